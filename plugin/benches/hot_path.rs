//! Hot-path cost: ns added per plugin call against the do-nothing plugin, same call sequence,
//! runs alternated, reported as a difference and a ratio measured in the same run.
//!
//! Run: `cargo build --release -p ncclprof-plugin -p ncclprof-noop-plugin && cargo bench -p ncclprof-plugin --bench hot_path`
//! (`HOT_PATH_CANDIDATE=<copy of another build's .so>` compares this build with that one in one
//! process instead; `HOT_PATH_IDLE_ONLY=1` measures only the idle threads.) Run without
//! `--bench`, as `cargo test --bench '*'` runs it, it makes one short round of each table: a
//! check that the bench still runs, not a measurement.
//!
//! The sequence is what a proxy thread does per network step (start, 3 states, stop) plus a
//! Coll start/stop every 8 steps. Calls come in paced bursts (the drain thread empties the
//! rings between bursts, as in a real job where NCCL does real work between callbacks); only
//! the time inside bursts counts.
//!
//! The plugin runs with its default settings, as a job gets it: rings of
//! `NCCLPROF_RING_EVENTS` slots per thread (4 MiB), unless the environment says otherwise.
//! (Until 2026-12-07 the bench set 1 M slots, a 64 MiB ring whose every record went to a line
//! no cache held: 2.5–3.9 ns more per call than the default, alternated in one process.) At
//! the end it prints what the plugin dropped, from the test viewer's last `Counters` frame: a
//! dropped record costs less than a kept one, so the figures hold only where that says none.

use std::ffi::{c_int, c_void};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nccl_profiler_ncclprof::abi::{InitV5, ProfilerTable, v4, v6};
use ncclprof_shared::kind::{EventKind, state};
use ncclprof_shared::link::RecvError;
use ncclprof_shared::wire::{DropReason, Frame};
use std::sync::atomic::{AtomicU64, Ordering};

type T = ProfilerTable<InitV5, v6::Descr, v4::StateArgs>;

fn lib_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().unwrap().to_path_buf();
    for _ in 0..3 {
        let p = dir.join(name);
        if p.exists() {
            return p;
        }
        dir = dir.parent().unwrap().to_path_buf();
        let p = dir.join("release").join(name);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{name} not found: run `cargo build --release -p ncclprof-plugin -p ncclprof-noop-plugin` first (without `--release` for a run without `--bench`)"
    );
}

struct Lib {
    lib: libloading::Library,
    t: &'static T,
    ctx: *mut c_void,
}

fn open(name: &str, mask: &mut c_int) -> Lib {
    open_path(lib_path(name), mask)
}

fn open_path(path: PathBuf, mask: &mut c_int) -> Lib {
    // SAFETY: loading our own plugins.
    let lib: libloading::Library = unsafe {
        libloading::os::unix::Library::open(
            Some(path),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
        )
    }
    .unwrap()
    .into();
    // SAFETY: data symbol with the v6 table layout; the library stays loaded in `Lib`.
    let t: &'static T = unsafe { &**lib.get::<*const T>(b"ncclProfiler_v6").unwrap() };
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid out-pointers.
    unsafe { (t.init)(&mut ctx, 0xbe4c, mask, c"bench".as_ptr(), 1, 2, 0, None) };
    Lib { lib, t, ctx }
}

fn descr(kind: EventKind, parent: *mut c_void) -> v6::Descr {
    // SAFETY: all-zero is a valid descriptor.
    let mut d: v6::Descr = unsafe { std::mem::zeroed() };
    d.type_ = u64::from(kind.bit());
    d.parent_obj = parent;
    d
}

/// A ProxyStep under a (fake) ProxyOp handle.
fn step_descr() -> v6::Descr {
    descr(EventKind::ProxyStep, 0x10 as *mut c_void)
}

/// A Coll with the strings NCCL passes (interned on the call).
fn coll_descr() -> v6::Descr {
    let mut d = descr(EventKind::Coll, std::ptr::null_mut());
    d.u.coll.func = c"AllReduce".as_ptr();
    d.u.coll.datatype = c"ncclFloat32".as_ptr();
    d
}

const CALLS_PER_SEQ: u64 = 5;

/// One burst of `n` step sequences; returns (elapsed, calls).
fn burst(l: &Lib, n: u64, d_step: &mut v6::Descr, d_coll: &mut v6::Descr) -> (Duration, u64) {
    let t = l.t;
    let mut args = v4::StateArgs {
        trans_size: 1 << 20,
    };
    let mut calls = 0;
    let t0 = Instant::now();
    for i in 0..n {
        let mut h = std::ptr::null_mut();
        // SAFETY: valid context, handle slot, descriptors and args for the whole loop.
        unsafe {
            if i % 8 == 0 {
                let mut c = std::ptr::null_mut();
                (t.start_event)(l.ctx, &mut c, d_coll);
                (t.stop_event)(c);
                calls += 2;
            }
            // Step numbers one after another, as NCCL numbers an op's transfers (the ABI
            // spec: "transfer index 0, 1, 2, …"; `per_kind` does the same), and never the
            // same twice under the bench's one op.
            // Until 2026-12-07 evening every step of the sequence was step 0 of the op: each
            // start found the step before it under the same op and number in the table of
            // recent starts and checked whether it restarted it (spec §4.6), a path NCCL's
            // starts take only where a step is started again, and every start used the same
            // entry of that table, where NCCL's use one after another.
            d_step.u.proxy_step.step = d_step.u.proxy_step.step.wrapping_add(1);
            (t.start_event)(l.ctx, &mut h, d_step);
            (t.record_event_state)(h, state::PROXY_STEP_SEND_GPU_WAIT as c_int, &mut args);
            (t.record_event_state)(h, state::PROXY_STEP_SEND_PEER_WAIT as c_int, &mut args);
            (t.record_event_state)(h, state::PROXY_STEP_SEND_WAIT as c_int, &mut args);
            (t.stop_event)(h);
        }
        calls += CALLS_PER_SEQ;
    }
    (t0.elapsed(), calls)
}

/// ns per call over `bursts` paced bursts.
fn measure(l: &Lib, bursts: u32) -> f64 {
    let mut d_step = step_descr();
    let mut d_coll = coll_descr();
    let (mut total, mut calls) = (Duration::ZERO, 0);
    for _ in 0..bursts {
        let (e, c) = burst(l, 400, &mut d_step, &mut d_coll);
        total += e;
        calls += c;
        std::thread::sleep(Duration::from_micros(500));
    }
    total.as_nanos() as f64 / calls as f64
}

/// ns per call of each call kind: N starts, then N of each state, then (ProxySteps) N
/// SendPeerWaits twice, timing the second (a retried send: a repeat that only counts), then N
/// stops, of the event `make` describes. [start, state, repeated state (0 if not a
/// ProxyStep), stop].
fn per_kind(l: &Lib, n: usize, make: fn() -> v6::Descr) -> [f64; 4] {
    let t = l.t;
    let mut d_step = make();
    let step = d_step.type_ == u64::from(EventKind::ProxyStep.bit());
    let mut args = v4::StateArgs {
        trans_size: 1 << 20,
    };
    let mut handles = vec![std::ptr::null_mut::<c_void>(); n];
    let t0 = Instant::now();
    for (i, h) in handles.iter_mut().enumerate() {
        if step {
            // Steps 0, 1, 2, … of one op, as NCCL numbers them. (Until 2026-12-07 every step
            // was step 0 of the op: each start took the one before it for a restart of the
            // same step (spec §4.6) and forgot it, so the state and stop rows timed a
            // forgotten step's path, and the drain counted every record of them as an
            // unknown handle.)
            d_step.u.proxy_step.step = i as c_int;
        }
        // SAFETY: valid context, slot and descriptor.
        unsafe { (t.start_event)(l.ctx, h, &mut d_step) };
    }
    let t1 = Instant::now();
    for &h in &handles {
        // SAFETY: handles from start_event, valid args.
        unsafe { (t.record_event_state)(h, state::PROXY_STEP_SEND_WAIT as c_int, &mut args) };
    }
    let t2 = Instant::now();
    let peer_wait = state::PROXY_STEP_SEND_PEER_WAIT as c_int;
    let (mut r0, mut r1) = (t2, t2);
    if step {
        for &h in &handles {
            // SAFETY: as above.
            unsafe { (t.record_event_state)(h, peer_wait, &mut args) };
        }
        r0 = Instant::now();
        for &h in &handles {
            // SAFETY: as above.
            unsafe { (t.record_event_state)(h, peer_wait, &mut args) };
        }
        r1 = Instant::now();
    }
    for &h in &handles {
        // SAFETY: handles from start_event.
        unsafe { (t.stop_event)(h) };
    }
    let t3 = Instant::now();
    let ns = |a: Instant, b: Instant| (b - a).as_nanos() as f64 / n as f64;
    [ns(t0, t1), ns(t1, t2), ns(r0, r1), ns(r1, t3)]
}

/// ns per call of a kernel channel's calls: N starts, then N times its GPU stop (record 22)
/// and its stop, one right after the other as NCCL's proxy thread makes them (spec §4.4).
/// [start, GPU stop + stop per pair].
fn kernel_ch_per_kind(l: &Lib, n: usize) -> [f64; 2] {
    let t = l.t;
    let mut d = descr(EventKind::KernelCh, 0x20 as *mut c_void);
    d.u.kernel_ch = v4::KernelCh {
        channel_id: 3,
        p_timer: 1_790_000_000_000_000_000,
    };
    let mut args = v4::StateArgs {
        p_timer: 1_790_000_000_000_500_000,
    };
    let mut handles = vec![std::ptr::null_mut::<c_void>(); n];
    let t0 = Instant::now();
    for h in handles.iter_mut() {
        // SAFETY: valid context, slot and descriptor.
        unsafe { (t.start_event)(l.ctx, h, &mut d) };
    }
    let t1 = Instant::now();
    for &h in &handles {
        // SAFETY: handles from start_event, valid args.
        unsafe {
            (t.record_event_state)(h, state::KERNEL_CH_STOP as c_int, &mut args);
            (t.stop_event)(h);
        }
    }
    let t2 = Instant::now();
    let ns = |a: Instant, b: Instant| (b - a).as_nanos() as f64 / n as f64;
    [ns(t0, t1), ns(t1, t2)]
}

/// ns per collective of what NCCL's caller thread records for one standalone collective
/// (spec §4.4, every API bit on): GroupApi start, its state 23, CollApi start and stop, state
/// 24, KernelLaunch start and stop, Group start, Coll start and stop, Group stop, GroupApi
/// stop: 12 calls.
fn launch_per_collective(l: &Lib, n: usize) -> f64 {
    let t = l.t;
    let call = |d: &mut v6::Descr| {
        let mut h = std::ptr::null_mut();
        // SAFETY: valid context, slot and descriptor.
        unsafe { (t.start_event)(l.ctx, &mut h, d) };
        h
    };
    // SAFETY: a handle from start_event; NULL args, as NCCL passes for states 23 and 24.
    let state = |h: *mut c_void, s: u32| unsafe {
        (t.record_event_state)(h, s as c_int, std::ptr::null_mut())
    };
    // SAFETY: a handle from start_event.
    let stop = |h: *mut c_void| unsafe { (t.stop_event)(h) };
    let mut d_gapi = descr(EventKind::GroupApi, std::ptr::null_mut());
    d_gapi.u.group_api.group_depth = 1;
    let mut d_capi = descr(EventKind::CollApi, std::ptr::null_mut());
    d_capi.u.coll_api.func = c"AllReduce".as_ptr();
    d_capi.u.coll_api.datatype = c"ncclFloat32".as_ptr();
    d_capi.u.coll_api.count = 1 << 20;
    let mut d_launch = descr(EventKind::KernelLaunch, std::ptr::null_mut());
    let mut d_group = descr(EventKind::Group, std::ptr::null_mut());
    let mut d_coll = coll_descr();
    d_coll.u.coll.algo = c"RING".as_ptr();
    d_coll.u.coll.proto = c"SIMPLE".as_ptr();
    d_coll.u.coll.n_channels = 16;
    let t0 = Instant::now();
    for _ in 0..n {
        let gapi = call(&mut d_gapi);
        state(gapi, state::GROUP_START_API_STOP);
        d_capi.parent_obj = gapi;
        let capi = call(&mut d_capi);
        stop(capi);
        state(gapi, state::GROUP_END_API_START);
        d_launch.parent_obj = gapi;
        let launch = call(&mut d_launch);
        stop(launch);
        let group = call(&mut d_group);
        d_coll.parent_obj = capi;
        d_coll.u.coll.parent_group = group;
        let coll = call(&mut d_coll);
        stop(coll);
        stop(group);
        stop(gapi);
    }
    t0.elapsed().as_nanos() as f64 / n as f64
}

/// CPU time (ns) used so far by this whole process.
fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Share of one core the whole process used over `secs` while this thread sleeps.
fn idle_percent(secs: u64) -> f64 {
    let c0 = process_cpu_ns();
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let c1 = process_cpu_ns();
    (c1 - c0) as f64 / w0.elapsed().as_nanos() as f64 * 100.0
}

/// `exampleProfilerStop()` of our plugin: the mask NCCL reads becomes 0.
fn profiler_stop(l: &Lib) {
    // SAFETY: the plugin's exported `int exampleProfilerStop(void)`.
    let stop = unsafe {
        l.lib
            .get::<extern "C" fn() -> c_int>(b"exampleProfilerStop")
    }
    .unwrap();
    stop();
}

/// Per figure `f` returns, its medians over `rounds` rounds alternating the do-nothing plugin
/// and ours (5 ms apart): (noop, ncclprof).
fn alternated<const N: usize>(
    noop: &Lib,
    prof: &Lib,
    rounds: usize,
    f: impl Fn(&Lib) -> [f64; N],
) -> [(f64, f64); N] {
    let (mut a, mut b) = (vec![Vec::new(); N], vec![Vec::new(); N]);
    for _ in 0..rounds {
        for (l, v) in [(noop, &mut a), (prof, &mut b)] {
            for (i, x) in f(l).into_iter().enumerate() {
                v[i].push(x);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    std::array::from_fn(|i| (median(&mut a[i]), median(&mut b[i])))
}

/// One row of the per-call-kind table.
fn kind_row(name: &str, (base, ours): (f64, f64)) {
    println!(
        "| {name:<39} | {base:>8.2} | {ours:>8.2} | {:>8.2} |",
        ours - base
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// The test viewer's view of the plugin's drops: the latest `Counters` frame's count per
/// [`DropReason`], and how many such frames came. The figures are only worth having if
/// nothing was dropped (a dropped record costs less than a kept one), so the bench prints them.
#[derive(Default)]
struct SeenDrops {
    counters_frames: AtomicU64,
    /// The plugin closed the connection: from then on (b) has no viewer, and the counts
    /// stop at that moment.
    closed: std::sync::atomic::AtomicBool,
    dropped: [AtomicU64; DropReason::COUNT],
}
type Drops = std::sync::Arc<SeenDrops>;

/// Connect a viewer that receives and decodes every frame (as the viewer's receive path
/// does), keeping the plugin's drop counts.
fn attach_viewer(dir: &std::path::Path) -> Drops {
    let path = ncclprof_shared::link::ProcessEntry::path(dir, std::process::id());
    let deadline = Instant::now() + Duration::from_secs(5);
    let entry = loop {
        if let Ok(e) = ncclprof_shared::link::ProcessEntry::read(&path)
            && !e.server.is_empty()
        {
            break e;
        }
        assert!(Instant::now() < deadline, "plugin published no server");
        std::thread::sleep(Duration::from_millis(10));
    };
    let conn = ncclprof_shared::link::connect(&entry).unwrap();
    let drops = Drops::default();
    let seen = drops.clone();
    std::thread::spawn(move || {
        // The whole connection, not only `conn.data` (a closure captures the fields it
        // names): dropping `conn.control` hangs up, and the plugin then drops this viewer.
        let mut conn = conn;
        // Decoded as the viewer does; a frame that does not decode is skipped.
        loop {
            let c = match conn.data.recv_frame() {
                Ok(Frame::Counters(c)) => c,
                Ok(_) | Err(RecvError::BadFrame(_)) => continue,
                Err(RecvError::Closed(_)) => {
                    seen.closed.store(true, Ordering::Relaxed);
                    break;
                }
            };
            for r in DropReason::ALL {
                seen.dropped[r as usize].store(c.dropped_for(r), Ordering::Relaxed);
            }
            seen.counters_frames.fetch_add(1, Ordering::Relaxed);
        }
    });
    drops
}

/// One line naming every drop reason the plugin counted, or saying there were none.
fn drops_line(drops: &Drops) -> String {
    if drops.counters_frames.load(Ordering::Relaxed) == 0 {
        return "not known (no Counters frame came)".to_string();
    }
    let closed = if drops.closed.load(Ordering::Relaxed) {
        " (THE PLUGIN DROPPED THE TEST VIEWER: counts as of then, and (b) had no viewer after)"
    } else {
        ""
    };
    let counted: Vec<String> = DropReason::ALL
        .iter()
        .filter_map(|&r| {
            let n = drops.dropped[r as usize].load(Ordering::Relaxed);
            (n > 0).then(|| format!("{} {n}", r.name()))
        })
        .collect();
    let counted = if counted.is_empty() {
        "none".to_string()
    } else {
        counted.join(", ")
    };
    format!("{counted}{closed}")
}

/// `HOT_PATH_CANDIDATE=/path/to/other/libnccl_profiler_ncclprof.so`: this build against
/// another one (a copy of a build from another commit), both loaded in this process and
/// rounds alternated noop / this / candidate, no viewer. Separate processes differ by ±3 ns
/// on this VM, more than most hot-path changes; in one process the spread is shared.
fn compare_builds(noop: &Lib, prof: &Lib, other: PathBuf, dir: &std::path::Path, bursts: u32) {
    // The candidate gets its own rendezvous directory (entries are per process id).
    // SAFETY: read by the candidate's first init, just below; no other thread reads it.
    unsafe { std::env::set_var("NCCLPROF_DIR", dir.join("rdv-candidate")) };
    let mut m: c_int = 0;
    let cand = open_path(other.clone(), &mut m);
    measure(&cand, 20);
    let rounds = 15;
    let (mut a, mut b, mut c, mut diff) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let base = measure(noop, bursts);
        let ours = measure(prof, bursts);
        let theirs = measure(&cand, bursts);
        a.push(base);
        b.push(ours - base);
        c.push(theirs - base);
        diff.push(ours - theirs);
    }
    println!(
        "this build against {} (no viewer; median of {rounds} alternated rounds, {} calls each)",
        other.display(),
        bursts as u64 * 400 * 21 / 4
    );
    println!(
        "| noop ns | this build, added ns | candidate, added ns | this − candidate, ns (median of per-round differences) |"
    );
    println!("|---:|---:|---:|---:|");
    println!(
        "| {:.2} | {:.2} | {:.2} | {:+.2} |",
        median(&mut a),
        median(&mut b),
        median(&mut c),
        median(&mut diff)
    );
    // `median` sorted `diff` in place.
    println!(
        "per-round differences, sorted: {}",
        diff.iter()
            .map(|d| format!("{d:+.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("hot_path: bench");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: set before the plugin reads its configuration (first init below).
    unsafe {
        std::env::set_var("NCCLPROF_DIR", dir.path().join("rdv"));
        std::env::set_var("NCCL_PROFILE_EVENT_MASK", "0x7fff");
    }
    let mut m1: c_int = 0;
    let mut m2: c_int = 0;
    let noop = open("libnccl_profiler_noop.so", &mut m1);
    let prof = open("libnccl_profiler_ncclprof.so", &mut m2);
    if std::env::var_os("HOT_PATH_IDLE_ONLY").is_some() {
        std::thread::sleep(Duration::from_millis(500));
        println!(
            "idle-only (no viewer, no calls, mask on): plugin threads used {:.3}% of one core",
            idle_percent(5)
        );
        profiler_stop(&prof);
        std::thread::sleep(Duration::from_millis(500));
        println!(
            "idle-only (no viewer, mask 0 by exampleProfilerStop): plugin threads used {:.3}% of one core",
            idle_percent(5)
        );
        return;
    }
    // `cargo bench` passes `--bench`; without it (`cargo test --bench '*'`, CI) one short round.
    let quick = !std::env::args().any(|a| a == "--bench");
    // Per call kind: as many open steps as a thread's phases table holds, no more. Past it
    // (2 000 until 2026-12-06) the older half of the steps had lost their entries to newer
    // ones, so the state and stop rows averaged the common path with the overflow path.
    let kind_calls = nccl_profiler_ncclprof::step_phases::SLOTS;
    let (rounds, bursts, kind_calls, idle_secs) = if quick {
        (1, 2, 200, 1)
    } else {
        (7, 200, kind_calls, 5)
    };
    if let Some(other) = std::env::var_os("HOT_PATH_CANDIDATE") {
        compare_builds(&noop, &prof, PathBuf::from(other), dir.path(), bursts);
        return;
    }
    // Warm up both.
    measure(&noop, bursts.min(20));
    measure(&prof, bursts.min(20));
    let run = |label: &str| {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            a.push(measure(&noop, bursts));
            b.push(measure(&prof, bursts));
        }
        let (base, ours) = (median(&mut a), median(&mut b));
        println!(
            "| {label:<34} | {base:>8.2} | {ours:>8.2} | {:>8.2} | {:>6.2}x |",
            ours - base,
            ours / base
        );
    };
    println!(
        "hot path, ns per plugin call (median of {rounds} alternated rounds, {} calls each)",
        bursts as u64 * 400 * 21 / 4
    );
    println!("| scenario                           | noop ns  | ncclprof | added ns | ratio   |");
    println!("|------------------------------------|----------|----------|----------|---------|");
    run("(a) no viewer attached");
    let viewer = attach_viewer(&dir.path().join("rdv"));
    std::thread::sleep(Duration::from_millis(200));
    run("(b) viewer attached and streaming");
    println!();
    println!(
        "per call kind, ns per call (median of {rounds} alternated rounds of {kind_calls} calls each)"
    );
    println!("| call                                    | noop ns  | ncclprof | added ns |");
    println!("|-----------------------------------------|----------|----------|----------|");
    for (event, make) in [
        ("ProxyStep", step_descr as fn() -> v6::Descr),
        ("Coll", coll_descr),
    ] {
        let m = alternated(&noop, &prof, rounds, |l| per_kind(l, kind_calls, make));
        for (i, call) in [
            "startEvent",
            "recordEventState",
            "recordEventState, repeat",
            "stopEvent",
        ]
        .iter()
        .enumerate()
        {
            if i == 2 && event != "ProxyStep" {
                continue;
            }
            kind_row(&format!("{call} ({event})"), m[i]);
        }
    }
    let m = alternated(&noop, &prof, rounds, |l| kernel_ch_per_kind(l, kind_calls));
    kind_row("startEvent (KernelCh)", m[0]);
    kind_row("GPU stop + stopEvent (KernelCh), pair", m[1]);
    let m = alternated(&noop, &prof, rounds, |l| {
        [launch_per_collective(l, kind_calls / 8)]
    });
    kind_row("a collective's launch, 12 calls", m[0]);
    // No calls: what remains is the plugin's own idle threads, once the records of the bursts
    // are settled (completion timeouts), first with the mask on (a job between iterations),
    // then at 0 (NCCL makes no calls at all). Measured as the whole process's CPU clock (ns
    // resolution; /proc ticks are 10 ms) while this thread sleeps: the plugin's threads plus
    // the test viewer's receiver.
    std::thread::sleep(Duration::from_secs(if quick { 0 } else { 3 }));
    println!();
    println!(
        "idle (mask on, no calls, records settled): plugin threads + test viewer used {:.3}% of one core over {idle_secs} s",
        idle_percent(idle_secs)
    );
    profiler_stop(&prof);
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "mask 0 (exampleProfilerStop, no calls): plugin threads + test viewer used {:.3}% of one core over {idle_secs} s",
        idle_percent(idle_secs)
    );
    println!(
        "records the plugin dropped over the whole bench (its last Counters frame; the drain's abandoned and unknown handles come 10-60 s late, not all in it): {}",
        drops_line(&viewer)
    );
}
