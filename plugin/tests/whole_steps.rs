//! A ProxyStep reaches the ring whole at its stop (`step_phases`): its start record is
//! pushed only when the drain must know the step earlier. Through the real `.so`, each of
//! those cases: a receive step NCCL restarts (the abandoned handle never reaches the viewer,
//! the new one is flagged), a NetPlugin event under an open step, on the step's thread and on
//! a helper thread (linked to it), and a step that stays open (the in-flight summary says
//! where its collective waits, a state a step does not have left out). Nothing is counted
//! lost.

mod common;

use std::ffi::c_void;
use std::time::Duration;

use common::*;
use nccl_profiler_ncclprof::abi::v6;
use ncclprof_shared::kind::{EventKind, state};
use ncclprof_shared::record::*;
use ncclprof_shared::wire::DropReason;

#[test]
fn restarted_steps_net_plugin_children_and_hung_steps() {
    let session = V6Session::open(0xfeed, &[("NCCL_PROFILE_EVENT_MASK", "0xffff")]);
    let (calls, viewer) = (session.calls, &session.viewer);
    let start = |d: &mut v6::Descr| calls.start(d);
    let rec = |h: u64, s: u32, a: u64| calls.state(h, s, Some(a));
    let stop = |h: u64| calls.stop(h);

    let mut d = descr(EventKind::Coll, std::ptr::null_mut());
    d.u.coll.func = c"AllReduce".as_ptr();
    d.u.coll.n_channels = 1;
    let coll = start(&mut d);
    let mut d = descr(EventKind::ProxyOp, coll as *mut c_void);
    d.u.proxy_op.pid = std::process::id() as i32;
    d.u.proxy_op.peer = 1;
    d.u.proxy_op.is_send = 0;
    let op = start(&mut d);
    rec(op, state::PROXY_OP_IN_PROGRESS, 0);
    let step = |n: i32| {
        let mut d = descr(EventKind::ProxyStep, op as *mut c_void);
        d.u.proxy_step.step = n;
        start(&mut d)
    };
    let received = |h: u64, bytes: u64| {
        rec(h, state::PROXY_STEP_RECV_WAIT, 0);
        rec(h, state::PROXY_STEP_RECV_FLUSH_WAIT, bytes);
        rec(h, state::PROXY_STEP_RECV_GPU_WAIT, 0);
        stop(h);
    };

    // Receive step 0 started, its buffer not posted; started again next pass (spec §4.6).
    let abandoned = step(0);
    let other = step(5); // another step of the pass between the two starts
    let restarted = step(0);
    received(restarted, 100);
    received(other, 500);

    // A NetPlugin event under an open step.
    let parent = step(1);
    rec(parent, state::PROXY_STEP_RECV_WAIT, 0);
    let mut d = descr(EventKind::NetPlugin, parent as *mut c_void);
    d.u.net_plugin.id = 1;
    let net = start(&mut d);
    stop(net);
    rec(parent, state::PROXY_STEP_RECV_FLUSH_WAIT, 200);
    rec(parent, state::PROXY_STEP_RECV_GPU_WAIT, 0);
    stop(parent);

    // A NetPlugin event on a helper thread (NCCL's socket transport) under an open step:
    // it cannot push the step's start (another thread's), and finds it issued in the rings.
    let helper_parent = step(3);
    rec(helper_parent, state::PROXY_STEP_RECV_WAIT, 0);
    let helper_net = std::thread::spawn(move || {
        let mut d = descr(EventKind::NetPlugin, helper_parent as *mut c_void);
        d.u.net_plugin.id = 2;
        let h = calls.start(&mut d);
        calls.stop(h);
        h
    })
    .join()
    .unwrap();
    rec(helper_parent, state::PROXY_STEP_RECV_FLUSH_WAIT, 250);
    rec(helper_parent, state::PROXY_STEP_RECV_GPU_WAIT, 0);
    stop(helper_parent);

    // A step that stays open: its collective is in flight, waiting on it. A state a step
    // does not have, ignored, leaves the one before it shown.
    let hung = step(2);
    rec(hung, state::PROXY_STEP_RECV_WAIT, 0);
    rec(hung, 99, 0);
    viewer.assert_open_step_shown(coll, 2, state::PROXY_STEP_RECV_WAIT as u8, 99);
    received(hung, 300);
    stop(op);
    stop(coll);

    let by_id = |id: u64| viewer.records().into_iter().find(|r| r.id == id);
    assert!(
        wait_for(Duration::from_secs(10), || by_id(hung).is_some()
            && by_id(net).is_some()),
        "the records reach the viewer"
    );
    assert!(
        by_id(abandoned).is_none(),
        "the abandoned handle is no event"
    );
    let r = by_id(restarted).unwrap();
    assert_eq!((r.p[0], r.p[4]), (0, 100));
    assert_ne!(r.flags & F_RESTARTED, 0, "{r:?}");
    for id in [other, parent, hung] {
        let r = by_id(id).unwrap();
        assert_eq!(r.flags & (F_RESTARTED | F_PARENT_UNKNOWN), 0, "{r:?}");
        assert!(r.has(F_END_KNOWN), "{r:?}");
        assert!(
            r.start_ns <= r.p[1] && r.p[1] <= r.p[2] && r.p[2] <= r.p[3],
            "{r:?}"
        );
        assert!(r.p[3] <= r.end_ns, "{r:?}");
    }
    assert_eq!(by_id(hung).unwrap().p[4], 300);
    let n = by_id(net).unwrap();
    assert_eq!(n.parent, parent, "linked to its step");
    assert_eq!(n.flags & F_PARENT_UNKNOWN, 0, "{n:?}");
    assert!(
        wait_for(Duration::from_secs(10), || by_id(helper_net).is_some()),
        "the helper thread's event reaches the viewer"
    );
    let n = by_id(helper_net).unwrap();
    assert_eq!(n.parent, helper_parent, "linked to its step");
    assert_eq!(n.flags & F_PARENT_UNKNOWN, 0, "{n:?}");
    assert_eq!(by_id(helper_parent).unwrap().p[4], 250);

    // Nothing counted lost (Counters go out every 250 ms).
    let c = viewer.settled_counters();
    for r in [DropReason::UnknownHandle, DropReason::Abandoned] {
        assert_eq!(c.dropped_for(r), 0, "{r:?}: {c:?}");
    }
    session.finalize();
}
