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
use ncclprof_shared::trace;
use ncclprof_shared::wire::{CommInfo, InFlight, OpenOp};

use super::store::{Kernel, Lane, Op, ProcState, ProxyOp, Store};

// The format itself (and its writer) lives in `ncclprof_shared::trace`, shared with the plugin's
// NCCL_PROFILE_DUMP_FILE, so `open` reads both.
pub use trace::{FORMAT, TID_KERNEL, TID_OPS, TID_OTHER, TID_PROXY, TID_STEPS, VERSION};

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

/// Call `f` with every retained record of a lane (unpacked) and its trace thread.
fn each_record(
    lane: &Lane,
    f: &mut dyn FnMut(u32, &EventRecord) -> std::io::Result<()>,
) -> std::io::Result<()> {
    for (_, o) in lane.ops.iter() {
        f(TID_OPS, &op_record(lane, o))?;
    }
    for (_, k) in lane.kernels.iter() {
        f(TID_KERNEL + u32::from(k.channel), &kernel_record(lane, k))?;
    }
    for (_, o) in lane.proxy_ops.iter() {
        f(TID_PROXY + u32::from(o.channel), &proxy_record(lane, o))?;
    }
    for (b, s) in lane.steps.iter() {
        let mut r = s.unpack(b);
        r.comm = lane.key.comm;
        r.rank = lane.key.rank;
        f(TID_STEPS + u32::from(s.channel), &r)?;
    }
    for (_, r) in lane.other.iter() {
        f(TID_OTHER, r)?;
    }
    Ok(())
}

/// Every retained record of a lane with its trace thread, collected.
pub fn lane_records(lane: &Lane) -> Vec<(u32, EventRecord)> {
    let mut out = Vec::with_capacity(lane.len());
    let _ = each_record(lane, &mut |t, r| {
        out.push((t, *r));
        Ok(())
    });
    out
}

/// A store lane as the snapshot's records: unpacked while they are written, never copied
/// whole (a copy was 104 B per event, three times what the store holds for a step).
struct StoreLane<'a>(&'a Lane);

impl trace::Records for StoreLane<'_> {
    fn each(
        &self,
        f: &mut dyn FnMut(u32, &EventRecord) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        each_record(self.0, f)
    }
}

/// The store's processes in the snapshot's terms.
fn processes(store: &Store) -> Vec<trace::Process> {
    store
        .procs
        .iter()
        .enumerate()
        .map(|(i, p)| trace::Process {
            src: p.src,
            pid: p.pid,
            host: p.host.clone(),
            cmdline: p.cmdline.clone(),
            api_version: p.api_version,
            plugin_version: p.plugin_version.clone(),
            clock: p.clock.clone(),
            mask: p.mask,
            active: p.active,
            requested_mask: p.requested,
            state: match &p.state {
                ProcState::Live => "live".to_string(),
                ProcState::Ended(r) => format!("ended: {r}"),
                ProcState::Crashed => "crashed".to_string(),
                ProcState::Offline => "offline".to_string(),
            },
            comms: p
                .comms
                .iter()
                .map(|c| CommInfo {
                    index: c.index,
                    comm_hash: c.comm_hash,
                    name: c.name.clone(),
                    nranks: c.nranks,
                    nnodes: c.nnodes,
                    rank: c.rank,
                    api_version: p.api_version,
                    finalized: c.finalized,
                })
                .collect(),
            strings: p.strings.clone(),
            captured: p
                .counters
                .as_ref()
                .map(|c| c.captured.clone())
                .unwrap_or_default(),
            completed: p
                .counters
                .as_ref()
                .map(|c| c.completed.clone())
                .unwrap_or_default(),
            dropped: p
                .counters
                .as_ref()
                .map(|c| c.dropped.clone())
                .unwrap_or_default(),
            in_flight: in_flight(store, i),
        })
        .collect()
}

/// A process's latest in-flight summary, as the wire carried it (steps as one total: the
/// store keeps no per-channel split), less the ops that completed since. `None` when no
/// summary came or nothing is open.
fn in_flight(store: &Store, proc: usize) -> Option<InFlight> {
    let p = &store.procs[proc];
    let ops: Vec<OpenOp> = p
        .open_ops
        .iter()
        .filter(|o| store.still_open(proc, o))
        .map(|o| OpenOp {
            comm: o.comm,
            rank: o.rank,
            kind: o.kind,
            id: o.id,
            seq: o.seq,
            func: o.func,
            start_ns: o.start,
            exec_start_ns: o.exec_start,
            steps_done: o.steps_done.clone(),
            channels_done: o.channels_done,
            n_channels: o.n_channels,
            oldest_step: o.oldest_step,
        })
        .collect();
    let gone = p.open_ops.len() - ops.len();
    let total = p.open_total.saturating_sub(gone as u32);
    // The list holds at most 512: with every listed op done since, more may still be open.
    (total > 0).then_some(InFlight {
        at_ns: p.open_at,
        total,
        ops,
    })
}

/// Write the whole store as a Chrome trace to `out`.
pub fn write_to(store: &Store, out: &mut impl Write) -> anyhow::Result<u64> {
    let procs = processes(store);
    let lanes: Vec<trace::Lane<StoreLane>> = store
        .lanes
        .iter()
        .map(|l| trace::Lane {
            proc: l.key.proc,
            comm: l.key.comm,
            rank: l.key.rank,
            records: StoreLane(l),
        })
        .collect();
    let totals = trace::Totals {
        retained: store.retained as u64,
        evicted: store.evicted,
        dropped: store.dropped(),
        writer: format!("ncclprof-tui {}", env!("CARGO_PKG_VERSION")),
    };
    Ok(trace::write(out, &procs, &lanes, &totals)?)
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
