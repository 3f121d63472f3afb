//! Ingest: decoded frames from any source → the store. The only writer of the store.

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::EventRecord;
use ncclprof_shared::wire::{self, Frame};

use super::store::{
    CommSeen, CountersSeen, Kernel, Lane, LaneKey, Op, OpenRow, ProcState, ProxyOp, RECENT, Recent,
    Step, Store,
};

/// What a source hands the UI loop.
#[derive(Debug)]
pub enum SourceMsg {
    /// A frame from source `src` (the process with `pid`).
    Frame { src: u32, pid: u32, frame: Frame },
    /// Raw bytes that did not decode.
    Bad { src: u32, pid: u32, error: String },
    /// The stream ended; `alive` says whether the process was still running.
    Closed { src: u32, pid: u32, alive: bool },
    /// A process was seen but another viewer is attached to it.
    Busy { pid: u32 },
    /// A process is now free again / connected (clears busy).
    NotBusy { pid: u32 },
    /// A problem not tied to one stream (directory, connect failure).
    Error(String),
    /// A connection was made: where to send control messages. Travels in the same channel as
    /// the frames so that it is ordered with the stream's `Closed`.
    Connected {
        src: u32,
        pid: u32,
        control: ipc_channel::ipc::IpcSender<ncclprof_shared::wire::ViewerMsg>,
    },
}

/// Apply raw bytes: decode, then ingest, turning a decode failure into a visible error.
pub fn apply_bytes(store: &mut Store, src: u32, pid: u32, bytes: &[u8]) {
    match wire::decode(bytes) {
        Ok(f) => apply_frame(store, src, pid, f),
        Err(e) => bad(store, src, pid, e.to_string()),
    }
}

fn bad(store: &mut Store, src: u32, pid: u32, error: String) {
    let p = store.proc_for(src, pid);
    let msg = format!("pid {pid}: bad frame: {error}");
    let errs = &mut store.procs[p].errors;
    if errs.len() < 32 {
        errs.push(msg.clone());
    }
    push_error(store, msg);
}

/// Note an error for the status bar (bounded).
pub fn push_error(store: &mut Store, msg: String) {
    if store.errors.last() != Some(&msg) {
        store.errors.push(msg);
    }
    if store.errors.len() > 64 {
        store.errors.remove(0);
    }
}

/// Apply one source message.
pub fn apply(store: &mut Store, msg: SourceMsg) {
    match msg {
        SourceMsg::Frame { src, pid, frame } => apply_frame(store, src, pid, frame),
        SourceMsg::Bad { src, pid, error } => bad(store, src, pid, error),
        SourceMsg::Closed { src, pid, alive } => {
            let p = store.proc_for(src, pid);
            let proc = &mut store.procs[p];
            if proc.state == ProcState::Live {
                // The plugin says nothing when its process exits; a process that is gone after
                // finalizing every communicator it reported, with nothing in flight at its
                // last summary, ended normally (seen with real NCCL 2.28: a job that finished
                // was shown as crashed). Gone with a communicator still open, it died: a
                // crash, a kill, or an exit without `ncclCommDestroy`/`Finalize`. Gone with
                // operations in flight, it was most likely torn down hung: NCCL finalizes a
                // communicator on `ncclCommAbort` too, which a watchdog calls on a hang before
                // it kills the job. (The summary is sent every 250 ms: a hung job that lives
                // that long after its abort, or a clean one whose last operations have no
                // completion signal and were still waiting for it, is misjudged.)
                let finalized = !proc.comms.is_empty()
                    && proc.comms.iter().all(|c| c.finalized)
                    && proc.open_total == 0;
                proc.state = if alive {
                    ProcState::Ended("stream closed".into())
                } else if finalized {
                    ProcState::Ended("exited after finalizing its communicators".into())
                } else {
                    ProcState::Crashed
                };
            }
            proc.open_ops.clear();
        }
        SourceMsg::Busy { pid } => {
            if !store.busy.contains(&pid) {
                store.busy.push(pid);
            }
        }
        SourceMsg::NotBusy { pid } => store.busy.retain(|&b| b != pid),
        SourceMsg::Error(e) => push_error(store, e),
        SourceMsg::Connected { src, pid, .. } => {
            store.proc_for(src, pid);
        }
    }
}

/// Apply one decoded frame from source `src`.
pub fn apply_frame(store: &mut Store, src: u32, pid: u32, frame: Frame) {
    let p = store.proc_for(src, pid);
    match frame {
        Frame::Hello(h) => {
            let proc = &mut store.procs[p];
            if proc.api_version != 0 {
                // A reconnection: the plugin replays its history; keep only what is newer.
                proc.resume_after = proc.last_end;
                proc.state = ProcState::Live;
            }
            proc.pid = h.pid;
            proc.host = h.host;
            proc.cmdline = h.cmdline;
            proc.api_version = h.api_version;
            proc.plugin_version = h.plugin_version;
            proc.clock = h.clock;
            proc.mask = h.mask;
            proc.active = h.active;
            if h.protocol != ncclprof_shared::PROTOCOL_VERSION {
                let msg = format!(
                    "pid {}: protocol v{} but this viewer speaks v{}: use matching ncclprof builds",
                    h.pid,
                    h.protocol,
                    ncclprof_shared::PROTOCOL_VERSION
                );
                proc.errors.push(msg.clone());
                push_error(store, msg);
            }
        }
        Frame::Meta(m) => {
            for (id, text) in m.strings {
                let strings = &mut store.procs[p].strings;
                let i = id as usize;
                if i >= strings.len() {
                    if i > 1 << 16 {
                        continue;
                    }
                    strings.resize(i + 1, "?".into());
                }
                strings[i] = text;
            }
            for c in m.comms {
                let seen = CommSeen {
                    index: c.index,
                    comm_hash: c.comm_hash,
                    name: c.name,
                    nranks: c.nranks,
                    nnodes: c.nnodes,
                    rank: c.rank,
                    finalized: c.finalized,
                };
                let comms = &mut store.procs[p].comms;
                match comms.iter_mut().find(|x| x.index == seen.index) {
                    Some(x) => *x = seen.clone(),
                    None => comms.push(seen.clone()),
                }
                store.add_member(p, &seen);
            }
        }
        Frame::Events(recs) => {
            ingest_events(store, p, &recs);
            store.enforce_cap();
        }
        Frame::Counters(c) => {
            let proc = &mut store.procs[p];
            if let Some(prev) = &proc.counters {
                let dt = c.at_ns.saturating_sub(prev.at_ns) as f64 / 1e9;
                if dt > 0.0 {
                    proc.rates = c
                        .completed
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| {
                            n.saturating_sub(prev.completed.get(i).copied().unwrap_or(0)) as f64
                                / dt
                        })
                        .collect();
                }
            }
            proc.counters = Some(CountersSeen {
                at_ns: c.at_ns,
                captured: c.captured,
                completed: c.completed,
                dropped: c.dropped,
                open_events: c.open_events,
                disabled: c.disabled,
            });
            store.t_now = store.t_now.max(c.at_ns);
        }
        Frame::InFlight(f) => {
            let proc = &mut store.procs[p];
            proc.open_at = f.at_ns;
            proc.open_total = f.total;
            proc.open_ops = f
                .ops
                .into_iter()
                .map(|o| OpenRow {
                    comm: o.comm,
                    rank: o.rank,
                    kind: o.kind,
                    id: o.id,
                    seq: o.seq,
                    func: o.func,
                    start: o.start_ns,
                    exec_start: o.exec_start_ns,
                    steps_done: o.steps_done,
                    channels_done: o.channels_done,
                    n_channels: o.n_channels,
                    oldest_step: o.oldest_step,
                })
                .collect();
            store.t_now = store.t_now.max(f.at_ns);
        }
        Frame::MaskAck(a) => {
            let proc = &mut store.procs[p];
            proc.mask = a.mask;
            proc.active = a.active;
            proc.acked = true;
        }
        Frame::Bye(b) => {
            store.procs[p].state = ProcState::Ended(b.reason);
            store.procs[p].open_ops.clear();
        }
    }
}

/// Which lane a record belongs to.
fn lane_key(store: &Store, proc: usize, r: &EventRecord) -> LaneKey {
    let mut rank = r.rank;
    if rank < 0
        && let Some(c) = store.procs[proc].comm(r.comm)
    {
        rank = c.rank;
    }
    LaneKey {
        proc,
        comm: r.comm,
        rank,
    }
}

/// Insert a batch of records of process `proc` (one Events frame), skipping replayed history.
///
/// Same effect as [`ingest_record`] per record, but the lane is looked up only when the
/// record's (comm, rank) differs from the previous record's (a drain pass emits each NCCL
/// thread's records in a run, so that is rare), and the store's totals are updated once.
fn ingest_events(store: &mut Store, proc: usize, recs: &[EventRecord]) {
    let resume = store.procs[proc].resume_after;
    let mut last = store.procs[proc].last_end;
    // (comm, rank) as recorded → lane index. The key derived from them depends only on the
    // process's comm table, which a batch of records does not change.
    let mut cached: Option<(u32, i32, usize)> = None;
    // Lanes this batch pushed to: each is settled (late items sorted) once, at the end.
    let mut touched: Vec<usize> = Vec::new();
    let (mut delta, mut n, mut t_min, mut t_max) = (0isize, 0usize, u64::MAX, 0u64);
    for r in recs {
        // (An end unknown is 0: its start says when it was sent.)
        if resume != 0 && r.end_ns.max(r.start_ns) <= resume {
            continue;
        }
        last = last.max(r.end_ns);
        let li = match cached {
            Some((c, k, li)) if c == r.comm && k == r.rank => li,
            _ => {
                let li = store.lane_for(lane_key(store, proc, r));
                cached = Some((r.comm, r.rank, li));
                touched.push(li);
                li
            }
        };
        delta += push_record(&mut store.lanes[li], r);
        n += 1;
        if r.start_ns != 0 {
            t_min = t_min.min(r.start_ns);
        }
        t_max = t_max.max(r.end_ns.max(r.start_ns));
    }
    touched.sort_unstable();
    touched.dedup();
    for li in touched {
        store.lanes[li].settle();
    }
    store.note_many(delta, n, t_min, t_max);
    store.procs[proc].last_end = last;
}

/// Insert one record into its lane.
pub fn ingest_record(store: &mut Store, proc: usize, r: &EventRecord) {
    let key = lane_key(store, proc, r);
    let li = store.lane_for(key);
    let delta = push_record(&mut store.lanes[li], r);
    store.lanes[li].settle();
    store.note(delta, r.start_ns, r.end_ns.max(r.start_ns));
}

/// Insert one record into `lane`; returns the change in heap bytes.
#[inline]
fn push_record(lane: &mut Lane, r: &EventRecord) -> isize {
    let (start, end) = (r.start_ns, r.end_ns.max(r.start_ns));
    match r.kind() {
        Some(EventKind::Coll | EventKind::P2p | EventKind::CeColl) => {
            let strings = r.strings();
            let op = Op {
                id: r.id,
                parent: r.parent,
                start,
                end,
                enq_stop: r.p[3],
                exec_start: if r.kind() == Some(EventKind::CeColl) {
                    0
                } else {
                    r.p[5]
                },
                seq: if r.kind() == Some(EventKind::P2p) {
                    0
                } else {
                    r.p[0]
                },
                count: r.p[1],
                n_warps: if r.kind() == Some(EventKind::Coll) {
                    r.p[4]
                } else {
                    0
                },
                strings,
                x: r.x,
                n_channels: r.sub,
                kind: r.kind,
                flags: r.flags,
            };
            if r.kind() == Some(EventKind::Coll) {
                // End 0 where it is not known (flushed in flight at finalize, say): the banner
                // then gives no "ended … ago".
                let known = if r.has(ncclprof_shared::record::F_END_UNKNOWN) {
                    0
                } else {
                    end
                };
                let last = lane.last_seq.entry(strings[0]).or_insert((op.seq, known));
                if op.seq >= last.0 {
                    *last = (op.seq, known);
                }
            }
            if end > start && !r.has(ncclprof_shared::record::F_END_UNKNOWN) {
                let q = lane.recent.entry(strings[0]).or_default();
                q.push_back(Recent {
                    run: crate::model::analysis::run_time(start, end, op.exec_start),
                    total: end - start,
                });
                if q.len() > RECENT {
                    q.pop_front();
                }
            }
            lane.ops.push(start, |_| Some(op))
        }
        Some(EventKind::KernelCh) => {
            let k = Kernel {
                id: r.id,
                parent: r.parent,
                start,
                end,
                gpu_start: r.p[0],
                gpu_stop: r.p[1],
                cpu_start: r.p[2],
                cpu_stop: r.p[3],
                gpu_id: r.p[4].min(u64::from(u32::MAX)) as u32,
                channel: r.sub,
                flags: r.flags,
            };
            lane.kernels.push(start, |_| Some(k))
        }
        Some(EventKind::ProxyOp) => {
            let o = ProxyOp {
                id: r.id,
                parent: r.parent,
                start,
                end,
                in_progress: r.p[4],
                bytes: r.p[3],
                pid: r.p[0],
                chunk_size: r.p[2],
                n_steps: r.p[1].min(u64::from(u32::MAX)) as u32,
                peer: r.x,
                channel: r.sub,
                states: r.p[5] as u8,
                flags: r.flags,
            };
            lane.proxy_ops.push(start, |_| Some(o))
        }
        Some(EventKind::ProxyStep) => lane.steps.push(start, |b| Step::pack(r, b)),
        _ => lane.other.push(start, |_| Some(*r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch goes in exactly as record-by-record ingest would put it (lane cache, totals).
    #[test]
    fn events_batch_equals_record_by_record() {
        let meta = || {
            Frame::Meta(wire::Meta {
                comms: (0..3)
                    .map(|i| wire::CommInfo {
                        index: i,
                        comm_hash: 7,
                        name: "w".into(),
                        nranks: 4,
                        nnodes: 1,
                        rank: i as i32 + 1,
                        api_version: 6,
                        finalized: false,
                    })
                    .collect(),
                strings: vec![(1, "AllReduce".into())],
            })
        };
        let kinds = [
            EventKind::ProxyStep,
            EventKind::ProxyStep,
            EventKind::ProxyOp,
            EventKind::Coll,
            EventKind::KernelCh,
            EventKind::P2p,
            EventKind::NetPlugin,
        ];
        let recs: Vec<EventRecord> = (0..3000u64)
            .map(|i| {
                let start = 1_000_000 + i * 997 % 50_000 + (i / 7) * 3_000;
                EventRecord {
                    id: i + 1,
                    start_ns: if i % 101 == 0 { 0 } else { start },
                    end_ns: start + (i * 31) % 20_000,
                    comm: (i / 40 % 4) as u32,
                    rank: if i % 3 == 0 { -1 } else { (i / 100 % 3) as i32 },
                    kind: kinds[(i % 7) as usize] as u8,
                    sub: (i % 4) as u8,
                    p: [i % 8, start + 1, start + 2, start + 3, 4096, 0],
                    ..Default::default()
                }
            })
            .collect();
        let mut a = Store::new(256 << 10);
        let mut b = Store::new(256 << 10);
        apply_frame(&mut a, 1, 9, meta());
        apply_frame(&mut b, 1, 9, meta());
        for part in recs.chunks(700) {
            apply_frame(&mut a, 1, 9, Frame::Events(part.to_vec().into()));
            let p = b.proc_for(1, 9);
            for r in part {
                ingest_record(&mut b, p, r);
                b.procs[p].last_end = b.procs[p].last_end.max(r.end_ns);
            }
            b.enforce_cap();
        }
        assert!(a.evicted > 0);
        let sum = |s: &Store| {
            (
                s.bytes,
                s.retained,
                s.ingested,
                s.evicted,
                s.t_min,
                s.t_max,
                s.procs[0].last_end,
                s.recount_bytes(),
            )
        };
        assert_eq!(sum(&a), sum(&b));
        assert_eq!(a.lanes.len(), b.lanes.len());
        for (x, y) in a.lanes.iter().zip(&b.lanes) {
            assert_eq!(x.key, y.key);
            assert!(x.steps.iter().eq(y.steps.iter()));
            assert!(x.proxy_ops.iter().eq(y.proxy_ops.iter()));
            assert!(x.ops.iter().eq(y.ops.iter()));
            assert!(x.kernels.iter().eq(y.kernels.iter()));
            assert!(x.other.iter().eq(y.other.iter()));
        }
    }

    /// A process gone after finalizing every communicator, nothing in flight, ended; gone with
    /// one open, or with operations in flight (a hung job aborted), crashed.
    #[test]
    fn a_process_gone_is_crashed_unless_it_finalized_with_nothing_in_flight() {
        let meta = |finalized: [bool; 2]| {
            Frame::Meta(wire::Meta {
                comms: (0..2)
                    .map(|i| wire::CommInfo {
                        index: i,
                        comm_hash: 7 + u64::from(i),
                        name: String::new(),
                        nranks: 1,
                        nnodes: 1,
                        rank: 0,
                        api_version: 5,
                        finalized: finalized[i as usize],
                    })
                    .collect(),
                strings: Vec::new(),
            })
        };
        // The stream closes and the process is no longer alive: the state it is left in.
        let gone_now = |st: &mut Store| {
            apply(
                st,
                SourceMsg::Closed {
                    src: 1,
                    pid: 9,
                    alive: false,
                },
            );
            st.procs[0].state.clone()
        };
        let gone_with = |finalized: [bool; 2], in_flight: u32| {
            let mut st = Store::new(1 << 20);
            apply_frame(&mut st, 1, 9, meta([false, false]));
            apply_frame(
                &mut st,
                1,
                9,
                Frame::InFlight(wire::InFlight {
                    at_ns: 1,
                    total: in_flight,
                    ops: Vec::new(),
                }),
            );
            apply_frame(&mut st, 1, 9, meta(finalized));
            gone_now(&mut st)
        };
        let gone = |finalized| gone_with(finalized, 0);
        assert!(matches!(gone([true, true]), ProcState::Ended(r) if r.contains("finalizing")));
        assert_eq!(gone([true, false]), ProcState::Crashed);
        assert_eq!(gone([false, false]), ProcState::Crashed);
        // Every communicator finalized, but an operation in flight at the last summary.
        assert_eq!(gone_with([true, true], 1), ProcState::Crashed);
        // No communicator reported at all: nothing says it ended normally.
        assert_eq!(gone_now(&mut Store::new(1 << 20)), ProcState::Crashed);
    }

    #[test]
    fn malformed_frames_are_visible_errors_not_panics() {
        let mut st = Store::new(1 << 20);
        apply_bytes(&mut st, 1, 42, b"garbage");
        // This version's header, kind 3, a 5-byte body that does not decode.
        let mut bad = b"NCPF\x00\x00\x03\x00\x05\x00\x00\x00\x00\x00\x00\x00abcde".to_vec();
        bad[4] = ncclprof_shared::PROTOCOL_VERSION as u8;
        apply_bytes(&mut st, 1, 42, &bad);
        let mut ok = wire::encode(&Frame::Bye(wire::Bye { reason: "x".into() })).unwrap();
        ok[4] = 9; // version
        apply_bytes(&mut st, 1, 42, &ok);
        assert_eq!(st.procs.len(), 1);
        assert_eq!(st.procs[0].errors.len(), 3);
        assert!(
            st.errors.last().unwrap().contains("version mismatch"),
            "{:?}",
            st.errors
        );
        assert!(st.errors[0].contains("pid 42: bad frame"));
    }
}
