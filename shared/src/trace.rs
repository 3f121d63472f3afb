//! Records → Chrome trace event JSON (opens in Perfetto and chrome://tracing).
//!
//! One trace process per (plugin process, communicator, rank), named
//! "rank R · COMM · HOST · pid P"; lanes (threads) for collectives/p2p, API calls, groups,
//! per-channel kernels, per-channel proxy ops and steps, proxy control and net-plugin events.
//! Timestamps are host `CLOCK_MONOTONIC` µs, so ranks of different processes line up.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::kind::EventKind;
use crate::record::*;
use crate::wire::CommInfo;

/// What one plugin process contributed.
#[derive(Debug, Clone, Default)]
pub struct ProcessData {
    pub pid: u32,
    pub host: String,
    pub comms: Vec<CommInfo>,
    pub strings: HashMap<u16, String>,
    pub records: Vec<EventRecord>,
}

/// Snapshot-wide metadata (`otherData`).
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    pub mask: u32,
    pub tool: String,
    /// Drops by reason name, summed over processes.
    pub drops: Vec<(String, u64)>,
    pub versions: Vec<String>,
}

/// Lane (Chrome "tid") numbers.
pub mod lane {
    pub const OPS: u32 = 1;
    pub const API: u32 = 2;
    pub const GROUP: u32 = 3;
    pub const PROXY_CTRL: u32 = 4;
    pub const KERNEL_BASE: u32 = 100;
    pub const PROXY_BASE: u32 = 200;
    pub const STEP_BASE: u32 = 300;
    pub const NET_BASE: u32 = 400;
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn lane_of(r: &EventRecord) -> u32 {
    match r.kind() {
        Some(EventKind::Coll | EventKind::P2p | EventKind::CeColl) => lane::OPS,
        Some(EventKind::CollApi | EventKind::P2pApi | EventKind::KernelLaunch) => lane::API,
        Some(EventKind::GroupApi | EventKind::Group | EventKind::CeSync | EventKind::CeBatch) => {
            lane::GROUP
        }
        Some(EventKind::ProxyCtrl) => lane::PROXY_CTRL,
        Some(EventKind::KernelCh) => lane::KERNEL_BASE + u32::from(r.sub),
        Some(EventKind::ProxyOp) => lane::PROXY_BASE + u32::from(r.sub),
        Some(EventKind::ProxyStep) => lane::STEP_BASE + u32::from(r.sub),
        Some(EventKind::NetPlugin) => lane::NET_BASE,
        None => 0,
    }
}

fn lane_name(tid: u32) -> String {
    match tid {
        lane::OPS => "collectives / p2p".into(),
        lane::API => "API calls".into(),
        lane::GROUP => "groups".into(),
        lane::PROXY_CTRL => "proxy thread".into(),
        lane::NET_BASE => "net plugin".into(),
        t if t >= lane::STEP_BASE => format!("proxy steps ch {}", t - lane::STEP_BASE),
        t if t >= lane::PROXY_BASE => format!("proxy ops ch {}", t - lane::PROXY_BASE),
        t if t >= lane::KERNEL_BASE => format!("kernel ch {}", t - lane::KERNEL_BASE),
        t => format!("lane {t}"),
    }
}

/// The event's display name and its args (every NCCL field it carries).
pub fn describe(r: &EventRecord, s: &dyn Fn(u16) -> String) -> (String, Value) {
    let strs = r.strings();
    let flags = json!({
        "endKnown": r.has(F_END_KNOWN),
        "endUnknown": r.has(F_END_UNKNOWN),
        "inFlight": r.has(F_IN_FLIGHT),
        "parentUnknown": r.has(F_PARENT_UNKNOWN),
    });
    let base = |mut v: Value| {
        v["id"] = json!(r.id);
        v["parent"] = json!(r.parent);
        v["rank"] = json!(r.rank);
        v["flags"] = flags.clone();
        v
    };
    match r.kind() {
        Some(EventKind::Coll) => (
            s(strs[0]),
            base(
                json!({"seq": r.p[0], "count": r.p[1], "datatype": s(strs[1]), "algo": s(strs[2]),
                "proto": s(strs[3]), "nChannels": r.sub, "nWarps": r.p[4], "root": r.x as i32,
                "enqueueStartUs": us(r.start_ns), "enqueueStopUs": us(r.p[3]), "execStartUs": us(r.p[5])}),
            ),
        ),
        Some(EventKind::P2p) => (
            s(strs[0]),
            base(
                json!({"peer": r.x as i32, "count": r.p[1], "datatype": s(strs[1]), "nChannels": r.sub,
                "enqueueStartUs": us(r.start_ns), "enqueueStopUs": us(r.p[3]), "execStartUs": us(r.p[5])}),
            ),
        ),
        Some(k @ (EventKind::CollApi | EventKind::P2pApi)) => (
            format!("{} ({})", s(strs[0]), k.name()),
            base(
                json!({"count": r.p[1], "datatype": s(strs[1]), "root": r.x as i32,
                "stream": format!("{:#x}", r.p[4]), "graphCaptured": r.has(F_GRAPH_CAPTURED), "stopUs": us(r.p[3])}),
            ),
        ),
        Some(EventKind::GroupApi) => (
            "Group API".into(),
            base(
                json!({"groupDepth": r.x, "graphCaptured": r.has(F_GRAPH_CAPTURED),
                "groupStartApiStopUs": us(r.p[0]), "groupEndApiStartUs": us(r.p[1])}),
            ),
        ),
        Some(EventKind::KernelLaunch) => (
            "KernelLaunch".into(),
            base(json!({"stream": format!("{:#x}", r.p[4])})),
        ),
        Some(EventKind::Group) => ("Group".into(), base(json!({}))),
        Some(EventKind::ProxyOp) => (
            if r.has(F_SEND) {
                "ProxySend"
            } else {
                "ProxyRecv"
            }
            .into(),
            base(
                json!({"channel": r.sub, "peer": r.x as i32, "pid": r.p[0], "nSteps": r.p[1],
                "chunkSize": r.p[2], "transSize": r.p[3], "inProgressUs": us(r.p[4]),
                "foreign": r.has(F_FOREIGN), "notNetwork": r.has(F_NOT_NETWORK)}),
            ),
        ),
        Some(EventKind::ProxyStep) => {
            let ph = r.step_phases();
            (
                format!(
                    "{} step {}",
                    if r.has(F_SEND) { "send" } else { "recv" },
                    r.p[0]
                ),
                base(
                    json!({"channel": r.sub, "peer": r.x as i32, "step": r.p[0], "transSize": r.p[4],
                    "peerWaitRetries": r.p[5], "restarted": r.has(F_RESTARTED),
                    ph[0].0.name(): ph[0].1, ph[1].0.name(): ph[1].1, ph[2].0.name(): ph[2].1}),
                ),
            )
        }
        Some(EventKind::ProxyCtrl) => (
            match u32::from(r.sub) {
                13 | 14 => "Idle/Active",
                15 | 16 => "Sleep",
                17 | 18 => "Append",
                _ => "ProxyCtrl",
            }
            .into(),
            base(json!({"lastState": r.sub, "appendedProxyOps": r.x})),
        ),
        Some(EventKind::KernelCh) => (
            format!("kernel ch {}", r.sub),
            base(
                json!({"channel": r.sub, "startGpuClk": r.p[0], "stopGpuClk": r.p[1],
                "startCallbackUs": us(r.p[2]), "stopCallbackUs": us(r.p[3]),
                "gpuConverted": r.has(F_GPU_CONVERTED)}),
            ),
        ),
        Some(EventKind::NetPlugin) => (
            "NetPlugin".into(),
            base(
                json!({"pluginId": format!("{:#x}", r.p[0]), "wrId": r.p[1], "opcode": r.p[2],
                "length": r.p[3], "qpNumOrFd": r.x, "deviceOrOp": r.sub, "updates": r.p[4]}),
            ),
        ),
        Some(EventKind::CeColl) => (
            s(strs[0]),
            base(
                json!({"seq": r.p[0], "count": r.p[1], "datatype": s(strs[1]),
                "syncStrategy": s(strs[2]), "ceSeqNum": r.x}),
            ),
        ),
        Some(EventKind::CeSync) => (
            "CeSync".into(),
            base(json!({"nRanks": r.x, "isComplete": r.has(F_CE_FLAG)})),
        ),
        Some(EventKind::CeBatch) => (
            "CeBatch".into(),
            base(json!({"numOps": r.x, "totalBytes": r.p[1], "useIntraSync": r.has(F_CE_FLAG)})),
        ),
        None => ("unknown".into(), base(json!({"kind": r.kind}))),
    }
}

/// The trace "pid" of (process, comm, rank): unique and stable within a snapshot.
fn track_id(proc_index: usize, comm: u32) -> u64 {
    (proc_index as u64 + 1) * 100_000 + u64::from(comm.min(99_999))
}

/// Build the whole Chrome trace document.
pub fn to_chrome_trace(procs: &[ProcessData], meta: &Metadata) -> String {
    let mut events: Vec<Value> = Vec::new();
    for (pi, p) in procs.iter().enumerate() {
        let strings = |id: u16| p.strings.get(&id).cloned().unwrap_or_default();
        let mut tracks: HashMap<u64, (u32, i32)> = HashMap::new();
        let mut lanes: HashMap<(u64, u32), ()> = HashMap::new();
        for r in &p.records {
            let track = track_id(pi, r.comm);
            tracks.entry(track).or_insert((r.comm, r.rank));
            let tid = lane_of(r);
            lanes.insert((track, tid), ());
            let (name, args) = describe(r, &strings);
            let cat = r.kind().map_or("unknown", EventKind::name);
            let (start, end) = (r.start_ns, r.end_ns.max(r.start_ns));
            events.push(json!({"name": name, "cat": cat, "ph": "X", "ts": us(start),
                "dur": us(end - start), "pid": track, "tid": tid, "args": args}));
        }
        for (track, (comm, rank)) in tracks {
            let c = p.comms.iter().find(|c| c.index == comm);
            let cname = c.map_or_else(
                || "unknown comm".to_string(),
                |c| {
                    if c.name.is_empty() {
                        format!("comm {:016x}", c.comm_hash)
                    } else {
                        c.name.clone()
                    }
                },
            );
            let rank = c.map_or(rank, |c| c.rank);
            events.push(json!({"name": "process_name", "ph": "M", "pid": track,
                "args": {"name": format!("rank {rank} · {cname} · {} · pid {}", p.host, p.pid)}}));
            events.push(
                json!({"name": "process_sort_index", "ph": "M", "pid": track,
                "args": {"sort_index": (pi as i64) * 1000 + i64::from(rank)}}),
            );
        }
        for (track, tid) in lanes.into_keys() {
            events.push(
                json!({"name": "thread_name", "ph": "M", "pid": track, "tid": tid,
                "args": {"name": lane_name(tid)}}),
            );
        }
    }
    let hosts: Vec<&str> = procs.iter().map(|p| p.host.as_str()).collect();
    let comms: Vec<Value> = procs
        .iter()
        .flat_map(|p| {
            p.comms.iter().map(move |c| {
                json!({"pid": p.pid, "host": p.host, "index": c.index, "commHash": format!("{:016x}", c.comm_hash),
                "name": c.name, "rank": c.rank, "nranks": c.nranks, "nnodes": c.nnodes, "apiVersion": c.api_version})
            })
        })
        .collect();
    let doc = json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "tool": meta.tool,
            "format": "ncclprof-snapshot",
            "formatVersion": 1,
            "clock": "CLOCK_MONOTONIC",
            "mask": meta.mask,
            "maskNames": crate::mask::names(meta.mask),
            "drops": meta.drops.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "hosts": hosts,
            "communicators": comms,
            "versions": meta.versions,
        }
    });
    serde_json::to_string(&doc).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_json_with_named_tracks() {
        let rec = EventRecord {
            id: 1,
            kind: EventKind::Coll as u8,
            start_ns: 1_000,
            end_ns: 5_000,
            comm: 0,
            rank: 3,
            p: [7, 1024, pack_strings([1, 2, 0, 0]), 2_000, 0, 3_000],
            ..Default::default()
        };
        let p = ProcessData {
            pid: 42,
            host: "h".into(),
            comms: vec![CommInfo {
                index: 0,
                comm_hash: 5,
                name: "world".into(),
                nranks: 8,
                nnodes: 1,
                rank: 3,
                api_version: 6,
                finalized: false,
            }],
            strings: [(1, "AllReduce".to_string()), (2, "ncclFloat32".to_string())].into(),
            records: vec![rec],
        };
        let s = to_chrome_trace(&[p], &Metadata::default());
        let v: Value = serde_json::from_str(&s).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let x = evs.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(x["name"], "AllReduce");
        assert_eq!(x["args"]["seq"], 7);
        assert_eq!(x["dur"], 4.0);
        let m = evs.iter().find(|e| e["name"] == "process_name").unwrap();
        assert_eq!(m["args"]["name"], "rank 3 · world · h · pid 42");
    }
}
