//! A job that creates and destroys communicators all run long (PyTorch process groups made
//! per phase, elastic restarts): the plugin has 1 024 communicator slots, and a finalized
//! communicator's slot must come back once the drain has read its records and the history
//! has aged past it, not only 10 s later. Before, a process that had created 1 024 communicators within 10 s profiled none of
//! the next ones (the scale bench's 2 × 64 runs found it).

mod common;

use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use common::*;
use nccl_profiler_ncclprof::context::{MAX_CONTEXTS, REUSE_AFTER_NS};
use ncclprof_shared::kind::EventKind;

#[test]
fn finalized_communicators_slots_come_back_once_drained() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: set before the plugin reads its configuration; no other thread reads env yet.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", dir.path().join("rdv"));
        std::env::set_var("NCCLPROF_NO_LISTEN", "1");
        // Slots wait for the history to age past a finalize (NCCLPROF_HISTORY_MS + 1 s).
        std::env::set_var("NCCLPROF_HISTORY_MS", "200");
    }
    let lib = load();
    let t = v6_table(&lib);
    let mask: *mut c_int = Box::into_raw(Box::new(0));
    let init = |hash: u64| init_comm(t, hash, mask, c"churn", 2, 0);
    // One event per communicator, so that each has records for the drain to read.
    let coll = |ctx: *mut c_void| {
        let mut d = descr(EventKind::Coll, std::ptr::null_mut());
        d.u.coll.func = c"AllReduce".as_ptr();
        let mut h: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid context, handle slot and descriptor.
        unsafe { (t.start_event)(ctx, &mut h, &mut d) };
        // SAFETY: a handle from start_event (or NULL, which stop ignores).
        unsafe { (t.stop_event)(h) };
    };
    // SAFETY: contexts from init.
    let finalize = |ctx: *mut c_void| unsafe { (t.finalize)(ctx) };

    // Every slot taken, then given back. A second process-wide context keeps the plugin
    // alive (its drain thread running) across the last finalize of the first batch.
    let keeper = init(1);
    assert!(!keeper.is_null());
    let batch: Vec<_> = (2..=MAX_CONTEXTS as u64).map(init).collect();
    assert!(
        batch.iter().all(|c| !c.is_null()),
        "all slots while they last"
    );
    assert!(init(99_999).is_null(), "every slot taken");
    let first_finalize = Instant::now(); // no slot was finalized before this
    for &c in &batch {
        coll(c);
        finalize(c);
    }
    // No slot is reused sooner than NCCLPROF_HISTORY_MS + 1 s after its finalize; well
    // before REUSE_AFTER_NS, the drain has retired them.
    let profiled = wait_for(Duration::from_secs(5), || {
        let c = init(100_000);
        let ok = !c.is_null();
        if ok {
            finalize(c);
        }
        ok
    });
    let waited = first_finalize.elapsed();
    assert!(profiled, "no slot came back within 5 s");
    // Not before the history (200 ms here) has aged past its finalize, plus 1 s.
    assert!(
        waited >= Duration::from_millis(1_200),
        "a slot came back {waited:?} after the first finalize"
    );
    assert!((waited.as_nanos() as u64) < REUSE_AFTER_NS);
    // And many of them: the next batch is profiled too.
    let again: Vec<_> = (0..64).map(|k| init(200_000 + k)).collect();
    assert!(again.iter().all(|c| !c.is_null()));
    for c in again {
        finalize(c);
    }
    finalize(keeper);
}
