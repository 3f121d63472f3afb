//! The ground truth written by the simulator (`--truth FILE`), as serde structs.
//!
//! Every `ns` value is `CLOCK_MONOTONIC` nanoseconds (`ncclprof_shared::clock::monotonic_ns()`)
//! taken when the simulator issued (or, for events the mask suppressed, would have issued) the
//! corresponding callback. GPU host times are the moments the simulator decided the GPU event
//! happened, always at or before the callback reporting it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Truth {
    /// Format version (1).
    pub version: u32,
    /// API version the plugin was driven through (1..6).
    pub api: u32,
    /// The plugin's `name` string.
    #[serde(default)]
    pub plugin_name: String,
    /// Value of the global activation mask after the inits (per process; the first process's value).
    #[serde(default)]
    pub mask: i32,
    /// One entry per (communicator, rank) context.
    pub ranks: Vec<RankTruth>,
    /// startEvent calls per kind (all 15 names), plus "states" and "stops".
    pub counts: BTreeMap<String, u64>,
    /// startEvent + recordEventState + stopEvent calls issued (what benchmarks divide by).
    #[serde(default)]
    pub total_calls: u64,
    /// init calls and finalize calls issued.
    #[serde(default)]
    pub inits: u64,
    #[serde(default)]
    pub finalizes: u64,
    /// Times the plugin called the logger (v4+).
    #[serde(default)]
    pub log_calls: u64,
    /// What the plugin logged during the run (its messages, oldest first; at most the
    /// newest 1 024 per process, processes one after another), e.g. ncclprof's summary of
    /// what it recorded and dropped.
    #[serde(default)]
    pub log: Vec<String>,
    /// Wall time of the run (first init to last finalize), ns.
    #[serde(default)]
    pub wall_ns: u64,
    /// The processes of the job.
    #[serde(default)]
    pub procs: Vec<ProcTruth>,
}

/// One process of the job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ProcTruth {
    pub index: usize,
    pub pid: i32,
    /// Exit code as seen by the parent (None for in-process runs or when killed by a signal).
    pub exit_code: Option<i32>,
    /// The process died through `--die`.
    pub died: bool,
}

/// One communicator context of one rank.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RankTruth {
    pub rank: i32,
    /// Communicator index (0..comms).
    #[serde(default)]
    pub comm: u32,
    pub pid: i32,
    pub comm_hash: u64,
    #[serde(default)]
    pub comm_name: String,
    #[serde(default)]
    pub nranks: i32,
    /// The context pointer value init returned (opaque).
    #[serde(default)]
    pub context: u64,
    /// The process of this rank died (`--die`): no finalize happened.
    #[serde(default)]
    pub died: bool,
    /// Simulated GPU clock: pTimer = (host_ns - base) * (1 + drift_ppm/1e6) + base + offset (then ticks if hz set).
    #[serde(default)]
    pub gpu_offset_ns: i64,
    #[serde(default)]
    pub gpu_drift_ppm: f64,
    #[serde(default)]
    pub gpu_ticks_hz: Option<u64>,
    pub ops: Vec<OpTruth>,
    /// ProxyOps this rank's proxy thread ran on behalf of other ranks (PXN, foreign pid).
    #[serde(default)]
    pub foreign_proxy_ops: Vec<ProxyOpTruth>,
}

/// One Coll or P2p task.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct OpTruth {
    /// "Coll" or "P2p".
    pub kind: String,
    /// "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Send", "Recv", "AlltoAll" (CE only).
    pub func: String,
    /// Coll `seqNumber` as issued (per communicator and function); for P2p a per-function counter.
    pub seq: u64,
    /// Index of the API call (group) on this communicator, counting from 0 (what --hang/--die use).
    #[serde(default)]
    pub call: u64,
    /// Element count as put in the Coll/P2p descriptor.
    pub count: u64,
    /// Bytes of the operation (message size; per peer for p2p).
    pub bytes: u64,
    /// Peer for P2p, -1 for collectives.
    pub peer: i32,
    #[serde(default)]
    pub root: i32,
    #[serde(default)]
    pub n_channels: u32,
    /// Graph replay index, for ops issued by a CUDA-graph replay.
    #[serde(default)]
    pub graph_replay: Option<u64>,
    /// Executed on the copy engine (CeColl events instead of Coll).
    #[serde(default)]
    pub ce: bool,
    /// This op hangs (--hang): never completes.
    #[serde(default)]
    pub hung: bool,
    /// Whether the Coll/P2p (or CeColl) start was issued to the plugin.
    #[serde(default)]
    pub issued: bool,
    /// CollApi/P2pApi start and stop (the API call), when there is one.
    #[serde(default)]
    pub api_start: Option<u64>,
    #[serde(default)]
    pub api_stop: Option<u64>,
    /// Coll/P2p start and stop ("enqueued").
    pub enqueue_start: u64,
    pub enqueue_stop: u64,
    /// Earliest kernel GPU start (host clock), or first InProgress if no KernelCh was issued.
    pub exec_start: Option<u64>,
    /// max(last kernel GPU end (host), last ProxyOp stop); None if it never completed.
    pub end: Option<u64>,
    pub channels: Vec<ChannelTruth>,
    pub proxy_ops: Vec<ProxyOpTruth>,
}

/// One KernelCh (per channel of the task).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ChannelTruth {
    pub channel: u32,
    pub gpu_start_host: u64,
    pub gpu_end_host: Option<u64>,
    pub gpu_start_raw: u64,
    pub gpu_end_raw: Option<u64>,
    /// Times of the KernelCh start and stop callbacks.
    #[serde(default)]
    pub cb_start: u64,
    #[serde(default)]
    pub cb_stop: Option<u64>,
}

/// One ProxyOp.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ProxyOpTruth {
    pub channel: u32,
    pub peer: i32,
    pub is_send: bool,
    /// Network transport (false: started, never progressed, never stopped).
    #[serde(default)]
    pub network: bool,
    #[serde(default)]
    pub n_steps: u32,
    #[serde(default)]
    pub chunk_size: u32,
    /// pid put in the descriptor (foreign for PXN ops).
    #[serde(default)]
    pub pid: i32,
    /// Rank of the originating rank (PXN ops), else this rank.
    #[serde(default)]
    pub origin_rank: i32,
    pub start: u64,
    pub in_progress: Option<u64>,
    pub stop: Option<u64>,
    /// Sum of all step transfer sizes.
    #[serde(default)]
    pub trans_size: u64,
    /// Number of steps actually started (all of them, even beyond `--truth-steps`).
    #[serde(default)]
    pub steps_started: u64,
    pub steps: Vec<StepTruth>,
}

/// One ProxyStep.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StepTruth {
    pub step: u32,
    /// Time of the (last) start callback.
    pub start: u64,
    /// Starts abandoned without stop before the last one (receive re-post).
    #[serde(default)]
    pub restarts: u32,
    /// (state, ns) in issue order.
    pub states: Vec<(i32, u64)>,
    pub stop: Option<u64>,
    pub trans_size: u64,
}

/// Plugin event calls (starts + states + stops) of a run, for ns-per-call benchmarks.
pub fn call_stats(t: &Truth) -> u64 {
    t.total_calls
}

impl Truth {
    /// Merges the truths of several processes into one.
    pub fn merge(parts: Vec<Truth>) -> Truth {
        let mut out = Truth {
            version: 1,
            ..Default::default()
        };
        for (i, p) in parts.into_iter().enumerate() {
            if i == 0 {
                out.api = p.api;
                out.plugin_name = p.plugin_name.clone();
                out.mask = p.mask;
            }
            out.ranks.extend(p.ranks);
            for (k, v) in p.counts {
                *out.counts.entry(k).or_insert(0) += v;
            }
            out.total_calls += p.total_calls;
            out.inits += p.inits;
            out.finalizes += p.finalizes;
            out.log_calls += p.log_calls;
            out.log.extend(p.log.iter().cloned());
            out.wall_ns = out.wall_ns.max(p.wall_ns);
            out.procs.extend(p.procs);
        }
        out.ranks.sort_by_key(|r| (r.comm, r.rank));
        out
    }

    /// startEvent count of kind `name` (0 if absent).
    pub fn count(&self, name: &str) -> u64 {
        self.counts.get(name).copied().unwrap_or(0)
    }
}

/// Writes `t` as JSON to `path` (via a temporary file and rename).
pub fn write(t: &Truth, path: &std::path::Path) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let f = std::fs::File::create(&tmp)?;
    let mut w = std::io::BufWriter::new(f);
    serde_json::to_writer(&mut w, t)?;
    use std::io::Write;
    w.flush()?;
    drop(w);
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Reads a truth file.
pub fn read(path: &std::path::Path) -> anyhow::Result<Truth> {
    let s = std::fs::read(path)?;
    Ok(serde_json::from_slice(&s)?)
}
