//! Groups of sends/recvs to self, as a one-rank-per-GPU job or a local copy issues them:
//! NCCL plans no proxy op for a send to self, so no ProxyOp and no KernelCh ever signals
//! their end. They must reach the viewer at once (end flagged unknown), not after the
//! completion timeout, which this test sets far beyond its own wait: until then each group
//! held six open events, and a burst of them filled the open table (found on real NCCL).

mod common;

use std::ffi::c_void;
use std::time::Duration;

use common::*;
use nccl_profiler_ncclprof::abi::v6;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::*;

const GROUPS: usize = 2_000;

#[test]
fn self_send_recv_groups_complete_without_the_timeout() {
    let session = V6Session::open(
        0x5e1f,
        &[
            ("NCCL_PROFILE_EVENT_MASK", "0x7fff"),
            ("NCCLPROF_COMPLETION_TIMEOUT_MS", "600000"),
        ],
    );
    let (calls, viewer) = (session.calls, &session.viewer);
    let start = |d: &mut v6::Descr| calls.start(d) as *mut c_void;
    let stop = |h: *mut c_void| calls.stop(h as u64);

    for _ in 0..GROUPS {
        let group = start(&mut descr(EventKind::GroupApi, std::ptr::null_mut()));
        let mut apis = Vec::new();
        for func in [c"Send", c"Recv"] {
            let mut d = descr(EventKind::P2pApi, group);
            d.u.p2p_api.func = func.as_ptr();
            d.u.p2p_api.count = 1024;
            let api = start(&mut d);
            stop(api);
            apis.push((api, func));
        }
        stop(group);
        for (api, func) in apis {
            let mut d = descr(EventKind::P2p, api);
            d.u.p2p.func = func.as_ptr();
            d.u.p2p.count = 1024;
            d.u.p2p.peer = 0; // this rank: to self
            d.u.p2p.n_channels = 1;
            stop(start(&mut d));
        }
    }

    let want = GROUPS * 5; // GroupApi, 2 P2pApi, 2 P2p
    let all_in = wait_for(Duration::from_secs(60), || viewer.records().len() >= want);
    let records = viewer.records();
    assert!(
        all_in,
        "{} of {want} records before the timeout",
        records.len()
    );
    let p2p: Vec<_> = records
        .iter()
        .filter(|r| r.kind == EventKind::P2p as u8)
        .collect();
    assert_eq!(p2p.len(), 2 * GROUPS);
    for r in p2p {
        assert_ne!(r.flags & F_END_UNKNOWN, 0, "no signal: end unknown");
        assert_eq!(r.flags & F_PARENT_UNKNOWN, 0);
    }
    let counters = wait_for(Duration::from_secs(10), || {
        viewer.last_counters().is_some_and(|c| c.open_events == 0)
    });
    assert!(counters, "open events left: {:?}", viewer.last_counters());
    assert!(
        viewer
            .last_counters()
            .unwrap()
            .dropped
            .iter()
            .all(|&d| d == 0),
        "{:?}",
        viewer.last_counters()
    );
}
