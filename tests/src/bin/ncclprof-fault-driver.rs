//! `ncclprof-fault-driver SCENARIO PLUGIN [ARGS]`: one reliability/security scenario per
//! process (the plugin keeps process-global state). Scenarios that load the plugin read
//! `NCCLPROF_DIR` and the other plugin variables from the environment set by the test, and
//! print a one-line JSON report on stdout. `view` and `probe` are helper viewers.

use std::ffi::c_void;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ncclprof_shared::clock::monotonic_ns;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::link::{self, ProcessEntry};
use ncclprof_shared::record::*;
use ncclprof_shared::wire::{self, DropReason, Frame, ViewerMsg};
use ncclprof_sim::abi::{ev, st};
use ncclprof_tests::faults::*;
use ncclprof_tests::{Received, Viewer, wait_for};
use serde_json::json;

fn dir() -> PathBuf {
    PathBuf::from(std::env::var_os("NCCLPROF_DIR").expect("NCCLPROF_DIR"))
}

fn report(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn say(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}");
    let _ = out.flush();
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn counters(v: &Viewer) -> Option<wire::Counters> {
    v.got.last_counters()
}

fn dropped_json(c: &wire::Counters) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for r in DropReason::ALL {
        m.insert(r.name().replace(' ', "_"), json!(c.dropped_for(r)));
    }
    serde_json::Value::Object(m)
}

fn count_kind(g: &Received, k: EventKind) -> usize {
    g.records().iter().filter(|r| r.kind == k as u8).count()
}

/// Wait for a Counters frame produced after now that satisfies `pred`.
fn fresh_counters(
    v: &mut Viewer,
    timeout: Duration,
    pred: impl Fn(&wire::Counters) -> bool,
) -> Option<wire::Counters> {
    let since = monotonic_ns();
    v.until(timeout, |g| {
        g.last_counters()
            .is_some_and(|c| c.at_ns > since && pred(&c))
    });
    counters(v).filter(|c| c.at_ns > since)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    match mode {
        "view" => view(Path::new(&args[2]), args[3].parse().expect("pid"), &args[4]),
        "probe" => probe(Path::new(&args[2]), &args[3], args[4].parse().expect("pid")),
        _ => {
            let plugin = PathBuf::from(args.get(2).expect("plugin path"));
            match mode {
                "job" => job(&plugin, args.get(3).map_or(30.0, |s| s.parse().unwrap())),
                "fork" => fork(&plugin),
                "bad-input" => bad_input(&plugin),
                "panic" => panic_injection(&plugin),
                "finalize-viewer" => finalize_viewer(&plugin),
                "finalize-none" => finalize_none(&plugin),
                "finalize-send" => finalize_send(&plugin),
                "reload" => reload(&plugin),
                "pools" => pools(&plugin),
                "init-only" => init_only(&plugin),
                "late-comm" => late_comm(&plugin),
                _ => panic!("unknown scenario {mode}"),
            }
        }
    }
}

// ------------------------------------------------------------------ helper viewers

/// A viewer process: connect to `pid`'s entry in `dir`, print `hello` on the Hello frame,
/// then count frames (`slow`: 20 ms per frame). Prints `closed N` when the stream ends.
fn view(dir: &Path, pid: u32, mode: &str) {
    let path = ProcessEntry::path(dir, pid);
    let mut entry = None;
    let found = wait_for(Duration::from_secs(10), || {
        entry = ProcessEntry::read(&path)
            .ok()
            .filter(|e| !e.server.is_empty());
        entry.is_some()
    });
    assert!(found, "no entry with a server at {}", path.display());
    let mut conn = link::connect(&entry.expect("entry")).expect("connect");
    let mut frames = 0u64;
    while let Some(bytes) = next_frame(&mut conn.data) {
        let f = wire::decode(&bytes).expect("decodable frame");
        frames += 1;
        if matches!(f, Frame::Hello(_)) {
            say("hello");
        }
        if mode == "slow" {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    say(&format!("closed {frames}"));
}

/// Run as another user: try to list the rendezvous directory, plant an entry, connect to the
/// plugin's socket directly (bypassing the viewer's checks) and through `link::connect`.
fn probe(dir: &Path, server: &str, pid: u32) {
    let list = link::list_entries(dir);
    let readdir = std::fs::read_dir(dir);
    let plant = std::fs::write(dir.join("31337.json"), b"{}");
    let raw = ipc_channel::ipc::IpcSender::<ViewerMsg>::connect(server.to_string());
    // The entry as the plugin published it (uid = its owner): the viewer refuses it.
    let mut entry = ProcessEntry {
        protocol: ncclprof_shared::PROTOCOL_VERSION,
        pid,
        start_ticks: 0,
        host: String::new(),
        uid: 0,
        cmdline: String::new(),
        api_version: 6,
        comms: vec![],
        server: server.to_string(),
        generation: 0,
    };
    let as_published = link::connect(&entry).err().map(|e| e.to_string());
    // A forged entry claiming our uid: the socket check still refuses.
    entry.uid = link::my_uid();
    let forged = link::connect(&entry).err().map(|e| e.to_string());
    report(json!({
        "uid": link::my_uid(),
        "list_ok": list.is_ok(),
        "list_err": list.err().map(|e| e.to_string()),
        "readdir_ok": readdir.is_ok(),
        "plant_ok": plant.is_ok(),
        "raw_connect_ok": raw.is_ok(),
        "raw_connect_err": raw.err().map(|e| e.to_string()),
        "connect_as_published_err": as_published,
        "connect_forged_err": forged,
    }));
}

// ------------------------------------------------------------------ the job

/// A job at full speed: op cycles in a loop until stdin closes (or `max_s`), measuring the
/// slowest plugin call and the throughput per 100 ms window; then a timed finalize.
fn job(plugin: &Path, max_s: f64) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0x10b, c"job", 0);
    assert!(!ctx.is_null(), "init returned NULL");
    static STOP: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        let mut buf = [0u8; 64];
        while let Ok(n) = std::io::Read::read(&mut std::io::stdin(), &mut buf) {
            if n == 0 {
                break;
            }
        }
        STOP.store(true, Ordering::Relaxed);
    });
    say(&format!("ready {}", std::process::id()));
    let start = Instant::now();
    let (mut calls, mut ops, mut worst) = (0u64, 0u64, Duration::ZERO);
    let mut windows: Vec<u64> = Vec::new();
    let mut win_start = Instant::now();
    let mut win_ops = 0u64;
    let mut rss: Vec<u64> = Vec::new();
    let mut last_rss = Instant::now() - Duration::from_secs(1);
    while !STOP.load(Ordering::Relaxed) && start.elapsed().as_secs_f64() < max_s {
        let (c, w) = lib.op_cycle(ctx, ops, 8);
        calls += c;
        ops += 1;
        win_ops += 1;
        worst = worst.max(w);
        if win_start.elapsed() >= Duration::from_millis(100) {
            windows.push(win_ops);
            win_ops = 0;
            win_start = Instant::now();
        }
        if last_rss.elapsed() >= Duration::from_millis(500) {
            last_rss = Instant::now();
            rss.push(rss_kb(std::process::id()).unwrap_or(0));
        }
    }
    let elapsed = start.elapsed();
    let t = Instant::now();
    lib.finalize(ctx);
    let fin = t.elapsed();
    let mut sorted = windows.clone();
    sorted.sort_unstable();
    report(json!({
        "ops": ops,
        "calls": calls,
        "secs": elapsed.as_secs_f64(),
        "calls_per_s": calls as f64 / elapsed.as_secs_f64(),
        "max_call_ms": ms(worst),
        "windows": windows.len(),
        "min_window_ops": sorted.first().copied().unwrap_or(0),
        "median_window_ops": sorted.get(sorted.len() / 2).copied().unwrap_or(0),
        "rss_kb": rss,
        "finalize_ms": ms(fin),
    }));
}

// ------------------------------------------------------------------ fork

fn fork(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0xf0, c"parent", 0);
    assert!(!ctx.is_null());
    let me = std::process::id();
    let mut viewer = Viewer::attach(&dir(), me);
    for s in 0..50 {
        lib.op_cycle(ctx, s, 2);
    }
    assert!(
        viewer.until(Duration::from_secs(5), |g| count_kind(g, EventKind::Coll)
            >= 50)
    );
    // An event open across the fork: the child must not be able to stop it for the parent.
    let open = lib.start(ctx, &mut coll_descr(999, std::ptr::null_mut()));
    let fork_ns = monotonic_ns();
    // SAFETY: fork(2); the child only calls the plugin and async-signal-tolerant libc/Rust
    // code of this single-purpose process, then leaves with _exit.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // A panic here (a failed `Viewer::attach`) must not unwind into the parent's code:
        // 16, and out with _exit like every other result.
        let code = std::panic::catch_unwind(|| fork_child(&lib, ctx, open)).unwrap_or(16);
        // SAFETY: leave the child without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(code) };
    }
    assert!(child > 0, "fork failed");
    let mut status = 0;
    let t = Instant::now();
    let mut child_code = None;
    // Longer than the child's own waits (5 s for its entry, 8 s for its viewer's records).
    while t.elapsed() < Duration::from_secs(25) {
        // SAFETY: waitpid on our child with a valid status pointer.
        let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        if r == child {
            child_code = Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                -libc::WTERMSIG(status)
            });
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if child_code.is_none() {
        // SAFETY: kill and reap our own child, which did not finish in time.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::waitpid(child, &mut status, 0);
        }
    }
    // The parent keeps streaming.
    lib.stop(open);
    for s in 1000..1100 {
        lib.op_cycle(ctx, s, 2);
    }
    let ok = viewer.until(Duration::from_secs(5), |g| {
        g.records()
            .iter()
            .filter(|r| r.kind == EventKind::Coll as u8 && r.start_ns > fork_ns)
            .count()
            >= 100
    });
    let recs = viewer.got.records();
    let after = recs
        .iter()
        .filter(|r| r.kind == EventKind::Coll as u8 && r.start_ns > fork_ns)
        .count();
    let open_rec = recs
        .iter()
        .find(|r| r.kind == EventKind::Coll as u8 && r.p[0] == 999)
        .copied();
    let entry = ProcessEntry::read(&ProcessEntry::path(&dir(), me)).ok();
    report(json!({
        "child_code": child_code,
        "parent_streaming_after_fork": ok,
        "parent_colls_after_fork": after,
        "parent_colls_total": count_kind(&viewer.got, EventKind::Coll),
        "open_across_fork_end_after_fork": open_rec.map(|r| r.end_ns > fork_ns),
        "parent_entry_pid_ok": entry.map(|e| e.pid == me),
    }));
    lib.finalize(ctx);
}

/// The forked child of [`fork`]: its result bits (0 = all as it should be).
fn fork_child(lib: &V6, ctx: *mut c_void, open: *mut c_void) -> i32 {
    let mut code = 0;
    // 1: the inherited context still records in the child (it must not).
    if !lib
        .start(ctx, &mut coll_descr(1, std::ptr::null_mut()))
        .is_null()
    {
        code |= 1;
    }
    lib.stop(open);
    lib.record(open, st::PROXY_OP_IN_PROGRESS, Some(0));
    // 2: the child initialises a communicator of its own: fresh state, its own entry.
    let ctx2 = lib.init(0xc1, c"child", 0);
    if ctx2.is_null() {
        code |= 2;
    }
    // Sequence numbers the parent never uses (it uses 0..50, 999 and 1000..1100).
    let child_seqs = 5000..5020;
    for s in child_seqs.clone() {
        lib.op_cycle(ctx2, s, 2);
    }
    let cpid = std::process::id();
    let path = ProcessEntry::path(&dir(), cpid);
    // 4: no entry of the child's own with a server.
    if !wait_for(Duration::from_secs(5), || {
        ProcessEntry::read(&path).is_ok_and(|e| e.pid == cpid && !e.server.is_empty())
    }) {
        code |= 4;
    } else {
        // 8: a viewer of the child does not get the child's own collectives and steps, or
        // gets a collective of the parent's (from rings or history copied by the fork).
        let mut v = Viewer::attach(&dir(), cpid);
        let colls = |g: &Received, mine: bool| {
            g.records()
                .iter()
                .filter(|r| r.kind == EventKind::Coll as u8)
                .filter(|r| child_seqs.contains(&r.p[0]) == mine)
                .count()
        };
        let got = v.until(Duration::from_secs(8), |g| {
            colls(g, true) >= 20 && count_kind(g, EventKind::ProxyStep) >= 40
        });
        if !got || colls(&v.got, false) != 0 {
            code |= 8;
        }
    }
    lib.finalize(ctx2);
    code
}

// ------------------------------------------------------------------ bad input

fn bad_input(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0xbad, c"bad", 0);
    assert!(!ctx.is_null());
    let mut v = Viewer::attach(&dir(), std::process::id());
    let null = std::ptr::null_mut::<c_void>();
    let mut out = serde_json::Map::new();

    // NULL strings everywhere.
    let mut d = coll_descr(1, null);
    d.u.coll.func = std::ptr::null();
    d.u.coll.datatype = std::ptr::null();
    d.u.coll.algo = std::ptr::null();
    d.u.coll.proto = std::ptr::null();
    let h = lib.start(ctx, &mut d);
    lib.stop(h);
    // A string buffer NCCL reuses after the call (the pointer dangles, then holds other text).
    let mut buf = *b"BufferOne\0";
    let mut d = coll_descr(2, null);
    d.u.coll.func = buf.as_ptr().cast();
    let h = lib.start(ctx, &mut d);
    lib.stop(h);
    buf.copy_from_slice(b"BufferTwo\0");
    let mut d = coll_descr(3, null);
    d.u.coll.func = buf.as_ptr().cast();
    let h = lib.start(ctx, &mut d);
    lib.stop(h);
    buf.copy_from_slice(b"XXXXXXXXX\0");
    // Dangling / garbage parent pointers (never dereferenced).
    let garbage = 0xdead_beef_0000usize as *mut c_void;
    let h = lib.start(ctx, &mut coll_descr(4, garbage));
    lib.stop(h);
    // Foreign PXN ProxyOp: another process's pid, parent and context.
    let foreign_ctx = 0x7777_0000usize as *mut c_void;
    let mut d = proxy_op_descr(0x5555_0000usize as *mut c_void, 3, 1_000_000_007);
    let pxn = lib.start(foreign_ctx, &mut d);
    lib.record(pxn, st::PROXY_OP_IN_PROGRESS, Some(0));
    let ps = lib.start(foreign_ctx, &mut step_descr(pxn, 0));
    lib.record(ps, st::STEP_SEND_GPU_WAIT, Some(0));
    lib.stop(ps);
    lib.stop(pxn);
    out.insert("pxn_handle_nonnull".into(), json!(!pxn.is_null()));
    // Stale CUDA-graph parent: a CollApi handle long stopped and forgotten.
    let mut d = descr(ev::COLL_API, null);
    d.u.collApi.func = c"AllReduce".as_ptr();
    let capi = lib.start(ctx, &mut d);
    lib.stop(capi);
    std::thread::sleep(Duration::from_millis(300));
    let mut replays = vec![];
    for i in 0..3 {
        let h = lib.start(ctx, &mut coll_descr(100 + i, capi));
        replays.push(h);
        let op = lib.start(ctx, &mut proxy_op_descr(h, 0, std::process::id() as i32));
        lib.stop(h);
        lib.record(op, st::PROXY_OP_IN_PROGRESS, Some(0));
        lib.stop(op);
    }
    // Unknown event type (a future API's) and unknown states.
    let unknown = lib.start(ctx, &mut descr(1 << 20, null));
    out.insert("unknown_type_handle_null".into(), json!(unknown.is_null()));
    let unknown2 = lib.start(ctx, &mut descr(u64::MAX, null));
    out.insert(
        "all_bits_type_handle_null".into(),
        json!(unknown2.is_null()),
    );
    let h = lib.start(ctx, &mut coll_descr(5, null));
    lib.record(h, 99, Some(0));
    lib.record(h, -5, None);
    lib.record(h, 1 << 30, Some(u64::MAX));
    lib.stop(h);
    // Channel ids >= 64: ProxyOp 200, KernelCh 255; and more than 8 open steps.
    let coll = lib.start(ctx, &mut coll_descr(6, null));
    let op = lib.start(
        ctx,
        &mut proxy_op_descr(coll, 200, std::process::id() as i32),
    );
    let mut kd = descr(ev::KERNEL_CH, coll);
    kd.u.kernelCh.channelId = 255;
    kd.u.kernelCh.pTimer = 0;
    let kch = lib.start(ctx, &mut kd);
    lib.record(kch, st::KERNEL_CH_STOP, Some(0));
    lib.stop(kch);
    lib.stop(coll);
    lib.record(op, st::PROXY_OP_IN_PROGRESS, Some(0));
    let steps: Vec<_> = (0..20)
        .map(|s| {
            let h = lib.start(ctx, &mut step_descr(op, s));
            lib.record(h, st::STEP_SEND_GPU_WAIT, Some(0));
            h
        })
        .collect();
    for h in steps.iter().skip(10) {
        lib.stop(*h);
    }
    lib.stop(op);
    // Stop/state without start: garbage values and a handle-shaped id never issued.
    let never = ((EventKind::Coll as u64 + 1) << 59) | 0x00ff_ffff_ffffu64;
    for h in [0x1234usize, usize::MAX, never as usize] {
        lib.stop(h as *mut c_void);
        lib.record(h as *mut c_void, st::STEP_SEND_WAIT, Some(1));
    }
    // Double stop.
    let h = lib.start(ctx, &mut coll_descr(7, null));
    let hop = lib.start(ctx, &mut proxy_op_descr(h, 1, std::process::id() as i32));
    lib.stop(h);
    lib.stop(h);
    lib.record(hop, st::PROXY_OP_IN_PROGRESS, Some(0));
    lib.stop(hop);
    lib.stop(hop);
    // NULL descriptor and NULL handle slot (a buggy adapter).
    out.insert(
        "null_descr_handle_null".into(),
        json!(lib.start_null_descr(ctx).is_null()),
    );
    lib.start_null_slot(ctx, &mut coll_descr(9, null));
    let ok = v.until(Duration::from_secs(8), |g| {
        g.records()
            .iter()
            .any(|r| r.kind == EventKind::Coll as u8 && r.p[0] == 7)
            && g.records()
                .iter()
                .filter(|r| r.kind == EventKind::ProxyStep as u8)
                .count()
                >= 11
    });
    out.insert("stream_complete".into(), json!(ok));
    // Of the 10 steps never stopped, the 2 their op does not track (it tracks 8) are leaked
    // leaves: abandoned (counted) after 60 completion timeouts (the test sets
    // NCCLPROF_COMPLETION_TIMEOUT_MS=30). The 8 tracked ones go when the op stops.
    let c = fresh_counters(&mut v, Duration::from_secs(6), |c| {
        c.dropped_for(DropReason::Abandoned) >= 2
    });
    let recs = v.got.records();
    let strings = v.got.strings();
    let coll = |seq: u64| {
        recs.iter()
            .find(|r| r.kind == EventKind::Coll as u8 && r.p[0] == seq)
            .copied()
    };
    let func = |r: Option<EventRecord>| {
        r.map(|r| strings.get(&r.strings()[0]).cloned().unwrap_or_default())
    };
    out.insert(
        "null_strings_record".into(),
        json!(coll(1).map(|r| r.strings())),
    );
    out.insert("reused_buffer_first".into(), json!(func(coll(2))));
    out.insert("reused_buffer_second".into(), json!(func(coll(3))));
    out.insert(
        "garbage_parent_flags".into(),
        json!(coll(4).map(|r| (r.parent, r.has(F_PARENT_UNKNOWN)))),
    );
    let pxn_rec = recs
        .iter()
        .find(|r| r.kind == EventKind::ProxyOp as u8 && r.has(F_FOREIGN))
        .copied();
    out.insert(
        "pxn_record_foreign".into(),
        json!(pxn_rec.map(|r| (r.has(F_FOREIGN), r.comm, r.p[0]))),
    );
    out.insert(
        "stale_parent".into(),
        json!(
            (100..103)
                .map(|s| coll(s).map(|r| (r.parent == capi as u64, r.has(F_PARENT_UNKNOWN))))
                .collect::<Vec<_>>()
        ),
    );
    out.insert("unknown_state_coll_seen".into(), json!(coll(5).is_some()));
    let big_ch_op = recs
        .iter()
        .find(|r| r.kind == EventKind::ProxyOp as u8 && r.sub == 200)
        .is_some();
    let big_ch_k = recs
        .iter()
        .find(|r| r.kind == EventKind::KernelCh as u8 && r.sub == 255)
        .is_some();
    out.insert("channel_200_proxyop".into(), json!(big_ch_op));
    out.insert("channel_255_kernelch".into(), json!(big_ch_k));
    out.insert(
        "steps_of_20_open".into(),
        json!(
            recs.iter()
                .filter(|r| r.kind == EventKind::ProxyStep as u8 && r.sub == 200)
                .count()
        ),
    );
    out.insert(
        "double_stop_coll_records".into(),
        json!(
            recs.iter()
                .filter(|r| r.kind == EventKind::Coll as u8 && r.p[0] == 7)
                .count()
        ),
    );
    if let Some(c) = &c {
        out.insert("dropped".into(), dropped_json(c));
        out.insert("disabled".into(), json!(c.disabled));
    }
    // Events after finalize: no crash; nothing recorded for the finalized context.
    lib.finalize(ctx);
    let after = lib.start(ctx, &mut coll_descr(8, null));
    lib.stop(after);
    lib.record(after, st::PROXY_OP_IN_PROGRESS, Some(0));
    lib.finalize(ctx); // double finalize
    lib.finalize(garbage); // foreign context
    std::thread::sleep(Duration::from_millis(100));
    v.until(Duration::from_millis(300), |_| false);
    out.insert("after_finalize_handle_null".into(), json!(after.is_null()));
    out.insert(
        "after_finalize_recorded".into(),
        json!(
            v.got
                .records()
                .iter()
                .any(|r| r.kind == EventKind::Coll as u8 && r.p[0] == 8)
        ),
    );
    out.insert("survived".into(), json!(true));
    report(serde_json::Value::Object(out));
}

// ------------------------------------------------------------------ panic injection

fn panic_injection(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0x9a, c"panic", 0);
    assert!(!ctx.is_null());
    let mut v = Viewer::attach(&dir(), std::process::id());
    let h = lib.start(ctx, &mut coll_descr(1, std::ptr::null_mut()));
    lib.stop(h);
    let before_ok = !h.is_null();
    assert!(
        v.until(Duration::from_secs(5), |g| count_kind(g, EventKind::Coll)
            >= 1)
    );
    // The injected panic.
    let t = Instant::now();
    let u = lib.start(ctx, &mut descr(1 << 20, std::ptr::null_mut()));
    let panic_call = t.elapsed();
    // Later calls are no-ops.
    let t = Instant::now();
    let later = lib.start(ctx, &mut coll_descr(2, std::ptr::null_mut()));
    lib.record(later, st::PROXY_OP_IN_PROGRESS, Some(0));
    lib.stop(later);
    lib.stop(h);
    let later_calls = t.elapsed();
    let c = fresh_counters(&mut v, Duration::from_secs(3), |c| c.disabled);
    let t = Instant::now();
    lib.finalize(ctx);
    let fin = t.elapsed();
    report(json!({
        "before_handle_ok": before_ok,
        "unknown_handle_null": u.is_null(),
        "later_handle_null": later.is_null(),
        "panic_call_ms": ms(panic_call),
        "later_calls_ms": ms(later_calls),
        "counters_disabled": c.as_ref().map(|c| c.disabled),
        "later_recorded": v.got.records().iter().any(|r| r.kind == EventKind::Coll as u8 && r.p[0] == 2),
        "finalize_ms": ms(fin),
        "survived": true,
    }));
}

// ------------------------------------------------------------------ finalize

fn finalize_viewer(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0xf1, c"fin", 0);
    let mut v = Viewer::attach(&dir(), std::process::id());
    assert!(v.until(Duration::from_secs(5), |g| {
        g.frames.iter().any(|f| matches!(f, Frame::Hello(_)))
    }));
    let n = 500u64;
    for s in 0..n {
        lib.op_cycle(ctx, s, 4);
    }
    let t = Instant::now();
    lib.finalize(ctx);
    let fin = t.elapsed();
    // Everything issued before finalize reaches the attached viewer.
    v.until(Duration::from_secs(5), |g| {
        count_kind(g, EventKind::Coll) as u64 >= n
            && count_kind(g, EventKind::ProxyStep) as u64 >= 4 * n
    });
    let c = fresh_counters(&mut v, Duration::from_secs(2), |_| true);
    report(json!({
        "finalize_ms": ms(fin),
        "colls_issued": n,
        "colls_received": count_kind(&v.got, EventKind::Coll),
        "steps_issued": 4 * n,
        "steps_received": count_kind(&v.got, EventKind::ProxyStep),
        "dropped_total": c.map(|c| c.total_dropped()),
    }));
}

fn finalize_none(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0xf2, c"fin", 0);
    for s in 0..500 {
        lib.op_cycle(ctx, s, 4);
    }
    let t = Instant::now();
    lib.finalize(ctx);
    let fin = t.elapsed();
    // A viewer attaching after finalize still gets the history.
    let mut v = Viewer::attach(&dir(), std::process::id());
    v.until(Duration::from_secs(5), |g| {
        count_kind(g, EventKind::Coll) >= 500
    });
    report(json!({
        "finalize_ms": ms(fin),
        "colls_issued": 500,
        "colls_replayed_after": count_kind(&v.got, EventKind::Coll),
    }));
}

fn finalize_send(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0xf3, c"fin", 0);
    let me = std::process::id();
    let exe = std::env::current_exe().expect("exe");
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("view").arg(dir()).arg(me.to_string()).arg("read");
    let helper = Proc::spawn(cmd);
    helper.expect_line("hello", Duration::from_secs(10));
    helper.signal(libc::SIGSTOP);
    // Stream hard so the sender blocks in a send to the stopped viewer.
    let t = Instant::now();
    let mut s = 0;
    let mut worst = Duration::ZERO;
    while t.elapsed() < Duration::from_millis(1500) {
        let (_, w) = lib.op_cycle(ctx, s, 8);
        worst = worst.max(w);
        s += 1;
    }
    let t = Instant::now();
    lib.finalize(ctx);
    let fin = t.elapsed();
    helper.signal(libc::SIGKILL);
    helper.signal(libc::SIGCONT);
    report(json!({
        "ops": s,
        "max_call_ms": ms(worst),
        "finalize_ms": ms(fin),
    }));
}

// ------------------------------------------------------------------ reload

fn reload(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0xa1, c"first", 0);
    let first_ok = !ctx.is_null();
    for s in 0..100 {
        lib.op_cycle(ctx, s, 2);
    }
    lib.finalize(ctx);
    lib.close();
    let lib = V6::load(plugin);
    let ctx = lib.init(0xa2, c"second", 0);
    let second_ok = !ctx.is_null();
    for s in 1000..1100 {
        lib.op_cycle(ctx, s, 2);
    }
    let mut v = Viewer::attach(&dir(), std::process::id());
    let ok = v.until(Duration::from_secs(5), |g| {
        count_kind(g, EventKind::Coll) >= 200
    });
    let recs = v.got.records();
    let second = recs
        .iter()
        .filter(|r| r.kind == EventKind::Coll as u8 && r.p[0] >= 1000)
        .count();
    lib.finalize(ctx);
    lib.close();
    // A third load after the last finalize.
    let lib = V6::load(plugin);
    let ctx3 = lib.init(0xa3, c"third", 0);
    let third_ok = !ctx3.is_null();
    lib.finalize(ctx3);
    report(json!({
        "first_ctx_ok": first_ok,
        "second_ctx_ok": second_ok,
        "third_ctx_ok": third_ok,
        "stream_ok": ok,
        "colls_received": count_kind(&v.got, EventKind::Coll),
        "colls_after_reload": second,
    }));
}

// ------------------------------------------------------------------ pools full

fn pools(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0x9f, c"pools", 0);
    let mut v = Viewer::attach(&dir(), std::process::id());
    let null = std::ptr::null_mut();
    // 1. Burst of starts into a tiny ring that drains every 20 ms: ring full.
    let burst: u64 = std::env::var("POOLS_BURST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    for s in 0..burst {
        lib.start(ctx, &mut coll_descr(s, null));
    }
    // 2. A second NCCL thread when the pool has one ring: no ring.
    let lib_ref = &lib;
    let ctx_addr = ctx as usize;
    let other = 1_000u64;
    std::thread::scope(|sc| {
        sc.spawn(move || {
            for s in 0..other {
                lib_ref.start(
                    ctx_addr as *mut c_void,
                    &mut coll_descr(s, std::ptr::null_mut()),
                );
            }
        });
    });
    // 3. Paced starts never stopped, past the open-event table: table full.
    std::thread::sleep(Duration::from_millis(50));
    let paced = 2_000u64;
    for s in 0..paced {
        lib.start(ctx, &mut coll_descr(100_000 + s, null));
        if s % 32 == 31 {
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    // 4. More distinct strings than the interner holds (4000 ids): strings full.
    let names: Vec<std::ffi::CString> = (0..4_100)
        .map(|i| std::ffi::CString::new(format!("Func{i}")).unwrap())
        .collect();
    for (i, n) in names.iter().enumerate() {
        let mut d = coll_descr(200_000 + i as u64, null);
        d.u.coll.func = n.as_ptr();
        lib.start(ctx, &mut d);
        if i % 32 == 31 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let issued = burst + other + paced + names.len() as u64;
    let c = fresh_counters(&mut v, Duration::from_secs(5), |c| {
        c.captured_for(EventKind::Coll)
            + c.dropped_for(DropReason::RingFull)
            + c.dropped_for(DropReason::NoRing)
            >= issued
    });
    let c = c.expect("counters");
    report(json!({
        "issued_starts": issued,
        "captured": c.captured_for(EventKind::Coll),
        "dropped": dropped_json(&c),
        "open_events": c.open_events,
        "rings_in_use": c.rings_in_use,
    }));
    lib.finalize(ctx);
}

/// Init once and report whether an entry was published (for the rendezvous-refusal tests).
fn init_only(plugin: &Path) {
    let lib = V6::load(plugin);
    let ctx = lib.init(0x1, c"init", 0);
    let me = std::process::id();
    std::thread::sleep(Duration::from_millis(500));
    let entry = ProcessEntry::path(&dir(), me);
    report(json!({
        "ctx_ok": !ctx.is_null(),
        "entry_exists": std::fs::symlink_metadata(&entry).is_ok(),
    }));
    lib.finalize(ctx);
}

/// Communicators created one after the other: the rendezvous entry lists each, the first
/// as soon as it exists and the second once it is created too.
fn late_comm(plugin: &Path) {
    let lib = V6::load(plugin);
    let path = ProcessEntry::path(&dir(), std::process::id());
    let ranks = || -> Vec<i32> {
        ProcessEntry::read(&path)
            .map(|e| e.comms.iter().map(|c| c.rank).collect())
            .unwrap_or_default()
    };
    let a = lib.init(0xa, c"first", 0);
    let first_listed = wait_for(Duration::from_secs(5), || ranks() == [0]);
    let b = lib.init(0xb, c"second", 1);
    let both_listed = wait_for(Duration::from_secs(5), || ranks() == [0, 1]);
    report(json!({
        "first_listed": first_listed,
        "both_listed": both_listed,
        "ranks": ranks(),
    }));
    lib.finalize(b);
    lib.finalize(a);
}

/// The next frame, `None` once the plugin closed the connection; a frame the ring could not
/// give is a bug the test reports.
fn next_frame(data: &mut ncclprof_shared::link::FrameReceiver) -> Option<Vec<u8>> {
    match data.recv() {
        Ok(bytes) => Some(bytes),
        Err(ncclprof_shared::link::RecvError::Closed(_)) => None,
        Err(e) => panic!("plugin sent a frame the viewer cannot follow: {e}"),
    }
}
