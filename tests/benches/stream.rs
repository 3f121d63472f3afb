//! End-to-end streaming: producer threads drive the real plugin `.so` with what a proxy thread
//! does (a ProxyOp: start, InProgress, 8 steps of start + 3 states + stop each, stop), and the
//! real viewer pipeline receives it: the TUI's live source (directory watcher, one receiver
//! thread per process), its ingest into the store and a 30 fps render of the timeline into a
//! 160×48 test backend — everything `ncclprof-tui` does except writing to a terminal.
//! Its ProxyOps have no collective (a NULL parent, as under a mask without the Coll bit), so
//! the drain's linking of a job's ops to their collective is not in its figures:
//! `STREAM_MIX=colls` puts a Coll, with its kernel channels, above every 8 of them.
//!
//! For each rate: events produced (ProxyOps + ProxySteps), events in the viewer's store,
//! drops as the plugin counted them (the drain's apart: they can come 10-60 s late), latency
//! from an event's end to its ingest (newest event per ingest turn), and CPU time per produced
//! event by stage (thread CPU clocks), so the table says where the time went and what two
//! cores could sustain at that cost; and the share of vCPU time the hypervisor took meanwhile
//! (steal), which is what drops below saturation follow on a shared VM.
//!
//! Run: `cargo build --release --workspace && cargo bench -p ncclprof-tests --bench stream`
//! Env: `STREAM_SECS` (default 3, use 30 for the sustained figure), `STREAM_RATES`
//! (comma-separated events/s), `STREAM_PRODUCERS` (producer threads, default 1),
//! `STREAM_DEFAULT_MALLOC=1` (without the allocator settings the viewer binary uses),
//! `STREAM_PLUGIN=<path>` (another build's `.so` instead of this workspace's: runs of two
//! builds alternated without copying one over the other), `STREAM_MIX=kernels` (a job without
//! network traffic instead, one node over NVLink: per collective its start and stop and 32
//! kernel channels, each a start, its GPU stop and its stop, GPU times in epoch ns as an
//! H200's `%globaltimer`: 33 events in 98 calls), `STREAM_MIX=colls` (the default's ProxyOps
//! under collectives: per collective a Coll, started and stopped first as NCCL stops it at
//! enqueue, and 8 channels, each a ProxyOp with its steps and then a kernel channel: 81 events
//! in 370 calls).
//! Run without `--bench`, as `cargo test --bench '*'` runs it, it streams 1 s at 100 000
//! events/s: a check that the bench still runs, not a measurement.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ncclprof_shared::clock::monotonic_ns;
use ncclprof_shared::wire::DropReason;
use ncclprof_sim::abi::{self, ProfilerTable, v4, v6};
use ncclprof_tui::app::App;
use ncclprof_tui::event_loop::{Effects, ingest_turn};
use ncclprof_tui::model::source;
use ncclprof_tui::model::store::Store;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const STEPS_PER_OP: u64 = 8;
/// Events per ProxyOp: the op and its steps.
const EVENTS_PER_OP: u64 = STEPS_PER_OP + 1;
/// `STREAM_MIX=kernels`: kernel channels per collective.
const CHANNELS: u64 = 32;
/// Events per collective of that mix: the collective and its channels.
const EVENTS_PER_COLL: u64 = CHANNELS + 1;
/// `STREAM_MIX=colls`: channels per collective, each a ProxyOp and a kernel channel.
const OPS_PER_COLL: u64 = 8;
/// `STREAM_MIX=colls`: events per collective.
const EVENTS_PER_JOB_COLL: u64 = 1 + OPS_PER_COLL * (EVENTS_PER_OP + 1);
/// GPU stamps (`%globaltimer`, epoch ns) are this plus the host's monotonic ns.
const KERNEL_EPOCH_NS: u64 = 1_790_000_000_000_000_000;

/// What the producer threads drive.
#[derive(Clone, Copy, PartialEq)]
enum Mix {
    /// A proxy thread's network work: ProxyOps and their steps.
    Steps,
    /// A job without network traffic: collectives and their kernel channels.
    Kernels,
    /// `Steps` with a collective above its ProxyOps: per collective a Coll (start and stop,
    /// as NCCL stops it at enqueue) and `OPS_PER_COLL` ProxyOps under it, one per channel.
    Colls,
}

/// CPU seconds (user + system) of this process's threads, grouped by thread-name prefix.
fn cpu_by_thread() -> BTreeMap<String, f64> {
    let tick = 100.0; // USER_HZ
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in rd.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = &stat[open + 1..close];
        let group = if name.starts_with("ncclprof-rx") {
            "viewer rx"
        } else if name.starts_with("ncclprof-drain") {
            "plugin drain"
        } else if name.starts_with("ncclprof-send") {
            "plugin send"
        } else if name.starts_with("viewer-ui") {
            "viewer ingest+render"
        } else {
            "other"
        };
        let f: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let (u, s): (f64, f64) = (
            f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0),
            f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0),
        );
        *out.entry(group.to_string()).or_insert(0.0) += (u + s) / tick;
    }
    out
}

#[derive(Default)]
struct ViewerSide {
    ingested: u64,
    /// Drops by reason (`DropReason` order), summed over processes.
    dropped: Vec<u64>,
    lat: Vec<u64>,
    frames: u64,
    /// (when the viewer learnt it, total) each time the ring-full count moved: when in a run
    /// the rings filled (the plugin reports its counts every 250 ms).
    ring_full_at: Vec<(u64, u64)>,
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("stream: bench");
        return;
    }
    // The allocator settings `ncclprof-tui` starts with, for the viewer half of this process
    // (`STREAM_DEFAULT_MALLOC=1` to compare without them).
    if std::env::var_os("STREAM_DEFAULT_MALLOC").is_none() {
        // SAFETY: first thing in main, before any other thread exists.
        unsafe { ncclprof_tui::tune_allocator() };
    }
    // `cargo bench` passes `--bench`; without it (`cargo test --bench '*'`, CI) one short rate.
    let quick = !std::env::args().any(|a| a == "--bench");
    let secs: u64 = ncclprof_tests::env("STREAM_SECS").unwrap_or(if quick { 1 } else { 3 });
    let producers: u64 = ncclprof_tests::env("STREAM_PRODUCERS").unwrap_or(1).max(1);
    let mix = match std::env::var("STREAM_MIX").as_deref() {
        Ok("kernels") => Mix::Kernels,
        Ok("colls") => Mix::Colls,
        _ => Mix::Steps,
    };
    let rates: Vec<u64> = std::env::var("STREAM_RATES")
        .ok()
        .map(|s| s.split(',').filter_map(|r| r.trim().parse().ok()).collect())
        .unwrap_or_else(|| {
            if quick {
                vec![100_000]
            } else {
                vec![300_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000]
            }
        });
    let dir = tempfile::tempdir().unwrap();
    let rdv = dir.path().join("rdv");
    // SAFETY: before the plugin's first init in this process.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", &rdv);
        std::env::set_var("NCCL_PROFILE_EVENT_MASK", "0x7fff");
    }
    let so = ncclprof_tests::bench_plugin_path("STREAM_PLUGIN");
    // SAFETY: loading our plugin; it stays loaded for the whole run.
    let lib: libloading::Library = unsafe {
        libloading::os::unix::Library::open(
            Some(&so),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
        )
    }
    .unwrap()
    .into();
    // SAFETY: the v6 table symbol of our plugin.
    let t: ProfilerTable =
        unsafe { **lib.get::<*const ProfilerTable>(b"ncclProfiler_v6").unwrap() };
    // SAFETY: `init` of a v6 table has the v5 signature.
    let init: abi::InitV5 = unsafe { std::mem::transmute(t.init) };
    let mut ctx: *mut c_void = std::ptr::null_mut();
    let mut mask: c_int = 0;
    // SAFETY: valid out-pointers and name.
    unsafe { init(&mut ctx, 7, &mut mask, c"stream".as_ptr(), 1, 2, 0, None) };
    let ctx = ctx as usize;

    // The viewer: the TUI's own live source, ingest and renderer, on a thread named like the
    // UI loop.
    let side = Arc::new(std::sync::Mutex::new(ViewerSide::default()));
    let quit = Arc::new(AtomicBool::new(false));
    let (vs, vq, vdir) = (side.clone(), quit.clone(), rdv.clone());
    let viewer = std::thread::Builder::new()
        .name("viewer-ui".into())
        .spawn(move || {
            let live = source::live(vdir, Vec::new());
            let mut app = App::new(Store::new(1 << 30), true, "bench".into());
            let mut fx = Effects::new(false);
            let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
            let mut last_draw = Instant::now();
            let mut newest_seen = 0;
            while !vq.load(Ordering::Relaxed) {
                let any = ingest_turn(&mut app, &live, &mut fx);
                let now = monotonic_ns();
                let mut s = vs.lock().unwrap();
                if any {
                    let newest = app
                        .store
                        .procs
                        .iter()
                        .map(|p| p.last_end)
                        .max()
                        .unwrap_or(0);
                    // A turn that brought no newer event is no sample: after the producer
                    // stops, events the drain reports late (ops whose stop a full ring
                    // dropped, swept 10 timeouts on) would time the wait since the last one.
                    if newest > newest_seen {
                        newest_seen = newest;
                        s.lat.push(now.saturating_sub(newest));
                    }
                }
                s.ingested = app.store.ingested;
                let mut d = vec![0u64; DropReason::COUNT];
                for c in app.store.procs.iter().filter_map(|p| p.counters.as_ref()) {
                    for (a, b) in d.iter_mut().zip(&c.dropped) {
                        *a += b;
                    }
                }
                let ring_full = d[DropReason::RingFull as usize];
                if s.ring_full_at.last().map_or(0, |&(_, n)| n) != ring_full {
                    s.ring_full_at.push((now, ring_full));
                }
                s.dropped = d;
                drop(s);
                if last_draw.elapsed() >= Duration::from_millis(33) {
                    term.draw(|f| ncclprof_tui::ui::render(f, &app)).unwrap();
                    last_draw = Instant::now();
                    vs.lock().unwrap().frames += 1;
                }
                // As the UI loop does: wait 10 ms for terminal input unless frames are queued.
                if live.rx.is_empty() {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        })
        .unwrap();
    assert!(
        ncclprof_tests::wait_for(Duration::from_secs(10), || side.lock().unwrap().ingested
            > 0
            || !side.lock().unwrap().lat.is_empty()
            || std::fs::read_dir(&rdv).is_ok()),
        "viewer did not start"
    );
    std::thread::sleep(Duration::from_millis(1500)); // the watcher polls every 500 ms

    match mix {
        Mix::Steps => println!(
            "end-to-end streaming into the real viewer (ingest + 30 fps render): one ProxyOp = {EVENTS_PER_OP} events = {} calls, {producers} producer thread(s), {secs} s per rate",
            3 + STEPS_PER_OP * 5
        ),
        Mix::Colls => println!(
            "end-to-end streaming into the real viewer (ingest + 30 fps render), STREAM_MIX=colls: one collective = {EVENTS_PER_JOB_COLL} events (the Coll and {OPS_PER_COLL} channels of a ProxyOp of {EVENTS_PER_OP} events and a kernel channel) = {} calls, {producers} producer thread(s), {secs} s per rate",
            2 + OPS_PER_COLL * (3 + STEPS_PER_OP * 5 + 3)
        ),
        Mix::Kernels => println!(
            "end-to-end streaming into the real viewer (ingest + 30 fps render), STREAM_MIX=kernels: one collective = {EVENTS_PER_COLL} events (the Coll and {CHANNELS} kernel channels) = {} calls, {producers} producer thread(s), {secs} s per rate",
            2 + CHANNELS * 3
        ),
    }
    println!(
        "records dropped by the drain ({}) are counted apart: it counts {} and {} mostly when it gives an event up, 10-60 s later (10-60 completion timeouts), so a row's may belong to an earlier row",
        DropReason::DRAIN_ONLY.map(DropReason::name).join(", "),
        DropReason::UnknownHandle.name(),
        DropReason::Abandoned.name(),
    );
    println!(
        "| target ev/s | produced ev/s | in viewer store | records dropped on NCCL's threads + sender: ring full / viewer slow / other | dropped by the drain (late) | latency p50 | latency p99 | CPU ns per event: NCCL threads (per produced) / drain / socket (send + rx) / viewer ingest+render (per delivered) = total | 2 cores at that cost | vCPU time stolen |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut when_full = Vec::new();
    for target in rates {
        let started = monotonic_ns();
        let (ing0, drop0) = {
            let mut s = side.lock().unwrap();
            s.lat.clear();
            (s.ingested, s.dropped.clone())
        };
        let cpu0 = cpu_by_thread();
        let steal = ncclprof_tests::StealMeter::start();
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for p in 0..producers {
            let st = stop.clone();
            let per_thread = target / producers;
            let fns: Fns = (
                t.startEvent.unwrap(),
                t.stopEvent.unwrap(),
                t.recordEventState.unwrap(),
            );
            handles.push(
                std::thread::Builder::new()
                    .name(format!("producer-{p}"))
                    .spawn(move || produce(fns, ctx, per_thread, mix, &st))
                    .unwrap(),
            );
        }
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        let stolen = steal.percent();
        let (mut produced, mut producer_cpu) = (0u64, 0.0f64);
        for h in handles {
            let (n, cpu) = h.join().unwrap();
            produced += n;
            producer_cpu += cpu;
        }
        // Let the stream settle: the viewer has everything once its count stops moving.
        let mut last = u64::MAX;
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(250));
            let now = side.lock().unwrap().ingested;
            if now == last {
                break;
            }
            last = now;
        }
        let cpu1 = cpu_by_thread();
        let cpu = |g: &str| cpu1.get(g).unwrap_or(&0.0) - cpu0.get(g).unwrap_or(&0.0);
        let mut s = side.lock().unwrap();
        let got = s.ingested - ing0;
        let reason = |r: DropReason| {
            s.dropped.get(r as usize).copied().unwrap_or(0)
                - drop0.get(r as usize).copied().unwrap_or(0)
        };
        let (ring, slow) = (reason(DropReason::RingFull), reason(DropReason::ViewerSlow));
        let named = |rs: &[DropReason]| -> Vec<String> {
            rs.iter()
                .filter(|&&r| reason(r) > 0)
                .map(|&r| format!("{} {}", r.name(), reason(r)))
                .collect()
        };
        // The other reasons counted on NCCL's threads, named: "0", or e.g. "2 (no ring 2)".
        let others: Vec<DropReason> = DropReason::ALL
            .into_iter()
            .filter(|r| *r != DropReason::RingFull && *r != DropReason::ViewerSlow)
            .filter(|r| !DropReason::DRAIN_ONLY.contains(r))
            .collect();
        let other = match others.iter().map(|&r| reason(r)).sum::<u64>() {
            0 => "0".to_string(),
            n => format!("{n} ({})", named(&others).join(", ")),
        };
        // The drain's, named apart: "0", or e.g. "abandoned 2, unknown handle 1".
        let late = match named(&DropReason::DRAIN_ONLY) {
            l if l.is_empty() => "0".to_string(),
            l => l.join(", "),
        };
        s.lat.sort_unstable();
        let pct = |p: usize| {
            s.lat
                .get((s.lat.len() * p / 100).min(s.lat.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0) as f64
                / 1e6
        };
        // CPU per event by stage — per produced event on NCCL's threads, per delivered event
        // downstream (a dropped record costs the drain and the viewer nothing) — and what two
        // cores could sustain at that cost.
        let per = |cpu_s: f64, n: u64| cpu_s * 1e9 / n.max(1) as f64;
        let stages = [
            per(producer_cpu, produced),
            per(cpu("plugin drain"), got),
            per(cpu("plugin send") + cpu("viewer rx"), got),
            per(cpu("viewer ingest+render"), got),
        ];
        let total: f64 = stages.iter().sum();
        println!(
            "| {:>10} | {:>10.0} | {:>6.1} % | {} / {} / {} | {} | {:>6.2} ms | {:>6.2} ms | {:.0} / {:.0} / {:.0} / {:.0} = {:.0} | {:.1} M | {} |",
            target,
            produced as f64 / secs as f64,
            got as f64 / produced.max(1) as f64 * 100.0,
            ring,
            slow,
            other,
            late,
            pct(50),
            pct(99),
            stages[0],
            stages[1],
            stages[2],
            stages[3],
            total,
            2e9 / total / 1e6,
            stolen.map_or("n/a".into(), |p| format!("{p:.1} %")),
        );
        if ring > 0 {
            when_full.push(format!(
                "{target}: {}",
                ring_full_by_second(&s.ring_full_at, started)
            ));
        }
    }
    if !when_full.is_empty() {
        println!("\nrecords lost as ring full, by second of the run (as the viewer learnt them):");
        for line in when_full {
            println!("  {line}");
        }
    }
    quit.store(true, Ordering::Relaxed);
    let _ = viewer.join();
    drop(lib);
}

/// "second 3: 12 000, second 4: 800" — how many records were lost as ring full in each
/// second since `started`, from the viewer's log of the count.
fn ring_full_by_second(log: &[(u64, u64)], started: u64) -> String {
    let mut by_second = std::collections::BTreeMap::<u64, u64>::new();
    let mut before = log
        .iter()
        .take_while(|&&(t, _)| t < started)
        .last()
        .map_or(0, |&(_, n)| n);
    for &(t, n) in log.iter().filter(|&&(t, _)| t >= started) {
        *by_second.entry((t - started) / 1_000_000_000).or_default() += n.saturating_sub(before);
        before = n;
    }
    let parts: Vec<String> = by_second
        .iter()
        .map(|(sec, n)| format!("second {sec}: {n}"))
        .collect();
    parts.join(", ")
}

type Fns = (abi::StartFn, abi::StopFn, abi::RecordFn);
type Descr = v6::ncclProfilerEventDescr_v6_t;

/// An AllReduce's Coll descriptor over `channels` channels (no parent).
fn coll_descr(channels: u64) -> Descr {
    // SAFETY: a zeroed descriptor is a valid v6 descriptor (NULL strings, parents).
    let mut coll: Descr = unsafe { std::mem::zeroed() };
    coll.type_ = abi::ev::COLL;
    coll.u.coll.func = c"AllReduce".as_ptr();
    coll.u.coll.datatype = c"ncclFloat32".as_ptr();
    coll.u.coll.nChannels = channels as u8;
    coll
}

/// A KernelCh descriptor; its parent and arm are set per channel (`kernel_channel`).
fn kernel_descr() -> Descr {
    // SAFETY: as in `coll_descr`.
    let mut kernel: Descr = unsafe { std::mem::zeroed() };
    kernel.type_ = abi::ev::KERNEL_CH;
    kernel
}

/// Channel `channel`'s kernel under `kernel.parentObj`, as NCCL's proxy thread records it
/// (spec §4.4): its start with the GPU start time, its GPU stop, at once its stop. `gpu`:
/// (start, stop), `%globaltimer` ns.
///
/// # Safety
/// `ctx` and `kernel.parentObj` are what the plugin handed out (or NULL), `fns` its table's.
unsafe fn kernel_channel(
    fns: Fns,
    ctx: *mut c_void,
    kernel: &mut Descr,
    channel: u64,
    gpu: (u64, u64),
) {
    let (start_event, stop_event, record) = fns;
    kernel.u.kernelCh = abi::v4::KernelCh {
        channelId: channel as u8,
        pTimer: gpu.0,
    };
    let mut gpu_stop = v4::ncclProfilerEventStateArgs_v4_t {
        kernelCh_pTimer: gpu.1,
    };
    let mut kh = std::ptr::null_mut();
    // SAFETY: valid context, handle slot, descriptor and args (the caller's contract).
    unsafe {
        start_event(ctx, &mut kh, (kernel as *mut Descr).cast());
        record(
            kh,
            abi::st::KERNEL_CH_STOP,
            &mut gpu_stop as *mut _ as *mut c_void,
        );
        stop_event(kh);
    }
}

/// Drive `mix` at `rate` events/s until `stop`; returns events produced and the thread's CPU
/// seconds.
fn produce(fns: Fns, ctx: usize, rate: u64, mix: Mix, stop: &AtomicBool) -> (u64, f64) {
    if mix == Mix::Kernels {
        return produce_kernels(fns, ctx, rate, stop);
    }
    let ctx = ctx as *mut c_void;
    let (start_event, stop_event, record) = fns;
    // SAFETY: a zeroed descriptor is a valid v6 descriptor.
    let mut op: v6::ncclProfilerEventDescr_v6_t = unsafe { std::mem::zeroed() };
    op.type_ = abi::ev::PROXY_OP;
    op.u.proxyOp = abi::v1::ProxyOp {
        pid: std::process::id() as i32,
        channelId: 3,
        peer: 1,
        nSteps: STEPS_PER_OP as c_int,
        chunkSize: 1 << 19,
        isSend: 1,
    };
    // SAFETY: as above.
    let mut step: v6::ncclProfilerEventDescr_v6_t = unsafe { std::mem::zeroed() };
    step.type_ = abi::ev::PROXY_STEP;
    let mut args = v4::ncclProfilerEventStateArgs_v4_t {
        proxyStep_transSize: 1 << 19,
    };
    let a = &mut args as *mut _ as *mut c_void;
    let mut coll = coll_descr(OPS_PER_COLL);
    let mut kernel = kernel_descr();
    // Events per paced unit: a ProxyOp and its steps, or (`colls`) a collective over
    // OPS_PER_COLL channels, each a ProxyOp with its steps and a kernel channel.
    let per_unit = if mix == Mix::Colls {
        EVENTS_PER_JOB_COLL
    } else {
        EVENTS_PER_OP
    };
    let start = Instant::now();
    let mut units = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // Pace in 100 µs slices.
        let due = (start.elapsed().as_nanos() as u64 * rate / 1_000_000_000 / per_unit)
            .saturating_sub(units);
        // Kernel channels' GPU stamps, as `produce_kernels` makes them: over the slice before.
        let gpu_now = KERNEL_EPOCH_NS + monotonic_ns();
        let share = 100_000 / due.max(1);
        for u in 0..due {
            let ops_here = if mix == Mix::Colls {
                // SAFETY: valid context, handle slot and descriptor.
                unsafe {
                    let mut ch = std::ptr::null_mut();
                    coll.u.coll.seqNumber = units + u;
                    start_event(ctx, &mut ch, &mut coll as *mut _ as *mut c_void);
                    stop_event(ch);
                    op.parentObj = ch;
                }
                OPS_PER_COLL
            } else {
                1
            };
            for o in 0..ops_here {
                if mix == Mix::Colls {
                    op.u.proxyOp.channelId = o as u8;
                }
                // SAFETY: valid context, handle slots, descriptors and args.
                unsafe {
                    let mut oh = std::ptr::null_mut();
                    start_event(ctx, &mut oh, &mut op as *mut _ as *mut c_void);
                    record(oh, abi::st::PROXY_OP_IN_PROGRESS, a);
                    step.parentObj = oh;
                    for s in 0..STEPS_PER_OP as c_int {
                        step.u.proxyStep = abi::v1::ProxyStep { step: s };
                        let mut sh = std::ptr::null_mut();
                        start_event(ctx, &mut sh, &mut step as *mut _ as *mut c_void);
                        record(sh, abi::st::STEP_SEND_GPU_WAIT, a);
                        record(sh, abi::st::STEP_SEND_PEER_WAIT, a);
                        record(sh, abi::st::STEP_SEND_WAIT, a);
                        stop_event(sh);
                    }
                    stop_event(oh);
                    if mix == Mix::Colls {
                        // The channel's kernel: a Coll whose mask has KernelCh waits for all
                        // its channels' (its nChannels) before it completes.
                        let gpu_start = gpu_now - 100_000 + u * share + o * share / 32;
                        kernel.parentObj = op.parentObj;
                        let span = (gpu_start, gpu_start + share / 2);
                        kernel_channel(fns, ctx, &mut kernel, o, span);
                    }
                }
            }
        }
        units += due;
        std::thread::sleep(Duration::from_micros(100));
    }
    (
        units * per_unit,
        ncclprof_tests::cpu_seconds(libc::CLOCK_THREAD_CPUTIME_ID),
    )
}

/// `STREAM_MIX=kernels`: collectives with their kernel channels at `rate` events/s until
/// `stop`, as `produce`. The GPU's stamps are host times in epoch ns, from one clock read per
/// 100 µs slice of the pace, not per call (the producer stands for NCCL, whose stamps come
/// from the GPU): the slice's collectives one after the other over the slice before it, each
/// one's channels starting within the first quarter of its share and running half of it.
fn produce_kernels(fns: Fns, ctx: usize, rate: u64, stop: &AtomicBool) -> (u64, f64) {
    let ctx = ctx as *mut c_void;
    let (start_event, stop_event, _) = fns;
    let mut coll = coll_descr(CHANNELS);
    let mut kernel = kernel_descr();
    let start = Instant::now();
    let mut colls = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // Pace in 100 µs slices.
        let due = (start.elapsed().as_nanos() as u64 * rate / 1_000_000_000 / EVENTS_PER_COLL)
            .saturating_sub(colls);
        let gpu_now = KERNEL_EPOCH_NS + monotonic_ns();
        let share = 100_000 / due.max(1);
        for c in 0..due {
            // SAFETY: valid context, handle slots, descriptors and args.
            unsafe {
                let mut ch = std::ptr::null_mut();
                coll.u.coll.seqNumber = colls + c;
                start_event(ctx, &mut ch, &mut coll as *mut _ as *mut c_void);
                stop_event(ch);
                kernel.parentObj = ch;
                for k in 0..CHANNELS {
                    let gpu_start = gpu_now - 100_000 + c * share + k * share / (4 * CHANNELS);
                    kernel_channel(fns, ctx, &mut kernel, k, (gpu_start, gpu_start + share / 2));
                }
            }
        }
        colls += due;
        std::thread::sleep(Duration::from_micros(100));
    }
    (
        colls * EVENTS_PER_COLL,
        ncclprof_tests::cpu_seconds(libc::CLOCK_THREAD_CPUTIME_ID),
    )
}
