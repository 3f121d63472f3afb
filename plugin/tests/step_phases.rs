//! A ProxyStep's states stay on NCCL's thread until its stop (`step_phases`), with two ways
//! back to records of their own: a step whose phases entry a newer step took while it was
//! open (more ids issued on its thread than the table has entries), and a state recorded
//! from another thread. Both must give the record the states give one by one, through the
//! real `.so`, with no record counted as lost.

mod common;

use std::ffi::c_void;
use std::time::Duration;

use common::*;
use nccl_profiler_ncclprof::abi::v6;
use nccl_profiler_ncclprof::step_phases::SLOTS;
use ncclprof_shared::kind::{EventKind, state};
use ncclprof_shared::record::*;
use ncclprof_shared::wire::DropReason;

/// A handle NCCL holds (a plain integer id), movable to another thread as NCCL does.
#[derive(Clone, Copy)]
struct H(usize);

#[test]
fn evicted_and_cross_thread_step_states_give_the_same_record() {
    let session = V6Session::open(0xbeef, &[("NCCL_PROFILE_EVENT_MASK", "0x7fff")]);
    let (calls, viewer) = (session.calls, &session.viewer);
    let start = |d: &mut v6::Descr| -> H { H(calls.start(d) as usize) };
    let rec = |h: H, s: u32, a: u64| calls.state(h.0 as u64, s, Some(a));
    let stop = |h: H| calls.stop(h.0 as u64);
    let pause = || std::thread::sleep(Duration::from_millis(3));

    let mut d = descr(EventKind::Coll, std::ptr::null_mut());
    d.u.coll.func = c"AllReduce".as_ptr();
    d.u.coll.n_channels = 1;
    let coll = start(&mut d);
    let mut d = descr(EventKind::ProxyOp, coll.0 as *mut c_void);
    d.u.proxy_op.pid = std::process::id() as i32;
    d.u.proxy_op.peer = 1;
    d.u.proxy_op.is_send = 1;
    let op = start(&mut d);
    rec(op, state::PROXY_OP_IN_PROGRESS, 0);
    let step = |n: i32| {
        let mut d = descr(EventKind::ProxyStep, op.0 as *mut c_void);
        d.u.proxy_step.step = n;
        start(&mut d)
    };

    // Step A: one state, then more steps than the table has entries start and stop on this
    // thread (one of them takes A's entry), then A's other states and its stop.
    let a = step(0);
    rec(a, state::PROXY_STEP_SEND_GPU_WAIT, 0);
    pause();
    let others = SLOTS + 5;
    for i in 0..others {
        let s = step(1 + i as i32);
        rec(s, state::PROXY_STEP_SEND_GPU_WAIT, 0);
        rec(s, state::PROXY_STEP_SEND_PEER_WAIT, 0);
        rec(s, state::PROXY_STEP_SEND_WAIT, 100);
        stop(s);
    }
    pause();
    rec(a, state::PROXY_STEP_SEND_PEER_WAIT, 0);
    pause();
    rec(a, state::PROXY_STEP_SEND_PEER_WAIT, 0);
    rec(a, state::PROXY_STEP_SEND_WAIT, 7777);
    pause();
    stop(a);

    // Step B: a state from another thread between two of this thread's.
    let b = step(-1);
    rec(b, state::PROXY_STEP_SEND_GPU_WAIT, 0);
    pause();
    // The drain must read the other thread's record before B's stop (records of two rings
    // are not merged by time within a pass).
    session.state_from_another_thread(b.0 as u64, state::PROXY_STEP_SEND_PEER_WAIT, Some(0));
    rec(b, state::PROXY_STEP_SEND_WAIT, 8888);
    pause();
    stop(b);
    stop(op);
    stop(coll);

    let steps = |v: &TestViewer| {
        v.records()
            .into_iter()
            .filter(|r| r.kind == EventKind::ProxyStep as u8)
            .collect::<Vec<_>>()
    };
    assert!(
        wait_for(Duration::from_secs(10), || steps(viewer).len()
            == others + 2),
        "{} steps of {}",
        steps(viewer).len(),
        others + 2
    );
    let all = steps(viewer);
    let find = |h: H| *all.iter().find(|r| r.id == h.0 as u64).unwrap();
    for r in &all {
        assert!(r.has(F_SEND) && r.has(F_END_KNOWN), "{r:?}");
        assert_eq!(r.flags & (F_PARENT_UNKNOWN | F_RESTARTED), 0, "{r:?}");
        assert!(
            r.start_ns <= r.p[1] && r.p[1] <= r.p[2] && r.p[2] <= r.p[3] && r.p[3] <= r.end_ns,
            "phases in order within the step: {r:?}"
        );
        // Each SendGPUWait came while its step's entry held the start: it took that time.
        assert_eq!(r.p[1], r.start_ns, "{r:?}");
    }
    let ra = find(a);
    assert_eq!(ra.p[4], 7777, "bytes of the last SendWait");
    assert_eq!(ra.p[5], 2, "two SendPeerWaits");
    // a (GPU wait) came before the others ran; b (first peer wait) after them.
    let others_end = all.iter().filter(|r| r.id != ra.id).map(|r| r.end_ns).min();
    assert!(ra.p[1] < others_end.unwrap(), "{ra:?}");
    let ph = ra.step_phases();
    assert!(ph.iter().all(|p| p.1 >= 2_000_000), "{ph:?}");
    let rb = find(b);
    assert_eq!(rb.p[4], 8888);
    assert_eq!(rb.p[5], 1, "the other thread's SendPeerWait");
    let ph = rb.step_phases();
    assert!(ph.iter().all(|p| p.1 >= 2_000_000), "{ph:?}");

    // Nothing counted lost: no unknown handle, no abandoned step (Counters go out every
    // 250 ms; the latest after this wait covers every record above).
    let c = viewer.settled_counters();
    for r in [DropReason::UnknownHandle, DropReason::Abandoned] {
        assert_eq!(c.dropped_for(r), 0, "{r:?}: {c:?}");
    }
    session.finalize();
}
