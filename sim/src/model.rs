//! The workload model: which calls each rank makes, their tasks and proxy operations, and the
//! virtual-time plan (bandwidth + latency) shared by every process of a job.

use crate::config::{SimConfig, Workload};
use crate::plugin::{Dtype, Func, Proto};
use crate::rng::unit;

/// What one API call (group) of the workload does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    SendRecv,
    AlltoAll,
}

impl CallKind {
    pub fn is_p2p(self) -> bool {
        matches!(self, CallKind::SendRecv | CallKind::AlltoAll)
    }
}

/// The call kinds of one iteration position list for a workload.
pub fn kinds(w: Workload) -> Vec<CallKind> {
    match w {
        Workload::Allreduce => vec![CallKind::AllReduce],
        Workload::Allgather => vec![CallKind::AllGather],
        Workload::Reducescatter => vec![CallKind::ReduceScatter],
        Workload::Broadcast => vec![CallKind::Broadcast],
        Workload::Sendrecv => vec![CallKind::SendRecv],
        Workload::Alltoall => vec![CallKind::AlltoAll],
        Workload::Mixed => vec![
            CallKind::AllReduce,
            CallKind::AllGather,
            CallKind::ReduceScatter,
            CallKind::Broadcast,
            CallKind::SendRecv,
            CallKind::AlltoAll,
        ],
    }
}

/// One ProxyOp of a task.
#[derive(Clone, Debug)]
pub struct ProxySpec {
    pub channel: u8,
    pub peer: i32,
    pub is_send: bool,
    pub nsteps: u32,
    pub chunk: u32,
    /// Total bytes through this connection (sum of step sizes).
    pub total: u64,
    pub network: bool,
}

impl ProxySpec {
    /// Bytes of transfer `i`.
    pub fn step_bytes(&self, i: u32) -> u64 {
        let n = self.nsteps.max(1) as u64;
        self.total / n + u64::from((i as u64) < self.total % n)
    }
}

/// One API-level call inside the group (CollApi or P2pApi).
#[derive(Clone, Debug)]
pub struct ApiSpec {
    pub func: Func,
    pub p2p: bool,
    pub count: u64,
    pub dtype: Dtype,
    pub root: i32,
}

/// One Coll/P2p task.
#[derive(Clone, Debug)]
pub struct TaskSpec {
    pub p2p: bool,
    pub func: Func,
    /// Index into the call's `api` list of the API call this task came from.
    pub api: usize,
    pub count: u64,
    pub dtype: Dtype,
    pub bytes: u64,
    pub root: i32,
    pub peer: i32,
    pub proto: Proto,
    pub channels: Vec<u8>,
    pub proxies: Vec<ProxySpec>,
    pub ce: bool,
    pub traffic: u64,
}

/// One call (group) on one communicator of one rank.
#[derive(Clone, Debug)]
pub struct CallSpec {
    pub kind: CallKind,
    pub size: u64,
    pub api: Vec<ApiSpec>,
    pub tasks: Vec<TaskSpec>,
}

/// Channel count, protocol and max transfer size for a call.
fn geometry(cfg: &SimConfig, kind: CallKind, size: u64) -> (u64, Proto, u64) {
    let proto = if size < 64 << 10 {
        Proto::Ll
    } else if size < 2 << 20 {
        Proto::Ll128
    } else {
        Proto::Simple
    };
    let step = match proto {
        Proto::Ll => 32 << 10,
        Proto::Ll128 => 128 << 10,
        Proto::Simple => 512 << 10,
    };
    let nch = if kind.is_p2p() {
        if size < 64 << 10 {
            1
        } else {
            cfg.channels.min(2)
        }
    } else {
        size.div_ceil(64 << 10).clamp(1, cfg.channels)
    };
    (nch, proto, step)
}

/// (nsteps, chunk, total bytes) of one ring connection of a collective.
fn ring_conn(bytes_per_ch: u64, n: u64, k_per_loop: u64, step: u64) -> (u32, u32, u64) {
    let chunk = bytes_per_ch.div_ceil(n).clamp(1, step);
    let loops = bytes_per_ch.div_ceil(n * chunk).max(1);
    let nsteps = (loops * k_per_loop).max(1);
    let total = (k_per_loop * bytes_per_ch.div_ceil(n)).max(nsteps);
    (nsteps.min(u32::MAX as u64) as u32, chunk as u32, total)
}

fn p2p_conn(bytes_per_ch: u64, step: u64) -> (u32, u32, u64) {
    let chunk = bytes_per_ch.clamp(1, step);
    let nsteps = bytes_per_ch.div_ceil(chunk).max(1);
    (nsteps as u32, chunk as u32, bytes_per_ch.max(1))
}

fn pair_hash(seed: u64, a: u64, b: u64) -> u64 {
    crate::rng::hash(&[seed, 0x1a7, a.min(b), a.max(b)])
}

/// The pair hash below which a pair is non-network: the `round(fraction × pairs)`-th lowest
/// (0: none). Computed once per (seed, ranks, fraction).
fn non_network_cut(seed: u64, ranks: u64, fraction: f64) -> u64 {
    use std::sync::Mutex;
    /// (seed, ranks, fraction's bits) and its cut.
    type Entry = ((u64, u64, u64), u64);
    static CACHE: Mutex<Option<Entry>> = Mutex::new(None);
    let key = (seed, ranks, fraction.to_bits());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, cut)) = *cache
        && k == key
    {
        return cut;
    }
    let mut hashes: Vec<u64> = (0..ranks)
        .flat_map(|a| (a + 1..ranks).map(move |b| (a, b)))
        .map(|(a, b)| pair_hash(seed, a, b))
        .collect();
    let k = (fraction.clamp(0.0, 1.0) * hashes.len() as f64).round() as usize;
    let cut = if k == 0 {
        0
    } else if k >= hashes.len() {
        u64::MAX
    } else {
        *hashes.select_nth_unstable(k).1
    };
    *cache = Some((key, cut));
    cut
}

/// Builds the call `k` (at iteration position `kind`, message `size`) of `rank`, the same on
/// every communicator.
pub fn call_spec(cfg: &SimConfig, rank: usize, k: u64, kind: CallKind, size: u64) -> CallSpec {
    let n = cfg.ranks as u64;
    let r = rank as u64;
    if n < 2 || size == 0 {
        // single-rank communicators and empty messages emit nothing, not even CollApi
        return CallSpec {
            kind,
            size,
            api: vec![],
            tasks: vec![],
        };
    }
    let (nch, proto, step) = geometry(cfg, kind, size);
    let intra = cfg.intra_fraction();
    let seed = cfg.seed;
    // A pair's transport follows the topology, chosen at init: the same both ways, on every
    // channel and in every communicator, as in NCCL. The non-network ones modelled here are
    // those that still post proxy ops (P2P or SHM over cudaMemcpy, CollNet: spec §4.6): their
    // ProxyOps start, never progress, never stop, and report `isSend` 0, so they key as a
    // receive from their peer. (Chosen per call, a network receive progressing on the same
    // peer and channel made the plugin take such an op for one queued behind it, holding its
    // collective "in flight" for the completion timeout, past the viewer's 1 s hang floor: the
    // demo showed every rank HUNG.) Exactly round(fraction × pairs) pairs are non-network,
    // those with the lowest hash (no node model): a 2-rank job at 0.1 keeps its one pair on
    // the network (drawn per pair, it lost it under some seeds, and the demo's proxy view was
    // empty).
    let cut = non_network_cut(seed, n, intra);
    let network = |peer: u64| -> bool { pair_hash(seed, r, peer) >= cut };
    let ce = cfg.ce
        && cfg.api.unwrap_or(6) >= 6
        && matches!(kind, CallKind::AllGather | CallKind::AlltoAll);
    let dt = |bytes: u64| {
        if bytes >= 4 && bytes.is_multiple_of(4) {
            Dtype::Float32
        } else {
            Dtype::Int8
        }
    };
    let mut api = Vec::new();
    let mut tasks = Vec::new();
    let ring_peers = |c: u64| {
        if c.is_multiple_of(2) {
            ((r + 1) % n, (r + n - 1) % n)
        } else {
            ((r + n - 1) % n, (r + 1) % n)
        }
    };
    match kind {
        CallKind::AllReduce
        | CallKind::AllGather
        | CallKind::ReduceScatter
        | CallKind::Broadcast => {
            let func = match kind {
                CallKind::AllReduce => Func::AllReduce,
                CallKind::AllGather => Func::AllGather,
                CallKind::ReduceScatter => Func::ReduceScatter,
                _ => Func::Broadcast,
            };
            let d = dt(size);
            let root = if kind == CallKind::Broadcast {
                (k % n) as i32
            } else {
                0
            };
            // user count (CollApi) and reported count (Coll; bytes for AllGather/Broadcast).
            let (ucount, count, cdt) = match kind {
                CallKind::AllReduce => (size / d.size(), size / d.size(), d),
                CallKind::AllGather => (size / n / d.size(), size / n, Dtype::Int8),
                CallKind::ReduceScatter => (size / n / d.size(), size / n / d.size(), d),
                _ => (size / d.size(), size, Dtype::Int8),
            };
            api.push(ApiSpec {
                func,
                p2p: false,
                count: ucount.max(1),
                dtype: d,
                root,
            });
            let mut proxies = Vec::new();
            let per_ch = size.div_ceil(nch);
            if !ce {
                for c in 0..nch {
                    let (next, prev) = ring_peers(c);
                    let mut push = |peer: u64, is_send: bool, (ns, ch, tot): (u32, u32, u64)| {
                        let net = network(peer);
                        proxies.push(ProxySpec {
                            channel: c as u8,
                            peer: peer as i32,
                            is_send: is_send && net,
                            nsteps: ns,
                            chunk: ch,
                            total: tot,
                            network: net,
                        });
                    };
                    if n < 2 {
                        continue;
                    }
                    match kind {
                        CallKind::Broadcast => {
                            let dir_pos = if c.is_multiple_of(2) {
                                (r + n - root as u64) % n
                            } else {
                                (root as u64 + n - r) % n
                            };
                            let g = p2p_conn(per_ch, step);
                            if dir_pos != 0 {
                                push(prev, false, g);
                            }
                            if dir_pos != n - 1 {
                                push(next, true, g);
                            }
                        }
                        _ => {
                            let kl = if kind == CallKind::AllReduce {
                                2 * (n - 1)
                            } else {
                                n - 1
                            };
                            let g = ring_conn(per_ch, n, kl, step);
                            push(prev, false, g);
                            push(next, true, g);
                        }
                    }
                }
            }
            tasks.push(TaskSpec {
                p2p: false,
                func,
                api: 0,
                count: count.max(1),
                dtype: cdt,
                bytes: size,
                root,
                peer: -1,
                proto,
                channels: if ce { vec![] } else { (0..nch as u8).collect() },
                proxies,
                ce,
                traffic: size,
            });
        }
        CallKind::AlltoAll if ce => {
            let d = dt(size);
            api.push(ApiSpec {
                func: Func::AlltoAll,
                p2p: false,
                count: (size / n / d.size()).max(1),
                dtype: d,
                root: 0,
            });
            tasks.push(TaskSpec {
                p2p: false,
                func: Func::AlltoAll,
                api: 0,
                count: (size / n).max(1),
                dtype: Dtype::Int8,
                bytes: size,
                root: 0,
                peer: -1,
                proto,
                channels: vec![],
                proxies: vec![],
                ce: true,
                traffic: size,
            });
        }
        CallKind::SendRecv | CallKind::AlltoAll => {
            let per_peer = if kind == CallKind::AlltoAll {
                (size / n).max(1)
            } else {
                size
            };
            let d = dt(per_peer);
            let mut pairs: Vec<(Func, u64)> = Vec::new();
            if kind == CallKind::SendRecv {
                pairs.push((Func::Send, (r + 1) % n));
                pairs.push((Func::Recv, (r + n - 1) % n));
            } else {
                for delta in 1..n {
                    pairs.push((Func::Send, (r + delta) % n));
                    pairs.push((Func::Recv, (r + n - delta) % n));
                }
            }
            if n < 2 {
                pairs.clear();
            }
            for (ti, (func, peer)) in pairs.into_iter().enumerate() {
                let delta = (peer + n - r) % n;
                api.push(ApiSpec {
                    func,
                    p2p: true,
                    count: per_peer / d.size(),
                    dtype: d,
                    root: 0,
                });
                let per_ch = per_peer.div_ceil(nch);
                let g = p2p_conn(per_ch, step);
                let base = (delta * nch) % cfg.channels;
                let channels: Vec<u8> = (0..nch)
                    .map(|i| ((base + i) % cfg.channels) as u8)
                    .collect();
                let proxies = channels
                    .iter()
                    .map(|&c| {
                        let net = network(peer);
                        ProxySpec {
                            channel: c,
                            peer: peer as i32,
                            is_send: func == Func::Send && net,
                            nsteps: g.0,
                            chunk: g.1,
                            total: g.2,
                            network: net,
                        }
                    })
                    .collect();
                tasks.push(TaskSpec {
                    p2p: true,
                    func,
                    api: ti,
                    count: per_peer / d.size(),
                    dtype: d,
                    bytes: per_peer,
                    root: 0,
                    peer: peer as i32,
                    proto,
                    channels,
                    proxies,
                    ce: false,
                    traffic: per_peer,
                });
            }
        }
    }
    CallSpec {
        kind,
        size,
        api,
        tasks,
    }
}

/// Host-side virtual costs, ns.
pub const HOST_GAP_NS: f64 = 3_000.0;
pub const ENQUEUE_NS: f64 = 4_000.0;
pub const LAUNCH_NS: f64 = 4_000.0;

/// The plan of one call on one communicator, for every rank (virtual ns from the job origin).
#[derive(Clone, Debug)]
pub struct Row {
    pub iter: u64,
    /// Position in the iteration.
    pub pos: usize,
    pub comm: usize,
    /// Call index on the communicator.
    pub k: u64,
    pub kind: CallKind,
    pub size: u64,
    /// App arrival (start of the API call) per rank.
    pub arrive: Vec<f64>,
    /// Kernel start per rank.
    pub kstart: Vec<f64>,
    /// Data-flow start (all participants there).
    pub s: f64,
    /// Transfer duration per channel id.
    pub d_ch: Vec<f64>,
    /// Kernel end per rank.
    pub end: Vec<f64>,
    /// Ranks taking part (not hung or dead before this call).
    pub live: Vec<u32>,
}

/// Computes rows in job order (iteration, position, communicator); every process computes
/// the same plan, so cross-rank waits need no communication.
pub struct Planner {
    cfg: SimConfig,
    kinds: Vec<CallKind>,
    g: u64,
    app: Vec<f64>,
    last_end: Vec<Vec<f64>>,
    gone: Vec<bool>,
}

impl Planner {
    pub fn new(cfg: &SimConfig) -> Planner {
        Planner {
            cfg: cfg.clone(),
            kinds: kinds(cfg.workload),
            g: 0,
            app: vec![0.0; cfg.ranks],
            last_end: vec![vec![0.0; cfg.ranks]; cfg.comms],
            gone: vec![false; cfg.ranks],
        }
    }

    /// Calls per iteration on one communicator.
    pub fn calls_per_iter(&self) -> usize {
        self.kinds.len() * self.cfg.sizes.0.len()
    }

    /// Adds host time to every rank's app clock (graph capture).
    pub fn advance_app(&mut self, ns: f64) {
        for a in &mut self.app {
            *a += ns;
        }
    }

    /// The next row.
    pub fn next_row(&mut self) -> Row {
        let cfg = &self.cfg;
        let per_iter = self.calls_per_iter() as u64;
        let comms = cfg.comms as u64;
        let g = self.g;
        self.g += 1;
        let comm = (g % comms) as usize;
        let pos_all = g / comms;
        let iter = pos_all / per_iter;
        let pos = (pos_all % per_iter) as usize;
        let k = pos_all;
        let kind = self.kinds[pos % self.kinds.len()];
        let size = cfg.sizes.0[pos / self.kinds.len()];
        let n = cfg.ranks;
        let seed = cfg.seed;
        let mut arrive = vec![0.0; n];
        let mut kstart = vec![0.0; n];
        for r in 0..n {
            let jitter = 1_000.0 * unit(&[seed, 0xa77, g, r as u64]);
            let strag: f64 = cfg
                .straggler
                .iter()
                .filter(|s| s.rank == r)
                .map(|s| s.delay_ns as f64)
                .sum();
            let a = (self.app[r] + HOST_GAP_NS + jitter).max(self.last_end[comm][r]) + strag;
            arrive[r] = a;
            self.app[r] = a + ENQUEUE_NS;
            kstart[r] = (a + ENQUEUE_NS + LAUNCH_NS).max(self.last_end[comm][r]);
        }
        // A rank absent from this call (--absent) never arrives: its peers wait for it in
        // vain (their op hangs), and none of them waits for it to arrive.
        for h in &cfg.absent {
            if comm == 0 && h.seq == k && h.rank < n {
                self.gone[h.rank] = true;
            }
        }
        let live: Vec<u32> = (0..n)
            .filter(|&r| !self.gone[r])
            .map(|r| r as u32)
            .collect();
        let s = (0..n)
            .filter(|&r| !self.gone[r])
            .map(|r| kstart[r])
            .fold(0.0f64, f64::max);
        // durations per channel
        let (nch, _, step) = geometry(cfg, kind, size);
        let nn = n as u64;
        let bw = (cfg.bw_gbps.max(1e-6) * 1e9 / 8.0) / 1e9; // bytes per ns per rank
        let (conn_bytes, hops): (f64, f64) = match kind {
            CallKind::AllReduce => {
                let pc = size.div_ceil(nch);
                let (ns, _, tot) = ring_conn(pc, nn.max(2), 2 * (nn.max(2) - 1), step);
                (tot as f64, (2 * (nn.max(2) - 1)).min(ns as u64) as f64)
            }
            CallKind::AllGather | CallKind::ReduceScatter => {
                let pc = size.div_ceil(nch);
                let (ns, _, tot) = ring_conn(pc, nn.max(2), nn.max(2) - 1, step);
                (tot as f64, (nn.max(2) - 1).min(ns as u64) as f64)
            }
            CallKind::Broadcast => (size.div_ceil(nch) as f64, (nn.max(2) - 1) as f64),
            CallKind::SendRecv => (size.div_ceil(nch) as f64, 1.0),
            CallKind::AlltoAll => (
                ((nn.max(2) - 1) * (size / nn.max(1)).max(1)).div_ceil(nch) as f64,
                1.0,
            ),
        };
        let lat = cfg.latency_us * 1e3;
        let d_ch: Vec<f64> = (0..cfg.channels as usize)
            .map(|c| {
                let slow: f64 = cfg
                    .slow_channel
                    .iter()
                    .filter(|s| s.channel == c)
                    .map(|s| s.factor.max(0.01))
                    .product();
                let jit = 0.97 + 0.06 * unit(&[seed, 0xd00, comm as u64, k, c as u64]);
                ((lat * (hops + 1.0)) + conn_bytes / (bw / nch as f64)) * slow * jit
            })
            .collect();
        let dmax = (0..nch as usize).map(|c| d_ch[c]).fold(0.0f64, f64::max);
        let mut end = vec![0.0; n];
        for r in 0..n {
            end[r] = s.max(kstart[r]) + dmax * 1.25 + 500.0 * unit(&[seed, 0xe4d, g, r as u64]);
            self.last_end[comm][r] = end[r];
        }
        // ranks that stop participating after this call: a hung one, and every rank of a
        // call some rank is absent from (they all wait in it)
        for h in &cfg.hang {
            if comm == 0 && h.seq == k && h.rank < n {
                self.gone[h.rank] = true;
            }
        }
        if comm == 0 && cfg.absent.iter().any(|h| h.seq == k) {
            self.gone.iter_mut().for_each(|g| *g = true);
        }
        if let Some(d) = cfg.die
            && comm == 0
            && d.seq == k
            && d.rank < n
        {
            {
                // the whole process of that rank goes away
                for i in 0..cfg.procs.max(1) {
                    let rr = cfg.ranks_of_proc(i);
                    if rr.contains(&d.rank) {
                        for x in rr {
                            self.gone[x] = true;
                        }
                    }
                }
            }
        }
        Row {
            iter,
            pos,
            comm,
            k,
            kind,
            size,
            arrive,
            kstart,
            s,
            d_ch,
            end,
            live,
        }
    }
}

#[cfg(test)]
mod transport_tests {
    use super::*;

    fn non_network_pairs(seed: u64, n: u64, f: f64) -> usize {
        let cut = non_network_cut(seed, n, f);
        (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter(|&(a, b)| pair_hash(seed, a, b) < cut)
            .count()
    }

    /// Exactly round(fraction × pairs) pairs, whatever the seed: a 2-rank demo keeps its one
    /// pair on the network at the mixed workload's 0.1.
    #[test]
    fn the_fraction_of_non_network_pairs_is_exact() {
        for seed in 0..20 {
            assert_eq!(non_network_pairs(seed, 2, 0.1), 0);
            assert_eq!(non_network_pairs(seed, 8, 0.1), 3, "28 pairs");
            assert_eq!(non_network_pairs(seed, 4, 0.5), 3, "6 pairs");
            assert_eq!(non_network_pairs(seed, 4, 0.0), 0);
            assert_eq!(non_network_pairs(seed, 4, 1.0), 6);
        }
    }
}
