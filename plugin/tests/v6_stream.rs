//! Load the real `.so` through `ncclProfiler_v6`, drive one AllReduce by hand in NCCL's call
//! order, and check what a viewer receives: true completion, step phases, GPU conversion,
//! mask control. (The fake-NCCL host drives far more in the `ncclprof-tests` crate.)

mod common;

use std::ffi::{c_int, c_void};
use std::time::Duration;

use common::*;
use nccl_profiler_ncclprof::abi::{v4, v6};
use ncclprof_shared::kind::{EventKind, state};
use ncclprof_shared::record::*;
use ncclprof_shared::wire::{Frame, ViewerMsg};

#[test]
fn v6_allreduce_reaches_a_viewer_with_true_completion() {
    let session = V6Session::open(0xfeed, &[("NCCL_PROFILE_EVENT_MASK", "0x7fff")]);
    let (calls, viewer) = (session.calls, &session.viewer);
    // The core's mask int, which the plugin writes later from its own threads: read it with
    // volatile loads (a plain local may be kept in a register once the borrow ends).
    let mask_ptr = session.mask;
    // SAFETY: a valid, never freed int.
    let mask = || unsafe { std::ptr::read_volatile(mask_ptr) };
    assert_eq!(mask(), 0x7fff);
    assert!(wait_for(Duration::from_secs(5), || viewer
        .frames
        .lock()
        .unwrap()
        .iter()
        .any(|f| matches!(f, Frame::Hello(_)))));

    let start = |d: &mut v6::Descr| calls.start(d) as *mut c_void;
    let rec = |h: *mut c_void, s: u32, a: Option<u64>| calls.state(h as u64, s, a);
    let stop = |h: *mut c_void| calls.stop(h as u64);

    let mut d = descr(EventKind::GroupApi, std::ptr::null_mut());
    d.u.group_api = nccl_profiler_ncclprof::abi::v5::GroupApi {
        graph_captured: 0,
        group_depth: 1,
    };
    let gapi = start(&mut d);
    rec(gapi, state::GROUP_START_API_STOP, None);
    let mut d = descr(EventKind::CollApi, gapi);
    d.u.coll_api.func = c"AllReduce".as_ptr();
    d.u.coll_api.count = 1 << 20;
    d.u.coll_api.datatype = c"ncclFloat32".as_ptr();
    let capi = start(&mut d);
    stop(capi);
    rec(gapi, state::GROUP_END_API_START, None);
    let group = start(&mut descr(EventKind::Group, std::ptr::null_mut()));
    let mut d = descr(EventKind::Coll, capi);
    d.rank = 0;
    d.u.coll.seq_number = 7;
    d.u.coll.func = c"AllReduce".as_ptr();
    d.u.coll.count = 1 << 20;
    d.u.coll.datatype = c"ncclFloat32".as_ptr();
    d.u.coll.algo = c"RING".as_ptr();
    d.u.coll.proto = c"SIMPLE".as_ptr();
    d.u.coll.n_channels = 1;
    d.u.coll.parent_group = group;
    let coll = start(&mut d);
    let mut d = descr(EventKind::ProxyOp, coll);
    d.u.proxy_op.pid = std::process::id() as i32;
    d.u.proxy_op.channel_id = 0;
    d.u.proxy_op.peer = 1;
    d.u.proxy_op.n_steps = 1;
    d.u.proxy_op.chunk_size = 4 << 20;
    d.u.proxy_op.is_send = 1;
    let op = start(&mut d);
    stop(coll);
    stop(group);
    stop(gapi);
    rec(op, state::PROXY_OP_IN_PROGRESS, Some(0));
    let mut d = descr(EventKind::ProxyStep, op);
    d.u.proxy_step.step = 0;
    let step = start(&mut d);
    rec(step, state::PROXY_STEP_SEND_GPU_WAIT, Some(0));
    std::thread::sleep(Duration::from_millis(2));
    rec(step, state::PROXY_STEP_SEND_PEER_WAIT, Some(0));
    std::thread::sleep(Duration::from_millis(2));
    rec(step, state::PROXY_STEP_SEND_WAIT, Some(4 << 20));
    std::thread::sleep(Duration::from_millis(2));
    stop(step);
    // Kernel channel 0 ran on the "GPU" between 1 and 9 ms ago (ns timer at epoch + offset).
    let now = ncclprof_shared::clock::monotonic_ns();
    let gpu_off = 1_790_000_000_000_000_000u64;
    let mut d = descr(EventKind::KernelCh, coll);
    d.u.kernel_ch = v4::KernelCh {
        channel_id: 0,
        p_timer: now - 9_000_000 + gpu_off,
    };
    let kch = start(&mut d);
    rec(kch, state::KERNEL_CH_STOP, Some(now - 1_000_000 + gpu_off));
    stop(kch);
    let before_op_stop = ncclprof_shared::clock::monotonic_ns();
    stop(op);

    assert!(
        wait_for(Duration::from_secs(5), || viewer
            .records()
            .iter()
            .any(|r| r.kind == EventKind::GroupApi as u8)),
        "GroupApi never completed; got {:?}",
        viewer.records().iter().map(|r| r.kind).collect::<Vec<_>>()
    );
    let recs = viewer.records();
    let strings = viewer.strings();
    let find = |k: EventKind| {
        *recs
            .iter()
            .find(|r| r.kind == k as u8)
            .unwrap_or_else(|| panic!("no {k:?}"))
    };
    let c = find(EventKind::Coll);
    assert!(c.has(F_END_KNOWN));
    assert_eq!(c.p[0], 7);
    assert_eq!(strings[&c.strings()[0]], "AllReduce");
    assert_eq!(strings[&c.strings()[2]], "RING");
    // The TSC is calibrated to CLOCK_MONOTONIC within ~20 µs; the enqueue stop is ≥ 6 ms
    // earlier, so this tolerance keeps the point of the check.
    assert!(
        c.end_ns + 100_000 >= before_op_stop,
        "completion is the last child's stop, not the enqueue"
    );
    assert!(c.p[3] < c.end_ns, "enqueue stop kept and earlier");
    let s = find(EventKind::ProxyStep);
    assert!(s.has(F_SEND));
    assert_eq!(s.p[4], 4 << 20);
    assert_eq!(s.sub, 0);
    assert_eq!(s.x, 1, "peer copied from the ProxyOp");
    let ph = s.step_phases();
    assert!(
        ph[0].1 >= 1_500_000 && ph[1].1 >= 1_500_000 && ph[2].1 >= 1_500_000,
        "{ph:?}"
    );
    let k = find(EventKind::KernelCh);
    assert!(k.has(F_GPU_CONVERTED));
    assert_eq!(k.duration_ns(), 8_000_000);
    let capi_rec = find(EventKind::CollApi);
    assert!(capi_rec.has(F_END_KNOWN));
    assert_eq!(c.parent, capi_rec.id);

    // Mask control from the viewer: acknowledged and written into the core's mask.
    viewer.control.send(ViewerMsg::SetMask(2)).unwrap();
    assert!(wait_for(Duration::from_secs(5), || viewer
        .frames
        .lock()
        .unwrap()
        .iter()
        .any(
            |f| matches!(f, Frame::MaskAck(a) if a.mask == 2 && a.requested == 2)
        )));
    assert_eq!(mask(), 2);
    viewer.control.send(ViewerMsg::Stop).unwrap();
    assert!(wait_for(Duration::from_secs(5), || mask() == 0));
    // exampleProfilerStart/Stop, as an application would call them through dlsym.
    // SAFETY: exported C functions with these signatures.
    unsafe {
        let start_fn = session
            .lib
            .get::<unsafe extern "C" fn(c_int, *const std::ffi::c_char) -> c_int>(
                b"exampleProfilerStart",
            )
            .unwrap();
        assert_eq!(start_fn(6, std::ptr::null()), 0);
    }
    assert_eq!(mask(), 6);
    session.finalize();
}
