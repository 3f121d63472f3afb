//! The drain's cost per kernel channel of converting its GPU times to host time
//! (`gpuclock::GpuClock`, spec §4.10): two `observe` calls and one `convert_span`, as
//! `Completion` makes them at a KernelCh's stop, against a baseline measured in the same run
//! (the same loop converting with a fixed offset, which is what a clock that never needs
//! fitting would cost).
//!
//! The simulated GPU is an H200's as measured (spec §4.10): `%globaltimer` in epoch ns, 11 ppm
//! fast against the host clock; kernel channels of 8–40 µs, 32 channels per collective
//! reported 2–50 µs after the GPU event, a collective every 60 µs, 10 s of job time per round
//! (the clock's line needs a second of 100 ms buckets before it is fitted: the first second
//! is the unfitted path, the rest the fitted one, both printed).
//!
//! Run: `cargo bench -p ncclprof-plugin --bench gpuclock` (`GPUCLOCK_ROUNDS`, default 5).
//! Without `--bench`, as `cargo test --bench '*'` runs it, one short round: a check that the
//! bench still runs, not a measurement.

use std::hint::black_box;
use std::time::Instant;

use nccl_profiler_ncclprof::gpuclock::GpuClock;

/// One kernel channel as the drain sees it at its stop: (GPU start, start callback's host
/// time, GPU stop, stop callback's host time).
type Kernel = (u64, u64, u64, u64);

const HOST0: u64 = 1_000_000_000_000;
const OFFSET: f64 = 1.79e18;
const DRIFT_PPM: f64 = 11.0;
const CHANNELS: u64 = 32;
const COLL_EVERY_NS: u64 = 60_000;

fn gpu_of(host: u64) -> u64 {
    ((host - HOST0) as f64 * (1.0 + DRIFT_PPM * 1e-6) + HOST0 as f64 + OFFSET) as u64
}

/// `secs` of kernels, in the order their stops reach the drain (by stop callback).
fn kernels(secs: u64) -> Vec<Kernel> {
    let colls = secs * 1_000_000_000 / COLL_EVERY_NS;
    let mut out = Vec::with_capacity((colls * CHANNELS) as usize);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    for i in 0..colls {
        let t = HOST0 + i * COLL_EVERY_NS;
        for _ in 0..CHANNELS {
            let start = t + rand(2_000);
            let stop = start + 8_000 + rand(32_000);
            out.push((
                gpu_of(start),
                start + 2_000 + rand(48_000),
                gpu_of(stop),
                stop + 2_000 + rand(48_000),
            ));
        }
    }
    out.sort_by_key(|k| k.3);
    out
}

/// ns per kernel for `f` over `ks`.
fn time(ks: &[Kernel], mut f: impl FnMut(&Kernel) -> (u64, u64)) -> f64 {
    let t0 = Instant::now();
    let mut sum = 0u64;
    for k in ks {
        let (s, e) = f(black_box(k));
        sum = sum.wrapping_add(s ^ e);
    }
    black_box(sum);
    t0.elapsed().as_nanos() as f64 / ks.len() as f64
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("gpuclock: bench");
        return;
    }
    let quick = !std::env::args().any(|a| a == "--bench");
    let rounds: usize = std::env::var("GPUCLOCK_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 5 });
    let ks = kernels(if quick { 2 } else { 10 });
    // The first second's kernels: the clock has no line yet.
    let first_second = ks.partition_point(|k| k.3 < HOST0 + 1_000_000_000);
    let (unfitted, fitted) = ks.split_at(first_second);
    let fixed = OFFSET as u64;
    let mut base = Vec::new();
    let mut first = Vec::new();
    let mut rest = Vec::new();
    for _ in 0..rounds {
        base.push(time(&ks, |&(rs, _, re, cb)| {
            (rs - fixed, (re - fixed).min(cb))
        }));
        let mut c = GpuClock::new(0.0);
        let mut conv = |&(rs, cs, re, ce): &Kernel| {
            c.observe(cs, rs);
            c.observe(ce, re);
            c.convert_span(rs, cs, re, ce)
        };
        first.push(time(unfitted, &mut conv));
        rest.push(time(fitted, &mut conv));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (b, f, r) = (median(&mut base), median(&mut first), median(&mut rest));
    println!(
        "gpuclock: {} kernel channels per round ({} in the first second), median of {rounds} rounds",
        ks.len(),
        unfitted.len()
    );
    println!("| path | ns per kernel channel | vs baseline |");
    println!("|---|---:|---:|");
    println!("| baseline: a fixed offset | {b:.2} | 1.00× |");
    println!("| first second (no line yet) | {f:.2} | {:.2}× |", f / b);
    println!("| after it (line fitted) | {r:.2} | {:.2}× |", r / b);
}
