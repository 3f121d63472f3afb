//! A ProxyStep's state with a NULL args pointer, through the real `.so`: on the short path
//! (the step's own thread, its phases entry holding it: `capture::step_state`) and on the
//! general one (a state from another thread, pushed as a record of its own, flagged
//! `RF_ARGS_NULL`) it must give the record that zero args give, and nothing counted lost.
//! NCCL passes NULL for states without arguments; the short path reads the args word only
//! when the pointer is not NULL.

mod common;

use std::ffi::c_void;
use std::time::Duration;

use common::*;
use nccl_profiler_ncclprof::abi::v6;
use ncclprof_shared::kind::{EventKind, state};
use ncclprof_shared::record::*;
use ncclprof_shared::wire::DropReason;

#[derive(Clone, Copy)]
struct H(usize);

#[test]
fn null_args_step_states_give_the_zero_args_record_on_either_path() {
    let session = V6Session::open(0xa11, &[("NCCL_PROFILE_EVENT_MASK", "0x7fff")]);
    let (calls, viewer) = (session.calls, &session.viewer);
    let start = |d: &mut v6::Descr| -> H { H(calls.start(d) as usize) };
    let pause = || std::thread::sleep(Duration::from_millis(2));

    let mut d = descr(EventKind::ProxyOp, std::ptr::null_mut());
    d.u.proxy_op.pid = std::process::id() as i32;
    d.u.proxy_op.peer = 1;
    d.u.proxy_op.is_send = 1;
    let op = start(&mut d);
    calls.state(op.0 as u64, state::PROXY_OP_IN_PROGRESS, None);
    let step = |n: i32| {
        let mut d = descr(EventKind::ProxyStep, op.0 as *mut c_void);
        d.u.proxy_step.step = n;
        start(&mut d)
    };
    // Three steps: every state with NULL args on this thread; the same with zero args; and
    // NULL args with the SendWait from another thread (the general path).
    let run = |h: H, arg: Option<u64>, send_wait_elsewhere: bool| {
        calls.state(h.0 as u64, state::PROXY_STEP_SEND_GPU_WAIT, arg);
        pause();
        calls.state(h.0 as u64, state::PROXY_STEP_SEND_PEER_WAIT, arg);
        pause();
        if send_wait_elsewhere {
            session.state_from_another_thread(h.0 as u64, state::PROXY_STEP_SEND_WAIT, arg);
        } else {
            calls.state(h.0 as u64, state::PROXY_STEP_SEND_WAIT, arg);
        }
        pause();
        calls.stop(h.0 as u64);
    };
    let (null_here, zero_here, null_elsewhere) = (step(0), step(1), step(2));
    run(null_here, None, false);
    run(zero_here, Some(0), false);
    run(null_elsewhere, None, true);
    calls.stop(op.0 as u64);

    let steps = || {
        viewer
            .records()
            .into_iter()
            .filter(|r| r.kind == EventKind::ProxyStep as u8)
            .collect::<Vec<_>>()
    };
    assert!(
        wait_for(Duration::from_secs(10), || steps().len() == 3),
        "{} steps of 3",
        steps().len()
    );
    let all = steps();
    let find = |h: H| *all.iter().find(|r| r.id == h.0 as u64).unwrap();
    let [a, b, c] = [find(null_here), find(zero_here), find(null_elsewhere)];
    for r in [a, b, c] {
        assert!(r.has(F_SEND) && r.has(F_END_KNOWN), "{r:?}");
        assert_eq!(r.flags & (F_PARENT_UNKNOWN | F_RESTARTED), 0, "{r:?}");
        assert_eq!(r.p[4], 0, "no bytes from NULL or zero args: {r:?}");
        assert_eq!(r.p[5], 1, "one SendPeerWait: {r:?}");
        assert!(
            r.start_ns <= r.p[1] && r.p[1] <= r.p[2] && r.p[2] <= r.p[3] && r.p[3] <= r.end_ns,
            "phases in order: {r:?}"
        );
        assert!(
            r.step_phases().iter().all(|p| p.1 > 0),
            "every phase seen: {r:?}"
        );
    }
    // The short path's record has the flags and fields the zero-args one has.
    assert_eq!(a.flags, b.flags, "{a:?} / {b:?}");

    let counters = viewer.settled_counters();
    for r in [DropReason::UnknownHandle, DropReason::Abandoned] {
        assert_eq!(counters.dropped_for(r), 0, "{r:?}: {counters:?}");
    }
    session.finalize();
}
