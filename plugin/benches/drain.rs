//! Drain-side throughput: completed events per second that `completion` makes of raw
//! records, for the step-heavy mix a proxy thread produces (Coll → 8 ProxyOps → 8 steps each,
//! every step start + 3 states + stop, 8 KernelCh: a start, and a stop that carries the GPU stop), from one proxy thread's ring and from
//! four (each pass holds every ring's share, as the drain reads them). Single thread, as in
//! the plugin. A step reaches the ring as NCCL's thread sends it: whole, one record at its
//! stop (`step_phases`; `DRAIN_STEPS=split` sends a start and a stop that carries its
//! states, as before that and as a step the drain must know early still does;
//! `DRAIN_STATES=records` each state as its own record too, as before that).
//!
//! Completed records go where the drain keeps them: the history's Events frames, trimmed to
//! the default bound (`NCCLPROF_HISTORY_EVENTS`, 200 000 records) after each pass.
//!
//! Two sources per configuration: the records in a slice of `Item`s (completion alone), and
//! the same records pushed into real capture rings and read where they are, as the drain does
//! (`stream::InRings`: host-time conversion and context lookups included; the pushes are not
//! timed). The records are 50 time units apart: ns in the slice, counter ticks in the rings
//! (≈ 17–25 ns on a TSC), so the completion timeouts and sweeps land alike on x86 and less so
//! on a slow Arm counter. Each source prints the events it completed, which must agree in a
//! `--bench` run. (The one-pass round without `--bench` differs by its collectives: the rings'
//! host times are today's, so the pass's end runs the periodic sweep, which completes a
//! collective after its quiet pass; the slice's times are a millisecond from 0, and its
//! collectives wait for a pass that never comes.)
//!
//! The KernelCh records of this mix carry constant GPU times (5 000 / 9 000, never a rate the
//! GPU clock can take: its unconverted path). `DRAIN_MIX=kernels` is a job without network
//! traffic instead (one node, NVLink): per collective, its start and stop and 32 kernel
//! channels (a start, and a stop that carries the GPU stop), GPU times in epoch ns as an H200 stamps them, so each
//! channel goes through the GPU clock's real conversion (`gpuclock`; the `gpuclock` bench
//! times that alone, over job-length spans).
//!
//! Each collective's two records go to its proxy thread's ring by default; `DRAIN_COLLS=first`
//! or `last` puts them in a ring of their own, as NCCL's launch thread records them, before or
//! after the proxy threads' rings (the order in which the threads claimed them): a pass's
//! first sweep then reads that ring alone (see `Completion::pass`).
//!
//! Run: `cargo bench -p ncclprof-plugin --bench drain` (`DRAIN_RINGS=1` or `4` for one
//! configuration, `DRAIN_FROM=items` or `rings` for one source, `DRAIN_PASS` records per
//! pass, default 65 536, `DRAIN_STEPS=split`, `DRAIN_STATES=records`, `DRAIN_COLLS=first|last`,
//! `DRAIN_MIX=kernels`).
//! Run without `--bench`, as `cargo test --bench '*'` runs it, it makes one round of 100
//! collectives per configuration: a check that the bench still runs, not a measurement.

use std::time::{Duration, Instant};

use nccl_profiler_ncclprof::clock::{Calibration, now_raw};
use nccl_profiler_ncclprof::completion::{Completion, Item, Signals};
use nccl_profiler_ncclprof::context::Contexts;
use nccl_profiler_ncclprof::handle;
use nccl_profiler_ncclprof::history::History;
use nccl_profiler_ncclprof::ring::{
    OP_START, OP_STATE, OP_STOP, RF_PHASES, RF_WHOLE, Raw, Ring, RingPool, first_sweep_record,
};
use nccl_profiler_ncclprof::step_phases::{self, Phases};
use nccl_profiler_ncclprof::stream::InRings;
use ncclprof_shared::kind::{EventKind, state};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("drain: bench");
        return;
    }
    // `DRAIN_RINGS=4` runs one configuration only (e.g. under callgrind).
    let rings: Vec<u32> = std::env::var("DRAIN_RINGS").map_or_else(
        |_| vec![1, 4],
        |v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
    );
    let from = std::env::var("DRAIN_FROM").unwrap_or_default();
    for r in rings {
        for source in [Source::Items, Source::Rings] {
            if from.is_empty() || from == source.name() {
                run(r.max(1), source);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Source {
    Items,
    Rings,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Items => "items",
            Source::Rings => "rings",
        }
    }
}

/// How a ProxyStep reaches the drain.
#[derive(Clone, Copy, PartialEq)]
enum Steps {
    /// One record at its stop (`RF_WHOLE`), as NCCL's thread sends it.
    Whole,
    /// A start record, then a stop that carries its states (`DRAIN_STEPS=split`: as before
    /// whole steps, and as a step whose start the drain must know early still does), or its
    /// states as records of their own (`DRAIN_STATES=records`).
    Split,
}

/// A whole step's record as NCCL's thread writes it into a ring, stamps offset by `base`
/// ticks, from the form the slice holds (see `step_phases::to_whole`).
fn ring_form(it: &Item, base: u64) -> Raw {
    let start = it.raw.ts;
    let off = |t: u64| if t == 0 { 0 } else { t - start + 1 };
    let w = it.raw.w;
    Raw {
        ts: base + it.ns,
        w: [base + start, off(w[0]) | off(w[1]) << 32, off(w[2]), w[3]],
        ..it.raw
    }
}

/// Capture rings for the `rings` source, one per simulated proxy thread, each holding its
/// share of a pass (made once: their pages stay faulted in from round to round, as a running
/// job's do).
fn pool(rings: u32, share: usize) -> &'static RingPool {
    Box::leak(Box::new(
        RingPool::new(rings as usize, share).expect("map the capture rings"),
    ))
}

/// Records per pass (`DRAIN_PASS`, default [`PASS`]).
fn pass_records() -> usize {
    std::env::var("DRAIN_PASS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PASS)
}

/// Records per drain pass: about what the plugin's drain reads per pass when it runs behind at
/// 2-4 M events/s (at most 128 Ki). A pass opens every step started in it at once unless steps
/// are taken in ring order (see `Completion::pass`).
const PASS: usize = 65_536;

/// `rings` proxy threads' records, each ring's in its own blocks of a pass as the drain reads
/// them (ring 0's share, then ring 1's, …).
fn run(rings: u32, source: Source) {
    let states_as_records = std::env::var("DRAIN_STATES").is_ok_and(|v| v == "records");
    let steps = if states_as_records || std::env::var("DRAIN_STEPS").is_ok_and(|v| v == "split") {
        Steps::Split
    } else {
        Steps::Whole
    };
    // Collectives on a ring of their own (the launch thread's), before or after the proxy
    // threads' rings.
    let colls = std::env::var("DRAIN_COLLS").unwrap_or_default();
    let colls_ring = match colls.as_str() {
        "first" => Some(0),
        "last" => Some(rings),
        _ => None,
    };
    // `DRAIN_MIX=kernels`: what a job without network traffic records (one node, NVLink):
    // per collective its 32 kernel channels and no ProxyOp, with GPU times as an H200's
    // `%globaltimer` gives them (see `gpu_at`).
    let kernels_mix = std::env::var("DRAIN_MIX").is_ok_and(|v| v == "kernels");
    // The rings source stamps records as NCCL's threads do (raw counter ticks from now on) and
    // converts them with the drain's calibration.
    let cal = Calibration::start(false);
    let base = now_raw();
    // A GPU timestamp (epoch ns) for bench time `t`: host time plus a fixed offset, so that
    // the GPU clock's conversion sees what a real GPU gives it. Host time is `t` in the slice,
    // the calibration's ns for tick `base + t` in the rings.
    let epoch = 1_790_000_000_000_000_000u64;
    let gpu_at = |t: u64| match source {
        Source::Items => epoch + t,
        Source::Rings => epoch + (cal.to_ns(base + t) - cal.to_ns(base)),
    };
    let proxy_ring0 = u32::from(colls_ring == Some(0));
    let all_rings = rings + u32::from(colls_ring.is_some());
    let mut seq = vec![0u64; all_rings as usize];
    let ts = std::cell::Cell::new(1_000_000u64);
    let ring = std::cell::Cell::new(0u32);
    let mut id = |k: EventKind| {
        let r = match colls_ring {
            Some(c) if k == EventKind::Coll => c,
            _ => proxy_ring0 + ring.get(),
        };
        seq[r as usize] += 1;
        handle::make(k, r, seq[r as usize])
    };
    // Build one collective's worth of records.
    let mut one_coll = |items: &mut Vec<Item>| {
        let items = std::cell::RefCell::new(items);
        let push_raw = |raw: Raw| {
            ts.set(ts.get() + 50);
            let ts = ts.get();
            items.borrow_mut().push(Item {
                raw: Raw { ts, ..raw },
                ns: ts,
                rank: 0,
            });
        };
        let push = |op: u8, kind: EventKind, id: u64, parent: u64, st: u8, w: [u64; 4]| {
            push_raw(Raw {
                id,
                parent,
                op,
                kind: kind as u8,
                state: st,
                w,
                ..Raw::default()
            })
        };
        let coll = id(EventKind::Coll);
        let channels: u64 = if kernels_mix { 32 } else { 8 };
        push(
            OP_START,
            EventKind::Coll,
            coll,
            0,
            0,
            [1, 1024, 0, channels << 32],
        );
        push(OP_STOP, EventKind::Coll, coll, 0, 0, [0; 4]);
        if kernels_mix {
            for ch in 0..channels {
                // The GPU's stamps come before their callbacks (the next record's time, 50
                // units on): 10–40 units before, varying by channel.
                let k = id(EventKind::KernelCh);
                let lead = 10 + ch % 4 * 10;
                let gpu_start = gpu_at(ts.get() + 50 - lead);
                push(
                    OP_START,
                    EventKind::KernelCh,
                    k,
                    coll,
                    0,
                    [ch, gpu_start, 0, 0],
                );
                // Its GPU stop rides on its stop record, as `capture` pushes it.
                let gpu_stop = gpu_at(ts.get() + 50 - lead);
                let stop = state::KERNEL_CH_STOP as u8;
                push(
                    OP_STOP,
                    EventKind::KernelCh,
                    k,
                    0,
                    stop,
                    [gpu_stop, 0, 0, 0],
                );
            }
            return;
        }
        for ch in 0..channels {
            let op = id(EventKind::ProxyOp);
            push(
                OP_START,
                EventKind::ProxyOp,
                op,
                coll,
                0,
                [0, ch | (1 << 8), 8, 0],
            );
            push(
                OP_STATE,
                EventKind::ProxyOp,
                op,
                0,
                state::PROXY_OP_IN_PROGRESS as u8,
                [0; 4],
            );
            for s in 0..8u64 {
                let st = id(EventKind::ProxyStep);
                if steps == Steps::Whole {
                    // As NCCL's thread sends it now: one record at the stop. The slice holds
                    // it as the drain hands it to completion (times in ns); the rings source
                    // makes the ring's form of it (`ring_form`).
                    ts.set(ts.get() + 50);
                    let mut phases = Phases {
                        id: st,
                        start: ts.get(),
                        ..Phases::default()
                    };
                    for x in [
                        state::PROXY_STEP_SEND_GPU_WAIT,
                        state::PROXY_STEP_SEND_PEER_WAIT,
                        state::PROXY_STEP_SEND_WAIT,
                    ] {
                        ts.set(ts.get() + 50);
                        phases.record(x as i32, ts.get(), 1 << 16);
                    }
                    ts.set(ts.get() + 50);
                    let r = phases.to_whole(ts.get(), op, s as u32, 0).unwrap();
                    let [a, b, c] = step_phases::whole_times(&r);
                    items.borrow_mut().push(Item {
                        raw: Raw {
                            ts: r.w[0],
                            w: [a, b, c, r.w[3]],
                            ..r
                        },
                        ns: ts.get(),
                        rank: 0,
                    });
                    continue;
                }
                push(OP_START, EventKind::ProxyStep, st, op, 0, [s, 0, 0, 0]);
                let mut phases = Phases {
                    id: st,
                    ..Phases::default()
                };
                for x in [
                    state::PROXY_STEP_SEND_GPU_WAIT,
                    state::PROXY_STEP_SEND_PEER_WAIT,
                    state::PROXY_STEP_SEND_WAIT,
                ] {
                    if states_as_records {
                        push(OP_STATE, EventKind::ProxyStep, st, 1 << 16, x as u8, [0; 4]);
                    } else {
                        ts.set(ts.get() + 50);
                        phases.record(x as i32, ts.get(), 1 << 16);
                    }
                }
                if states_as_records {
                    push(OP_STOP, EventKind::ProxyStep, st, 0, 0, [0; 4]);
                } else {
                    let r = phases.to_raw(OP_STOP, 0);
                    push_raw(r);
                }
            }
            let k = id(EventKind::KernelCh);
            push(OP_START, EventKind::KernelCh, k, coll, 0, [ch, 5_000, 0, 0]);
            let stop = state::KERNEL_CH_STOP as u8;
            push(OP_STOP, EventKind::KernelCh, k, 0, stop, [9_000, 0, 0, 0]);
            push(OP_STOP, EventKind::ProxyOp, op, 0, 0, [0; 4]);
        }
    };
    let mut c = Completion::with_sink(History::new(), 262_144, 1000, 0.0);
    // What the drain keeps (the default `NCCLPROF_HISTORY_EVENTS`).
    const HISTORY_EVENTS: usize = 200_000;
    let completed_now = |c: &Completion<History>| c.completed.iter().sum::<u64>() as usize;
    let mut best = 0.0f64;
    let contexts = Contexts::new();
    let pass_records = pass_records();
    let share = (pass_records / rings as usize).max(1);
    let pool = (source == Source::Rings).then(|| pool(all_rings, share));
    let mut completed = 0usize;
    let mut ranges: Vec<(&'static Ring, u64, u64)> = Vec::new();
    // `cargo bench` passes `--bench`; without it (`cargo test --bench '*'`, CI) one short round.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (rounds, colls) = if quick { (1, 100) } else { (5, 2000) };
    for round in 0..rounds {
        // Each ring's records, then passes of `PASS` records made of each ring's next share.
        let mut per_ring: Vec<Vec<Item>> = Vec::new();
        for r in 0..rings {
            ring.set(r);
            let mut items = Vec::new();
            for _ in 0..colls / rings {
                one_coll(&mut items);
            }
            per_ring.push(items);
        }
        let mut passes: Vec<Vec<Item>> = Vec::new();
        let mut at = 0;
        while per_ring.iter().any(|v| at < v.len()) {
            let mut pass = Vec::with_capacity(pass_records);
            for v in &per_ring {
                pass.extend_from_slice(&v[at.min(v.len())..(at + share).min(v.len())]);
            }
            passes.push(pass);
            at += share;
        }
        let n: usize = passes.iter().map(Vec::len).sum();
        let completed_before = completed;
        let mut busy = Duration::ZERO;
        match pool {
            None => {
                let t0 = Instant::now();
                for pass in &passes {
                    c.pass(pass.as_slice(), Signals::ALL);
                    c.end_pass(ts.get());
                    c.sink_mut().trim(HISTORY_EVENTS, 0, None);
                    completed = completed_now(&c);
                }
                busy = t0.elapsed();
            }
            Some(pool) => {
                for pass in &passes {
                    // Untimed: what NCCL's threads did. Each ring gets its own records (their
                    // ids carry the ring index); one producer per ring, here this thread.
                    for it in pass {
                        let ring = &pool.rings()[handle::ring_of(it.raw.id) as usize];
                        if it.raw.flags & RF_WHOLE != 0 {
                            assert!(ring.push(&ring_form(it, base)), "ring full");
                            continue;
                        }
                        if first_sweep_record(it.raw.op, it.raw.kind) {
                            // As `capture` pushes a collective's start.
                            let raw = Raw {
                                ts: base + it.raw.ts,
                                ..it.raw
                            };
                            assert!(ring.push_marked(&raw), "ring full");
                            continue;
                        }
                        let mut raw = Raw {
                            ts: base + it.raw.ts,
                            ..it.raw
                        };
                        if raw.flags & RF_PHASES != 0 {
                            // Phase times are ticks in the ring, like every stamp.
                            for t in raw.w[..3].iter_mut().filter(|t| **t != 0) {
                                *t += base;
                            }
                        }
                        assert!(ring.push(&raw), "ring full: pass larger than a ring");
                    }
                    ranges.clear();
                    for ring in pool.rings() {
                        let (t, h) = ring.readable();
                        if h > t {
                            ranges.push((ring, t, h));
                        }
                    }
                    let t0 = Instant::now();
                    // SAFETY: readable ranges, released below after the pass.
                    let records = unsafe { InRings::new(&ranges, pool.rings(), &cal, &contexts) };
                    c.pass(&records, Signals::ALL);
                    for &(ring, _, h) in &ranges {
                        ring.release(h);
                    }
                    c.end_pass(cal.to_ns(base + ts.get()));
                    c.sink_mut().trim(HISTORY_EVENTS, 0, None);
                    completed = completed_now(&c);
                    busy += t0.elapsed();
                }
            }
        }
        let events = completed - completed_before;
        let rate = events as f64 / busy.as_secs_f64();
        best = best.max(rate);
        println!(
            "{rings} ring(s) from {}, round {round}: {:.2} M events/s, {:.1} ns per event ({n} records, {events} events)",
            source.name(),
            rate / 1e6,
            1e9 / rate
        );
    }
    println!(
        "drain, {rings} ring(s){} from {}, {}: best {:.2} M events/s, {:.1} ns per event ({completed} events completed)",
        match colls_ring {
            Some(0) => " after the collectives' own",
            Some(_) => " before the collectives' own",
            None => "",
        },
        source.name(),
        match (steps, states_as_records) {
            _ if kernels_mix => "kernel channels only",
            (Steps::Whole, _) => "steps whole",
            (Steps::Split, false) => "steps as start + stop with their states",
            (Steps::Split, true) => "steps as start + states + stop",
        },
        best / 1e6,
        1e9 / best
    );
}
