//! Many NCCL threads in one process with the drain far behind: 32 ranks (64 busy threads on
//! this machine's cores) build backlogs of thousands of records per ring, more than one drain
//! pass reads (`Drain::pass` stops every ring at a common time cut), and chains of records
//! deferred for a parent on another thread. Nothing may be lost or mislinked: every record
//! arrives, every child finds its parent (NetPlugin events theirs among the open ProxySteps).

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::*;

#[test]
fn bounded_drain_passes_lose_and_mislink_nothing() {
    let mut run = ncclprof_tests::e2e::run(6, |c| {
        c.ranks = 32;
        c.iterations = 4;
        // Deep rings so that the backlog is kept, not dropped, while the drain is starved;
        // 64 busy threads on 2 cores also starve the fake proxy threads, which may then start
        // a collective's ProxyOps more than the default 1 s after its enqueue: no timeout.
        // SAFETY: before the plugin's first init in this one-test process.
        unsafe {
            std::env::set_var("NCCLPROF_RING_EVENTS", "262144");
            std::env::set_var("NCCLPROF_COMPLETION_TIMEOUT_MS", "60000");
            // The viewer attaches after the job: keep all of it for the replay.
            std::env::set_var("NCCLPROF_HISTORY_EVENTS", "4000000");
        }
    });
    ncclprof_tests::e2e::check(&mut run);
    let recs = run.viewer.got.records();
    let mislinked = recs
        .iter()
        .filter(|r| r.has(F_PARENT_UNKNOWN) && !r.has(F_FOREIGN))
        .count();
    assert_eq!(mislinked, 0, "children whose parent was not found");
    let steps = recs
        .iter()
        .filter(|r| r.kind == EventKind::ProxyStep as u8)
        .count();
    assert!(
        steps > 32 * 1024,
        "job too small to build a backlog: {steps} steps"
    );
}
