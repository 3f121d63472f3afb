//! Frame time (p50 / p99 / max over 200 frames, on a 200×60 terminal) per view with 1 M and
//! 10 M events asked for (0.91 M and 9.1 M retained: see `run`), bytes per retained event by
//! type and resident memory, and the same at a 512 MiB memory cap after 30 M asked for (27.3 M
//! ingested), and the timeline, Channels and Proxy views with a deep queue in flight on every
//! rank (plain timing; run `cargo bench -p ncclprof-tui --bench frame`; `FRAME_EVENTS=N` for
//! one size only).
//! Rendering cost must depend on the visible window, not on what is retained.
//! Run without `--bench`, as `cargo test --bench '*'` runs it, it draws 5 frames per view of
//! 20 000 events asked for, without the cap run: a check that the bench still runs, not a
//! measurement.

use std::time::Instant;

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, F_SEND, pack_strings};
use ncclprof_shared::wire::{CommInfo, Frame, InFlight, Meta, OpenOp};
use ncclprof_tui::app::App;
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::store::Store;
use ncclprof_tui::ui::views::ViewId;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const RANKS: i32 = 64;
const FRAMES: usize = 200;
/// Open ops an in-flight summary lists (the plugin's drain lists the oldest 512).
const MAX_OPEN_LISTED: usize = 512;

/// Resident memory of this process (kB from /proc), in MiB.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// CPU time of the calling thread, ms.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

fn main() {
    // The viewer's allocator settings, as `ncclprof-tui` starts with them.
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { ncclprof_tui::tune_allocator() };
    // `cargo bench` passes `--bench`; without it (`cargo test --bench '*'`, CI) a small store
    // and a few frames.
    let quick = !std::env::args().any(|a| a == "--bench");
    let frames = if quick { 5 } else { FRAMES };
    let sizes: Vec<usize> = match std::env::var("FRAME_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(n) => vec![n],
        None if quick => vec![20_000],
        None => vec![1_000_000, 10_000_000],
    };
    for total in sizes {
        run(total, 4 << 30, frames);
    }
    if std::env::var_os("FRAME_EVENTS").is_none() && !quick {
        // At the memory cap: 30 M events into a 512 MiB store, which evicts its oldest chunks.
        run(30_000_000, 512 << 20, frames);
    }
}

fn run(total: usize, cap: usize, frames: usize) {
    let rss0 = rss_mib();
    let t = Instant::now();
    let mut st = Store::new(cap);
    for r in 0..RANKS {
        let src = r as u32 + 1;
        ingest::apply_frame(
            &mut st,
            src,
            1000 + src,
            Frame::Meta(Meta {
                comms: vec![CommInfo {
                    index: 0,
                    comm_hash: 7,
                    name: "world".into(),
                    nranks: RANKS,
                    nnodes: 8,
                    rank: r,
                    api_version: 6,
                    finalized: false,
                }],
                strings: vec![(1, "AllReduce".into()), (2, "ncclFloat32".into())],
            }),
        );
    }
    let per_rank = total / RANKS as usize;
    // Per op, every 1 ms: 1 Coll + 8 × (1 KernelCh + 8 steps + 1 ProxyOp) = 81 records. The
    // ops per rank are `per_rank / 89` (an old miscount, kept so that results stay comparable
    // with earlier runs): a run ingests 81/89 of `total`, the line above the table says how many.
    let ops = per_rank / 89;
    for r in 0..RANKS {
        let p = st.proc_for(r as u32 + 1, 0);
        let mut id = 0u64;
        for i in 0..ops as u64 {
            let t0 = 1_000_000_000 + i * 1_000_000;
            let coll = id + 1;
            id += 1;
            for ch in 0..8u8 {
                id += 1;
                let k = EventRecord {
                    id,
                    parent: coll,
                    start_ns: t0 + 10_000,
                    end_ns: t0 + 500_000,
                    comm: 0,
                    rank: r,
                    kind: EventKind::KernelCh as u8,
                    sub: ch,
                    ..Default::default()
                };
                ingest::ingest_record(&mut st, p, &k);
                id += 1;
                let po = id;
                for s in 0..8u64 {
                    id += 1;
                    let s0 = t0 + 20_000 + s * 50_000;
                    let step = EventRecord {
                        id,
                        parent: po,
                        start_ns: s0,
                        end_ns: s0 + 50_000,
                        comm: 0,
                        rank: r,
                        kind: EventKind::ProxyStep as u8,
                        sub: ch,
                        flags: F_SEND,
                        x: ((r + 1) % RANKS) as u32,
                        p: [s, s0 + 1_000, s0 + 10_000, s0 + 30_000, 65536, 0],
                    };
                    ingest::ingest_record(&mut st, p, &step);
                }
                let op = EventRecord {
                    id: po,
                    parent: coll,
                    start_ns: t0 + 20_000,
                    end_ns: t0 + 420_000,
                    comm: 0,
                    rank: r,
                    kind: EventKind::ProxyOp as u8,
                    sub: ch,
                    flags: F_SEND,
                    ..Default::default()
                };
                ingest::ingest_record(&mut st, p, &op);
            }
            let c = EventRecord {
                id: coll,
                start_ns: t0,
                end_ns: t0 + 600_000,
                comm: 0,
                rank: r,
                kind: EventKind::Coll as u8,
                sub: 8,
                p: [
                    i,
                    1 << 20,
                    pack_strings([1, 2, 0, 0]),
                    t0 + 5_000,
                    8,
                    t0 + 10_000,
                ],
                ..Default::default()
            };
            ingest::ingest_record(&mut st, p, &c);
            st.enforce_cap(); // as every Events frame does
        }
    }
    let ingest_s = t.elapsed().as_secs_f64();
    let sum = |f: &dyn Fn(&ncclprof_tui::model::store::Lane) -> (usize, usize)| {
        st.lanes
            .iter()
            .map(f)
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    };
    let steps = sum(&|l| (l.steps.len(), l.steps.bytes()));
    let ops = sum(&|l| (l.proxy_ops.len(), l.proxy_ops.bytes()));
    let kernels = sum(&|l| (l.kernels.len(), l.kernels.bytes()));
    let colls = sum(&|l| (l.ops.len(), l.ops.bytes()));
    let per = |(n, b): (usize, usize)| b as f64 / n.max(1) as f64;
    println!(
        "\n{} retained events of {} ingested ({} evicted at the {} MiB cap) in {:.1} s ({:.2} M/s); store {:.1} MiB, process RSS +{:.0} MiB",
        st.retained,
        st.ingested,
        st.evicted,
        cap >> 20,
        ingest_s,
        st.ingested as f64 / ingest_s / 1e6,
        st.bytes as f64 / (1 << 20) as f64,
        rss_mib() - rss0,
    );
    println!(
        "bytes per retained event: ProxyStep {:.1} ({}), ProxyOp {:.1} ({}), KernelCh {:.1} ({}), Coll {:.1} ({})",
        per(steps),
        steps.0,
        per(ops),
        ops.0,
        per(kernels),
        kernels.0,
        per(colls),
        colls.0
    );
    let newest = 1_000_000_000 + (per_rank / 89) as u64 * 1_000_000; // after the last op
    let mut app = App::new(st, true, String::new());
    let mut term = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    // Wall time is what a user sees; thread CPU time is the same frame without the time this
    // thread spent descheduled (the machine is shared).
    println!("| view | window | p50 ms | p99 ms | max ms | p99 CPU ms |");
    println!("|---|---|---|---|---|---|");
    for (view, span, in_flight) in [
        (ViewId::Timeline, 200_000_000u64, false),
        (ViewId::Timeline, 10_000_000_000, false),
        (ViewId::Channels, 200_000_000, false),
        (ViewId::Channels, 10_000_000_000, false),
        (ViewId::Proxy, 200_000_000, false),
        (ViewId::Proxy, 10_000_000_000, false),
        (ViewId::Stats, 200_000_000, false),
        (ViewId::Stats, 10_000_000_000, false),
        (ViewId::Mask, 200_000_000, false),
        // A deep queue in flight: every rank lists as many open ops as a summary holds, the
        // oldest running for 2 s (hung), and the timeline draws and judges each.
        (ViewId::Timeline, 200_000_000, true),
        (ViewId::Timeline, 10_000_000_000, true),
        // ... and the views that list how far each hung rank got.
        (ViewId::Channels, 200_000_000, true),
        (ViewId::Proxy, 200_000_000, true),
    ] {
        if in_flight && app.store.procs.iter().all(|p| p.open_ops.is_empty()) {
            for r in 0..RANKS {
                let src = r as u32 + 1;
                let ops = (0..MAX_OPEN_LISTED as u64)
                    .map(|i| OpenOp {
                        comm: 0,
                        rank: r,
                        kind: EventKind::Coll as u8,
                        id: 1 << 40 | i,
                        seq: 1 << 40 | i,
                        func: 1,
                        start_ns: newest + i * 1_000,
                        exec_start_ns: if i == 0 { newest + 1_000 } else { 0 },
                        steps_done: vec![0; 8],
                        channels_done: 0,
                        n_channels: 8,
                        oldest_step: None,
                    })
                    .collect();
                let f = Frame::InFlight(InFlight {
                    at_ns: newest + 2_000_000_000,
                    ops,
                    total: MAX_OPEN_LISTED as u32,
                });
                ingest::apply_frame(&mut app.store, src, 1000 + src, f);
            }
        }
        let view_name = if in_flight {
            format!("{} ({MAX_OPEN_LISTED} in flight per rank)", view.title())
        } else {
            view.title().to_string()
        };
        app.view = view;
        app.tl.span = span;
        app.tl.follow = true;
        let (mut wall, mut cpu): (Vec<f64>, Vec<f64>) = (0..frames)
            .map(|_| {
                let (t, c) = (Instant::now(), thread_cpu_ms());
                term.draw(|f| ncclprof_tui::ui::render(f, &app))
                    .expect("draw");
                (t.elapsed().as_secs_f64() * 1e3, thread_cpu_ms() - c)
            })
            .unzip();
        wall.sort_by(|a, b| a.total_cmp(b));
        cpu.sort_by(|a, b| a.total_cmp(b));
        let pct = |v: &[f64], p: usize| v[(v.len() * p / 100).min(v.len() - 1)];
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            view_name,
            ncclprof_tui::model::units::dur(span),
            pct(&wall, 50),
            pct(&wall, 99),
            wall[wall.len() - 1],
            pct(&cpu, 99),
        );
    }
}
