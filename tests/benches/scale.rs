//! Scale: how the plugin's added cost per call moves from 2 to 64 ranks and from 1 to 64
//! communicators, with NCCL's real call patterns (the fake NCCL host, as fast as possible),
//! against the do-nothing plugin in the same run, runs alternated. An ncclprof run lasts until
//! its drain has processed every record (the catch-up after finalize counts). Beside each
//! figure, what ncclprof dropped or had not read at finalize (from the summary it logs then),
//! per 100 events the job started: a run that drops does less work, so its cost reads lower.
//! (Ring full and unread count records: 1.1-1.2 per event at 8 ranks and more, where most
//! events are ProxySteps, one record each, and 1.75 at 2 ranks. The drain's reasons count
//! events, and so does no ring, nearly: a thread without a ring counts an event once, at its
//! start, and hands NCCL a NULL handle, for which NCCL makes no more calls (it also counts a
//! state or stop such a thread makes for another thread's event). No ring is shown apart:
//! none of those events' records exist.) Until 2026-12-07 the column divided all of them by
//! calls: 2.4-5x too low per record since a step became one record (`86e0fb0`), about 1.8-2.6x
//! before, and about 3x too low for no ring.
//!
//! Both runs' wall is divided by the do-nothing run's calls, the job's: a run whose threads
//! lack rings makes fewer calls (no states or stops for NULL handles) for the same work, and
//! the table prints its count beside the job's where they differ.
//!
//! Every run makes about the same number of calls, whatever the shape: a short run of the
//! do-nothing plugin first measures the shape's calls per iteration. (Before, iterations were
//! divided by contexts, which made 2.1 M calls at 2 x 1 and 90 M at 64 x 1: NCCL's calls per
//! iteration grow with ranks.) The plugin runs with its defaults (until 2026-12-07 the bench
//! set `NCCLPROF_RING_EVENTS=262144`: every ring at its largest size from the start).
//!
//! Run: `cargo build --release -p ncclprof-plugin -p ncclprof-noop-plugin && cargo bench -p ncclprof-tests --bench scale`
//! (`SCALE_SHAPES=8x32,2x64` for some rows only, `SCALE_RUNS` runs of each plugin, default 3;
//! `SCALE_PLUGIN=<path>` another build's `.so` instead of this workspace's).
//! Run without `--bench`, as `cargo test --bench '*'` runs it, it makes one short run of each
//! plugin at 2 × 1: a check that the bench still runs, not a measurement.

use std::time::{Duration, Instant};

use ncclprof_shared::wire::DropReason;
use ncclprof_sim::SimConfig;
use ncclprof_tests::loss::Losses;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// (ranks, communicators) of each row.
const SHAPES: [(usize, usize); 8] = [
    (2, 1),
    (8, 1),
    (16, 1),
    (32, 1),
    (64, 1),
    (8, 8),
    (8, 32),
    (2, 64),
];

/// `SCALE_SHAPES`, e.g. `8x32,2x64`: only those rows.
fn shapes(list: &str) -> Vec<(usize, usize)> {
    list.split(',')
        .map(|s| {
            let parsed = s
                .trim()
                .split_once('x')
                .and_then(|(r, c)| Some((r.parse().ok()?, c.parse().ok()?)));
            parsed.unwrap_or_else(|| panic!("SCALE_SHAPES: {s:?} is not RANKSxCOMMS"))
        })
        .collect()
}

/// Calls per run, about (see `iterations_for`).
const CALLS_PER_RUN: u64 = 8_000_000;

/// Wait until this process is idle (under 2 ms of CPU in a 20 ms window, at most 20 s) and
/// return how long it was busy before that. After a run whose drain was behind at finalize
/// (finalize waits 200 ms at most), the plugin's drain goes on reading the backlog: that is
/// part of the run's cost, and left alone it would be charged to the next run instead.
fn settle() -> Duration {
    let cpu = || ncclprof_tests::cpu_seconds(libc::CLOCK_PROCESS_CPUTIME_ID);
    let start = Instant::now();
    for _ in 0..1000 {
        let (at, before) = (Instant::now(), cpu());
        std::thread::sleep(Duration::from_millis(20));
        if cpu() - before < 0.002 {
            return at - start;
        }
    }
    start.elapsed()
}

/// One run's figures.
struct Run {
    wall_ns: u64,
    calls: u64,
    /// startEvent calls the job made (events started, of every kind).
    events: u64,
    /// ncclprof's records dropped so far and unread (from its summary).
    losses: Option<Losses>,
}

/// Iterations that make about `calls` calls at this shape: measured with a short run of the
/// do-nothing plugin, since a collective's calls grow with ranks (a ring all-reduce has
/// 2 (n - 1) steps per channel). Long enough to measure the steady state: 65 k calls were
/// mostly the plugin's start-up (threads, rendezvous, first touch of rings).
fn iterations_for(noop: &std::path::Path, ranks: usize, comms: usize, calls: u64) -> u64 {
    const PROBE: u64 = 4;
    let probe = run_once(noop, ranks, comms, true, PROBE);
    (calls * PROBE / probe.calls.max(1)).max(2)
}

fn run_once(
    plugin: &std::path::Path,
    ranks: usize,
    comms: usize,
    noop: bool,
    iterations: u64,
) -> Run {
    let mut cfg = SimConfig::default_for(plugin);
    cfg.ranks = ranks;
    cfg.comms = comms;
    cfg.iterations = iterations;
    cfg.rate = 0.0;
    cfg.quiet = true;
    cfg.seed = 3;
    if noop {
        // The do-nothing plugin writes no mask: give the core the same mask ncclprof sets.
        cfg.force_mask = Some(ncclprof_shared::mask::DEFAULT as i32);
    }
    let t = ncclprof_sim::run(&cfg).expect("sim run");
    let events = t
        .counts
        .iter()
        .filter(|(k, _)| *k != "states" && *k != "stops")
        .map(|(_, n)| n)
        .sum();
    Run {
        wall_ns: t.wall_ns,
        calls: t.total_calls,
        events,
        losses: ncclprof_tests::loss::drops_by_reason(&t.log),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("scale: bench");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: before the plugin's first init in this process.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", dir.path().join("rdv"));
    }
    let prof = ncclprof_tests::bench_plugin_path("SCALE_PLUGIN");
    let noop = ncclprof_tests::noop_path();
    // `cargo bench` passes `--bench`; without it (`cargo test --bench '*'`, CI) one short run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let shapes = match std::env::var("SCALE_SHAPES") {
        Ok(s) => shapes(&s),
        Err(_) if quick => vec![(2, 1)],
        Err(_) => SHAPES.to_vec(),
    };
    let runs: usize = ncclprof_tests::env("SCALE_RUNS").unwrap_or(if quick { 1 } else { 3 });
    let calls_per_run = if quick { 100_000 } else { CALLS_PER_RUN };
    println!(
        "scale: wall ns per plugin call of the whole fake job (all its threads on this machine) until every record is processed, median of {runs} alternated runs"
    );
    println!(
        "the plugin's default settings; about {calls_per_run} calls per run (the do-nothing run's: ns per call divides both runs' wall by them); losses per 100 events the job started (ring full and unread count records, the drain's reasons and no ring events)"
    );
    println!(
        "| ranks | comms | calls per run | noop ns/call | ncclprof ns/call | added ns/call | of which the drain's catch-up after finalize, ns/call ({runs} runs) | records dropped + unread at finalize, per 100 events started ({runs} runs) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---|---|");
    // The plugin stays loaded between runs (its state too, as under NCCL), so its drop counts
    // are since the first run: a run's are the growth of each count it reports. Drops the
    // drain counts while it catches up after a run show in the next run's. And a summary
    // written while the drain was behind cannot give the counts only the drain keeps
    // (unknown handle, abandoned, table full): the next full summary's growth of those also
    // holds what the runs in between lost, so it is named apart and left out of that run's %.
    let mut dropped_before = [0u64; DropReason::COUNT];
    let mut drain_counts_unreported = false;
    for (ranks, comms) in shapes {
        let iterations = iterations_for(&noop, ranks, comms, calls_per_run);
        let (mut a, mut b, mut lost, mut after) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut calls_seen, mut prof_calls_seen) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let base = run_once(&noop, ranks, comms, true, iterations);
            // Both runs are divided by the calls of the do-nothing run, the job's calls: where
            // a thread has no ring, ncclprof hands NCCL a NULL handle and NCCL makes no state
            // or stop calls for that event, so its run makes fewer calls for the same work.
            let calls = base.calls.max(1);
            calls_seen.push(calls as f64);
            a.push(base.wall_ns as f64 / calls as f64);
            settle();
            let Run {
                wall_ns,
                calls: prof_calls,
                events,
                losses: summary,
            } = run_once(&prof, ranks, comms, false, iterations);
            prof_calls_seen.push(prof_calls as f64);
            // The drain's catch-up after finalize counts: the job's records were not all
            // processed when it returned.
            let catch_up = settle().as_nanos() as f64 / calls as f64;
            b.push(wall_ns as f64 / calls as f64 + catch_up);
            after.push(format!("{catch_up:.0}"));
            lost.push(match summary {
                Some(Losses { by_reason, unread }) => {
                    let (mut new, mut named, mut carried) = (0, Vec::new(), Vec::new());
                    // Events a thread without a ring started (counted once, at the start: NCCL
                    // makes no more calls for a NULL handle), shown apart: none of their
                    // records exist to be dropped.
                    let mut no_ring_events = 0;
                    let mut drain_counts_here = false;
                    for (r, (now, before)) in DropReason::ALL
                        .iter()
                        .zip(by_reason.iter().zip(&mut dropped_before))
                    {
                        let Some(now) = *now else {
                            drain_counts_unreported = true; // a summary written while behind
                            continue;
                        };
                        let n = now.saturating_sub(*before);
                        *before = (*before).max(now);
                        let drain_only = DropReason::DRAIN_ONLY.contains(r);
                        drain_counts_here |= drain_only;
                        if n > 0 && drain_only && drain_counts_unreported {
                            carried.push(format!("{} {n}", r.name()));
                        } else if n > 0 && *r == DropReason::NoRing {
                            no_ring_events = n;
                        } else if n > 0 {
                            named.push(format!("{} {n}", r.name()));
                            new += n;
                        }
                    }
                    if drain_counts_here {
                        drain_counts_unreported = false;
                    }
                    if !carried.is_empty() {
                        named.push(format!(
                            "and since earlier runs' summaries, not in the %: {}",
                            carried.join(", ")
                        ));
                    }
                    let pct = |n: u64| n as f64 * 100.0 / events.max(1) as f64;
                    let named = if named.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", named.join(", "))
                    };
                    let no_ring = match no_ring_events {
                        0 => String::new(),
                        n => format!("; no ring {n} events unrecorded, {:.1} per 100", pct(n)),
                    };
                    format!("{:.1} + {:.1}{named}{no_ring}", pct(new), pct(unread))
                }
                None => "?".into(),
            });
        }
        let (x, y) = (median(&mut a), median(&mut b));
        let calls = median(&mut calls_seen);
        let prof_calls = median(&mut prof_calls_seen);
        let calls = if (prof_calls - calls).abs() > calls * 0.001 {
            format!("{calls:.0} (ncclprof {prof_calls:.0})")
        } else {
            format!("{calls:.0}")
        };
        println!(
            "| {ranks:>5} | {comms:>5} | {calls:>10} | {x:>12.1} | {y:>16.1} | {:>13.1} | {:>20} | {:>40} |",
            y - x,
            after.join(" / "),
            lost.join(" / ")
        );
    }
}
