//! Ingest cost per event through the real path (`ingest::apply_frame` with `Frame::Events`),
//! against a baseline measured in the same run: building the same batches (copying a template
//! batch and shifting its times), which both loops do. Run `cargo bench -p ncclprof-tui --bench
//! ingest`; env `INGEST_EVENTS` (events per round, default 4 000 000), `INGEST_ROUNDS` (default 5).
//! Run without `--bench`, as `cargo test --bench '*'` runs it, one round of 20 000 events per
//! scenario (the at-cap one after its usual 4 M-event warm-up past the cap): a check that the
//! bench still runs, not a measurement.
//!
//! The mix is what proxy threads produce: per ProxyOp, 8 ProxySteps then the ProxyOp (send,
//! `F_END_KNOWN`, phases a/b/c, transSize), 8 ranks × 4 channels per process, 2 processes; one
//! frame = one process's drain pass ≈ 2000 records, ring (rank) by ring, each ring's records in
//! completion order (steps of a rank's channels interleave by end time).
//!
//! Two scenarios: `fill` (a fresh store below its memory cap: new chunks all the time) and
//! `at cap` (a store kept at a 64 MiB cap: every batch evicts the oldest chunks). `fill` has two
//! rows, as a store's memory costs differently: the viewer's allocator settings
//! (`tune_allocator`: a 128 MiB trim threshold) keep a dropped store's heap, so that a store
//! filled after one reuses its pages, while a viewer's first store faults in every page. Each
//! round fills one store after `malloc_trim(0)` has given the free heap back (`fill, new pages`,
//! as a viewer's first store), then one in the heap that store left (`fill, kept heap`). Each
//! row prints its minor page faults per 1000 events, which show which memory it filled.
//!
//! `INGEST_MIX=kernels`: a job without network traffic instead, per collective its Coll and
//! its 32 kernel channels (converted GPU times, each channel's start 10–40 ns before the
//! next one's, completed in stop order), 8 ranks per process, 2 processes.

use std::hint::black_box;
use std::time::Instant;

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, F_END_KNOWN, F_GPU_CONVERTED, F_SEND, pack_strings};
use ncclprof_shared::wire::{CommInfo, Frame, Meta};
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::store::Store;

const PROCS: u32 = 2;
const RANKS_PER_PROC: i32 = 8;
const CHANNELS: u8 = 4;
const STEPS: u64 = 8;
/// Ops per (rank, channel) per batch: 8 × 4 × 7 × 9 = 2016 records.
const OPS_PER_BATCH: u64 = 7;
const STEP_NS: u64 = 50_000;
const OP_NS: u64 = STEPS * STEP_NS;
/// Time one batch covers.
const BATCH_NS: u64 = OPS_PER_BATCH * OP_NS;

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// Kernel channels per collective in the kernel mix.
const KERNEL_CHANNELS: u64 = 32;
/// Collectives per rank per batch in the kernel mix: 8 × 8 × 33 = 2112 records.
const COLLS_PER_BATCH: u64 = 8;

/// One process's template batch of the kernel mix (see the module doc), starting at time 0;
/// a collective every `BATCH_NS / COLLS_PER_BATCH`.
fn kernel_template(proc: u32) -> Vec<EventRecord> {
    let mut out = Vec::new();
    let mut id = 1u64;
    let every = BATCH_NS / COLLS_PER_BATCH;
    for lr in 0..RANKS_PER_PROC {
        let rank = proc as i32 * RANKS_PER_PROC + lr;
        for j in 0..COLLS_PER_BATCH {
            let t0 = j * every + lr as u64 * 700;
            let coll = id;
            id += 1;
            let mut channels: Vec<EventRecord> = (0..KERNEL_CHANNELS)
                .map(|ch| {
                    let start = t0 + 5_000 + ch * 25 + (ch % 4) * 10;
                    let end = start + every / 2 + (ch * 37) % 900;
                    id += 1;
                    EventRecord {
                        id: id - 1,
                        parent: coll,
                        start_ns: start,
                        end_ns: end,
                        comm: lr as u32,
                        rank,
                        kind: EventKind::KernelCh as u8,
                        sub: ch as u8,
                        flags: F_END_KNOWN | F_GPU_CONVERTED,
                        x: 0,
                        p: [start + 7, end + 7, start + 3_000, end + 3_000, lr as u64, 0],
                    }
                })
                .collect();
            channels.sort_by_key(|r| r.end_ns);
            let last_end = channels.last().map_or(t0, |r| r.end_ns);
            out.extend(channels);
            out.push(EventRecord {
                id: coll,
                parent: 0,
                start_ns: t0,
                end_ns: last_end,
                comm: lr as u32,
                rank,
                kind: EventKind::Coll as u8,
                sub: KERNEL_CHANNELS as u8,
                flags: F_END_KNOWN,
                x: 0,
                p: [
                    j,
                    1 << 20,
                    pack_strings([1, 0, 0, 0]),
                    t0 + 2_000,
                    0,
                    t0 + 5_000,
                ],
            });
        }
    }
    out
}

/// One process's template batch starting at time 0 (shifted per batch).
fn template(proc: u32) -> Vec<EventRecord> {
    let mut out = Vec::new();
    let mut id = 1u64;
    for lr in 0..RANKS_PER_PROC {
        let rank = proc as i32 * RANKS_PER_PROC + lr;
        let mut ring: Vec<(u64, EventRecord)> = Vec::new();
        for ch in 0..CHANNELS {
            for j in 0..OPS_PER_BATCH {
                let t0 = j * OP_NS + u64::from(ch) * 3_000 + lr as u64 * 700;
                let op_id = id;
                id += 1;
                let mut last_end = t0;
                for s in 0..STEPS {
                    let s0 = t0 + s * STEP_NS;
                    // Some jitter, so that completion order is not start order everywhere.
                    let dur = STEP_NS + ((s * 7 + u64::from(ch) * 13 + j * 5) % 11) * 1_000;
                    let end = s0 + dur;
                    last_end = last_end.max(end);
                    ring.push((
                        end,
                        EventRecord {
                            id,
                            parent: op_id,
                            start_ns: s0,
                            end_ns: end,
                            comm: lr as u32,
                            rank,
                            kind: EventKind::ProxyStep as u8,
                            sub: ch,
                            flags: F_SEND | F_END_KNOWN,
                            x: ((rank + 1) % (PROCS as i32 * RANKS_PER_PROC)) as u32,
                            p: [s, s0 + 1_000, s0 + 10_000, s0 + 30_000, 1 << 19, 0],
                        },
                    ));
                    id += 1;
                }
                ring.push((
                    last_end,
                    EventRecord {
                        id: op_id,
                        parent: 1 << 40 | j,
                        start_ns: t0,
                        end_ns: last_end,
                        comm: lr as u32,
                        rank,
                        kind: EventKind::ProxyOp as u8,
                        sub: ch,
                        flags: F_SEND | F_END_KNOWN,
                        x: ((rank + 1) % (PROCS as i32 * RANKS_PER_PROC)) as u32,
                        p: [
                            1000 + u64::from(proc),
                            STEPS,
                            1 << 19,
                            STEPS << 19,
                            t0 + 500,
                            0,
                        ],
                    },
                ));
            }
        }
        // Completion order within the ring (stable: an op after its last step).
        ring.sort_by_key(|(e, _)| *e);
        out.extend(ring.into_iter().map(|(_, r)| r));
    }
    out
}

/// The template shifted to batch `b` (what a freshly decoded frame costs to produce).
fn batch(t: &[EventRecord], b: u64) -> Vec<EventRecord> {
    let off = 1_000_000_000 + b * BATCH_NS;
    let ids = b << 20;
    t.iter()
        .map(|r| {
            let mut r = *r;
            r.id += ids;
            r.start_ns += off;
            r.end_ns += off;
            if r.kind == EventKind::ProxyStep as u8 {
                r.parent += ids;
                r.p[1] += off;
                r.p[2] += off;
                r.p[3] += off;
            } else if r.kind == EventKind::KernelCh as u8 {
                r.parent += ids;
                for t in &mut r.p[..4] {
                    *t += off;
                }
            } else if r.kind == EventKind::Coll as u8 {
                r.p[0] += b * COLLS_PER_BATCH;
                r.p[3] += off;
                r.p[5] += off;
            } else {
                r.p[4] += off;
            }
            r
        })
        .collect()
}

fn new_store(cap: usize) -> Store {
    let mut st = Store::new(cap);
    for p in 0..PROCS {
        let src = p + 1;
        let comms = (0..RANKS_PER_PROC)
            .map(|lr| CommInfo {
                index: lr as u32,
                comm_hash: 7,
                name: "world".into(),
                nranks: PROCS as i32 * RANKS_PER_PROC,
                nnodes: 1,
                rank: p as i32 * RANKS_PER_PROC + lr,
                api_version: 6,
                finalized: false,
            })
            .collect();
        ingest::apply_frame(
            &mut st,
            src,
            1000 + src,
            Frame::Meta(Meta {
                comms,
                strings: vec![(1, "AllReduce".into())],
            }),
        );
    }
    st
}

/// Run `batches` batches starting at batch `first`: `ingest` false = build and drop only.
/// Returns seconds.
fn round(
    st: &mut Store,
    tpl: &[Vec<EventRecord>],
    first: u64,
    batches: u64,
    ingest_it: bool,
) -> f64 {
    let t = Instant::now();
    for b in first..first + batches {
        let p = (b % u64::from(PROCS)) as u32;
        let v = batch(&tpl[p as usize], b / u64::from(PROCS));
        if ingest_it {
            ingest::apply_frame(st, p + 1, 1001 + p, Frame::Events(v.into()));
        } else {
            black_box(&v);
            drop(black_box(v));
        }
    }
    t.elapsed().as_secs_f64()
}

/// Minor page faults of this process so far.
fn minor_faults() -> f64 {
    // SAFETY: `rusage` is plain integers, for which all zeroes is a valid value; getrusage
    // only writes the struct it is given.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru.ru_minflt as f64
    }
}

/// Per round of one row: the baseline's and the ingest's ns per event, and the ingest's minor
/// page faults per 1000 events.
#[derive(Default)]
struct Rounds {
    base: Vec<f64>,
    ing: Vec<f64>,
    faults: Vec<f64>,
}

/// One round of `fill` into `out`: a baseline, then a fresh store far below its cap filled
/// with `batches` batches and dropped. Returns the store's bytes per retained step (kernel
/// channel with `kernels`).
fn fill(tpl: &[Vec<EventRecord>], batches: u64, kernels: bool, out: &mut Rounds) -> f64 {
    let n = (batches * tpl[0].len() as u64) as f64;
    let mut st = new_store(4 << 30);
    out.base
        .push(round(&mut st, tpl, 0, batches, false) * 1e9 / n);
    let mut st = new_store(4 << 30);
    let f0 = minor_faults();
    out.ing
        .push(round(&mut st, tpl, 0, batches, true) * 1e9 / n);
    out.faults.push((minor_faults() - f0) * 1e3 / n);
    assert_eq!(st.ingested as f64, n);
    let (items, bytes): (usize, usize) = if kernels {
        let k = st.lanes.iter().map(|l| l.kernels.len()).sum();
        (k, st.lanes.iter().map(|l| l.kernels.bytes()).sum())
    } else {
        let k = st.lanes.iter().map(|l| l.steps.len()).sum();
        (k, st.lanes.iter().map(|l| l.steps.bytes()).sum())
    };
    drop(black_box(st));
    bytes as f64 / items as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // The viewer's allocator settings, as `ncclprof-tui` starts with them.
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { ncclprof_tui::tune_allocator() };
    if std::env::args().any(|a| a == "--list") {
        println!("ingest: bench");
        return;
    }
    // `cargo bench` passes `--bench`; without it (`cargo test --bench '*'`, CI) one small round.
    let quick = !std::env::args().any(|a| a == "--bench");
    let events: u64 = env("INGEST_EVENTS").unwrap_or(if quick { 20_000 } else { 4_000_000 });
    let rounds: usize = env("INGEST_ROUNDS").unwrap_or(if quick { 1 } else { 5 });
    let kernels = std::env::var("INGEST_MIX").is_ok_and(|m| m == "kernels");
    let tpl: Vec<Vec<EventRecord>> = (0..PROCS)
        .map(if kernels { kernel_template } else { template })
        .collect();
    let per_batch = tpl[0].len() as u64;
    let batches = events.div_ceil(per_batch);
    let n = (batches * per_batch) as f64;
    let mix = if kernels {
        format!("a Coll + {KERNEL_CHANNELS} kernel channels per collective")
    } else {
        format!("8 steps + 1 ProxyOp per op, {CHANNELS} channels")
    };
    println!(
        "ingest: {per_batch} records per frame ({mix}, {RANKS_PER_PROC} ranks per process, {PROCS} processes), {batches} frames = {n} events per round, {rounds} alternated rounds"
    );

    // fill: per round, a store in new pages, then one in the heap that store left (module doc).
    let (mut new, mut kept) = (Rounds::default(), Rounds::default());
    let mut per_step = 0.0;
    for _ in 0..rounds {
        // SAFETY: malloc_trim only returns free heap pages to the system.
        unsafe { libc::malloc_trim(0) };
        fill(&tpl, batches, kernels, &mut new);
        per_step = fill(&tpl, batches, kernels, &mut kept);
    }
    report("fill, new pages", &new);
    report("fill, kept heap", &kept);
    let what = if kernels {
        "kernel channel"
    } else {
        "proxy step"
    };
    println!("  memory per retained {what}: {per_step:.1} B");

    // at cap: one store kept at 64 MiB; warm it past the cap first.
    let cap = 64 << 20;
    let mut st = new_store(cap);
    let warm = (cap as u64 * 2 / 32).div_ceil(per_batch);
    round(&mut st, &tpl, 0, warm, true);
    let mut next = warm;
    let mut at_cap = Rounds::default();
    for _ in 0..rounds {
        let mut scratch = new_store(cap);
        at_cap
            .base
            .push(round(&mut scratch, &tpl, next, batches, false) * 1e9 / n);
        let ev0 = st.evicted;
        let f0 = minor_faults();
        at_cap
            .ing
            .push(round(&mut st, &tpl, next, batches, true) * 1e9 / n);
        at_cap.faults.push((minor_faults() - f0) * 1e3 / n);
        assert!(st.evicted > ev0 && st.bytes <= cap);
        next += batches;
    }
    report("at cap (64 MiB, evicting)", &at_cap);
}

fn report(name: &str, r: &Rounds) {
    let (b, i) = (median(r.base.clone()), median(r.ing.clone()));
    let tenths = |v: &[f64]| {
        v.iter()
            .map(|x| (x * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    };
    println!(
        "{name:<26} baseline (build batch) {b:6.1} ns/ev | build + apply_frame {i:6.1} ns/ev | ingest alone {:6.1} ns/ev | ratio {:5.2}× | faults/1000 ev {:5.1}   [rounds: base {:?} ingest {:?} faults {:?}]",
        i - b,
        i / b,
        median(r.faults.clone()),
        tenths(&r.base),
        tenths(&r.ing),
        tenths(&r.faults),
    );
}
