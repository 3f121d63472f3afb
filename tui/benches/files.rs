//! Files: snapshot write and `open` speed (events/s, MB/s, peak RSS) for a 1 M-event snapshot,
//! and `open` of a 1 M-span dump of NCCL's example profiler plugin. Plain timing; run
//! `cargo bench -p ncclprof-tui --bench files`. Env: `FILES_EVENTS` (default 1 000 000),
//! `FILES_DIR` (where the files go; default a temp dir; page cache warm), `FILES_KEEP=1` (leave
//! the files there, e.g. to profile `ncclprof-tui open` on them). Run without `--bench`, as
//! `cargo test --bench '*'` runs it, it writes and opens 10 000 events: a check that the bench
//! still runs, not a measurement.
//!
//! Everything goes through the real paths: the store is filled by `ingest::apply_frame`, written
//! by `snapshot::write` (what the `s` key and `record` use: atomic, fsync'd) and read back by
//! `open::load` (what `ncclprof-tui open FILE...` calls). Baselines from the same run, so the
//! figures read as ratios: `std::fs::read` (raw read speed) and `serde_json` parsing the same
//! bytes into a `serde_json::Value` tree (a whole-file tree for the snapshot, one tree per line
//! for the dump). Peak RSS is the rise of `VmHWM` over the RSS at the start of each step (reset
//! through `/proc/self/clear_refs`).
//!
//! Snapshot store: 2 processes × 4 ranks, per collective 1 CollApi, 1 Coll, 8 KernelCh,
//! 8 ProxyOp (send/recv alternating by channel) and 8 ProxySteps per ProxyOp (82 records).
//! Dump: 8 files `nccl_prof_<commHash>_<rank>.json` of 8 processes (each its own time zero, so
//! `open` aligns them), per group GroupApi, KernelLaunch, CollApi, Coll, 4 channels × (KernelCh,
//! Schedule + Progress, 4 steps × 3 NET states) = 64 spans, in the plugin's order, with the
//! 2.28–2.29.2 quirk of unquoted `Stream`/`datatype` values on the API lines.

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, F_END_KNOWN, F_SEND, pack_strings};
use ncclprof_shared::wire::{CommInfo, Frame, MAX_RECORDS_PER_FRAME, Meta, PluginHello};
use ncclprof_tui::model::store::Store;
use ncclprof_tui::model::{ingest, open, snapshot};

const PROCS: u32 = 2;
const RANKS_PER_PROC: i32 = 4;
const CHANNELS: u8 = 8;
const STEPS: u64 = 8;
/// Records per collective in the snapshot store.
const PER_OP: usize = 2 + CHANNELS as usize * (2 + STEPS as usize);

const DUMP_RANKS: i32 = 8;
const DUMP_CHANNELS: u32 = 4;
const DUMP_STEPS: u32 = 4;
/// Spans per group in the dump.
const DUMP_PER_GROUP: usize = 4 + DUMP_CHANNELS as usize * (3 + 3 * DUMP_STEPS as usize);
/// Records the import makes of a group: its 4 API, launch and Coll spans, and per channel the
/// KernelCh, one ProxyOp of the Schedule and Progress spans, and one step of each step's 3
/// state spans.
const DUMP_RECORDS_PER_GROUP: u64 = 4 + DUMP_CHANNELS as u64 * (2 + DUMP_STEPS as u64);
const DUMP_HASH: u64 = 0x5eed_cafe_f00d;

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Give freed memory back and reset the peak: returns the RSS (KiB) the step starts from.
fn rss_reset() -> u64 {
    // SAFETY: malloc_trim only returns free heap pages to the system.
    unsafe {
        libc::malloc_trim(0);
    }
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("VmRSS:")
}

/// One measured step.
struct Row {
    what: String,
    events: u64,
    bytes: u64,
    secs: f64,
    peak_mib: f64,
}

/// Time `f`, with the rise of peak RSS over the start of the step.
fn step<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let base = rss_reset();
    let t = Instant::now();
    let out = f();
    let secs = t.elapsed().as_secs_f64();
    let peak = status_kib("VmHWM:").saturating_sub(base) as f64 / 1024.0;
    (out, secs, peak)
}

fn hello(pid: u32) -> Frame {
    Frame::Hello(PluginHello {
        protocol: ncclprof_shared::PROTOCOL_VERSION,
        pid,
        host: format!("node-{pid}"),
        uid: 0,
        cmdline: "python train.py".into(),
        api_version: 6,
        plugin_version: "bench".into(),
        mask: 5982,
        active: true,
        clock: "tsc".into(),
    })
}

/// A store of about `total` records through the real ingest.
fn build_store(total: usize) -> Store {
    let mut st = Store::new(16 << 30);
    let ranks = PROCS as usize * RANKS_PER_PROC as usize;
    let ops = total.div_ceil(ranks * PER_OP) as u64;
    for proc in 0..PROCS {
        let (src, pid) = (proc + 1, 1000 + proc);
        ingest::apply_frame(&mut st, src, pid, hello(pid));
        ingest::apply_frame(
            &mut st,
            src,
            pid,
            Frame::Meta(Meta {
                comms: (0..RANKS_PER_PROC)
                    .map(|lr| CommInfo {
                        index: lr as u32,
                        comm_hash: 0xc0ffee,
                        name: "world".into(),
                        nranks: PROCS as i32 * RANKS_PER_PROC,
                        nnodes: PROCS as i32,
                        rank: proc as i32 * RANKS_PER_PROC + lr,
                        api_version: 6,
                        finalized: false,
                    })
                    .collect(),
                strings: vec![
                    (1, "AllReduce".into()),
                    (2, "ncclFloat32".into()),
                    (3, "RING".into()),
                    (4, "SIMPLE".into()),
                ],
            }),
        );
        let mut id = 0u64;
        let mut batch = Vec::with_capacity(MAX_RECORDS_PER_FRAME);
        let flush = |st: &mut Store, batch: &mut Vec<EventRecord>, force: bool| {
            if force || batch.len() + PER_OP > MAX_RECORDS_PER_FRAME {
                ingest::apply_frame(st, src, pid, Frame::Events(std::mem::take(batch).into()));
            }
        };
        for i in 0..ops {
            for lr in 0..RANKS_PER_PROC {
                let rank = proc as i32 * RANKS_PER_PROC + lr;
                let comm = lr as u32;
                let t0 = 1_000_000_000 + i * 1_000_000 + rank as u64 * 3_000;
                let (api, coll) = (id + 1, id + 2);
                id += 2;
                for ch in 0..CHANNELS {
                    let send = ch % 2 == 0;
                    let po = id + 1;
                    id += 1;
                    for s in 0..STEPS {
                        id += 1;
                        let s0 = t0 + 20_000 + s * 50_000 + u64::from(ch) * 700;
                        batch.push(EventRecord {
                            id,
                            parent: po,
                            start_ns: s0,
                            end_ns: s0 + 48_000 + (s * 7 + u64::from(ch)) % 11 * 100,
                            comm,
                            rank,
                            kind: EventKind::ProxyStep as u8,
                            sub: ch,
                            flags: F_END_KNOWN | if send { F_SEND } else { 0 },
                            x: ((rank + 1) % (PROCS as i32 * RANKS_PER_PROC)) as u32,
                            p: [s, s0 + 1_000, s0 + 10_000, s0 + 30_000, 131_072, 0],
                        });
                    }
                    batch.push(EventRecord {
                        id: po,
                        parent: coll,
                        start_ns: t0 + 15_000,
                        end_ns: t0 + 440_000,
                        comm,
                        rank,
                        kind: EventKind::ProxyOp as u8,
                        sub: ch,
                        flags: F_END_KNOWN | if send { F_SEND } else { 0 },
                        x: ((rank + 1) % (PROCS as i32 * RANKS_PER_PROC)) as u32,
                        p: [
                            u64::from(pid),
                            STEPS,
                            131_072,
                            STEPS * 131_072,
                            t0 + 19_000,
                            0x1f,
                        ],
                    });
                    id += 1;
                    batch.push(EventRecord {
                        id,
                        parent: coll,
                        start_ns: t0 + 10_000,
                        end_ns: t0 + 500_000,
                        comm,
                        rank,
                        kind: EventKind::KernelCh as u8,
                        sub: ch,
                        flags: F_END_KNOWN,
                        p: [
                            7_000_000 + i * 1_000,
                            7_000_490 + i * 1_000,
                            t0 + 10_000,
                            t0 + 500_000,
                            lr as u64,
                            0,
                        ],
                        ..Default::default()
                    });
                }
                batch.push(EventRecord {
                    id: coll,
                    parent: api,
                    start_ns: t0 + 2_000,
                    end_ns: t0 + 600_000,
                    comm,
                    rank,
                    kind: EventKind::Coll as u8,
                    sub: CHANNELS,
                    flags: F_END_KNOWN,
                    p: [
                        i,
                        1 << 20,
                        pack_strings([1, 2, 3, 4]),
                        t0 + 5_000,
                        8,
                        t0 + 10_000,
                    ],
                    ..Default::default()
                });
                batch.push(EventRecord {
                    id: api,
                    start_ns: t0,
                    end_ns: t0 + 600_000,
                    comm,
                    rank,
                    kind: EventKind::CollApi as u8,
                    flags: F_END_KNOWN,
                    p: [0, 1 << 20, pack_strings([1, 2, 0, 0]), t0 + 4_000, 0, 0],
                    ..Default::default()
                });
                flush(&mut st, &mut batch, false);
            }
        }
        flush(&mut st, &mut batch, true);
    }
    st
}

/// Writes dump lines the way the example plugin prints them.
struct DumpWriter<W: Write> {
    w: W,
    pid: u32,
    /// This process's time zero relative to the others (µs).
    skew: f64,
}

impl<W: Write> DumpWriter<W> {
    fn line(&mut self, name: &str, cat: &str, ph: &str, id: u64, ts: f64, args: &str) {
        let (w, pid) = (&mut self.w, self.pid);
        // Begins the plugin never timed stay 0.0.
        let ts = if ts == 0.0 { 0.0 } else { ts + self.skew };
        if args.is_empty() {
            writeln!(
                w,
                "{{\"name\": \"{name}\", \"cat\": \"{cat}\", \"ph\": \"{ph}\", \"id\": {id}, \"pid\": {pid}, \"tid\": 1, \"ts\": {ts:.6}}},"
            )
        } else {
            writeln!(
                w,
                "{{\"name\": \"{name}\", \"cat\": \"{cat}\", \"ph\": \"{ph}\", \"id\": {id}, \"pid\": {pid}, \"tid\": 1, \"ts\": {ts:.6}, \"args\": {{{args}}}}},"
            )
        }
        .expect("write dump");
    }
}

/// Write the example-plugin dump files (one per rank and process); returns (paths, spans).
fn write_dumps(dir: &Path, total: usize) -> (Vec<PathBuf>, u64) {
    let groups = total.div_ceil(DUMP_RANKS as usize * DUMP_PER_GROUP) as u64;
    let mut paths = Vec::new();
    let mut spans = 0u64;
    for rank in 0..DUMP_RANKS {
        let path = dir.join(format!("nccl_prof_{DUMP_HASH}_{rank}.json"));
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).expect("create dump"));
        w.write_all(b"[\n").expect("write dump");
        let pid = 4000 + rank as u32;
        // Each process has its own zero: rank r started r × 1.7 ms later.
        let skew = -(f64::from(rank) * 1_700.0);
        let mut out = DumpWriter { w, pid, skew };
        let (mut proxy_id, mut net_id) = (0u64, 0u64);
        for g in 0..groups {
            // From 20 ms: with its zero 1.7 ms later per rank, rank 7's first spans are still
            // after its own zero, as every span of a real dump is (its `ts` counts from the
            // process's first init). From 10 ms, as until 2026-12-07, ranks 6 and 7 began
            // with negative times, which the import takes for untimed, and lost their steps.
            let t = 20_000.0 + g as f64 * 1_000.0 + f64::from(rank) * 3.0;
            out.line(
                "Group API",
                "GROUP_API",
                "b",
                g,
                t,
                "\"groupApiId\": 0, \"groupDepth\": 1",
            );
            out.line(
                "KernelLaunch",
                "KERNEL_LAUNCH",
                "b",
                g,
                0.0,
                "\"groupId\": 0, \"Stream\": 0x7f00aa12",
            );
            out.line("KernelLaunch", "KERNEL_LAUNCH", "e", g, t + 4.0, "");
            out.line(
                "AllReduce",
                "COLL_API",
                "b",
                g,
                0.0,
                "\"count\": 262144, \"datatype\": ncclFloat32, \"root\": 0, \"GraphCaptured\": 0, \"Stream\": 0x7f00aa12",
            );
            out.line(
                "AllReduce",
                "COLL",
                "b",
                g,
                t + 10.0,
                &format!(
                    "\"SeqNum\": {g}, \"CommHash\": {DUMP_HASH}, \"Rank\": {rank}, \"Count\": 262144, \"Datatype\": \"ncclFloat32\", \"Algorithm\": \"RING\", \"Protocol\": \"SIMPLE\", \"nChannels\": {DUMP_CHANNELS}"
                ),
            );
            for ch in 0..DUMP_CHANNELS {
                let c0 = t + 12.0 + f64::from(ch) * 0.5;
                out.line(
                    "KernelCh",
                    "GPU",
                    "b",
                    0,
                    c0,
                    &format!(
                        "\"Channel\": {ch}, \"StartGpuClk\": {}, \"StopGpuClk\": {}",
                        9_000_000 + g * 1_000,
                        9_000_480 + g * 1_000
                    ),
                );
                let send = ch % 2 == 0;
                let (sched, prog, states) = if send {
                    (
                        "ScheduleSend",
                        "ProgressSend",
                        ["SendGpuWait", "SendPeerWait", "SendWait"],
                    )
                } else {
                    (
                        "ScheduleRecv",
                        "ProgressRecv",
                        ["RecvWait", "RecvFlushWait", "RecvGpuWait"],
                    )
                };
                let pargs = format!(
                    "\"Channel\": {ch}, \"Peer\": {}, \"Steps\": {DUMP_STEPS}, \"ChunkSize\": 131072, \"transSize\": {}",
                    (rank + 1) % DUMP_RANKS,
                    u64::from(DUMP_STEPS) * 131_072
                );
                out.line(sched, "PROXY", "b", proxy_id, c0 + 1.0, &pargs);
                out.line(sched, "PROXY", "e", proxy_id, c0 + 2.0, "");
                out.line(prog, "PROXY", "b", proxy_id, c0 + 2.0, &pargs);
                for s in 0..DUMP_STEPS {
                    let s0 = c0 + 3.0 + f64::from(s) * 100.0;
                    let step = format!("\"Step\": {s}");
                    for (k, (name, d)) in states.iter().zip([5.0, 60.0, 30.0]).enumerate() {
                        let b = s0 + [0.0, 5.0, 65.0][k];
                        out.line(name, "NET", "b", net_id, b, &step);
                        out.line(name, "NET", "e", net_id, b + d, "");
                        net_id += 1;
                    }
                }
                out.line(prog, "PROXY", "e", proxy_id, c0 + 420.0, "");
                proxy_id += 1;
                out.line("KernelCh", "GPU", "e", 0, c0 + 480.0, "");
            }
            out.line("AllReduce", "COLL", "e", g, t + 600.0, "");
            out.line("AllReduce", "COLL_API", "e", g, t + 600.0, "");
            out.line("Group API", "GROUP_API", "e", g, t + 601.0, "");
            spans += DUMP_PER_GROUP as u64;
        }
        out.w.write_all(b"{}]").expect("write dump");
        out.w.flush().expect("write dump");
        paths.push(path);
    }
    (paths, spans)
}

fn file_size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn main() {
    // The viewer's allocator settings, as `ncclprof-tui` starts with them.
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { ncclprof_tui::tune_allocator() };
    // `cargo bench` passes `--bench`; without it (`cargo test --bench '*'`, CI) 10 000 events.
    let quick = !std::env::args().any(|a| a == "--bench");
    let total: usize = env("FILES_EVENTS").unwrap_or(if quick { 10_000 } else { 1_000_000 });
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = env::<String>("FILES_DIR").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from);
    let keep = env::<String>("FILES_KEEP").is_some_and(|v| v == "1");
    let mut rows: Vec<Row> = Vec::new();

    // --- Snapshot ---
    let t = Instant::now();
    let st = build_store(total);
    eprintln!(
        "store: {} events through ingest in {:.1}s",
        st.retained,
        t.elapsed().as_secs_f64()
    );
    // The live viewer's `s` key first takes a copy of the store on the UI thread and writes
    // that in the background while ingest goes on.
    let (copy, secs, peak) = step(|| st.clone());
    rows.push(Row {
        what: "store copy for a live snapshot (`Store::clone`, UI thread)".into(),
        events: copy.retained as u64,
        bytes: copy.bytes as u64,
        secs,
        peak_mib: peak,
    });
    drop(copy);
    let snap = dir.join("bench-snapshot.json");
    let (summary, secs, peak) = step(|| snapshot::write(&st, &snap).expect("snapshot"));
    let events = summary.events;
    let bytes = file_size(&snap);
    rows.push(Row {
        what: "snapshot write (`snapshot::write`, fsync'd)".into(),
        events,
        bytes,
        secs,
        peak_mib: peak,
    });
    drop(st);

    let (data, secs, peak) = step(|| std::fs::read(&snap).expect("read"));
    rows.push(Row {
        what: "baseline: `std::fs::read`".into(),
        events,
        bytes,
        secs,
        peak_mib: peak,
    });
    // What the disk alone costs for the same bytes: the write's floor.
    let copy = dir.join("bench-snapshot-copy.json");
    let ((), secs, peak) = step(|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&copy).expect("create");
        f.write_all(&data).expect("write");
        f.sync_all().expect("fsync");
    });
    rows.push(Row {
        what: "baseline: `write_all` + `fsync` of the same bytes".into(),
        events,
        bytes,
        secs,
        peak_mib: peak,
    });
    let _ = std::fs::remove_file(&copy);
    let (n, secs, peak) = step(|| {
        let v: serde_json::Value = serde_json::from_slice(&data).expect("json");
        black_box(v["traceEvents"].as_array().map_or(0, Vec::len))
    });
    assert!(n as u64 >= events);
    rows.push(Row {
        what: "baseline: `serde_json::from_slice::<Value>`".into(),
        events,
        bytes,
        secs,
        peak_mib: peak,
    });
    drop(data);

    let (back, secs, peak) = step(|| {
        let mut back = Store::new(16 << 30);
        open::load(&mut back, std::slice::from_ref(&snap)).expect("open snapshot");
        back
    });
    assert_eq!(back.retained as u64, events, "open lost events");
    rows.push(Row {
        what: "open snapshot (`open::load`)".into(),
        events,
        bytes,
        secs,
        peak_mib: peak,
    });
    drop(back);
    if !keep {
        let _ = std::fs::remove_file(&snap);
    }

    // --- Example-plugin dump ---
    let t = Instant::now();
    let (paths, spans) = write_dumps(&dir, total);
    let dump_bytes: u64 = paths.iter().map(|p| file_size(p)).sum();
    eprintln!(
        "dump: {} files, {spans} spans, {dump_bytes} bytes written in {:.1}s",
        paths.len(),
        t.elapsed().as_secs_f64()
    );
    let (texts, secs, peak) = step(|| {
        paths
            .iter()
            .map(|p| std::fs::read_to_string(p).expect("read dump"))
            .collect::<Vec<_>>()
    });
    rows.push(Row {
        what: "baseline: `std::fs::read_to_string` (8 files)".into(),
        events: spans,
        bytes: dump_bytes,
        secs,
        peak_mib: peak,
    });
    let (n, secs, peak) = step(|| {
        let mut n = 0usize;
        for text in &texts {
            for l in text.lines() {
                let l = l.trim_end_matches(',');
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(l) {
                    n += usize::from(black_box(&v).is_object());
                }
            }
        }
        n
    });
    black_box(n);
    rows.push(Row {
        what: "baseline: `serde_json::from_str::<Value>` per line".into(),
        events: spans,
        bytes: dump_bytes,
        secs,
        peak_mib: peak,
    });
    drop(texts);
    let (back, secs, peak) = step(|| {
        let mut back = Store::new(16 << 30);
        open::load(&mut back, &paths).expect("open dump");
        back
    });
    eprintln!(
        "dump opened: {} records retained, {} processes",
        back.retained,
        back.procs.len()
    );
    assert_eq!(back.procs.len(), DUMP_RANKS as usize);
    // Every span became part of a record: nothing was taken for untimed or lost.
    assert_eq!(
        back.retained as u64,
        spans / DUMP_PER_GROUP as u64 * DUMP_RECORDS_PER_GROUP
    );
    rows.push(Row {
        what: "open example-plugin dump (`open::load`, 8 files)".into(),
        events: spans,
        bytes: dump_bytes,
        secs,
        peak_mib: peak,
    });
    drop(back);
    if !keep {
        for p in &paths {
            let _ = std::fs::remove_file(p);
        }
    }

    println!(
        "\n| step | events | bytes | s | events/s | MB/s | peak RSS rise |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for r in &rows {
        println!(
            "| {} | {:.3} M | {:.1} MB | {:.3} | {:.0} k | {:.0} | {:.0} MiB |",
            r.what,
            r.events as f64 / 1e6,
            r.bytes as f64 / 1e6,
            r.secs,
            r.events as f64 / r.secs / 1e3,
            r.bytes as f64 / r.secs / 1e6,
            r.peak_mib
        );
    }
}
