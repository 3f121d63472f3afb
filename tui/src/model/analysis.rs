//! Pure analysis over query rows: bandwidth, percentiles, stragglers, hangs, proxy bottlenecks,
//! channel imbalance, size buckets. Exact numbers, tested without any screen.

use std::collections::BTreeMap;

use ncclprof_shared::kind::{StepPhase, busbw_factor};

/// Bytes per element of an NCCL datatype name.
pub fn dtype_size(name: &str) -> u64 {
    match name {
        "ncclInt8" | "ncclUint8" | "ncclFloat8e4m3" | "ncclFloat8e5m2" | "ncclChar" => 1,
        "ncclFloat16" | "ncclBfloat16" | "ncclHalf" => 2,
        "ncclInt32" | "ncclUint32" | "ncclFloat32" | "ncclInt" | "ncclFloat" => 4,
        "ncclInt64" | "ncclUint64" | "ncclFloat64" | "ncclDouble" => 8,
        _ => 1,
    }
}

/// The size S nccl-tests divides by time for algbw: per-rank counts × n for the gather/scatter
/// family (NCCL reports per-rank counts), the buffer otherwise.
pub fn op_bytes(func: &str, dtype: &str, count: u64, nranks: u32) -> u64 {
    let elt = count.saturating_mul(dtype_size(dtype));
    match func {
        "AllGather" | "ReduceScatter" | "AlltoAll" | "Gather" | "Scatter" => {
            elt.saturating_mul(u64::from(nranks.max(1)))
        }
        _ => elt,
    }
}

/// Algorithm bandwidth in GB/s (GB = 1e9 bytes).
pub fn algbw(bytes: u64, dur_ns: u64) -> f64 {
    if dur_ns == 0 {
        return 0.0;
    }
    bytes as f64 / dur_ns as f64
}

/// Bus bandwidth in GB/s: algbw × nccl-tests' factor.
pub fn busbw(func: &str, nranks: u32, algbw: f64) -> f64 {
    algbw * busbw_factor(func, nranks)
}

/// Nearest-rank percentile of sorted values (`q` in 0..=1); 0 for no values.
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median (nearest-rank p50) of unsorted values.
pub fn median(values: &[u64]) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    Some(percentile(&v, 0.5))
}

/// The last rank to arrive at one collective instance and how late it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Straggler {
    pub rank: i32,
    /// Its start minus the median start of the other ranks.
    pub lag_ns: u64,
    /// Its start.
    pub at_ns: u64,
}

/// A straggler's lag must exceed this…
pub const STRAGGLER_MIN_NS: u64 = 10_000;
/// …and this fraction of the instance's median duration, so that jitter is not flagged.
pub const STRAGGLER_MIN_FRACTION: f64 = 0.1;

/// One collective instance of a communicator: its function and sequence number. NCCL numbers
/// each function's collectives separately (spec §4.14): AllGather 7 and ReduceScatter 7 of an
/// FSDP step are two instances, and were compared as one when keyed by the number alone.
pub type CollKey<'a> = (&'a str, u64);

/// The stragglers of a window, by collective instance.
pub type Stragglers<'a> = BTreeMap<CollKey<'a>, Straggler>;

/// Per collective instance, the last rank to start, given (rank, instance, start, duration)
/// of each rank's op: for instances seen on at least two ranks whose last arrival lags the
/// median start of the others by more than [`STRAGGLER_MIN_NS`] and
/// [`STRAGGLER_MIN_FRACTION`] of the median duration.
pub fn stragglers<'a>(rows: &[(i32, CollKey<'a>, u64, u64)]) -> Stragglers<'a> {
    let mut by_key: BTreeMap<CollKey<'a>, Vec<(u64, i32, u64)>> = BTreeMap::new();
    for &(rank, key, start, dur) in rows {
        by_key.entry(key).or_default().push((start, rank, dur));
    }
    let mut out = BTreeMap::new();
    for (key, mut v) in by_key {
        if v.len() < 2 {
            continue;
        }
        v.sort_unstable();
        let Some(&(last, rank, _)) = v.last() else {
            continue;
        };
        let others: Vec<u64> = v[..v.len() - 1].iter().map(|x| x.0).collect();
        let med = percentile(&others, 0.5);
        let durs: Vec<u64> = v.iter().map(|x| x.2).collect();
        let med_dur = median(&durs).unwrap_or(0);
        let lag = last - med;
        let min = STRAGGLER_MIN_NS.max((med_dur as f64 * STRAGGLER_MIN_FRACTION) as u64);
        if lag > min {
            out.insert(
                key,
                Straggler {
                    rank,
                    lag_ns: lag,
                    at_ns: last,
                },
            );
        }
    }
    out
}

/// Who was late most often among the collectives of a window that had a straggler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StragglerSummary {
    pub rank: i32,
    /// Collectives at which it arrived last…
    pub times: usize,
    /// …of this many that had a straggler.
    pub of: usize,
    /// Its median lag at those.
    pub median_lag_ns: u64,
}

/// The rank that arrived last most often in `stragglers` (ties: the one late most recently).
/// The banner names it, not the latest collective's straggler: a rank that is always late
/// stays named while an occasional other one comes and goes.
pub fn straggler_summary(stragglers: &Stragglers<'_>) -> Option<StragglerSummary> {
    let mut by_rank: BTreeMap<i32, (usize, u64, Vec<u64>)> = BTreeMap::new();
    for st in stragglers.values() {
        let e = by_rank.entry(st.rank).or_default();
        e.0 += 1;
        e.1 = e.1.max(st.at_ns);
        e.2.push(st.lag_ns);
    }
    let (rank, (times, _, lags)) = by_rank
        .into_iter()
        .max_by_key(|(_, (n, latest, _))| (*n, *latest))?;
    Some(StragglerSummary {
        rank,
        times,
        of: stragglers.len(),
        median_lag_ns: median(&lags).unwrap_or(0),
    })
}

/// Minimum age before an in-flight op can be called hung.
pub const HUNG_MIN_NS: u64 = 1_000_000_000;
/// How many times the peers' median duration an op must exceed to be hung.
pub const HUNG_FACTOR: u64 = 10;
/// Without any completed peer op to compare with, the age that makes an op hung.
pub const HUNG_NO_PEERS_NS: u64 = 5_000_000_000;

/// An op's run time as nccl-tests would time it: from its execution start (its first
/// kernel, else its first proxy op's progress) to its end, where known; else from its start.
/// An op enqueued behind others waits before it runs (PyTorch enqueues ahead): 200
/// all-reduces queued at once on a real job read 684 ms each from their start, 6.8 ms run.
/// The stats time ops by it, and hang verdicts compare against medians of it.
pub fn run_time(start: u64, end: u64, exec_start: u64) -> u64 {
    let from = if exec_start > start && exec_start < end {
        exec_start
    } else {
        start
    };
    end.saturating_sub(from)
}

/// Whether an op in flight for `age_ns` is hung, given the median time of the same function
/// on its communicator (None = none completed yet), both measured the same way: an op that
/// started to run, from its execution start against the median run time ([`run_time`]);
/// one that has not, from its start against the median time from start to end.
pub fn is_hung(age_ns: u64, peer_median_ns: Option<u64>) -> bool {
    match peer_median_ns {
        Some(m) => age_ns > HUNG_MIN_NS && age_ns > m.saturating_mul(HUNG_FACTOR),
        None => age_ns > HUNG_NO_PEERS_NS,
    }
}

/// What a proxy phase waits on.
pub fn phase_category(p: StepPhase) -> &'static str {
    match p {
        StepPhase::SendNetWait | StepPhase::RecvNetWait => "network",
        StepPhase::SendGpuWait | StepPhase::RecvGpuWait | StepPhase::RecvFlushWait => "GPU",
        StepPhase::SendPeerWait => "peer",
    }
}

/// The dominant phase of a breakdown and its category (None if all zero).
pub fn bottleneck(phases: &[(StepPhase, u64)]) -> Option<(StepPhase, &'static str)> {
    phases
        .iter()
        .filter(|p| p.1 > 0)
        .max_by_key(|p| p.1)
        .map(|p| (p.0, phase_category(p.0)))
}

/// Min, mean, max and imbalance (max / mean) of per-channel durations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
    pub imbalance: f64,
}

pub fn spread(values: &[u64]) -> Option<Spread> {
    if values.is_empty() {
        return None;
    }
    let min = *values.iter().min()?;
    let max = *values.iter().max()?;
    let mean = values.iter().sum::<u64>() as f64 / values.len() as f64;
    Some(Spread {
        min,
        mean,
        max,
        imbalance: if mean > 0.0 { max as f64 / mean } else { 0.0 },
    })
}

/// Size bucket: powers of four, `[lo, hi)`; 0 bytes → (0, 1).
pub fn size_bucket(bytes: u64) -> (u64, u64) {
    if bytes == 0 {
        return (0, 1);
    }
    let lg = 63 - bytes.leading_zeros();
    let lo_lg = lg - lg % 2;
    let lo = 1u64 << lo_lg;
    let hi = lo.saturating_mul(4);
    (lo, hi)
}

/// One completed op as the stats table sees it.
#[derive(Debug, Clone)]
pub struct OpSample<'a> {
    pub func: &'a str,
    pub bytes: u64,
    pub dur_ns: u64,
    pub algo: &'a str,
    pub proto: &'a str,
}

/// One row of the stats table.
#[derive(Debug, Clone, PartialEq)]
pub struct StatRow {
    pub func: String,
    pub bucket: (u64, u64),
    pub count: usize,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub mean: f64,
    /// From the mean duration and the mean size (nccl-tests averages time).
    pub algbw: f64,
    pub busbw: f64,
    pub algos: Vec<String>,
    pub protos: Vec<String>,
}

/// Group samples by function and size bucket.
pub fn stats<'a>(samples: &[OpSample<'a>], nranks: u32) -> Vec<StatRow> {
    let mut groups = StatGroups::default();
    for s in samples {
        groups.add(s);
    }
    groups.rows(nranks)
}

/// Samples grouped by function and size bucket as they come ([`stats`] without the slice of
/// samples): a frame of the Stats view over a 64-rank window samples 131 072 ops, 8 MiB of
/// [`OpSample`]s collected first, over the viewer's mmap threshold (`tune_allocator`), so
/// mapped and faulted in again every frame. A group keeps only the durations (8 bytes each).
#[derive(Default)]
pub struct StatGroups<'a> {
    /// (function, bucket's low bound) → its samples.
    groups: BTreeMap<(&'a str, u64), StatGroup<'a>>,
}

/// One row's samples.
#[derive(Default)]
struct StatGroup<'a> {
    durations: Vec<u64>,
    bytes: u64,
    algos: Vec<&'a str>,
    protos: Vec<&'a str>,
    /// The ops the samples stand for (`StatGroups::add_sample`).
    stands_for: f64,
}

impl<'a> StatGroups<'a> {
    /// One op.
    pub fn add(&mut self, s: &OpSample<'a>) {
        self.add_sample(s, 1.0);
    }

    /// One op sampled from `stands_for` ops (its lane's `Store::ops_strided`): the row's
    /// count is what the samples stand for; times and bandwidths are the samples'.
    pub fn add_sample(&mut self, s: &OpSample<'a>, stands_for: f64) {
        let b = size_bucket(s.bytes);
        let g = self.groups.entry((s.func, b.0)).or_default();
        g.stands_for += stands_for;
        g.durations.push(s.dur_ns);
        g.bytes += s.bytes;
        if !s.algo.is_empty() && !g.algos.contains(&s.algo) {
            g.algos.push(s.algo);
        }
        if !s.proto.is_empty() && !g.protos.contains(&s.proto) {
            g.protos.push(s.proto);
        }
    }

    /// One row per group, by function then size.
    pub fn rows(self, nranks: u32) -> Vec<StatRow> {
        self.groups
            .into_iter()
            .map(|((func, lo), g)| {
                let mut durs = g.durations;
                durs.sort_unstable();
                let n = durs.len();
                let mean = durs.iter().sum::<u64>() as f64 / n as f64;
                let mean_bytes = g.bytes as f64 / n as f64;
                let alg = if mean > 0.0 { mean_bytes / mean } else { 0.0 };
                StatRow {
                    busbw: busbw(func, nranks, alg),
                    func: func.to_string(),
                    bucket: size_bucket(lo),
                    count: g.stands_for.round() as usize,
                    p50: percentile(&durs, 0.5),
                    p99: percentile(&durs, 0.99),
                    max: *durs.last().unwrap_or(&0),
                    mean,
                    algbw: alg,
                    algos: g.algos.into_iter().map(str::to_string).collect(),
                    protos: g.protos.into_iter().map(str::to_string).collect(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row counts what its samples stand for, lanes read whole and lanes sampled alike;
    /// its times are the samples'.
    #[test]
    fn a_rows_count_is_what_its_samples_stand_for() {
        let op = |dur_ns| OpSample {
            func: "AllReduce",
            bytes: 1 << 20,
            dur_ns,
            algo: "Ring",
            proto: "LL",
        };
        let mut g = StatGroups::default();
        g.add(&op(10));
        g.add(&op(20));
        g.add_sample(&op(30), 3.5);
        g.add_sample(&op(40), 3.5);
        let rows = g.rows(8);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].count, 9);
        assert_eq!((rows[0].max, rows[0].mean), (40, 25.0));
    }

    #[test]
    fn busbw_matches_nccl_tests_golden() {
        // 8 GiB AllReduce on 16 ranks in 47 535 µs: algbw 180.71, busbw 338.82 GB/s.
        let bytes = op_bytes("AllReduce", "ncclFloat32", 2 * 1024 * 1024 * 1024, 16);
        assert_eq!(bytes, 8 * 1024 * 1024 * 1024);
        let a = algbw(bytes, 47_535_000);
        assert_eq!(format!("{a:.2}"), "180.71");
        // The log prints 338.82 (from the unrounded time); ours is 338.827.
        assert!((busbw("AllReduce", 16, a) - 338.82).abs() < 0.01);
        assert!((busbw("AllReduce", 16, a) - a * 1.875).abs() < 1e-9);
        // AllGather: per-rank bytes × n, factor (n-1)/n.
        let b = op_bytes("AllGather", "ncclInt8", 1 << 20, 8);
        assert_eq!(b, 8 << 20);
        let a = algbw(b, 1_000_000);
        assert!((a - 8.388608).abs() < 1e-9);
        assert!((busbw("AllGather", 8, a) - 8.388608 * 0.875).abs() < 1e-9);
        assert_eq!(algbw(10, 0), 0.0);
    }

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&[7], 0.99), 7);
        assert_eq!(percentile(&[], 0.5), 0);
        assert_eq!(median(&[5, 1, 3]), Some(3));
        assert_eq!(median(&[4, 1, 3, 2]), Some(2));
    }

    #[test]
    fn straggler_is_last_arrival_by_lag_over_median() {
        // seq 1: ranks 0,1,2 at 1000,1010,1005 µs; rank 3 at 3000 µs → lag 1995 µs.
        let us = 1_000;
        let d = 1_000 * us;
        let ar = |seq| ("AllReduce", seq);
        let rows = [
            (0, ar(1), 1000 * us, d),
            (1, ar(1), 1010 * us, d),
            (2, ar(1), 1005 * us, d),
            (3, ar(1), 3000 * us, d),
            (0, ar(2), 5000 * us, d),
            (1, ar(2), 5000 * us, d),
            (2, ar(9), 100 * us, d), // alone: ignored
            // seq 3: 50 µs late on 1 ms ops is jitter (< 10 % of the duration).
            (0, ar(3), 9000 * us, d),
            (1, ar(3), 9050 * us, d),
            // seq 4: 9 µs late on 20 µs ops is under the absolute floor.
            (0, ar(4), 9500 * us, 20 * us),
            (1, ar(4), 9509 * us, 20 * us),
            // AllGather 2 is another collective than AllReduce 2: each on time.
            (0, ("AllGather", 2), 7000 * us, d),
            (1, ("AllGather", 2), 7000 * us, d),
        ];
        let s = stragglers(&rows);
        assert_eq!(
            s.get(&ar(1)),
            Some(&Straggler {
                rank: 3,
                lag_ns: 1995 * us,
                at_ns: 3000 * us
            })
        );
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn the_banner_names_the_rank_late_most_often() {
        let st = |rank, at_ns| Straggler {
            rank,
            lag_ns: if rank == 3 { 2_000 + at_ns } else { 9_000 },
            at_ns,
        };
        let mut s = BTreeMap::new();
        assert_eq!(straggler_summary(&s), None);
        s.insert(("AllReduce", 1), st(3, 0));
        s.insert(("AllReduce", 2), st(3, 100));
        s.insert(("AllGather", 2), st(0, 150));
        s.insert(("AllReduce", 3), st(3, 200));
        // The latest is rank 0's: still rank 3, late at 3 of 5.
        s.insert(("AllGather", 3), st(0, 300));
        assert_eq!(
            straggler_summary(&s),
            Some(StragglerSummary {
                rank: 3,
                times: 3,
                of: 5,
                median_lag_ns: 2_100
            })
        );
        // A tie: the one late most recently.
        s.insert(("AllGather", 4), st(0, 400));
        assert_eq!(straggler_summary(&s).map(|x| x.rank), Some(0));
    }

    #[test]
    fn hang_detection_thresholds() {
        // Median 50 ms: 10× is 500 ms, but the 1 s floor applies.
        assert!(!is_hung(900_000_000, Some(50_000_000)));
        assert!(is_hung(1_100_000_000, Some(50_000_000)));
        // Median 200 ms: needs > 2 s.
        assert!(!is_hung(1_500_000_000, Some(200_000_000)));
        assert!(is_hung(2_000_000_001, Some(200_000_000)));
        // No peers: 5 s.
        assert!(!is_hung(4_000_000_000, None));
        assert!(is_hung(6_000_000_000, None));
    }

    #[test]
    fn bottleneck_and_spread() {
        let ph = [
            (StepPhase::SendGpuWait, 10),
            (StepPhase::SendPeerWait, 300),
            (StepPhase::SendNetWait, 100),
        ];
        assert_eq!(bottleneck(&ph), Some((StepPhase::SendPeerWait, "peer")));
        assert_eq!(bottleneck(&[(StepPhase::RecvNetWait, 0)]), None);
        let s = spread(&[10, 20, 30, 40]).unwrap();
        assert_eq!((s.min, s.max), (10, 40));
        assert_eq!(s.mean, 25.0);
        assert_eq!(s.imbalance, 1.6);
    }

    #[test]
    fn buckets_and_stats() {
        assert_eq!(size_bucket(1), (1, 4));
        assert_eq!(size_bucket(5), (4, 16));
        assert_eq!(size_bucket(1 << 20), (1 << 20, 1 << 22));
        assert_eq!(size_bucket(3 << 20), (1 << 20, 1 << 22));
        let s = |d| OpSample {
            func: "AllReduce",
            bytes: 1 << 20,
            dur_ns: d,
            algo: "RING",
            proto: "SIMPLE",
        };
        let rows = stats(&[s(100_000), s(300_000), s(200_000)], 8);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(
            (r.count, r.p50, r.p99, r.max),
            (3, 200_000, 300_000, 300_000)
        );
        assert!((r.algbw - 1048576.0 / 200_000.0).abs() < 1e-9);
        assert!((r.busbw - r.algbw * 1.75).abs() < 1e-9);
        assert_eq!(r.algos, vec!["RING"]);
    }
}
