//! A kernel channel's GPU stop (record 22) is kept on its thread and carried by the stop that
//! follows it (`capture`, `Ring::kernel_gpu_stop`): one record per kernel channel fewer, no
//! clock read for the state. Through the real `.so`: the plain order (v6_stream.rs), and the
//! ways a kept GPU stop goes out as its own record instead — another channel's GPU stop or
//! stop comes first, or the thread exits before the stop (which another thread then makes).
//! In each the viewer gets the channel converted with its GPU length, and nothing is counted
//! lost or unknown.

mod common;

use std::ffi::c_void;
use std::time::Duration;

use common::*;
use nccl_profiler_ncclprof::abi::v4;
use ncclprof_shared::kind::{EventKind, state};
use ncclprof_shared::record::*;
use ncclprof_shared::wire::DropReason;

#[test]
fn a_kept_gpu_stop_reaches_its_channel_in_every_order() {
    let s = V6Session::open(0xfeed, &[("NCCL_PROFILE_EVENT_MASK", "0x7fff")]);
    let (calls, viewer) = (s.calls, &s.viewer);
    let gpu_stop = move |h: u64, gpu: u64| calls.state(h, state::KERNEL_CH_STOP, Some(gpu));
    let kernel = move |coll: u64, channel: u8, gpu_start: u64| {
        let mut d = descr(EventKind::KernelCh, coll as *mut c_void);
        d.u.kernel_ch = v4::KernelCh {
            channel_id: channel,
            p_timer: gpu_start,
        };
        calls.start(&mut d)
    };
    let coll_on = |func: &'static std::ffi::CStr, channels: u8| {
        let mut d = descr(EventKind::Coll, std::ptr::null_mut());
        d.u.coll.func = func.as_ptr();
        d.u.coll.n_channels = channels;
        let coll = calls.start(&mut d);
        calls.stop(coll);
        coll
    };

    let coll = coll_on(c"AllReduce", 3);
    // The GPU's timer: epoch ns (NVIDIA's %globaltimer), channels that ran in the last 10 ms.
    let now = ncclprof_shared::clock::monotonic_ns();
    let gpu = move |ago_ms: u64| now - ago_ms * 1_000_000 + 1_790_000_000_000_000_000;

    // Two channels' GPU stops before either stop: the first goes out as its own record.
    let k0 = kernel(coll, 0, gpu(9));
    let k1 = kernel(coll, 1, gpu(8));
    gpu_stop(k0, gpu(2));
    gpu_stop(k1, gpu(1));
    calls.stop(k0);
    calls.stop(k1);
    assert!(
        wait_for(Duration::from_secs(5), || viewer.last_counters().is_some()),
        "no counters"
    );
    let rings_before = viewer.last_counters().unwrap().rings_in_use;
    // Not NCCL's order: a channel's GPU stop, then another channel's stop, and its own stop
    // made by another thread. The kept GPU stop goes out as its own record ahead of the
    // other channel's stop (kept, it would wait for this thread's next kernel channel).
    let coll2 = coll_on(c"AllGather", 2);
    let k3 = kernel(coll2, 0, gpu(6));
    let k4 = kernel(coll2, 1, gpu(6));
    gpu_stop(k3, gpu(5));
    calls.stop(k4); // no GPU stop of its own: not converted
    std::thread::spawn(move || calls.stop(k3)).join().unwrap();
    // A helper thread starts a channel and records its GPU stop, then exits: the kept GPU
    // stop goes out as its own record at the exit; this thread makes the stop.
    let k2 = std::thread::spawn(move || {
        let k2 = kernel(coll, 2, gpu(7));
        gpu_stop(k2, gpu(3));
        k2
    })
    .join()
    .unwrap();
    // The stop only once the drain has read the helpers' rings to their end (a retired ring
    // is freed then): a pass visits rings in index order, and this thread's comes first, so
    // a stop read in the same pass as the flushed GPU stop would go before it.
    let joined = ncclprof_shared::clock::monotonic_ns();
    assert!(
        wait_for(Duration::from_secs(10), || viewer
            .last_counters()
            .is_some_and(
                |c| c.at_ns > joined && c.rings_in_use <= rings_before
            )),
        "the helper's ring was never read and freed: {:?}",
        viewer.last_counters()
    );
    calls.stop(k2);

    let by_id = |id: u64| viewer.records().into_iter().find(|r| r.id == id);
    assert!(
        wait_for(Duration::from_secs(5), || [k0, k1, k2, k3, k4]
            .iter()
            .all(|&k| by_id(k).is_some())),
        "kernel channels never reached the viewer: {:?}",
        viewer.records()
    );
    for (k, parent, channel, gpu_ns) in [
        (k0, coll, 0, 7_000_000),
        (k1, coll, 1, 7_000_000),
        (k2, coll, 2, 4_000_000),
        (k3, coll2, 0, 1_000_000),
    ] {
        let r = by_id(k).unwrap();
        assert_eq!(r.sub, channel, "{r:?}");
        assert!(
            r.has(F_GPU_CONVERTED),
            "channel {channel} not converted: {r:?}"
        );
        assert_eq!(r.duration_ns(), gpu_ns, "channel {channel}: {r:?}");
        assert_eq!(r.parent, parent, "{r:?}");
    }
    let r = by_id(k4).unwrap();
    assert!(!r.has(F_GPU_CONVERTED), "k4 had no GPU stop: {r:?}");
    assert_eq!(r.p[1], 0, "k3's GPU stop is not k4's: {r:?}");
    assert!(
        wait_for(Duration::from_secs(5), || by_id(coll)
            .is_some_and(|c| c.has(F_END_KNOWN))),
        "the collective completes with its three channels"
    );

    // Nothing counted lost (Counters go out every 250 ms).
    let c = viewer.settled_counters();
    for r in [DropReason::UnknownHandle, DropReason::Abandoned] {
        assert_eq!(c.dropped_for(r), 0, "{r:?}: {c:?}");
    }
    s.finalize();
}
