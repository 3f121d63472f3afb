//! Fuzzing the file readers (`open`): our snapshot reader and the example-plugin dump reader
//! never panic and never allocate from a length field, whatever the bytes — arbitrary text,
//! and valid files mutated byte by byte or truncated. Bounded: a few thousand cases each.

mod common;

use common::*;
use ncclprof_tui::model::store::Store;
use ncclprof_tui::model::{open, snapshot};
use proptest::prelude::*;

fn valid_snapshot() -> Vec<u8> {
    let st = store(&Fixture::default());
    let mut out = Vec::new();
    snapshot::write_to(&st, &mut out).unwrap();
    out
}

fn valid_dump() -> Vec<u8> {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nccl_prof_12345678_0.json");
    std::fs::read(p).unwrap()
}

/// Feed bytes through the same entry point `ncclprof-tui open` uses.
fn open_bytes(bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.json");
    std::fs::write(&path, bytes).unwrap();
    let mut st = Store::new(64 << 20);
    let _ = open::load(&mut st, &[path]);
}

fn mutate(base: &[u8], edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
    let mut b = base.to_vec();
    for &(i, v) in edits {
        if !b.is_empty() {
            let n = b.len();
            b[i % n] = v;
        }
    }
    if let Some(c) = cut {
        b.truncate(c % (b.len() + 1));
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_as_dump_never_panics(text in ".{0,400}") {
        let _ = open::parse_dump(std::path::Path::new("nccl_prof_1_0.json"), &text);
    }

    #[test]
    fn mutated_dumps_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8), cut in proptest::option::of(any::<usize>())) {
        let b = mutate(&valid_dump(), &edits, cut);
        let text = String::from_utf8_lossy(&b);
        let _ = open::parse_dump(std::path::Path::new("nccl_prof_1_0.json"), &text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn mutated_snapshots_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8), cut in proptest::option::of(any::<usize>())) {
        open_bytes(&mutate(&valid_snapshot(), &edits, cut));
    }

    #[test]
    fn arbitrary_bytes_never_panic_open(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        open_bytes(&bytes);
    }
}

#[test]
fn snapshot_with_absurd_numbers_is_an_error_or_ignored_not_a_panic() {
    let v = serde_json::json!({
        "traceEvents": [
            {"ph": "X", "cat": "Coll", "name": "AllReduce", "ts": 1e300, "dur": -5.0, "pid": u64::MAX, "tid": -1,
             "args": {"nChannels": 1e12, "Count": "lots", "SeqNum": -3, "id": null}},
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": 42}}
        ],
        "otherData": {"format": snapshot::FORMAT, "formatVersion": 999999, "hosts": "x"}
    });
    let mut next = 1;
    let _ = open::read_snapshot(&v, &mut next);
    open_bytes(serde_json::to_string(&v).unwrap().as_bytes());
}
