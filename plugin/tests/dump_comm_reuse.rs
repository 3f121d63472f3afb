//! `NCCL_PROFILE_DUMP_FILE` in a job that outlives its communicators: with a dump asked for,
//! the history is not aged, so the dump, and the history replayed to a viewer that attaches
//! late, can hold records of a communicator whose slot a later one took (10 s after its
//! finalize). Before, such records named their communicator by number only ("comm none"
//! lanes, no hash): the dump and the viewer's Meta listed the slots as they were at the time.
//! Takes 10 s (`REUSE_AFTER_NS`).

mod common;

use std::ffi::{c_int, c_void};
use std::time::Duration;

use common::*;
use nccl_profiler_ncclprof::context::MAX_CONTEXTS;
use ncclprof_shared::kind::EventKind;

#[test]
fn a_dump_names_the_communicators_whose_slots_were_reused() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("job");
    // SAFETY: set before the plugin's first init; no other thread reads env yet.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", dir.path().join("rdv"));
        std::env::set_var("NCCL_PROFILE_DUMP_FILE", &prefix);
    }
    let lib = load();
    let t = v6_table(&lib);
    let mask: *mut c_int = Box::into_raw(Box::new(0));
    let coll = |ctx: *mut c_void, func: &std::ffi::CStr| {
        let mut d = descr(EventKind::Coll, std::ptr::null_mut());
        d.u.coll.func = func.as_ptr();
        let mut h: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid context, handle slot and descriptor.
        unsafe { (t.start_event)(ctx, &mut h, &mut d) };
        // SAFETY: a handle from start_event (or NULL, which stop ignores).
        unsafe { (t.stop_event)(h) };
    };
    // SAFETY: contexts from init.
    let finalize = |ctx: *mut c_void| unsafe { (t.finalize)(ctx) };

    // A keeper holds the plugin across the batches; every other slot gets an "old"
    // communicator with one all-reduce, then all are finalized.
    let keeper = init_comm(t, 1, mask, c"keeper", 2, 0);
    assert!(!keeper.is_null());
    let old: Vec<_> = (0..MAX_CONTEXTS as u64 - 1)
        .map(|k| init_comm(t, 0x01d0_0000 + k, mask, c"old", 2, 0))
        .collect();
    assert!(old.iter().all(|c| !c.is_null()));
    for &c in &old {
        coll(c, c"AllReduce");
        finalize(c);
    }
    // A new communicator gets a reused slot once the finalize is 10 s old.
    let mut new = std::ptr::null_mut();
    assert!(
        wait_for(Duration::from_secs(20), || {
            new = init_comm(t, 0x2e3, mask, c"new", 2, 0);
            !new.is_null()
        }),
        "no slot came back"
    );
    coll(new, c"ReduceScatter");
    // A viewer attaching now is replayed every record, and told every communicator they name.
    let viewer = TestViewer::attach(&dir.path().join("rdv"), std::process::id());
    assert!(
        wait_for(Duration::from_secs(10), || viewer.records().len()
            >= MAX_CONTEXTS),
        "replayed {} records",
        viewer.records().len()
    );
    let told: std::collections::HashMap<u32, String> = viewer
        .frames
        .lock()
        .unwrap()
        .iter()
        .filter_map(|f| match f {
            ncclprof_shared::wire::Frame::Meta(m) => Some(m.comms.clone()),
            _ => None,
        })
        .flatten()
        .map(|c| (c.index, c.name))
        .collect();
    for r in viewer.records() {
        let name = told
            .get(&r.comm)
            .unwrap_or_else(|| panic!("the viewer was not told comm {}: {r:?}", r.comm));
        assert!(name == "old" || name == "new", "{name}");
    }
    drop(viewer);
    finalize(new);
    finalize(keeper); // the last: writes the dump

    let path = format!("{}.{}.json", prefix.display(), std::process::id());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    let colls: Vec<&serde_json::Value> = evs
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "Coll")
        .collect();
    assert_eq!(colls.len(), MAX_CONTEXTS, "every communicator's all-reduce");
    // Every record names a communicator the dump describes, with its hash.
    let comms = v["otherData"]["processes"][0]["comms"].as_array().unwrap();
    let described: std::collections::HashMap<u64, &serde_json::Value> = comms
        .iter()
        .map(|c| (c["index"].as_u64().unwrap(), c))
        .collect();
    for e in &colls {
        let comm = e["args"]["ncclprof"]["comm"].as_u64().unwrap();
        let c = described
            .get(&comm)
            .unwrap_or_else(|| panic!("record of comm {comm} not described: {e}"));
        let want = if e["name"] == "ReduceScatter" {
            "new"
        } else {
            "old"
        };
        assert_eq!(c["name"], want, "{e}");
        assert!(e["args"]["CommHash"].is_u64(), "{e}");
    }
    // The reused slot's two communicators are told apart.
    let reused = colls
        .iter()
        .find(|e| e["name"] == "ReduceScatter")
        .map(|e| e["args"]["ncclprof"]["comm"].as_u64().unwrap())
        .unwrap();
    let slot = reused % MAX_CONTEXTS as u64;
    let same_slot = comms
        .iter()
        .filter(|c| c["index"].as_u64().unwrap() % MAX_CONTEXTS as u64 == slot)
        .count();
    assert_eq!(same_slot, 2, "old and new in slot {slot}");
    let lanes: Vec<&str> = evs
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(
        lanes.iter().all(|l| !l.contains("comm none")),
        "{:?}",
        lanes
            .iter()
            .filter(|l| l.contains("comm none"))
            .collect::<Vec<_>>()
    );
}
