//! Streaming throughput and latency: a producer thread drives the real plugin `.so` with what
//! a proxy thread does, at a fixed event rate (one event = a ProxyStep: start, 3 states, stop,
//! under its ProxyOp; every 8 steps one ProxyOp around them: start, InProgress, stop), and a
//! viewer thread in this process receives and decodes every frame. For each rate: steps
//! delivered, records dropped (by the plugin's counters, the drain's late ones apart), and the
//! latency from an event's end to its arrival at the viewer.
//!
//! It used to start every step with a NULL parent and step number 0, which NCCL never does
//! (it records a step's states only under a non-NULL op, spec §4.2): with no parent the plugin
//! skips the restart check on NCCL's thread and the op lookup, restart check and op
//! bookkeeping in the drain, so it measured a cheaper path than a real job takes.
//!
//! Run: `cargo build --release -p ncclprof-plugin && cargo bench -p ncclprof-plugin --bench stream`
//! (`STREAM_SECS=30` for the sustained 30 s run; default 3 s per rate.) Run without `--bench`,
//! as `cargo test --bench '*'` runs it, it streams 1 s at the lowest rate: a check that the
//! bench still runs, not a measurement.

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nccl_profiler_ncclprof::abi::common::{ProxyOp, ProxyStep};
use nccl_profiler_ncclprof::abi::{InitV5, ProfilerTable, v4, v6};
use ncclprof_shared::clock::monotonic_ns;
use ncclprof_shared::kind::{EventKind, state};
use ncclprof_shared::wire::{DropReason, Frame};

type T = ProfilerTable<InitV5, v6::Descr, v4::StateArgs>;

/// Steps per ProxyOp, as `tests/benches/stream.rs` drives them.
const STEPS_PER_OP: u64 = 8;

fn lib_path() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let p = dir.join("libnccl_profiler_ncclprof.so");
    assert!(
        p.exists(),
        "build it first: cargo build --release -p ncclprof-plugin (or, for a run without --bench, cargo build -p ncclprof-plugin)"
    );
    p
}

#[derive(Default)]
struct ViewerStats {
    /// ProxyStep records received (ops are not events here).
    steps: AtomicU64,
    lat_samples: std::sync::Mutex<Vec<u64>>,
    /// The plugin's latest drop counts, by [`DropReason`] index.
    dropped: std::sync::Mutex<Vec<u64>>,
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("stream: bench");
        return;
    }
    // `cargo bench` passes `--bench`; without it (`cargo test --bench '*'`, CI) one short rate.
    let quick = !std::env::args().any(|a| a == "--bench");
    let secs: u64 = std::env::var("STREAM_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 1 } else { 3 });
    let rates: &[u64] = if quick {
        &[100_000]
    } else {
        &[100_000, 300_000, 1_000_000, 2_000_000, 4_000_000]
    };
    let dir = tempfile::tempdir().unwrap();
    let rdv = dir.path().join("rdv");
    // SAFETY: before the plugin's first init.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", &rdv);
        std::env::set_var("NCCL_PROFILE_EVENT_MASK", "0x7fff");
    }
    // SAFETY: loading our plugin.
    let lib: libloading::Library = unsafe {
        libloading::os::unix::Library::open(
            Some(lib_path()),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
        )
    }
    .unwrap()
    .into();
    // SAFETY: v6 table; the library stays loaded for the whole run.
    let t: &'static T = unsafe { &**lib.get::<*const T>(b"ncclProfiler_v6").unwrap() };
    let mut ctx: *mut c_void = std::ptr::null_mut();
    let mut mask: c_int = 0;
    // SAFETY: valid out-pointers.
    unsafe { (t.init)(&mut ctx, 7, &mut mask, c"stream".as_ptr(), 1, 2, 0, None) };
    let ctx = ctx as usize;

    // Viewer.
    let path = ncclprof_shared::link::ProcessEntry::path(&rdv, std::process::id());
    // Bounded: CI runs this bench, and a plugin that never publishes must fail it, not hang it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let entry = loop {
        if let Ok(e) = ncclprof_shared::link::ProcessEntry::read(&path)
            && !e.server.is_empty()
        {
            break e;
        }
        assert!(Instant::now() < deadline, "plugin published no server");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut conn = ncclprof_shared::link::connect(&entry).unwrap();
    let stats = Arc::new(ViewerStats::default());
    let vs = stats.clone();
    std::thread::spawn(move || {
        let mut n = 0u64;
        // As the viewer reads: records where they arrived (the frame ring, or the socket's
        // buffer); a frame that does not decode is skipped.
        loop {
            let f = match conn.data.recv_frame() {
                Ok(f) => Ok(f),
                Err(ncclprof_shared::link::RecvError::Closed(_)) => break,
                Err(e) => Err(e),
            };
            match f {
                Ok(Frame::Events(r)) => {
                    let now = monotonic_ns();
                    let steps = r
                        .iter()
                        .filter(|e| e.kind == EventKind::ProxyStep as u8)
                        .count();
                    vs.steps.fetch_add(steps as u64, Ordering::Relaxed);
                    n += 1;
                    if n.is_multiple_of(8)
                        && let Some(last) = r.last()
                    {
                        vs.lat_samples
                            .lock()
                            .unwrap()
                            .push(now.saturating_sub(last.end_ns));
                    }
                }
                Ok(Frame::Counters(c)) => *vs.dropped.lock().unwrap() = c.dropped,
                _ => {}
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));

    println!(
        "streaming to a viewer: one event = one ProxyStep (5 calls); every {STEPS_PER_OP} steps one ProxyOp start/InProgress/stop around them (3 calls, not counted as events), 1 producer thread, {secs} s per rate"
    );
    println!(
        "records dropped by the drain ({}) are counted apart: it counts {} and {} mostly when it gives an event up, 10-60 s later (10-60 completion timeouts), so a row's may belong to an earlier row",
        DropReason::DRAIN_ONLY.map(DropReason::name).join(", "),
        DropReason::UnknownHandle.name(),
        DropReason::Abandoned.name(),
    );
    println!(
        "| target ev/s | produced ev/s | delivered % | records dropped on NCCL's threads + sender | dropped by the drain (late) | latency p50 | latency p99 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &target in rates {
        let before = stats.steps.load(Ordering::Relaxed);
        let drop_before = stats.dropped.lock().unwrap().clone();
        stats.lat_samples.lock().unwrap().clear();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let tp = t as *const T as usize;
        let producer = std::thread::spawn(move || {
            let ctx = ctx as *mut c_void;
            // SAFETY: the table is a static of the loaded library, which outlives this thread.
            let t: &T = unsafe { &*(tp as *const T) };
            // SAFETY: zeroed descriptors are valid.
            let mut op: v6::Descr = unsafe { std::mem::zeroed() };
            op.type_ = u64::from(EventKind::ProxyOp.bit());
            op.u.proxy_op = ProxyOp {
                pid: std::process::id() as i32,
                channel_id: 3,
                peer: 1,
                n_steps: STEPS_PER_OP as c_int,
                chunk_size: 65536,
                is_send: 1,
            };
            // SAFETY: as above.
            let mut step: v6::Descr = unsafe { std::mem::zeroed() };
            step.type_ = u64::from(EventKind::ProxyStep.bit());
            let mut args = v4::StateArgs { trans_size: 65536 };
            // NCCL records InProgress with zeroed args (spec §4.6).
            let mut no_args = v4::StateArgs { trans_size: 0 };
            let start = Instant::now();
            let mut ops = 0u64;
            while !st.load(Ordering::Relaxed) {
                // Pace in 100 µs slices, in whole ops: `target` counts steps.
                let due =
                    (start.elapsed().as_nanos() as u64 * target / 1_000_000_000 / STEPS_PER_OP)
                        .saturating_sub(ops);
                for _ in 0..due {
                    // SAFETY: valid context, slots, descriptors, args.
                    unsafe {
                        let mut oh = std::ptr::null_mut();
                        (t.start_event)(ctx, &mut oh, &mut op);
                        (t.record_event_state)(
                            oh,
                            state::PROXY_OP_IN_PROGRESS as c_int,
                            &mut no_args,
                        );
                        step.parent_obj = oh;
                        for s in 0..STEPS_PER_OP as c_int {
                            step.u.proxy_step = ProxyStep { step: s };
                            let mut h = std::ptr::null_mut();
                            (t.start_event)(ctx, &mut h, &mut step);
                            (t.record_event_state)(
                                h,
                                state::PROXY_STEP_SEND_GPU_WAIT as c_int,
                                &mut args,
                            );
                            (t.record_event_state)(
                                h,
                                state::PROXY_STEP_SEND_PEER_WAIT as c_int,
                                &mut args,
                            );
                            (t.record_event_state)(
                                h,
                                state::PROXY_STEP_SEND_WAIT as c_int,
                                &mut args,
                            );
                            (t.stop_event)(h);
                        }
                        (t.stop_event)(oh);
                    }
                }
                ops += due;
                std::thread::sleep(Duration::from_micros(100));
            }
            let produced = ops * STEPS_PER_OP;
            (produced, produced as f64 / start.elapsed().as_secs_f64())
        });
        let w0 = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        let (produced_n, produced) = producer.join().unwrap();
        let _ = w0;
        std::thread::sleep(Duration::from_millis(500)); // let the stream drain
        let delivered = (stats.steps.load(Ordering::Relaxed) - before) as f64
            / produced_n.max(1) as f64
            * 100.0;
        let drop_now = stats.dropped.lock().unwrap().clone();
        let reason = |r: DropReason| {
            drop_now
                .get(r as usize)
                .copied()
                .unwrap_or(0)
                .saturating_sub(drop_before.get(r as usize).copied().unwrap_or(0))
        };
        let on_threads: u64 = DropReason::ALL
            .iter()
            .filter(|r| !DropReason::DRAIN_ONLY.contains(r))
            .map(|&r| reason(r))
            .sum();
        // Named: "0", or e.g. "abandoned 2, unknown handle 1".
        let late: Vec<String> = DropReason::DRAIN_ONLY
            .iter()
            .filter(|&&r| reason(r) > 0)
            .map(|&r| format!("{} {}", r.name(), reason(r)))
            .collect();
        let late = if late.is_empty() {
            "0".to_string()
        } else {
            late.join(", ")
        };
        let mut lat = stats.lat_samples.lock().unwrap().clone();
        lat.sort_unstable();
        let pct = |p: usize| {
            lat.get((lat.len() * p / 100).min(lat.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        println!(
            "| {:>11} | {:>13.0} | {:>10.1}% | {} | {} | {:>8.2} ms | {:>8.2} ms |",
            target,
            produced,
            delivered,
            on_threads,
            late,
            pct(50) as f64 / 1e6,
            pct(99) as f64 / 1e6
        );
    }
    drop(lib);
}
