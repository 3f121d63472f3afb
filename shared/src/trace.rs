//! The ncclprof snapshot: completed records → Chrome trace event JSON that Perfetto and
//! chrome://tracing open, and that `ncclprof-tui open` reads back exactly. One writer for the
//! viewer's `s` key and the plugin's `NCCL_PROFILE_DUMP_FILE`, streamed (no per-event JSON tree).
//!
//! Layout: one trace process per rank lane, named "rank R · comm NAME · HOST · pid PID"; threads
//! for collectives, other events (API, groups), and per channel kernels, proxy ops and steps.
//! `ts`/`dur` are µs on the shared host clock (`CLOCK_MONOTONIC`). Every record's raw fields ride
//! in `args.ncclprof`; `otherData` carries the processes, communicators, string tables, masks
//! and counters.

use std::io::{self, Write};

use crate::kind::EventKind;
use crate::record::EventRecord;
use crate::wire::{CommInfo, DropReason, InFlight};

/// Format name in `otherData.format`.
pub const FORMAT: &str = "ncclprof-snapshot";
/// Snapshot format version.
pub const VERSION: u32 = 1;

/// Trace thread ids ("lanes").
pub const TID_OPS: u32 = 1;
pub const TID_OTHER: u32 = 2;
pub const TID_KERNEL: u32 = 100;
pub const TID_PROXY: u32 = 200;
pub const TID_STEPS: u32 = 300;

/// One plugin process, as the snapshot's `otherData.processes` describes it.
#[derive(Debug, Clone, Default)]
pub struct Process {
    pub src: u32,
    pub pid: u32,
    pub host: String,
    pub cmdline: String,
    pub api_version: u32,
    pub plugin_version: String,
    pub clock: String,
    pub mask: u32,
    pub active: bool,
    pub requested_mask: Option<u32>,
    /// "live", "ended: …", "crashed", "offline".
    pub state: String,
    pub comms: Vec<CommInfo>,
    /// String table, index = id (0 = none).
    pub strings: Vec<String>,
    pub captured: Vec<u64>,
    pub completed: Vec<u64>,
    pub dropped: Vec<u64>,
    /// Collectives and p2p ops still running at the latest in-flight summary (a hung job's
    /// snapshot shows what it hangs on): `otherData` keeps them for `open`, and each is also
    /// an `InFlight` span, start to `at_ns`, on its rank's lane for Perfetto.
    pub in_flight: Option<InFlight>,
}

impl Process {
    fn string(&self, id: u16) -> &str {
        self.strings.get(usize::from(id)).map_or("", String::as_str)
    }
    fn comm(&self, index: u32) -> Option<&CommInfo> {
        self.comms.iter().find(|c| c.index == index)
    }
}

/// One trace process: the records of one (process, communicator, rank).
#[derive(Debug, Clone, Default)]
pub struct Lane<R = Vec<(u32, EventRecord)>> {
    /// Index into the `procs` slice.
    pub proc: usize,
    pub comm: u32,
    pub rank: i32,
    /// (trace thread, record).
    pub records: R,
}

/// A lane's records, produced on demand. [`write()`] walks them twice, once for the lane's
/// thread names and once for its events, so a viewer's snapshot unpacks its store as it
/// writes instead of holding a copy of it (104 B per event, three times the store itself).
pub trait Records {
    /// Call `f` with every record and its trace thread; stop at the first error.
    fn each(&self, f: &mut dyn FnMut(u32, &EventRecord) -> io::Result<()>) -> io::Result<()>;
}

impl Records for Vec<(u32, EventRecord)> {
    fn each(&self, f: &mut dyn FnMut(u32, &EventRecord) -> io::Result<()>) -> io::Result<()> {
        self.iter().try_for_each(|(t, r)| f(*t, r))
    }
}

/// Snapshot-wide figures for `otherData`.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub retained: u64,
    pub evicted: u64,
    pub dropped: u64,
    /// Who wrote it ("ncclprof-tui 0.1.0", "ncclprof-plugin 0.1.0").
    pub writer: String,
}

/// The trace thread a record belongs on.
pub fn tid_of(r: &EventRecord) -> u32 {
    match r.kind() {
        Some(EventKind::Coll | EventKind::P2p) => TID_OPS,
        Some(EventKind::KernelCh) => TID_KERNEL + u32::from(r.sub),
        Some(EventKind::ProxyOp) => TID_PROXY + u32::from(r.sub),
        Some(EventKind::ProxyStep) => TID_STEPS + u32::from(r.sub),
        _ => TID_OTHER,
    }
}

/// Group records into lanes by (communicator, rank), threads chosen by [`tid_of`].
pub fn lanes_of(proc: usize, records: &[EventRecord]) -> Vec<Lane> {
    let mut lanes: Vec<Lane> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for r in records {
        let i = *index.entry((r.comm, r.rank)).or_insert_with(|| {
            lanes.push(Lane {
                proc,
                comm: r.comm,
                rank: r.rank,
                records: Vec::new(),
            });
            lanes.len() - 1
        });
        lanes[i].records.push((tid_of(r), *r));
    }
    lanes
}

fn thread_name(tid: u32) -> String {
    match tid {
        TID_OPS => "collectives / p2p".into(),
        TID_OTHER => "API, groups, other".into(),
        t if t >= TID_STEPS => format!("steps ch {}", t - TID_STEPS),
        t if t >= TID_PROXY => format!("proxy ch {}", t - TID_PROXY),
        t => format!("kernel ch {}", t.saturating_sub(TID_KERNEL)),
    }
}

fn lane_title<R>(p: &Process, lane: &Lane<R>) -> String {
    if lane.comm == u32::MAX {
        return format!("process · {} · pid {}", p.host, p.pid);
    }
    let comm = p.comm(lane.comm).map_or_else(
        || "none".to_string(),
        |c| {
            if c.name.is_empty() {
                format!("{:x}", c.comm_hash)
            } else {
                c.name.clone()
            }
        },
    );
    format!(
        "rank {} · comm {} · {} · pid {}",
        lane.rank, comm, p.host, p.pid
    )
}

/// A JSON string literal (escaped).
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A JSON string literal, written without allocating where nothing needs escaping (names,
/// datatypes: nearly always).
struct Js<'a>(&'a str);

impl std::fmt::Display for Js<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            write!(f, "\"{}\"", self.0)
        } else {
            f.write_str(&js(self.0))
        }
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn name_of<'a>(p: &'a Process, r: &EventRecord) -> std::borrow::Cow<'a, str> {
    match r.kind() {
        Some(
            EventKind::Coll
            | EventKind::P2p
            | EventKind::CeColl
            | EventKind::CollApi
            | EventKind::P2pApi,
        ) => p.string(r.strings()[0]).into(),
        Some(k) => k.name().into(),
        None => format!("kind {}", r.kind).into(),
    }
}

/// The readable args of a record, written as JSON object members (no braces).
fn write_args(out: &mut impl Write, p: &Process, proc: usize, r: &EventRecord) -> io::Result<()> {
    let s = r.strings();
    match r.kind() {
        Some(EventKind::Coll) => write!(
            out,
            "\"SeqNum\":{},\"Count\":{},\"Datatype\":{},\"Algorithm\":{},\"Protocol\":{},\"nChannels\":{},\"nWarps\":{},\"Root\":{},\"EnqueueStopUs\":{},\"ExecStartUs\":{},",
            r.p[0],
            r.p[1],
            Js(p.string(s[1])),
            Js(p.string(s[2])),
            Js(p.string(s[3])),
            r.sub,
            r.p[4],
            r.x,
            us(r.p[3]),
            us(r.p[5])
        )?,
        Some(EventKind::P2p) => write!(
            out,
            "\"Peer\":{},\"Count\":{},\"Datatype\":{},\"nChannels\":{},\"EnqueueStopUs\":{},\"ExecStartUs\":{},",
            r.x,
            r.p[1],
            Js(p.string(s[1])),
            r.sub,
            us(r.p[3]),
            us(r.p[5])
        )?,
        Some(EventKind::KernelCh) => write!(
            out,
            "\"Channel\":{},\"StartGpuClk\":{},\"StopGpuClk\":{},\"GpuId\":{},",
            r.sub, r.p[0], r.p[1], r.p[4]
        )?,
        Some(EventKind::ProxyOp) => write!(
            out,
            "\"Channel\":{},\"Peer\":{},\"Steps\":{},\"ChunkSize\":{},\"transSize\":{},\"InProgressUs\":{},\"Pid\":{},",
            r.sub,
            r.x,
            r.p[1],
            r.p[2],
            r.p[3],
            us(r.p[4]),
            r.p[0]
        )?,
        Some(EventKind::ProxyStep) => {
            write!(
                out,
                "\"Step\":{},\"Channel\":{},\"Peer\":{},\"transSize\":{},",
                r.p[0], r.sub, r.x, r.p[4]
            )?;
            for (ph, d) in r.step_phases() {
                write!(out, "{}:{},", Js(ph.name()), us(d))?;
            }
        }
        _ => {
            if s[0] != 0 {
                write!(out, "\"func\":{},", Js(p.string(s[0])))?;
            }
        }
    }
    match p.comm(r.comm) {
        Some(c) => write!(out, "\"CommHash\":{},", c.comm_hash)?,
        None => write!(out, "\"CommHash\":null,")?,
    }
    write!(
        out,
        "\"Rank\":{},\"ncclprof\":{{\"proc\":{proc},\"id\":{},\"parent\":{},\"start_ns\":{},\"end_ns\":{},\"comm\":{},\"rank\":{},\"kind\":{},\"sub\":{},\"flags\":{},\"x\":{},\"p\":[{},{},{},{},{},{}]}}",
        r.rank,
        r.id,
        r.parent,
        r.start_ns,
        r.end_ns,
        r.comm,
        r.rank,
        r.kind,
        r.sub,
        r.flags,
        r.x,
        r.p[0],
        r.p[1],
        r.p[2],
        r.p[3],
        r.p[4],
        r.p[5]
    )
}

/// Each in-flight op as a span from its start to the summary's time, on its rank's lane (a new
/// lane after the others when that rank has no retained record). No `args.ncclprof`: these
/// are not records, and `open` restores them from `otherData` instead.
fn write_in_flight<R>(
    out: &mut impl Write,
    procs: &[Process],
    lanes: &[Lane<R>],
    sep: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut tpids: std::collections::HashMap<(usize, u32, i32), u64> = lanes
        .iter()
        .enumerate()
        .map(|(i, l)| ((l.proc, l.comm, l.rank), i as u64 + 1))
        .collect();
    for (pi, p) in procs.iter().enumerate() {
        let Some(f) = &p.in_flight else { continue };
        for o in &f.ops {
            // An op with no rank is its communicator's rank's, as records are (the viewer's
            // lane key): not a lane of its own.
            let rank = match p.comm(o.comm) {
                Some(c) if o.rank < 0 => c.rank,
                _ => o.rank,
            };
            let next = tpids.len() as u64 + 1;
            let tpid = *tpids.entry((pi, o.comm, rank)).or_insert_with(|| next);
            if tpid == next {
                let lane = Lane {
                    proc: pi,
                    comm: o.comm,
                    rank,
                    records: (),
                };
                sep(out)?;
                write!(
                    out,
                    "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{tpid},\"tid\":0,\"args\":{{\"name\":{}}}}}",
                    Js(&lane_title(p, &lane))
                )?;
            }
            let kind = EventKind::from_u8(o.kind).map_or("?", EventKind::name);
            let func = p.string(o.func);
            let name = if func.is_empty() { kind } else { func };
            // A send/recv has no seq: its peer (`OpenOp::seq`).
            let seq_key = if o.kind == EventKind::P2p as u8 {
                "Peer"
            } else {
                "SeqNum"
            };
            sep(out)?;
            write!(
                out,
                "{{\"ph\":\"X\",\"name\":{},\"cat\":\"InFlight\",\"pid\":{tpid},\"tid\":{TID_OPS},\"ts\":{},\"dur\":{},\"args\":{{\"InFlight\":true,\"Kind\":\"{kind}\",\"{seq_key}\":{},\"AgeUs\":{},\"RunningUs\":{},\"StepsDone\":{},\"ChannelsDone\":{},\"nChannels\":{},\"Rank\":{},\"OldestOpenStep\":{}}}}}",
                Js(&format!("{name} (in flight)")),
                us(o.start_ns),
                us(f.at_ns.saturating_sub(o.start_ns)),
                o.seq,
                us(f.at_ns.saturating_sub(o.start_ns)),
                // Since it started to run; null while queued (or not known).
                if o.exec_start_ns > 0 {
                    us(f.at_ns.saturating_sub(o.exec_start_ns)).to_string()
                } else {
                    "null".to_string()
                },
                o.steps_done.iter().map(|&s| u64::from(s)).sum::<u64>(),
                o.channels_done,
                o.n_channels,
                rank,
                // Where it waits: channel, step, open for how long (null: none open).
                o.oldest_step.map_or("null".to_string(), |s| format!(
                    "{{\"Channel\":{},\"Step\":{},\"OpenUs\":{},\"State\":{}}}",
                    s.channel,
                    s.step,
                    us(f.at_ns.saturating_sub(s.start_ns)),
                    crate::kind::state::step_state(u32::from(s.state))
                        .map_or("null".to_string(), |(n, _)| format!("\"{n}\""))
                ))
            )?;
        }
    }
    Ok(())
}

fn other_data(procs: &[Process], totals: &Totals) -> serde_json::Value {
    use serde_json::json;
    let ps: Vec<serde_json::Value> = procs
        .iter()
        .map(|p| {
            json!({
                "src": p.src, "pid": p.pid, "host": p.host, "cmdline": p.cmdline,
                "api_version": p.api_version, "plugin_version": p.plugin_version,
                "clock": p.clock, "mask": p.mask, "mask_names": crate::mask::names(p.mask),
                "active": p.active, "requested_mask": p.requested_mask, "state": p.state,
                "comms": p.comms.iter().map(|c| json!({
                    "index": c.index, "comm_hash": c.comm_hash, "name": c.name,
                    "nranks": c.nranks, "nnodes": c.nnodes, "rank": c.rank, "finalized": c.finalized,
                })).collect::<Vec<_>>(),
                "strings": p.strings,
                "dropped": p.dropped,
                "dropped_reasons": DropReason::ALL.iter().map(|r| r.name()).collect::<Vec<_>>(),
                "captured": p.captured,
                "completed": p.completed,
                "in_flight": p.in_flight.as_ref().map(|f| json!({
                    "at_ns": f.at_ns, "total": f.total,
                    "ops": f.ops.iter().map(|o| json!({
                        "comm": o.comm, "rank": o.rank, "kind": o.kind, "id": o.id, "seq": o.seq,
                        "func": o.func, "start_ns": o.start_ns, "exec_start_ns": o.exec_start_ns,
                        "steps_done": o.steps_done,
                        "channels_done": o.channels_done, "n_channels": o.n_channels,
                        "oldest_step": o.oldest_step.map(|s| json!({
                            "channel": s.channel, "step": s.step, "start_ns": s.start_ns,
                            "state": s.state,
                        })),
                    })).collect::<Vec<_>>(),
                })),
            })
        })
        .collect();
    let mut hosts: Vec<&str> = procs.iter().map(|p| p.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    json!({
        "format": FORMAT,
        "version": VERSION,
        "viewer_version": totals.writer,
        "protocol": crate::PROTOCOL_VERSION,
        "hosts": hosts,
        "retained": totals.retained,
        "evicted": totals.evicted,
        "dropped": totals.dropped,
        "processes": ps,
    })
}

/// Write the snapshot. Returns the number of events written.
pub fn write<R: Records>(
    out: &mut impl Write,
    procs: &[Process],
    lanes: &[Lane<R>],
    totals: &Totals,
) -> io::Result<u64> {
    out.write_all(b"{\"traceEvents\":[\n")?;
    let mut first = true;
    let mut sep = |out: &mut dyn Write| -> io::Result<()> {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        Ok(())
    };
    let mut n = 0u64;
    for (li, lane) in lanes.iter().enumerate() {
        let Some(p) = procs.get(lane.proc) else {
            continue;
        };
        let tpid = li as u64 + 1;
        sep(out)?;
        write!(
            out,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{tpid},\"tid\":0,\"args\":{{\"name\":{}}}}}",
            Js(&lane_title(p, lane))
        )?;
        sep(out)?;
        write!(
            out,
            "{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{tpid},\"tid\":0,\"args\":{{\"sort_index\":{}}}}}",
            lane.rank.max(0) as u64 * 1000 + li as u64
        )?;
        let mut tids = std::collections::BTreeSet::new();
        lane.records.each(&mut |t, _| {
            tids.insert(t);
            Ok(())
        })?;
        for t in tids {
            sep(out)?;
            write!(
                out,
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{tpid},\"tid\":{t},\"args\":{{\"name\":{}}}}}",
                Js(&thread_name(t))
            )?;
        }
        lane.records.each(&mut |tid, r| {
            sep(out)?;
            let cat = r.kind().map_or("?", EventKind::name);
            write!(
                out,
                "{{\"ph\":\"X\",\"name\":{},\"cat\":\"{cat}\",\"pid\":{tpid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{{",
                Js(&name_of(p, r)),
                us(r.start_ns),
                us(r.end_ns.saturating_sub(r.start_ns))
            )?;
            write_args(out, p, lane.proc, r)?;
            out.write_all(b"}}")?;
            n += 1;
            Ok(())
        })?;
    }
    // Not counted in `n`: the count is of records.
    write_in_flight(out, procs, lanes, &mut sep)?;
    out.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    serde_json::to_writer(&mut *out, &other_data(procs, totals)).map_err(io::Error::other)?;
    out.write_all(b"}\n")?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::pack_strings;

    #[test]
    fn records_produced_on_demand_write_what_a_collected_lane_does() {
        // A lane that builds each record as it is asked (the viewer's store unpacking).
        struct Made(u64);
        impl Records for Made {
            fn each(
                &self,
                f: &mut dyn FnMut(u32, &EventRecord) -> io::Result<()>,
            ) -> io::Result<()> {
                for i in 0..self.0 {
                    let r = made(i);
                    f(tid_of(&r), &r)?;
                }
                Ok(())
            }
        }
        fn made(i: u64) -> EventRecord {
            EventRecord {
                id: i + 1,
                kind: if i.is_multiple_of(2) {
                    EventKind::ProxyStep as u8
                } else {
                    EventKind::KernelCh as u8
                },
                sub: (i % 3) as u8,
                start_ns: 1_000 * i,
                end_ns: 1_000 * i + 500,
                ..Default::default()
            }
        }
        let p = Process::default();
        fn lane<R>(records: R) -> Lane<R> {
            Lane {
                proc: 0,
                comm: 0,
                rank: 1,
                records,
            }
        }
        let collected: Vec<(u32, EventRecord)> =
            (0..10).map(made).map(|r| (tid_of(&r), r)).collect();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let t = Totals::default();
        assert_eq!(
            write(&mut a, std::slice::from_ref(&p), &[lane(collected)], &t).unwrap(),
            10
        );
        assert_eq!(write(&mut b, &[p], &[lane(Made(10))], &t).unwrap(), 10);
        assert_eq!(a, b);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        let names = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .count();
        assert_eq!(names, 6, "3 step and 3 kernel channels, each named once");
    }

    #[test]
    fn a_name_that_needs_escaping_is_escaped() {
        assert_eq!(Js("plain").to_string(), "\"plain\"");
        assert_eq!(Js("a\"b\\c\nd").to_string(), js("a\"b\\c\nd"));
        assert_eq!(Js("µs · é").to_string(), js("µs · é"));
    }

    #[test]
    fn valid_json_with_named_tracks_and_raw_records() {
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
        let p = Process {
            pid: 42,
            host: "h\"q".into(),
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
            strings: vec![String::new(), "AllReduce".into(), "ncclFloat32".into()],
            ..Default::default()
        };
        let lanes = lanes_of(0, &[rec]);
        let mut out = Vec::new();
        assert_eq!(
            write(&mut out, &[p], &lanes, &Totals::default()).unwrap(),
            1
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let x = evs.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(x["name"], "AllReduce");
        assert_eq!(x["args"]["SeqNum"], 7);
        assert_eq!(x["args"]["Datatype"], "ncclFloat32");
        assert_eq!(x["dur"], 4.0);
        assert_eq!(x["args"]["ncclprof"]["p"][5], 3000);
        let m = evs.iter().find(|e| e["name"] == "process_name").unwrap();
        assert_eq!(m["args"]["name"], "rank 3 · comm world · h\"q · pid 42");
        assert_eq!(v["otherData"]["format"], FORMAT);
    }

    /// (From a review.) In-flight spans keep the JSON valid and every span on a named trace
    /// process, whatever the lanes: none, the op's own, another process's, or a lane whose
    /// process is not in the list; with empty, unknown and odd function names.
    #[test]
    fn in_flight_spans_in_odd_cases() {
        let op = |comm: u32, rank: i32, func: u16, start: u64| crate::wire::OpenOp {
            comm,
            rank,
            kind: EventKind::Coll as u8,
            id: 1,
            seq: 2,
            func,
            start_ns: start,
            exec_start_ns: 0,
            steps_done: vec![],
            channels_done: 0,
            n_channels: 0,
            oldest_step: None,
        };
        let flight = |ops| {
            Some(InFlight {
                at_ns: 5_000,
                total: 9,
                ops,
            })
        };
        let procs = vec![
            Process {
                strings: vec![String::new(), "Ro\"u\\nd\n".into()],
                in_flight: flight(vec![
                    op(0, 2, 0, 1_000),
                    op(0, 2, 1, 9_000),
                    op(u32::MAX, -1, 77, 0),
                    op(3, 1, 1, u64::MAX),
                ]),
                ..Default::default()
            },
            Process {
                in_flight: flight(vec![op(0, 2, 0, 1_000)]),
                ..Default::default()
            },
            Process::default(),
        ];
        let rec = EventRecord {
            kind: EventKind::Coll as u8,
            rank: 2,
            ..Default::default()
        };
        for lanes in [
            Vec::<Lane>::new(),
            lanes_of(0, &[rec]),
            lanes_of(1, &[rec]),
            lanes_of(7, &[rec]),
        ] {
            let mut out = Vec::new();
            write(&mut out, &procs, &lanes, &Totals::default()).unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
            let ev = v["traceEvents"].as_array().unwrap();
            let mut pids: Vec<u64> = ev
                .iter()
                .filter(|e| e["name"] == "process_name")
                .map(|e| e["pid"].as_u64().unwrap())
                .collect();
            pids.sort_unstable();
            let n = pids.len();
            pids.dedup();
            assert_eq!(n, pids.len(), "a trace pid named twice");
            for e in ev.iter().filter(|e| e["ph"] == "X") {
                let pid = e["pid"].as_u64().unwrap();
                assert!(pids.contains(&pid), "span on an unnamed pid {pid}");
            }
        }
    }

    /// An in-flight send/recv's span names its peer (it has no seq), a collective's its seq.
    #[test]
    fn an_in_flight_p2p_names_its_peer() {
        let op = |kind: EventKind, seq: u64| crate::wire::OpenOp {
            comm: 0,
            rank: 0,
            kind: kind as u8,
            id: seq,
            seq,
            func: 0,
            start_ns: 1_000,
            exec_start_ns: 0,
            steps_done: vec![0, 0, 2, 1],
            channels_done: 0,
            n_channels: 2,
            oldest_step: None,
        };
        let procs = vec![Process {
            in_flight: Some(InFlight {
                at_ns: 5_000,
                total: 2,
                ops: vec![op(EventKind::P2p, 5), op(EventKind::Coll, 7)],
            }),
            ..Default::default()
        }];
        let mut out = Vec::new();
        write(&mut out, &procs, &Vec::<Lane>::new(), &Totals::default()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        let spans: Vec<&serde_json::Value> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "InFlight")
            .collect();
        assert_eq!(spans[0]["args"]["Peer"], 5);
        assert_eq!(spans[0]["args"]["OldestOpenStep"], serde_json::Value::Null);
        assert!(spans[0]["args"].get("SeqNum").is_none());
        assert_eq!(spans[0]["args"]["StepsDone"], 3);
        assert_eq!(spans[1]["args"]["SeqNum"], 7);
    }
}
