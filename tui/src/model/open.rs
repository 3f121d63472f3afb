//! `open FILE...`: our snapshots and NCCL example-plugin dumps → the same frames live
//! processes send, fed through the real ingest.
//!
//! Example-plugin dumps (spec §6.4): a JSON array of async `b`/`e` records, one per line, one
//! file per communicator rank, ending in `{}]`. Tolerated quirks: `ts` 0.0 begins (CollApi,
//! P2pApi, KernelLaunch), KernelCh ids always 0, unquoted `Stream`/`datatype` values
//! (2.28–2.29.2; repaired before parsing), missing ends and truncated files (each line is
//! parsed on its own). Files of different processes do not share a zero: they are lined up on
//! the first Coll of the same (commHash, seq) found in an already aligned file.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, F_END_KNOWN, F_END_UNKNOWN, F_SEND, pack_strings};
use ncclprof_shared::wire::{CommInfo, Counters, Frame, Meta, PluginHello};
use serde_json::Value;

use super::ingest::{self, SourceMsg};
use super::snapshot;
use super::store::{ProcState, Store};

/// Added to every converted dump time so that no real time is 0 ("did not happen").
pub const DUMP_BASE_NS: u64 = 1_000_000_000;

/// Load files into `store`. Each file is either our snapshot or an example-plugin dump.
/// Returns one line per file describing what was read.
pub fn load(store: &mut Store, paths: &[PathBuf]) -> anyhow::Result<Vec<String>> {
    let mut dumps = Vec::new();
    let mut notes = Vec::new();
    let mut next_src = store.procs.iter().map(|p| p.src).max().unwrap_or(0) + 1;
    for path in paths {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') {
            let v: Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not valid JSON", path.display()))?;
            let msgs = read_snapshot(&v, &mut next_src)
                .with_context(|| format!("{} is not an ncclprof snapshot", path.display()))?;
            notes.push(format!(
                "{}: ncclprof snapshot, {} frames",
                path.display(),
                msgs.len()
            ));
            for m in msgs {
                ingest::apply(store, m);
            }
        } else if trimmed.starts_with('[') {
            let d = parse_dump(path, &text);
            notes.push(format!(
                "{}: example-plugin dump, {} spans{}",
                path.display(),
                d.spans.len(),
                if d.bad_lines > 0 {
                    format!(", {} unreadable lines skipped", d.bad_lines)
                } else {
                    String::new()
                }
            ));
            dumps.push(d);
        } else {
            bail!(
                "{}: neither an ncclprof snapshot (JSON object) nor an example-plugin dump (JSON array)",
                path.display()
            );
        }
    }
    if !dumps.is_empty() {
        for m in dumps_to_frames(&dumps, &mut next_src) {
            ingest::apply(store, m);
        }
    }
    for p in &mut store.procs {
        if p.state == ProcState::Live {
            p.state = ProcState::Offline;
        }
        p.open_ops.clear();
    }
    Ok(notes)
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Our snapshot → frames.
pub fn read_snapshot(v: &Value, next_src: &mut u32) -> anyhow::Result<Vec<SourceMsg>> {
    let od = v.get("otherData").context("no otherData")?;
    if s(od, "format") != snapshot::FORMAT {
        bail!("otherData.format is not {:?}", snapshot::FORMAT);
    }
    let ver = u(od, "version");
    if ver != u64::from(snapshot::VERSION) {
        bail!(
            "snapshot version {ver}; this viewer reads version {}",
            snapshot::VERSION
        );
    }
    let procs = od
        .get("processes")
        .and_then(Value::as_array)
        .context("no processes")?;
    let mut out = Vec::new();
    let mut srcs = Vec::new();
    for p in procs {
        let src = *next_src;
        *next_src += 1;
        let pid = u(p, "pid") as u32;
        srcs.push((src, pid));
        let frame = |frame| SourceMsg::Frame { src, pid, frame };
        out.push(frame(Frame::Hello(PluginHello {
            protocol: ncclprof_shared::PROTOCOL_VERSION,
            pid,
            host: s(p, "host").into(),
            uid: 0,
            cmdline: s(p, "cmdline").into(),
            api_version: u(p, "api_version") as u32,
            plugin_version: s(p, "plugin_version").into(),
            mask: u(p, "mask") as u32,
            active: p.get("active").and_then(Value::as_bool).unwrap_or(false),
            clock: s(p, "clock").into(),
        })));
        let strings = p
            .get("strings")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .enumerate()
                    .skip(1)
                    .map(|(i, t)| (i as u16, t.as_str().unwrap_or("?").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let comms = p
            .get("comms")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|c| CommInfo {
                        index: u(c, "index") as u32,
                        comm_hash: u(c, "comm_hash"),
                        name: s(c, "name").into(),
                        nranks: c.get("nranks").and_then(Value::as_i64).unwrap_or(1) as i32,
                        nnodes: c.get("nnodes").and_then(Value::as_i64).unwrap_or(1) as i32,
                        rank: c.get("rank").and_then(Value::as_i64).unwrap_or(-1) as i32,
                        api_version: u(p, "api_version") as u32,
                        finalized: c.get("finalized").and_then(Value::as_bool).unwrap_or(false),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(frame(Frame::Meta(Meta { comms, strings })));
        let arr = |k: &str| -> Vec<u64> {
            p.get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
                .unwrap_or_default()
        };
        out.push(frame(Frame::Counters(Counters {
            dropped: arr("dropped"),
            captured: arr("captured"),
            completed: arr("completed"),
            ..Default::default()
        })));
    }
    let mut recs: Vec<Vec<EventRecord>> = vec![Vec::new(); srcs.len()];
    for e in v
        .get("traceEvents")
        .and_then(Value::as_array)
        .context("no traceEvents")?
    {
        let Some(r) = e.get("args").and_then(|a| a.get("ncclprof")) else {
            continue;
        };
        let proc = u(r, "proc") as usize;
        let Some(list) = recs.get_mut(proc) else {
            continue;
        };
        let mut p = [0u64; 6];
        if let Some(a) = r.get("p").and_then(Value::as_array) {
            for (i, x) in a.iter().take(6).enumerate() {
                p[i] = x.as_u64().unwrap_or(0);
            }
        }
        list.push(EventRecord {
            id: u(r, "id"),
            parent: u(r, "parent"),
            start_ns: u(r, "start_ns"),
            end_ns: u(r, "end_ns"),
            comm: u(r, "comm") as u32,
            rank: r.get("rank").and_then(Value::as_i64).unwrap_or(-1) as i32,
            kind: u(r, "kind") as u8,
            sub: u(r, "sub") as u8,
            flags: u(r, "flags") as u16,
            x: u(r, "x") as u32,
            p,
        });
    }
    for ((src, pid), list) in srcs.into_iter().zip(recs) {
        for chunk in list.chunks(ncclprof_shared::wire::MAX_RECORDS_PER_FRAME) {
            out.push(SourceMsg::Frame {
                src,
                pid,
                frame: Frame::Events(chunk.to_vec()),
            });
        }
    }
    Ok(out)
}

/// Quote bare values (`"Stream": 0x7f12`, `"datatype": ncclFloat32`) so the line parses.
pub fn repair_line(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len() + 8);
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c as char);
            if c == b'\\' && i + 1 < b.len() {
                out.push(b[i + 1] as char);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_str = true;
            out.push('"');
            i += 1;
            continue;
        }
        if c == b':' {
            out.push(':');
            i += 1;
            while i < b.len() && b[i] == b' ' {
                out.push(' ');
                i += 1;
            }
            let start = i;
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']') {
                i += 1;
            }
            let tok = line[start..i].trim_end();
            let ok = tok.is_empty()
                || tok.starts_with(['"', '{', '['])
                || matches!(tok, "true" | "false" | "null")
                || serde_json::from_str::<serde_json::Number>(tok).is_ok();
            if ok {
                // Re-scan the token normally (it may open a string or object).
                i = start;
                if tok.starts_with(['"', '{', '[']) {
                    continue;
                }
                out.push_str(&line[start..start + tok.len()]);
                i = start + tok.len();
            } else {
                out.push('"');
                out.push_str(&tok.replace('\\', "\\\\").replace('"', "\\\""));
                out.push('"');
                i = start + tok.len();
            }
            continue;
        }
        // Non-ASCII is copied whole.
        let ch = line[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// One span of an example-plugin dump.
#[derive(Debug, Clone)]
pub struct Span {
    pub cat: String,
    pub name: String,
    pub begin_us: f64,
    pub end_us: Option<f64>,
    pub args: Value,
    /// Enclosing spans still open when this one began (innermost last).
    pub open_parents: Vec<usize>,
}

/// A parsed dump file.
#[derive(Debug, Clone)]
pub struct Dump {
    pub path: PathBuf,
    pub pid: u32,
    pub spans: Vec<Span>,
    pub bad_lines: usize,
    /// From the file name `<prefix>_<commHash>_<rank>.json`.
    pub name_comm: Option<(u64, i32)>,
}

fn name_comm(path: &Path) -> Option<(u64, i32)> {
    let stem = path.file_stem()?.to_str()?;
    let mut parts = stem.rsplitn(3, '_');
    let rank = parts.next()?.parse().ok()?;
    let hash = parts.next()?.parse().ok()?;
    Some((hash, rank))
}

/// Parse a dump line by line.
pub fn parse_dump(path: &Path, text: &str) -> Dump {
    let mut d = Dump {
        path: path.to_path_buf(),
        pid: 0,
        spans: Vec::new(),
        bad_lines: 0,
        name_comm: name_comm(path),
    };
    let mut open: HashMap<(String, String, u64), Vec<usize>> = HashMap::new();
    let mut stack: Vec<usize> = Vec::new();
    for line in text.lines() {
        let t = line.trim().trim_end_matches(',').trim();
        if t.is_empty() || t == "[" || t == "]" || t == "{}" || t == "{}]" {
            continue;
        }
        let v: Value =
            match serde_json::from_str(t).or_else(|_| serde_json::from_str(&repair_line(t))) {
                Ok(v) => v,
                Err(_) => {
                    d.bad_lines += 1;
                    continue;
                }
            };
        let cat = s(&v, "cat").to_string();
        let name = s(&v, "name").to_string();
        let id = u(&v, "id");
        let ts = v.get("ts").and_then(Value::as_f64).unwrap_or(0.0);
        if d.pid == 0 {
            d.pid = u(&v, "pid") as u32;
        }
        let key = (cat.clone(), name.clone(), id);
        match s(&v, "ph") {
            "b" => {
                let i = d.spans.len();
                d.spans.push(Span {
                    cat,
                    name,
                    begin_us: ts,
                    end_us: None,
                    args: v.get("args").cloned().unwrap_or(Value::Null),
                    open_parents: stack.clone(),
                });
                open.entry(key).or_default().push(i);
                stack.push(i);
            }
            "e" => {
                if let Some(i) = open.get_mut(&key).and_then(Vec::pop) {
                    if ts > 0.0 {
                        d.spans[i].end_us = Some(ts);
                    }
                    if let Some(pos) = stack.iter().rposition(|&x| x == i) {
                        stack.remove(pos);
                    }
                }
            }
            _ => d.bad_lines += 1,
        }
    }
    d
}

/// Per-dump time offsets (µs) from the first Coll of each (commHash, seq), by pid group.
pub fn align(dumps: &[Dump]) -> HashMap<u32, f64> {
    let mut firsts: BTreeMap<u32, HashMap<(u64, u64), f64>> = BTreeMap::new();
    for d in dumps {
        let m = firsts.entry(d.pid).or_default();
        for sp in &d.spans {
            if sp.cat == "COLL" {
                let k = (u(&sp.args, "CommHash"), u(&sp.args, "SeqNum"));
                let e = m.entry(k).or_insert(sp.begin_us);
                if sp.begin_us < *e {
                    *e = sp.begin_us;
                }
            }
        }
    }
    let pids: Vec<u32> = firsts.keys().copied().collect();
    let mut off: HashMap<u32, f64> = HashMap::new();
    let Some(&first) = pids.first() else {
        return off;
    };
    off.insert(first, 0.0);
    loop {
        let mut progress = false;
        for &p in &pids {
            if off.contains_key(&p) {
                continue;
            }
            let mine = &firsts[&p];
            // Earliest shared key with any aligned group.
            let mut best: Option<(f64, f64)> = None;
            for (&q, &qo) in off.iter() {
                for (k, &t) in mine {
                    if let Some(&tq) = firsts[&q].get(k)
                        && best.is_none_or(|b| t < b.0)
                    {
                        best = Some((t, tq + qo - t));
                    }
                }
            }
            if let Some((_, o)) = best {
                off.insert(p, o);
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    for p in pids {
        off.entry(p).or_insert(0.0);
    }
    off
}

struct Builder {
    strings: Vec<String>,
    comms: Vec<CommInfo>,
    recs: Vec<EventRecord>,
    next_id: u64,
}

impl Builder {
    fn string(&mut self, t: &str) -> u16 {
        if t.is_empty() {
            return 0;
        }
        if let Some(i) = self.strings.iter().position(|x| x == t) {
            return i as u16 + 1;
        }
        self.strings.push(t.to_string());
        self.strings.len() as u16
    }
    fn comm(&mut self, hash: u64, rank: i32) -> u32 {
        if let Some(c) = self
            .comms
            .iter()
            .find(|c| c.comm_hash == hash && c.rank == rank)
        {
            return c.index;
        }
        let index = self.comms.len() as u32;
        self.comms.push(CommInfo {
            index,
            comm_hash: hash,
            name: String::new(),
            nranks: rank + 1,
            nnodes: 1,
            rank,
            api_version: 0,
            finalized: true,
        });
        index
    }
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// Convert parsed dumps to frames: one synthetic process per pid.
pub fn dumps_to_frames(dumps: &[Dump], next_src: &mut u32) -> Vec<SourceMsg> {
    let offsets = align(dumps);
    let mut by_pid: BTreeMap<u32, Vec<&Dump>> = BTreeMap::new();
    for d in dumps {
        by_pid.entry(d.pid).or_default().push(d);
    }
    // nranks per comm hash from every file.
    let mut nranks: HashMap<u64, i32> = HashMap::new();
    for d in dumps {
        if let Some((h, r)) = d.name_comm {
            let e = nranks.entry(h).or_insert(0);
            *e = (*e).max(r + 1);
        }
        for sp in &d.spans {
            if sp.cat == "COLL" || sp.cat == "P2P" {
                let h = u(&sp.args, "CommHash");
                let r = sp.args.get("Rank").and_then(Value::as_i64).unwrap_or(0) as i32;
                let e = nranks.entry(h).or_insert(0);
                *e = (*e).max(r + 1);
            }
        }
    }
    let mut out = Vec::new();
    for (pid, files) in by_pid {
        let src = *next_src;
        *next_src += 1;
        let off = offsets.get(&pid).copied().unwrap_or(0.0);
        let ns = |t: f64| ((t + off).max(0.0) * 1000.0).round() as u64 + DUMP_BASE_NS;
        let mut b = Builder {
            strings: Vec::new(),
            comms: Vec::new(),
            recs: Vec::new(),
            next_id: 0,
        };
        for d in &files {
            convert_dump(d, &mut b, &ns);
        }
        for c in &mut b.comms {
            c.nranks = c.nranks.max(nranks.get(&c.comm_hash).copied().unwrap_or(1));
        }
        let host = files
            .first()
            .map(|d| {
                d.path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        let frame = |frame| SourceMsg::Frame { src, pid, frame };
        out.push(frame(Frame::Hello(PluginHello {
            protocol: ncclprof_shared::PROTOCOL_VERSION,
            pid,
            host: format!("pid {pid}"),
            uid: 0,
            cmdline: files
                .iter()
                .map(|d| d.path.display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
            api_version: 0,
            plugin_version: format!("NCCL example profiler dump {host}"),
            mask: 0,
            active: false,
            clock: "example-plugin steady clock (aligned)".into(),
        })));
        out.push(frame(Frame::Meta(Meta {
            comms: b.comms.clone(),
            strings: b
                .strings
                .iter()
                .enumerate()
                .map(|(i, t)| (i as u16 + 1, t.clone()))
                .collect(),
        })));
        for chunk in b.recs.chunks(ncclprof_shared::wire::MAX_RECORDS_PER_FRAME) {
            out.push(frame(Frame::Events(chunk.to_vec())));
        }
    }
    out
}

fn convert_dump(d: &Dump, b: &mut Builder, ns: &dyn Fn(f64) -> u64) {
    // Index of the record made for each span (ops, API calls, proxy ops).
    let mut rec_of: HashMap<usize, usize> = HashMap::new();
    // (proxy record index, step, send) → step record index.
    let mut steps: HashMap<(usize, u64), usize> = HashMap::new();
    let mut last_proxy: Option<usize> = None;
    let file_comm = d.name_comm;
    let nearest = |sp: &Span, cats: &[&str]| -> Option<usize> {
        sp.open_parents
            .iter()
            .rev()
            .copied()
            .find(|&p| cats.contains(&d.spans[p].cat.as_str()))
    };
    for (i, sp) in d.spans.iter().enumerate() {
        let start = if sp.begin_us > 0.0 {
            ns(sp.begin_us)
        } else {
            0
        };
        let end_known = sp.end_us.map(ns);
        let end = end_known.unwrap_or(start);
        let flags = if end_known.is_some() {
            F_END_KNOWN
        } else {
            F_END_UNKNOWN
        };
        let a = &sp.args;
        // Comm/rank of a span: its own args, its enclosing op, or the file name.
        let parent_op = nearest(sp, &["COLL", "P2P"]).and_then(|p| rec_of.get(&p).copied());
        let (comm, rank) = match (sp.cat.as_str(), parent_op) {
            ("COLL" | "P2P", _) => {
                let r = a.get("Rank").and_then(Value::as_i64).unwrap_or(0) as i32;
                (b.comm(u(a, "CommHash"), r), r)
            }
            (_, Some(pi)) => (b.recs[pi].comm, b.recs[pi].rank),
            _ => match file_comm {
                Some((h, r)) => (b.comm(h, r), r),
                None => (u32::MAX, -1),
            },
        };
        let mut r = EventRecord {
            start_ns: start,
            end_ns: end,
            comm,
            rank,
            flags,
            ..Default::default()
        };
        match sp.cat.as_str() {
            "COLL" | "P2P" => {
                let is_coll = sp.cat == "COLL";
                r.id = b.id();
                r.kind = if is_coll {
                    EventKind::Coll as u8
                } else {
                    EventKind::P2p as u8
                };
                if let Some(api) = nearest(sp, &["COLL_API", "P2P_API"])
                    && let Some(&ai) = rec_of.get(&api)
                {
                    r.parent = b.recs[ai].id;
                    if b.recs[ai].start_ns == 0 {
                        b.recs[ai].start_ns = start;
                    }
                }
                r.sub = u(a, "nChannels").min(255) as u8;
                r.x = u(a, "Peer") as u32;
                r.p[0] = if is_coll { u(a, "SeqNum") } else { 0 };
                r.p[1] = u(a, "Count");
                let f = b.string(&sp.name);
                let dt = b.string(s(a, "Datatype"));
                let al = b.string(s(a, "Algorithm"));
                let pr = b.string(s(a, "Protocol"));
                r.p[2] = pack_strings([f, dt, al, pr]);
                rec_of.insert(i, b.recs.len());
                b.recs.push(r);
            }
            "COLL_API" | "P2P_API" => {
                r.id = b.id();
                r.kind = if sp.cat == "COLL_API" {
                    EventKind::CollApi as u8
                } else {
                    EventKind::P2pApi as u8
                };
                r.x = u(a, "root") as u32;
                r.p[1] = u(a, "count");
                let f = b.string(&sp.name);
                let dt = b.string(s(a, "datatype"));
                r.p[2] = pack_strings([f, dt, 0, 0]);
                r.p[3] = end;
                rec_of.insert(i, b.recs.len());
                b.recs.push(r);
            }
            "GROUP_API" | "GROUP" => {
                r.id = b.id();
                r.kind = if sp.cat == "GROUP" {
                    EventKind::Group as u8
                } else {
                    EventKind::GroupApi as u8
                };
                r.x = u(a, "groupDepth") as u32;
                r.p[3] = end;
                b.recs.push(r);
            }
            "KERNEL_LAUNCH" => {
                r.id = b.id();
                r.kind = EventKind::KernelLaunch as u8;
                if r.start_ns == 0 {
                    r.start_ns = end;
                }
                b.recs.push(r);
            }
            "GPU" => {
                r.id = b.id();
                r.kind = EventKind::KernelCh as u8;
                r.sub = u(a, "Channel").min(255) as u8;
                r.p = [u(a, "StartGpuClk"), u(a, "StopGpuClk"), start, end, 0, 0];
                if let Some(pi) = parent_op {
                    r.parent = b.recs[pi].id;
                    let op = &mut b.recs[pi];
                    if start != 0 && (op.p[5] == 0 || start < op.p[5]) {
                        op.p[5] = start;
                    }
                }
                b.recs.push(r);
            }
            "PROXY" if sp.name.starts_with("Schedule") || sp.name.starts_with("Progress") => {
                let send = sp.name.ends_with("Send");
                if sp.name.starts_with("Progress")
                    && let Some(pi) = last_proxy
                    && b.recs[pi].p[1] == u(a, "Steps")
                    && b.recs[pi].sub == u(a, "Channel") as u8
                    && b.recs[pi].x == u(a, "Peer") as u32
                {
                    // The Progress half of the last Schedule: extend it.
                    let o = &mut b.recs[pi];
                    if o.p[4] == 0 {
                        o.p[4] = start;
                    }
                    o.end_ns = o.end_ns.max(end);
                    o.flags = (o.flags & !(F_END_KNOWN | F_END_UNKNOWN)) | flags;
                    rec_of.insert(i, pi);
                    continue;
                }
                r.id = b.id();
                r.kind = EventKind::ProxyOp as u8;
                r.sub = u(a, "Channel").min(255) as u8;
                r.x = u(a, "Peer") as u32;
                r.p = [
                    0,
                    u(a, "Steps"),
                    u(a, "ChunkSize"),
                    u(a, "transSize"),
                    end,
                    0,
                ];
                if sp.name.starts_with("Progress") {
                    r.p[4] = start;
                }
                if send {
                    r.flags |= F_SEND;
                }
                if let Some(pi) = parent_op {
                    r.parent = b.recs[pi].id;
                }
                last_proxy = Some(b.recs.len());
                rec_of.insert(i, b.recs.len());
                b.recs.push(r);
            }
            "PROXY" => {
                r.id = b.id();
                r.kind = EventKind::ProxyCtrl as u8;
                r.comm = u32::MAX;
                r.rank = -1;
                r.x = u(a, "appended") as u32;
                b.recs.push(r);
            }
            "NET" => {
                let Some(pi) = last_proxy else { continue };
                let step = u(a, "Step");
                let send = sp.name.starts_with("Send");
                let slot = match sp.name.as_str() {
                    "SendGpuWait" | "RecvWait" => 1,
                    "SendPeerWait" | "RecvFlushWait" => 2,
                    "SendWait" | "RecvGpuWait" => 3,
                    _ => continue,
                };
                let si = *steps.entry((pi, step)).or_insert_with(|| {
                    let parent = b.recs[pi];
                    let id = b.id();
                    b.recs.push(EventRecord {
                        id,
                        parent: parent.id,
                        comm: parent.comm,
                        rank: parent.rank,
                        kind: EventKind::ProxyStep as u8,
                        sub: parent.sub,
                        x: parent.x,
                        flags: if send {
                            F_SEND | F_END_KNOWN
                        } else {
                            F_END_KNOWN
                        },
                        p: [step, 0, 0, 0, 0, 0],
                        ..Default::default()
                    });
                    b.recs.len() - 1
                });
                let st = &mut b.recs[si];
                if start != 0 {
                    st.p[slot] = start;
                    if st.start_ns == 0 || start < st.start_ns {
                        st.start_ns = start;
                    }
                }
                if let Some(e) = end_known {
                    st.end_ns = st.end_ns.max(e);
                }
                st.end_ns = st.end_ns.max(st.start_ns);
            }
            "NET_IB" | "NET_SOCK" => {
                r.id = b.id();
                r.kind = EventKind::NetPlugin as u8;
                r.p[5] = u(a, "size");
                b.recs.push(r);
            }
            "CE_COLL" => {
                r.id = b.id();
                r.kind = EventKind::CeColl as u8;
                r.p[1] = u(a, "count");
                let f = b.string(&sp.name);
                let dt = b.string(s(a, "datatype"));
                let st = b.string(s(a, "strategy"));
                r.p[2] = pack_strings([f, dt, st, 0]);
                r.p[3] = end;
                b.recs.push(r);
            }
            "CE_SYNC" | "CE_BATCH" => {
                r.id = b.id();
                r.kind = if sp.cat == "CE_SYNC" {
                    EventKind::CeSync as u8
                } else {
                    EventKind::CeBatch as u8
                };
                r.p[3] = end;
                b.recs.push(r);
            }
            _ => {}
        }
    }
    // Step records never given a time are dropped.
    b.recs
        .retain(|r| !(r.kind == EventKind::ProxyStep as u8 && r.start_ns == 0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_unquoted_values() {
        let l = r#"{"name": "AllReduce", "args": {"count": 4, "datatype": ncclFloat32, "Stream": 0x7f12ab, "x": -1.5e3, "ok": true}}"#;
        let v: Value = serde_json::from_str(&repair_line(l)).unwrap();
        assert_eq!(v["args"]["datatype"], "ncclFloat32");
        assert_eq!(v["args"]["Stream"], "0x7f12ab");
        assert_eq!(v["args"]["count"], 4);
        assert_eq!(v["args"]["x"], -1500.0);
        assert_eq!(v["args"]["ok"], true);
        // Already valid text is unchanged.
        let good = r#"{"a": "x: y", "b": [1, 2], "c": {"d": null}}"#;
        assert_eq!(repair_line(good), good);
    }

    #[test]
    fn aligns_by_first_coll_of_same_seq() {
        let mk = |pid: u32, t: f64| Dump {
            path: PathBuf::from(format!("d_{pid}.json")),
            pid,
            spans: vec![Span {
                cat: "COLL".into(),
                name: "AllReduce".into(),
                begin_us: t,
                end_us: Some(t + 10.0),
                args: serde_json::json!({"CommHash": 5, "SeqNum": 0}),
                open_parents: vec![],
            }],
            bad_lines: 0,
            name_comm: None,
        };
        let off = align(&[mk(1, 100.0), mk(2, 40.0)]);
        assert_eq!(off[&1], 0.0);
        assert_eq!(off[&2], 60.0);
    }
}
