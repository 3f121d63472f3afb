//! Snapshot: everything the viewer holds → Chrome trace event JSON (Perfetto / chrome://tracing),
//! written atomically (temp file in the target directory + rename).
//!
//! Layout: one trace process per rank lane, named "rank R · comm NAME · HOST · pid PID"; threads
//! for collectives, other events (API, groups), and per channel kernels, proxy ops and steps.
//! `ts`/`dur` are µs on the shared host clock. Every record's raw fields ride in
//! `args.ncclprof` so that `open` rebuilds the same records; `otherData` carries the processes,
//! communicators, string tables, masks and counters.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, pack_strings};
use serde_json::{Value, json};

use super::store::{Kernel, Lane, Op, ProcState, ProxyOp, Store};

/// Format name in `otherData.format`.
pub const FORMAT: &str = "ncclprof-snapshot";
/// Snapshot format version.
pub const VERSION: u32 = 1;

pub const TID_OPS: u32 = 1;
pub const TID_OTHER: u32 = 2;
pub const TID_KERNEL: u32 = 100;
pub const TID_PROXY: u32 = 200;
pub const TID_STEPS: u32 = 300;

/// What a written snapshot holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub path: PathBuf,
    pub processes: usize,
    pub events: u64,
    pub dropped: u64,
}

/// `ncclprof-YYYYMMDD-HHMMSS.json` in UTC.
pub fn default_name() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("ncclprof-{}.json", utc_stamp(secs))
}

/// `YYYYMMDD-HHMMSS` for Unix seconds (UTC).
pub fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Rebuild the record of an op.
pub fn op_record(lane: &Lane, o: &Op) -> EventRecord {
    EventRecord {
        id: o.id,
        parent: o.parent,
        start_ns: o.start,
        end_ns: o.end,
        comm: lane.key.comm,
        rank: lane.key.rank,
        kind: o.kind,
        sub: o.n_channels,
        flags: o.flags,
        x: o.x,
        p: [
            o.seq,
            o.count,
            pack_strings(o.strings),
            o.enq_stop,
            o.n_warps,
            o.exec_start,
        ],
    }
}

pub fn kernel_record(lane: &Lane, k: &Kernel) -> EventRecord {
    EventRecord {
        id: k.id,
        parent: k.parent,
        start_ns: k.start,
        end_ns: k.end,
        comm: lane.key.comm,
        rank: lane.key.rank,
        kind: EventKind::KernelCh as u8,
        sub: k.channel,
        flags: k.flags,
        x: 0,
        p: [
            k.gpu_start,
            k.gpu_stop,
            k.cpu_start,
            k.cpu_stop,
            u64::from(k.gpu_id),
            0,
        ],
    }
}

pub fn proxy_record(lane: &Lane, o: &ProxyOp) -> EventRecord {
    EventRecord {
        id: o.id,
        parent: o.parent,
        start_ns: o.start,
        end_ns: o.end,
        comm: lane.key.comm,
        rank: lane.key.rank,
        kind: EventKind::ProxyOp as u8,
        sub: o.channel,
        flags: o.flags,
        x: o.peer,
        p: [
            o.pid,
            u64::from(o.n_steps),
            o.chunk_size,
            o.bytes,
            o.in_progress,
            u64::from(o.states),
        ],
    }
}

/// Every retained record of a lane with its trace thread.
pub fn lane_records(lane: &Lane) -> Vec<(u32, EventRecord)> {
    let mut out = Vec::with_capacity(lane.len());
    for (_, o) in lane.ops.iter() {
        out.push((TID_OPS, op_record(lane, o)));
    }
    for (_, k) in lane.kernels.iter() {
        out.push((TID_KERNEL + u32::from(k.channel), kernel_record(lane, k)));
    }
    for (_, o) in lane.proxy_ops.iter() {
        out.push((TID_PROXY + u32::from(o.channel), proxy_record(lane, o)));
    }
    for (b, s) in lane.steps.iter() {
        let mut r = s.unpack(b);
        r.comm = lane.key.comm;
        r.rank = lane.key.rank;
        out.push((TID_STEPS + u32::from(s.channel), r));
    }
    for (_, r) in lane.other.iter() {
        out.push((TID_OTHER, *r));
    }
    out
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Readable args of a record (names resolved through the process's strings).
fn args(store: &Store, proc: usize, r: &EventRecord) -> serde_json::Map<String, Value> {
    let p = &store.procs[proc];
    let s = r.strings();
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    match r.kind() {
        Some(EventKind::Coll) => {
            put("SeqNum", json!(r.p[0]));
            put("Count", json!(r.p[1]));
            put("Datatype", json!(p.string(s[1])));
            put("Algorithm", json!(p.string(s[2])));
            put("Protocol", json!(p.string(s[3])));
            put("nChannels", json!(r.sub));
            put("nWarps", json!(r.p[4]));
            put("Root", json!(r.x));
            put("EnqueueStopUs", json!(us(r.p[3])));
            put("ExecStartUs", json!(us(r.p[5])));
        }
        Some(EventKind::P2p) => {
            put("Peer", json!(r.x));
            put("Count", json!(r.p[1]));
            put("Datatype", json!(p.string(s[1])));
            put("nChannels", json!(r.sub));
            put("EnqueueStopUs", json!(us(r.p[3])));
            put("ExecStartUs", json!(us(r.p[5])));
        }
        Some(EventKind::KernelCh) => {
            put("Channel", json!(r.sub));
            put("StartGpuClk", json!(r.p[0]));
            put("StopGpuClk", json!(r.p[1]));
            put("GpuId", json!(r.p[4]));
        }
        Some(EventKind::ProxyOp) => {
            put("Channel", json!(r.sub));
            put("Peer", json!(r.x));
            put("Steps", json!(r.p[1]));
            put("ChunkSize", json!(r.p[2]));
            put("transSize", json!(r.p[3]));
            put("InProgressUs", json!(us(r.p[4])));
            put("Pid", json!(r.p[0]));
        }
        Some(EventKind::ProxyStep) => {
            put("Step", json!(r.p[0]));
            put("Channel", json!(r.sub));
            put("Peer", json!(r.x));
            put("transSize", json!(r.p[4]));
            for (ph, d) in r.step_phases() {
                put(ph.name(), json!(us(d)));
            }
        }
        _ => {
            if s[0] != 0 {
                put("func", json!(p.string(s[0])));
            }
        }
    }
    put("CommHash", json!(p.comm(r.comm).map(|c| c.comm_hash)));
    put("Rank", json!(r.rank));
    put(
        "ncclprof",
        json!({
            "proc": proc, "id": r.id, "parent": r.parent, "start_ns": r.start_ns, "end_ns": r.end_ns,
            "comm": r.comm, "rank": r.rank, "kind": r.kind, "sub": r.sub, "flags": r.flags,
            "x": r.x, "p": r.p,
        }),
    );
    m
}

fn name_of(store: &Store, proc: usize, r: &EventRecord) -> String {
    let p = &store.procs[proc];
    match r.kind() {
        Some(
            EventKind::Coll
            | EventKind::P2p
            | EventKind::CeColl
            | EventKind::CollApi
            | EventKind::P2pApi,
        ) => p.string(r.strings()[0]).to_string(),
        Some(k) => k.name().to_string(),
        None => format!("kind {}", r.kind),
    }
}

fn lane_title(store: &Store, lane: &Lane) -> String {
    let p = &store.procs[lane.key.proc];
    let comm = p
        .comm(lane.key.comm)
        .map(|c| {
            if c.name.is_empty() {
                format!("{:x}", c.comm_hash)
            } else {
                c.name.clone()
            }
        })
        .unwrap_or_else(|| "none".into());
    if lane.key.comm == u32::MAX {
        format!("process · {} · pid {}", p.host, p.pid)
    } else {
        format!(
            "rank {} · comm {} · {} · pid {}",
            lane.key.rank, comm, p.host, p.pid
        )
    }
}

fn thread_name(tid: u32) -> String {
    match tid {
        TID_OPS => "collectives / p2p".into(),
        TID_OTHER => "API, groups, other".into(),
        t if t >= TID_STEPS => format!("steps ch {}", t - TID_STEPS),
        t if t >= TID_PROXY => format!("proxy ch {}", t - TID_PROXY),
        t => format!("kernel ch {}", t - TID_KERNEL),
    }
}

/// The `otherData` object.
pub fn other_data(store: &Store) -> Value {
    let procs: Vec<Value> = store
        .procs
        .iter()
        .map(|p| {
            json!({
                "src": p.src, "pid": p.pid, "host": p.host, "cmdline": p.cmdline,
                "api_version": p.api_version, "plugin_version": p.plugin_version,
                "clock": p.clock, "mask": p.mask, "mask_names": ncclprof_shared::mask::names(p.mask),
                "active": p.active, "requested_mask": p.requested,
                "state": match &p.state {
                    ProcState::Live => "live".to_string(),
                    ProcState::Ended(r) => format!("ended: {r}"),
                    ProcState::Crashed => "crashed".to_string(),
                    ProcState::Offline => "offline".to_string(),
                },
                "comms": p.comms.iter().map(|c| json!({
                    "index": c.index, "comm_hash": c.comm_hash, "name": c.name,
                    "nranks": c.nranks, "nnodes": c.nnodes, "rank": c.rank, "finalized": c.finalized,
                })).collect::<Vec<_>>(),
                "strings": p.strings,
                "dropped": p.counters.as_ref().map(|c| c.dropped.clone()).unwrap_or_default(),
                "dropped_reasons": ncclprof_shared::wire::DropReason::ALL.iter().map(|r| r.name()).collect::<Vec<_>>(),
                "captured": p.counters.as_ref().map(|c| c.captured.clone()).unwrap_or_default(),
                "completed": p.counters.as_ref().map(|c| c.completed.clone()).unwrap_or_default(),
            })
        })
        .collect();
    let mut hosts: Vec<&str> = store.procs.iter().map(|p| p.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    json!({
        "format": FORMAT,
        "version": VERSION,
        "viewer_version": env!("CARGO_PKG_VERSION"),
        "protocol": ncclprof_shared::PROTOCOL_VERSION,
        "hosts": hosts,
        "retained": store.retained,
        "evicted": store.evicted,
        "dropped": store.dropped(),
        "processes": procs,
    })
}

/// Write the whole store as a Chrome trace to `out`.
pub fn write_to(store: &Store, out: &mut impl Write) -> anyhow::Result<u64> {
    out.write_all(b"{\"traceEvents\":[\n")?;
    let mut first = true;
    let mut n = 0u64;
    let mut emit = |out: &mut dyn Write, v: &Value| -> std::io::Result<()> {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, v).map_err(std::io::Error::other)
    };
    for (li, lane) in store.lanes.iter().enumerate() {
        let tpid = li as u64 + 1;
        emit(
            out,
            &json!({"ph":"M","name":"process_name","pid":tpid,"tid":0,"args":{"name": lane_title(store, lane)}}),
        )?;
        emit(
            out,
            &json!({"ph":"M","name":"process_sort_index","pid":tpid,"tid":0,"args":{"sort_index": lane.key.rank.max(0) as u64 * 1000 + li as u64}}),
        )?;
        let recs = lane_records(lane);
        let mut tids: Vec<u32> = recs.iter().map(|r| r.0).collect();
        tids.sort_unstable();
        tids.dedup();
        for t in tids {
            emit(
                out,
                &json!({"ph":"M","name":"thread_name","pid":tpid,"tid":t,"args":{"name": thread_name(t)}}),
            )?;
        }
        for (tid, r) in recs {
            let cat = r.kind().map_or("?", EventKind::name);
            let v = json!({
                "ph": "X", "name": name_of(store, lane.key.proc, &r), "cat": cat,
                "pid": tpid, "tid": tid, "ts": us(r.start_ns),
                "dur": us(r.end_ns.saturating_sub(r.start_ns)),
                "args": Value::Object(args(store, lane.key.proc, &r)),
            });
            emit(out, &v)?;
            n += 1;
        }
    }
    out.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    serde_json::to_writer(&mut *out, &other_data(store))?;
    out.write_all(b"}\n")?;
    Ok(n)
}

/// Write atomically to `path` (temp file in the same directory, then rename). On failure
/// nothing is left behind and the store is untouched.
pub fn write(store: &Store, path: &Path) -> anyhow::Result<Summary> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".ncclprof-snapshot-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    let mut w = std::io::BufWriter::new(tmp);
    let n = write_to(store, &mut w).with_context(|| format!("writing {}", path.display()))?;
    let tmp = w
        .into_inner()
        .map_err(|e| anyhow::anyhow!("writing {}: {}", path.display(), e.error()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| anyhow::anyhow!("renaming into {}: {}", path.display(), e.error))?;
    Ok(Summary {
        path: path.to_path_buf(),
        processes: store.procs.len(),
        events: n,
        dropped: store.dropped(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn stamps() {
        assert_eq!(super::utc_stamp(0), "19700101-000000");
        assert_eq!(super::utc_stamp(1_764_680_000), "20251202-125320");
    }
}
