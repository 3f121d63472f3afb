//! With `NCCLPROF_CLOCK=monotonic` the raw clock is `clock_gettime`'s, a call, so a
//! ProxyStep's start, states and stop never take their short paths (`guard::short_paths`,
//! which read the counter inline): every call goes the general way. Through the real `.so`, the
//! steps a job records most, a send and a receive, must give the same whole records there as
//! the short paths give (`whole_steps`, `step_phases`), with nothing counted lost; and a step
//! left open shows in the in-flight summary the last state a step has.

mod common;

use std::ffi::c_void;
use std::time::Duration;

use common::*;
use ncclprof_shared::kind::{EventKind, state};
use ncclprof_shared::record::*;
use ncclprof_shared::wire::{DropReason, Frame};

#[test]
fn steps_recorded_the_general_way_give_the_short_paths_records() {
    let session = V6Session::open(
        0x6e4,
        &[
            ("NCCL_PROFILE_EVENT_MASK", "0x7fff"),
            ("NCCLPROF_CLOCK", "monotonic"),
        ],
    );
    let (calls, viewer) = (session.calls, &session.viewer);
    let pause = || std::thread::sleep(Duration::from_millis(2));

    let mut d = descr(EventKind::Coll, std::ptr::null_mut());
    d.u.coll.func = c"AllReduce".as_ptr();
    d.u.coll.n_channels = 1;
    let coll = calls.start(&mut d);
    let op = |is_send: i32| {
        let mut d = descr(EventKind::ProxyOp, coll as *mut c_void);
        d.u.proxy_op.pid = std::process::id() as i32;
        d.u.proxy_op.peer = 1;
        d.u.proxy_op.is_send = is_send;
        calls.start(&mut d)
    };
    let (send_op, recv_op) = (op(1), op(0));
    let step = |op: u64, n: i32| {
        let mut d = descr(EventKind::ProxyStep, op as *mut c_void);
        d.u.proxy_step.step = n;
        calls.start(&mut d)
    };

    // A send step that waits on its peer twice, and a receive step, each state a pause apart.
    let send = step(send_op, 0);
    calls.state(send, state::PROXY_STEP_SEND_GPU_WAIT, Some(0));
    pause();
    calls.state(send, state::PROXY_STEP_SEND_PEER_WAIT, Some(0));
    pause();
    calls.state(send, state::PROXY_STEP_SEND_PEER_WAIT, Some(0));
    calls.state(send, state::PROXY_STEP_SEND_WAIT, Some(4096));
    pause();
    calls.stop(send);
    let recv = step(recv_op, 0);
    calls.state(recv, state::PROXY_STEP_RECV_WAIT, Some(0));
    pause();
    calls.state(recv, state::PROXY_STEP_RECV_FLUSH_WAIT, Some(8192));
    pause();
    calls.state(recv, state::PROXY_STEP_RECV_GPU_WAIT, Some(0));
    pause();
    calls.stop(recv);
    // A receive step that stays open, its collective in flight waiting on it: a state a step
    // does not have, ignored, leaves the one before it shown (as on the short path).
    let hung = step(recv_op, 1);
    calls.state(hung, state::PROXY_STEP_RECV_WAIT, Some(0));
    calls.state(hung, 99, Some(0));
    viewer.assert_open_step_shown(coll, 1, state::PROXY_STEP_RECV_WAIT as u8, 99);
    calls.state(hung, state::PROXY_STEP_RECV_FLUSH_WAIT, Some(1));
    calls.state(hung, state::PROXY_STEP_RECV_GPU_WAIT, Some(0));
    calls.stop(hung);
    calls.stop(send_op);
    calls.stop(recv_op);
    calls.stop(coll);

    let by_id = |id: u64| viewer.records().into_iter().find(|r| r.id == id);
    assert!(
        wait_for(Duration::from_secs(10), || by_id(send).is_some()
            && by_id(recv).is_some()),
        "the steps reach the viewer"
    );
    let hello_clock = viewer.frames.lock().unwrap().iter().find_map(|f| match f {
        Frame::Hello(h) => Some(h.clock.clone()),
        _ => None,
    });
    assert_eq!(
        hello_clock.as_deref(),
        Some("clock_gettime"),
        "the raw clock is clock_gettime's, so no short path ran"
    );

    let s = by_id(send).unwrap();
    assert!(s.has(F_SEND) && s.has(F_END_KNOWN), "{s:?}");
    assert_eq!(s.flags & (F_PARENT_UNKNOWN | F_RESTARTED), 0, "{s:?}");
    assert_eq!(s.parent, send_op);
    assert_eq!(
        s.p[1], s.start_ns,
        "SendGPUWait took its start's time: {s:?}"
    );
    assert_eq!((s.p[4], s.p[5]), (4096, 2), "bytes, SendPeerWaits: {s:?}");
    let r = by_id(recv).unwrap();
    assert!(!r.has(F_SEND) && r.has(F_END_KNOWN), "{r:?}");
    assert_eq!(r.parent, recv_op);
    assert_eq!(r.p[4], 8192, "bytes of the flush: {r:?}");
    for x in [s, r] {
        assert!(
            x.start_ns <= x.p[1] && x.p[1] <= x.p[2] && x.p[2] <= x.p[3] && x.p[3] <= x.end_ns,
            "phases in order within the step: {x:?}"
        );
        // Each phase spans one of the pauses.
        let ph = x.step_phases();
        assert!(ph.iter().all(|p| p.1 >= 1_000_000), "{ph:?}");
    }

    let c = viewer.settled_counters();
    for reason in [DropReason::UnknownHandle, DropReason::Abandoned] {
        assert_eq!(c.dropped_for(reason), 0, "{reason:?}: {c:?}");
    }
    session.finalize();
}
