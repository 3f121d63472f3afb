//! Command-line / library configuration of a simulated job.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// Collective workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum Workload {
    #[default]
    Allreduce,
    Allgather,
    Reducescatter,
    Broadcast,
    Sendrecv,
    Alltoall,
    Mixed,
}

/// Which network-plugin events steps carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum NetKind {
    /// InfiniBand QP events (id 0x10001, `ncclProfilerNetIbDescr_v1_t`).
    #[default]
    Ib,
    /// Socket events (id 0x20001, `ncclProfilerNetSockDescr_v1_t`).
    Socket,
    /// No network-plugin events (NCCL's default build).
    None,
}

/// `RANK:DURATION`, e.g. `3:2ms`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankDelay {
    pub rank: usize,
    pub delay_ns: u64,
}

/// `CH:FACTOR`, e.g. `5:4.0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChannelFactor {
    pub channel: usize,
    pub factor: f64,
}

/// `RANK:SEQ`, e.g. `3:10`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankSeq {
    pub rank: usize,
    pub seq: u64,
}

/// Message sizes in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizes(pub Vec<u64>);

/// Parses `8`, `64K`, `1M`, `1G` (binary units, optional trailing `B`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches(['B', 'b']);
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1u64 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1u64 << 30),
        _ => (t, 1),
    };
    let v: f64 = num.parse().map_err(|_| format!("bad size '{s}'"))?;
    if v < 0.0 {
        return Err(format!("negative size '{s}'"));
    }
    Ok((v * mul as f64) as u64)
}

fn parse_sizes(s: &str) -> Result<Sizes, String> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        if let Some((a, b)) = part.split_once("..") {
            let (b, f) = match b.split_once(':') {
                Some((b, f)) => (
                    b,
                    f.parse::<u64>()
                        .map_err(|_| format!("bad factor in '{part}'"))?,
                ),
                None => (b, 2),
            };
            let (mut x, hi) = (parse_size(a)?.max(1), parse_size(b)?);
            if f < 2 {
                return Err("sweep factor must be >= 2".into());
            }
            while x <= hi {
                out.push(x);
                x = x.saturating_mul(f);
            }
        } else {
            out.push(parse_size(part)?);
        }
    }
    if out.is_empty() {
        return Err("no sizes".into());
    }
    Ok(Sizes(out))
}

/// Parses `2ms`, `150us`, `3s`, `500ns`; a bare number is milliseconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else {
        (t, 1e6)
    };
    let v: f64 = num.parse().map_err(|_| format!("bad duration '{s}'"))?;
    Ok((v * mul).max(0.0) as u64)
}

fn parse_rank_delay(s: &str) -> Result<RankDelay, String> {
    let (r, d) = s.split_once(':').ok_or("expected RANK:DELAY")?;
    Ok(RankDelay {
        rank: r.parse().map_err(|_| format!("bad rank '{r}'"))?,
        delay_ns: parse_duration_ns(d)?,
    })
}

fn parse_channel_factor(s: &str) -> Result<ChannelFactor, String> {
    let (c, f) = s.split_once(':').ok_or("expected CH:FACTOR")?;
    Ok(ChannelFactor {
        channel: c.parse().map_err(|_| format!("bad channel '{c}'"))?,
        factor: f.parse().map_err(|_| format!("bad factor '{f}'"))?,
    })
}

fn parse_rank_seq(s: &str) -> Result<RankSeq, String> {
    let (r, q) = s.split_once(':').ok_or("expected RANK:SEQ")?;
    Ok(RankSeq {
        rank: r.parse().map_err(|_| format!("bad rank '{r}'"))?,
        seq: q.parse().map_err(|_| format!("bad seq '{q}'"))?,
    })
}

fn parse_api(s: &str) -> Result<u32, String> {
    let t = s.trim().trim_start_matches(['v', 'V']);
    match t.parse::<u32>() {
        Ok(v @ 1..=6) => Ok(v),
        _ => Err(format!("unknown API version '{s}' (v1..v6)")),
    }
}

/// Parses a mask: decimal or 0x-prefixed hex.
fn parse_mask(s: &str) -> Result<i32, String> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => i64::from_str_radix(h, 16),
        None => t.parse::<i64>(),
    }
    .map_err(|_| format!("bad mask '{s}'"))?;
    i32::try_from(v).map_err(|_| format!("mask '{s}' out of range"))
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("bad fraction '{s}'"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err("fraction must be within 0..=1".into())
    }
}

/// Configuration of one simulated NCCL job. Build it with [`SimConfig::default_for`] or
/// `SimConfig::parse_from(["ncclprof-sim", "--plugin", ...])`.
#[derive(Parser, Clone, Debug)]
#[command(
    name = "ncclprof-sim",
    version,
    about = "Fake NCCL core: loads an NCCL profiler plugin and drives it exactly as NCCL does.",
    long_about = "Fake NCCL core: dlopens an NCCL/RCCL profiler plugin (.so) and calls it as NCCL's core \
would, from realistic application, proxy-progress and CUDA-callback threads, with realistic workloads, \
then writes the ground truth of what happened (--truth) so tests can check the plugin.",
    after_help = "ENVIRONMENT:\n  NCCLPROF_SIM_PLUGIN   default for --plugin.\n  NCCLPROF_SIM_EXE      the simulator binary re-spawned for --procs > 1 (default: this executable).\n  NCCL_PROFILE_EVENT_MASK, NCCLPROF_DIR, ... and every other variable are passed untouched to the plugin and to child processes.\n\nMASK: the simulated core's global activation mask starts at --mask (default 0, as in NCCL) and the plugin's init may overwrite it; a do-nothing plugin therefore needs --mask (e.g. --mask 32767) to receive events."
)]
pub struct SimConfig {
    /// Path of the profiler plugin shared library to dlopen (RTLD_NOW|RTLD_LOCAL).
    #[arg(long, env = "NCCLPROF_SIM_PLUGIN")]
    pub plugin: PathBuf,

    /// Profiler API version to drive (v1..v6); default: the newest `ncclProfiler_vN` the plugin exports.
    #[arg(long, value_parser = parse_api)]
    pub api: Option<u32>,

    /// Total number of ranks (GPUs) in the job.
    #[arg(long, default_value_t = 8)]
    pub ranks: usize,

    /// Number of processes; the binary re-spawns itself this many times and splits the ranks evenly.
    #[arg(long, default_value_t = 1)]
    pub procs: usize,

    /// Number of communicators spanning all ranks (each rank gets one context per communicator).
    #[arg(long, default_value_t = 1)]
    pub comms: usize,

    /// Maximum channels per collective (1..=64); small messages use fewer.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub channels: u64,

    /// Workload: allreduce, allgather, reducescatter, broadcast, sendrecv, alltoall, or mixed.
    #[arg(long, value_enum, default_value_t = Workload::Allreduce)]
    pub workload: Workload,

    /// Message sizes: a comma list (8,1M,1G) and/or sweeps A..B (doubling) or A..B:F (factor F).
    #[arg(long, value_parser = parse_sizes, default_value = "1M")]
    pub sizes: Sizes,

    /// Iterations of the workload (each iteration runs every size on every communicator).
    #[arg(long, default_value_t = 10)]
    pub iterations: u64,

    /// Run for this many seconds instead of --iterations; 0 = until SIGTERM/SIGINT (live demo).
    #[arg(long)]
    pub duration: Option<f64>,

    /// Time scale: 0 = as fast as possible (no sleeping, for benchmarks), 1.0 = real time, 2.0 = twice as fast.
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,

    /// Seed of every random choice; the same seed gives the same operation list.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// RANK:DELAY (e.g. 3:2ms): that rank arrives DELAY late to every collective (repeatable).
    #[arg(long, value_parser = parse_rank_delay)]
    pub straggler: Vec<RankDelay>,

    /// CH:FACTOR (e.g. 2:4): transfers on that channel take FACTOR times longer (repeatable).
    #[arg(long, value_parser = parse_channel_factor)]
    pub slow_channel: Vec<ChannelFactor>,

    /// RANK:SEQ: that rank never finishes operation SEQ (call index on communicator 0): its proxy ops stay in progress, its kernels never stop, and its application blocks there until the run ends (--duration, a signal; with --iterations its thread returns and the other ranks finish) (repeatable).
    #[arg(long, value_parser = parse_rank_seq)]
    pub hang: Vec<RankSeq>,

    /// RANK:SEQ: that rank's application never calls operation SEQ (call index on communicator 0), as when it is stuck elsewhere (a data loader, another code path): every other rank runs SEQ and waits there for it, as in --hang (their proxy ops stay in progress, their kernels never stop), and every rank's application blocks there until the run ends. The hang a viewer should trace to that rank (repeatable).
    #[arg(long, value_parser = parse_rank_seq)]
    pub absent: Vec<RankSeq>,

    /// RANK:SEQ: that rank's process exits abruptly with _exit(1) while running operation SEQ (call index on communicator 0), after writing its truth file.
    #[arg(long, value_parser = parse_rank_seq)]
    pub die: Option<RankSeq>,

    /// PXN: each proxy thread also runs ProxyOps of other ranks with a foreign pid and foreign parent/context pointers.
    #[arg(long)]
    pub pxn: bool,

    /// CUDA-graph mode: capture one iteration, then replay it this many times (Coll/P2p re-issued with the stale captured API handles and repeated seq numbers).
    #[arg(long, default_value_t = 0)]
    pub graph_replays: u64,

    /// Non-blocking communicators: KernelLaunch and Group/Coll/P2p run on an NCCL group-job thread, so GroupApi stop may come before them.
    #[arg(long)]
    pub nonblocking: bool,

    /// v6 only: AllGather and AlltoAll run on the copy engine (CollApi -> CeColl -> CeSync/CeBatch, no Coll/ProxyOp/KernelCh).
    #[arg(long)]
    pub ce: bool,

    /// Drift of each simulated GPU clock against CLOCK_MONOTONIC, in parts per million (each GPU gets a random value within +-this).
    #[arg(long, default_value_t = 20.0)]
    pub gpu_drift_ppm: f64,

    /// RCCL mode: KernelCh pTimer values are ticks of a clock at this frequency instead of nanoseconds.
    #[arg(long)]
    pub gpu_ticks_hz: Option<u64>,

    /// Fraction (0..1) of rank pairs joined by a non-network transport that still posts proxy ops (P2P/SHM over cudaMemcpy, CollNet): round(fraction × pairs) pairs, chosen by the seed, the same both ways, on every channel and in every communicator; their ProxyOps are started, never progressed or stopped; default 0, or 0.1 for --workload mixed.
    #[arg(long, value_parser = parse_fraction)]
    pub intra_node: Option<f64>,

    /// Network bandwidth per rank in Gbit/s for the time model.
    #[arg(long, default_value_t = 200.0)]
    pub bw_gbps: f64,

    /// Per-transfer network latency in microseconds for the time model.
    #[arg(long, default_value_t = 5.0)]
    pub latency_us: f64,

    /// Network-plugin events under ProxySteps: ib, socket or none.
    #[arg(long, value_enum, default_value_t = NetKind::Ib)]
    pub net: NetKind,

    /// Initial value (decimal or 0x hex) of the core's global activation mask, before the plugin's init may overwrite it.
    #[arg(long, default_value_t = 0, value_parser = parse_mask)]
    pub mask: i32,

    /// Store this value (decimal or 0x hex) into the global mask after every init, overriding what the plugin wrote.
    #[arg(long, value_parser = parse_mask)]
    pub force_mask: Option<i32>,

    /// Write the JSON ground truth to this file at the end (also on SIGTERM, duration end, or --die).
    #[arg(long)]
    pub truth: Option<PathBuf>,

    /// Record at most this many steps per proxy op in the truth (all are still issued and counted).
    #[arg(long, default_value_t = 64)]
    pub truth_steps: usize,

    /// Do not print the plugin's log lines or the simulator's progress messages.
    #[arg(long)]
    pub quiet: bool,

    /// Never dlclose the plugin after the last finalize.
    #[arg(long)]
    pub keep_loaded: bool,

    /// Internal: index of this child process in a --procs job.
    #[arg(long, hide = true)]
    pub proc_index: Option<usize>,

    /// Internal: CLOCK_MONOTONIC ns of the job's time origin (shared by all processes of a job).
    #[arg(long, hide = true)]
    pub epoch_ns: Option<u64>,

    /// Internal: the arrival-board file shared by the processes of a job.
    #[arg(long, hide = true)]
    pub board: Option<PathBuf>,

    /// Simulator executable re-spawned for --procs > 1 (default: the current executable).
    #[arg(long, env = "NCCLPROF_SIM_EXE")]
    pub sim_exe: Option<PathBuf>,

    /// Set by the binary: `--die` really `_exit(1)`s and SIGTERM is handled. In-process runs
    /// instead stop the simulated process (no more callbacks, no finalize) and return.
    #[arg(skip)]
    pub real_exit: bool,
}

impl SimConfig {
    /// The CLI defaults driving the plugin at `plugin`, except `rate` = 0 (as fast as possible)
    /// and `quiet` = true, which suit in-process tests and benchmarks.
    pub fn default_for(plugin: impl Into<PathBuf>) -> Self {
        let p: PathBuf = plugin.into();
        let mut c = SimConfig::parse_from(["ncclprof-sim", "--plugin", &p.to_string_lossy()]);
        c.plugin = p;
        c.rate = 0.0;
        c.quiet = true;
        c
    }

    /// Effective fraction of rank pairs joined by a non-network transport.
    pub fn intra_fraction(&self) -> f64 {
        self.intra_node
            .unwrap_or(if self.workload == Workload::Mixed {
                0.1
            } else {
                0.0
            })
    }

    /// The command-line arguments that reproduce this configuration (without argv\[0\]).
    pub fn to_args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut kv = |k: &str, v: String| {
            a.push(format!("--{k}"));
            a.push(v);
        };
        kv("plugin", self.plugin.to_string_lossy().into_owned());
        if let Some(v) = self.api {
            kv("api", format!("v{v}"));
        }
        kv("ranks", self.ranks.to_string());
        kv("procs", self.procs.to_string());
        kv("comms", self.comms.to_string());
        kv("channels", self.channels.to_string());
        kv(
            "workload",
            self.workload
                .to_possible_value()
                .unwrap()
                .get_name()
                .to_string(),
        );
        kv(
            "sizes",
            self.sizes
                .0
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(","),
        );
        kv("iterations", self.iterations.to_string());
        if let Some(d) = self.duration {
            kv("duration", d.to_string());
        }
        kv("rate", self.rate.to_string());
        kv("seed", self.seed.to_string());
        for s in &self.straggler {
            kv("straggler", format!("{}:{}ns", s.rank, s.delay_ns));
        }
        for s in &self.slow_channel {
            kv("slow-channel", format!("{}:{}", s.channel, s.factor));
        }
        for h in &self.hang {
            kv("hang", format!("{}:{}", h.rank, h.seq));
        }
        for h in &self.absent {
            kv("absent", format!("{}:{}", h.rank, h.seq));
        }
        if let Some(d) = self.die {
            kv("die", format!("{}:{}", d.rank, d.seq));
        }
        kv("graph-replays", self.graph_replays.to_string());
        kv("gpu-drift-ppm", self.gpu_drift_ppm.to_string());
        if let Some(h) = self.gpu_ticks_hz {
            kv("gpu-ticks-hz", h.to_string());
        }
        if let Some(f) = self.intra_node {
            kv("intra-node", f.to_string());
        }
        kv("bw-gbps", self.bw_gbps.to_string());
        kv("latency-us", self.latency_us.to_string());
        kv(
            "net",
            self.net.to_possible_value().unwrap().get_name().to_string(),
        );
        kv("mask", self.mask.to_string());
        if let Some(m) = self.force_mask {
            kv("force-mask", m.to_string());
        }
        if let Some(t) = &self.truth {
            kv("truth", t.to_string_lossy().into_owned());
        }
        kv("truth-steps", self.truth_steps.to_string());
        if let Some(i) = self.proc_index {
            kv("proc-index", i.to_string());
        }
        if let Some(e) = self.epoch_ns {
            kv("epoch-ns", e.to_string());
        }
        if let Some(b) = &self.board {
            kv("board", b.to_string_lossy().into_owned());
        }
        if let Some(x) = &self.sim_exe {
            kv("sim-exe", x.to_string_lossy().into_owned());
        }
        for (flag, on) in [
            ("--pxn", self.pxn),
            ("--ce", self.ce),
            ("--nonblocking", self.nonblocking),
            ("--quiet", self.quiet),
            ("--keep-loaded", self.keep_loaded),
        ] {
            if on {
                a.push(flag.into());
            }
        }
        a
    }

    /// Ranks run by process `index` of `procs`.
    pub fn ranks_of_proc(&self, index: usize) -> std::ops::Range<usize> {
        let p = self.procs.max(1);
        (index * self.ranks / p)..((index + 1) * self.ranks / p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("8,1M,1G").unwrap().0, vec![8, 1 << 20, 1 << 30]);
        assert_eq!(
            parse_sizes("1K..8K").unwrap().0,
            vec![1024, 2048, 4096, 8192]
        );
        assert_eq!(parse_sizes("1..64:4").unwrap().0, vec![1, 4, 16, 64]);
        assert_eq!(parse_duration_ns("2ms").unwrap(), 2_000_000);
        assert_eq!(parse_mask("0x7fff").unwrap(), 32767);
        assert_eq!(parse_mask("8").unwrap(), 8);
        assert_eq!(parse_duration_ns("150us").unwrap(), 150_000);
        assert_eq!(
            parse_rank_delay("3:2ms").unwrap(),
            RankDelay {
                rank: 3,
                delay_ns: 2_000_000
            }
        );
    }

    #[test]
    fn args_round_trip() {
        let mut c = SimConfig::default_for("/x/libp.so");
        c.straggler.push(RankDelay {
            rank: 1,
            delay_ns: 5,
        });
        c.hang.push(RankSeq { rank: 2, seq: 3 });
        c.absent.push(RankSeq { rank: 1, seq: 4 });
        c.pxn = true;
        c.api = Some(4);
        let mut argv = vec!["ncclprof-sim".to_string()];
        argv.extend(c.to_args());
        let d = SimConfig::parse_from(argv);
        assert_eq!(d.to_args(), c.to_args());
    }
}
