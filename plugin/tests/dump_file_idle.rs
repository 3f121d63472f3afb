//! `NCCL_PROFILE_DUMP_FILE` with a job that idles longer than the history's age bound
//! (`NCCLPROF_HISTORY_MS`) before it finalizes (a checkpoint, an evaluation): the dump still
//! holds what was recorded. The history was aged like a viewer's replay and the dump came out
//! empty (found in review).

mod common;

use std::ffi::{c_int, c_void};

use nccl_profiler_ncclprof::abi::{InitV5, ProfilerTable, v4, v6};
use ncclprof_shared::kind::EventKind;

type T = ProfilerTable<InitV5, v6::Descr, v4::StateArgs>;

#[test]
fn a_job_idle_past_the_age_bound_still_dumps_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("job");
    // SAFETY: set before the plugin's first init.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", dir.path().join("rdv"));
        std::env::set_var("NCCL_PROFILE_DUMP_FILE", &prefix);
        std::env::set_var("NCCLPROF_HISTORY_MS", "300");
        std::env::set_var("NCCLPROF_COMPLETION_TIMEOUT_MS", "100");
    }
    let lib = common::load();
    // SAFETY: the symbol is the v6 table.
    let t: &T = unsafe { &**lib.get::<*const T>(b"ncclProfiler_v6").unwrap() };
    let mut ctx: *mut c_void = std::ptr::null_mut();
    let mut mask: c_int = 0;
    // SAFETY: valid out-pointers.
    unsafe { (t.init)(&mut ctx, 42, &mut mask, c"dumpcomm".as_ptr(), 1, 1, 0, None) };
    for i in 0..10u64 {
        // SAFETY: zeroed descriptors are valid; handles come from start_event.
        unsafe {
            let mut d: v6::Descr = std::mem::zeroed();
            d.type_ = u64::from(EventKind::Coll.bit());
            d.u.coll.seq_number = i;
            d.u.coll.func = c"AllGather".as_ptr();
            let mut h = std::ptr::null_mut();
            (t.start_event)(ctx, &mut h, &mut d);
            (t.stop_event)(h);
        }
    }
    // The job idles longer than the age bound (300 ms) before it destroys its communicator;
    // the drain's 250 ms summaries trim meanwhile.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let t0 = std::time::Instant::now();
    // SAFETY: ctx from init.
    unsafe { (t.finalize)(ctx) };
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(1),
        "finalize must return promptly"
    );
    let path = format!("{}.{}.json", prefix.display(), std::process::id());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let spans: Vec<&serde_json::Value> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "Coll")
        .collect();
    assert_eq!(spans.len(), 10);
    assert_eq!(spans[0]["name"], "AllGather");
    // Ops without completion signal are reported as such, never with an invented end.
    let flags = spans[0]["args"]["ncclprof"]["flags"].as_u64().unwrap() as u16;
    assert_ne!(flags & ncclprof_shared::record::F_END_UNKNOWN, 0);
    assert_eq!(v["otherData"]["format"], ncclprof_shared::trace::FORMAT);
    assert!(text.contains("dumpcomm"));
    assert!(!std::path::Path::new(&format!("{path}.tmp")).exists());
}
