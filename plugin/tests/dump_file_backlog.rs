//! `NCCL_PROFILE_DUMP_FILE` with the drain thread far behind at the last finalize: the dump
//! is still written, with the newest events. Finalize waits for the drain up to 5 s when a
//! dump was asked for (200 ms otherwise); before, a backlog that took the drain more than
//! 200 ms meant no dump at all.

mod common;

use std::ffi::{c_int, c_void};

use nccl_profiler_ncclprof::abi::v6;
use ncclprof_shared::kind::EventKind;

/// Threads issuing ProxySteps back to back before finalize, and steps per thread: on two
/// cores the drain thread gets about a fifth of the machine meanwhile, and is left with a
/// backlog of millions of records, more than a second of work for a debug build.
const THREADS: i32 = 4;
const STEPS: i32 = 400_000;
/// The history (what a dump holds) keeps the newest this many.
const HISTORY: usize = 1000;

#[test]
fn the_dump_is_written_when_finalize_finds_the_drain_behind() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("job");
    // SAFETY: set before the plugin's first init.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", dir.path().join("rdv"));
        std::env::set_var("NCCL_PROFILE_DUMP_FILE", &prefix);
        std::env::set_var("NCCL_PROFILE_EVENT_MASK", "ProxyStep");
        std::env::set_var("NCCLPROF_RING_EVENTS", "1048576");
        std::env::set_var("NCCLPROF_DRAIN_US", "20000");
        std::env::set_var("NCCLPROF_HISTORY_EVENTS", HISTORY.to_string());
    }
    let lib = common::load();
    let t = common::v6_table(&lib);
    let mut mask: c_int = 0;
    let ctx = common::init_comm(t, 43, &mut mask, c"backlog", 1, 0);
    let ctx_addr = ctx as usize;
    let (start_event, stop_event) = (t.start_event, t.stop_event);
    std::thread::scope(|sc| {
        for thread in 0..THREADS {
            sc.spawn(move || {
                let ctx = ctx_addr as *mut c_void;
                // SAFETY: all-zero is a valid descriptor (pointers NULL, ints 0).
                let mut d: v6::Descr = unsafe { std::mem::zeroed() };
                d.type_ = u64::from(EventKind::ProxyStep.bit());
                // Step numbers say which thread issued a step, and in what order.
                for i in 0..STEPS {
                    d.u.proxy_step.step = thread * STEPS + i;
                    let mut h = std::ptr::null_mut();
                    // SAFETY: a valid descriptor; the handle comes from start_event.
                    unsafe {
                        start_event(ctx, &mut h, &mut d);
                        stop_event(h);
                    }
                }
            });
        }
    });
    let t0 = std::time::Instant::now();
    // SAFETY: ctx from init.
    unsafe { (t.finalize)(ctx) };
    let took = t0.elapsed();
    eprintln!("finalize took {took:?}");
    assert!(
        took < std::time::Duration::from_secs(6),
        "bounded: {took:?}"
    );
    let path = format!("{}.{}.json", prefix.display(), std::process::id());
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no dump after a {took:?} finalize: {path}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let steps: Vec<i64> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "ProxyStep")
        .map(|e| e["args"]["Step"].as_i64().unwrap())
        .collect();
    assert_eq!(steps.len(), HISTORY, "the newest {HISTORY} steps");
    // The newest steps are the last ones of the threads that finished last: whichever those
    // were, every thread's final step was issued before finalize, so at least one is in.
    assert!(
        (0..THREADS).any(|th| steps.contains(&i64::from(th * STEPS + STEPS - 1))),
        "no thread's last step in the dump"
    );
}
