//! The viewer's model: sources yield `shared::wire` frames, [`ingest`] writes them into the
//! [`store::Store`], views and the snapshot writer read it through [`query`]. Nothing under
//! `model/` knows about the terminal (a test enforces that no file here mentions the UI crate).

pub mod analysis;
pub mod ingest;
pub mod open;
pub mod query;
pub mod snapshot;
pub mod source;
pub mod store;
pub mod units;

#[cfg(test)]
mod tests {
    #[test]
    fn model_does_not_use_the_ui_crate() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model");
        let forbidden = ["rata", "tui"].concat();
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(
                !text.contains(&forbidden),
                "{} mentions the UI crate",
                p.display()
            );
        }
    }
}
