//! `NCCL_PROFILE_DUMP_FILE` writes the same snapshot the viewer writes: after a job driven by the
//! fake NCCL host, `ncclprof-tui open`'s reader loads the plugin's file and holds every record.

#[test]
fn plugin_dump_file_opens_in_the_viewer() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("job");
    // SAFETY: before the plugin's first init in this process.
    unsafe { std::env::set_var("NCCL_PROFILE_DUMP_FILE", &prefix) };
    let run = ncclprof_tests::e2e::run(6, |c| c.iterations = 4);
    let path = dir.path().join(format!("job.{}.json", std::process::id()));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let spans = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .count();
    let colls = run.truth.counts.get("Coll").copied().unwrap_or(0);
    assert!(
        colls > 0 && spans as u64 >= colls,
        "{spans} spans for {colls} collectives"
    );
    let mut store = ncclprof_tui::model::store::Store::new(256 << 20);
    let notes = ncclprof_tui::model::open::load(&mut store, &[path])
        .expect("the viewer opens the plugin's dump");
    assert_eq!(store.retained, spans, "{notes:?}");
}
