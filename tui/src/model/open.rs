//! `open FILE...`: our snapshots and NCCL example-plugin dumps → the same frames live
//! processes send, fed through the real ingest.
//!
//! Example-plugin dumps (spec §6.4): a JSON array of async `b`/`e` records, one per line, one
//! file per communicator rank, ending in `{}]`. Tolerated quirks: `ts` 0.0 begins (CollApi,
//! P2pApi, KernelLaunch), KernelCh ids always 0, unquoted `Stream`/`datatype` values
//! (2.28–2.29.2; repaired before parsing), missing ends and truncated files (each line is
//! parsed on its own). Files of different processes do not share a zero: they are lined up on
//! the first Coll of the same (commHash, function, seq) found in an already aligned file.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, F_END_KNOWN, F_END_UNKNOWN, F_SEND, pack_strings};
use ncclprof_shared::wire::{
    CommInfo, Counters, Frame, InFlight, Meta, OpenOp, OpenStep, PluginHello,
};
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
        let first = text.trim_start().chars().next();
        if first == Some('{') {
            let n = read_snapshot_text(text, &mut next_src, path, &mut |m| {
                ingest::apply(store, m);
            })?;
            notes.push(format!("{}: ncclprof snapshot, {n} frames", path.display()));
        } else if first == Some('[') {
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
        dumps_into(&dumps, &mut next_src, &mut |m| ingest::apply(store, m));
    }
    // What was in flight stays, frozen at its summary's time: a hung job's snapshot shows
    // the op it hangs on, aged as it was when the snapshot was taken.
    for p in &mut store.procs {
        if p.state == ProcState::Live {
            p.state = ProcState::Offline;
        }
    }
    Ok(notes)
}

/// The JSON readers: typed visitors that keep only what `open` uses, straight from the text (no
/// `serde_json::Value` per event, no allocation per key or string). They accept exactly the
/// documents `serde_json::Value` accepts (ignored values are still parsed and checked, with the
/// same nesting limit), and read each kept field the way `Value`'s accessors do: a field that is
/// missing or of another type reads as its default, the last of repeated keys wins.
mod json {
    use std::borrow::Cow;
    use std::fmt;

    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

    /// Scalar visits that all give the visitor's default (for values of the wrong type).
    macro_rules! defaults {
        () => {
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Default::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Default::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Default::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Default::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Default::default())
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Default::default())
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Default::default())
            }
        };
    }
    pub(super) use defaults;

    /// Skip the rest of an array (each element still parsed and checked).
    pub fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(())
    }

    /// Skip the rest of an object.
    pub fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
        while map.next_key::<Skip>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(())
    }

    /// Any JSON value, parsed and checked as for a `serde_json::Value`, kept nowhere.
    #[derive(Default)]
    pub struct Skip;

    impl<'de> Deserialize<'de> for Skip {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Skip;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                defaults!();
                fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
                    Skip::deserialize(d)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Skip, A::Error> {
                    drain_seq(seq).map(|()| Skip)
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Skip, A::Error> {
                    drain_map(map).map(|()| Skip)
                }
            }
            d.deserialize_any(V)
        }
    }

    /// An object key, borrowed from the text unless it had escapes.
    pub struct Key<'de>(pub Cow<'de, str>);

    impl<'de> Deserialize<'de> for Key<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Key<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string key")
                }
                fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                    Ok(Key(Cow::Borrowed(v)))
                }
                fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                    Ok(Key(Cow::Owned(v.to_string())))
                }
            }
            d.deserialize_str(V)
        }
    }

    /// A value as `serde_json::Value`'s `as_u64` / `as_i64` / `as_f64` / `as_str` see it;
    /// arrays, objects, booleans and null are `Other`.
    #[derive(Default)]
    pub enum Scalar<'de> {
        U(u64),
        I(i64),
        F(f64),
        S(Cow<'de, str>),
        #[default]
        Other,
    }

    impl<'de> Scalar<'de> {
        pub fn as_u64(&self) -> Option<u64> {
            match *self {
                Scalar::U(v) => Some(v),
                Scalar::I(v) => u64::try_from(v).ok(),
                _ => None,
            }
        }
        pub fn u(&self) -> u64 {
            self.as_u64().unwrap_or(0)
        }
        pub fn as_i64(&self) -> Option<i64> {
            match *self {
                Scalar::U(v) => i64::try_from(v).ok(),
                Scalar::I(v) => Some(v),
                _ => None,
            }
        }
        pub fn as_f64(&self) -> Option<f64> {
            match *self {
                Scalar::U(v) => Some(v as f64),
                Scalar::I(v) => Some(v as f64),
                Scalar::F(v) => Some(v),
                _ => None,
            }
        }
        /// The string, or "" (what `s()` gives for a missing or non-string value).
        pub fn into_str(self) -> Cow<'de, str> {
            match self {
                Scalar::S(s) => s,
                _ => Cow::Borrowed(""),
            }
        }
    }

    impl<'de> Deserialize<'de> for Scalar<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Scalar<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_bool<E>(self, _: bool) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::Other)
                }
                fn visit_i64<E>(self, v: i64) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::I(v))
                }
                fn visit_u64<E>(self, v: u64) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::U(v))
                }
                fn visit_f64<E>(self, v: f64) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::F(v))
                }
                fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::S(Cow::Borrowed(v)))
                }
                fn visit_str<E>(self, v: &str) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::S(Cow::Owned(v.to_string())))
                }
                fn visit_string<E>(self, v: String) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::S(Cow::Owned(v)))
                }
                fn visit_unit<E>(self) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::Other)
                }
                fn visit_none<E>(self) -> Result<Scalar<'de>, E> {
                    Ok(Scalar::Other)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar<'de>, A::Error> {
                    drain_seq(seq).map(|()| Scalar::Other)
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar<'de>, A::Error> {
                    drain_map(map).map(|()| Scalar::Other)
                }
            }
            d.deserialize_any(V)
        }
    }
}

use json::{Key, Scalar, Skip, defaults, drain_map, drain_seq};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// A snapshot as `open` reads it: `otherData` as a (small) tree, and the raw record of every
/// event that has `args.ncclprof`, grouped by its `proc`.
#[derive(Default)]
struct SnapshotDoc {
    other: Option<Value>,
    /// `None` when `traceEvents` is missing or not an array.
    events: Option<ProcRecords>,
}

/// Records grouped by the `proc` field, in file order within each.
#[derive(Default)]
struct ProcRecords {
    lists: Vec<Vec<EventRecord>>,
    index: HashMap<u64, usize>,
    last: Option<(u64, usize)>,
}

impl ProcRecords {
    fn push(&mut self, proc: u64, r: EventRecord) {
        let i = match self.last {
            Some((p, i)) if p == proc => i,
            _ => {
                let n = self.lists.len();
                let i = *self.index.entry(proc).or_insert(n);
                if i == n {
                    self.lists.push(Vec::new());
                }
                self.last = Some((proc, i));
                i
            }
        };
        self.lists[i].push(r);
    }
    fn take(&mut self, proc: u64) -> Vec<EventRecord> {
        self.index
            .get(&proc)
            .map(|&i| std::mem::take(&mut self.lists[i]))
            .unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for SnapshotDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SnapshotDoc;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an ncclprof snapshot")
            }
            defaults!();
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<SnapshotDoc, A::Error> {
                drain_seq(seq).map(|()| SnapshotDoc::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SnapshotDoc, A::Error> {
                let mut doc = SnapshotDoc::default();
                while let Some(Key(k)) = map.next_key()? {
                    match &*k {
                        "traceEvents" => doc.events = map.next_value::<TraceEvents>()?.0,
                        "otherData" => doc.other = Some(map.next_value()?),
                        _ => {
                            map.next_value::<Skip>()?;
                        }
                    }
                }
                Ok(doc)
            }
        }
        d.deserialize_any(V)
    }
}

/// `traceEvents`: the raw records (`None` if it is not an array).
#[derive(Default)]
struct TraceEvents(Option<ProcRecords>);

impl<'de> Deserialize<'de> for TraceEvents {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TraceEvents;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of trace events")
            }
            defaults!();
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TraceEvents, A::Error> {
                drain_map(map).map(|()| TraceEvents(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TraceEvents, A::Error> {
                let mut recs = ProcRecords::default();
                while let Some(Raw(e)) = seq.next_element::<Raw<Event>>()? {
                    if let Some((proc, r)) = e.0 {
                        recs.push(proc, r);
                    }
                }
                Ok(TraceEvents(Some(recs)))
            }
        }
        d.deserialize_any(V)
    }
}

/// An object read key by key (last key wins); any other value gives the default.
trait FromMap<'de>: Default {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// Deserializes a [`FromMap`] type leniently.
#[derive(Default)]
struct Raw<T>(T);

impl<'de, T: FromMap<'de>> Deserialize<'de> for Raw<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: FromMap<'de>> Visitor<'de> for V<T> {
            type Value = Raw<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            defaults!();
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Raw<T>, A::Error> {
                drain_seq(seq).map(|()| Raw(T::default()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw<T>, A::Error> {
                let mut t = T::default();
                while let Some(Key(k)) = map.next_key()? {
                    t.field(&k, &mut map)?;
                }
                Ok(Raw(t))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A trace event: the raw record in `args.ncclprof`, if there is one.
#[derive(Default)]
struct Event(Option<(u64, EventRecord)>);

impl<'de> FromMap<'de> for Event {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "args" {
            self.0 = map.next_value::<Raw<EventArgs>>()?.0.0;
        } else {
            map.next_value::<Skip>()?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct EventArgs(Option<(u64, EventRecord)>);

impl<'de> FromMap<'de> for EventArgs {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "ncclprof" {
            self.0 = Some(map.next_value::<Raw<RawRecord>>()?.0.0);
        } else {
            map.next_value::<Skip>()?;
        }
        Ok(())
    }
}

/// `args.ncclprof`: (proc, record). Missing fields are 0, `rank` -1.
struct RawRecord((u64, EventRecord));

impl Default for RawRecord {
    fn default() -> Self {
        RawRecord((
            0,
            EventRecord {
                rank: -1,
                ..Default::default()
            },
        ))
    }
}

impl<'de> FromMap<'de> for RawRecord {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let (proc, r) = &mut self.0;
        if key == "p" {
            r.p = map.next_value::<P6>()?.0;
            return Ok(());
        }
        let v: Scalar = map.next_value()?;
        match key {
            "proc" => *proc = v.u(),
            "id" => r.id = v.u(),
            "parent" => r.parent = v.u(),
            "start_ns" => r.start_ns = v.u(),
            "end_ns" => r.end_ns = v.u(),
            "comm" => r.comm = v.u() as u32,
            "rank" => r.rank = v.as_i64().unwrap_or(-1) as i32,
            "kind" => r.kind = v.u() as u8,
            "sub" => r.sub = v.u() as u8,
            "flags" => r.flags = v.u() as u16,
            "x" => r.x = v.u() as u32,
            _ => {}
        }
        Ok(())
    }
}

/// `p`: the first six elements as u64 (others 0); not an array: all 0.
#[derive(Default)]
struct P6([u64; 6]);

impl<'de> Deserialize<'de> for P6 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = P6;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of numbers")
            }
            defaults!();
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<P6, A::Error> {
                drain_map(map).map(|()| P6::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<P6, A::Error> {
                let mut p = [0u64; 6];
                let mut i = 0;
                while let Some(x) = seq.next_element::<Scalar>()? {
                    if let Some(slot) = p.get_mut(i) {
                        *slot = x.u();
                    }
                    i += 1;
                }
                Ok(P6(p))
            }
        }
        d.deserialize_any(V)
    }
}

/// Our snapshot → frames.
pub fn read_snapshot(v: &Value, next_src: &mut u32) -> anyhow::Result<Vec<SourceMsg>> {
    let doc = SnapshotDoc::deserialize(v).context("unreadable snapshot")?;
    let mut out = Vec::new();
    snapshot_frames(doc, next_src, &mut |m| out.push(m))?;
    Ok(out)
}

/// Snapshot text → frames, handed to `emit` in order (nothing is emitted on error). Returns the
/// number of frames.
fn read_snapshot_text(
    text: String,
    next_src: &mut u32,
    path: &Path,
    emit: &mut dyn FnMut(SourceMsg),
) -> anyhow::Result<usize> {
    let doc: SnapshotDoc = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    drop(text);
    snapshot_frames(doc, next_src, emit)
        .with_context(|| format!("{} is not an ncclprof snapshot", path.display()))
}

fn snapshot_frames(
    doc: SnapshotDoc,
    next_src: &mut u32,
    emit: &mut dyn FnMut(SourceMsg),
) -> anyhow::Result<usize> {
    let od = doc.other.as_ref().context("no otherData")?;
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
        if let Some(f) = p.get("in_flight").filter(|f| !f.is_null()) {
            out.push(frame(Frame::InFlight(in_flight_of(f))));
        }
    }
    let mut recs = doc.events.context("no traceEvents")?;
    let mut n = out.len();
    for m in out {
        emit(m);
    }
    for (proc, (src, pid)) in srcs.into_iter().enumerate() {
        let list = recs.take(proc as u64);
        for chunk in list.chunks(ncclprof_shared::wire::MAX_RECORDS_PER_FRAME) {
            emit(SourceMsg::Frame {
                src,
                pid,
                frame: Frame::Events(chunk.to_vec().into()),
            });
            n += 1;
        }
    }
    Ok(n)
}

/// `otherData.processes[].in_flight` → the summary frame it was written from.
fn in_flight_of(f: &Value) -> InFlight {
    let ops =
        f.get("ops")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|o| OpenOp {
                        comm: u(o, "comm") as u32,
                        rank: o.get("rank").and_then(Value::as_i64).unwrap_or(-1) as i32,
                        kind: u(o, "kind") as u8,
                        id: u(o, "id"),
                        seq: u(o, "seq"),
                        func: u(o, "func") as u16,
                        start_ns: u(o, "start_ns"),
                        // 0 (not known) in snapshots written before it was recorded.
                        exec_start_ns: u(o, "exec_start_ns"),
                        steps_done: o
                            .get("steps_done")
                            .and_then(Value::as_array)
                            .map(|s| s.iter().map(|x| x.as_u64().unwrap_or(0) as u32).collect())
                            .unwrap_or_default(),
                        channels_done: u(o, "channels_done") as u32,
                        n_channels: u(o, "n_channels") as u32,
                        // (Not in snapshots written before it was recorded.)
                        oldest_step: o.get("oldest_step").filter(|s| !s.is_null()).map(|s| {
                            OpenStep {
                                channel: u(s, "channel") as u8,
                                step: u(s, "step") as u32,
                                start_ns: u(s, "start_ns"),
                                state: u(s, "state") as u8,
                            }
                        }),
                    })
                    .collect()
            })
            .unwrap_or_default();
    InFlight {
        at_ns: u(f, "at_ns"),
        total: u(f, "total") as u32,
        ops,
    }
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

/// The category of a span (`cat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cat {
    Coll,
    P2p,
    CollApi,
    P2pApi,
    GroupApi,
    Group,
    KernelLaunch,
    Gpu,
    Proxy,
    Net,
    NetIb,
    NetSock,
    CeColl,
    CeSync,
    CeBatch,
    Other,
}

impl Cat {
    pub fn of(cat: &str) -> Cat {
        match cat {
            "COLL" => Cat::Coll,
            "P2P" => Cat::P2p,
            "COLL_API" => Cat::CollApi,
            "P2P_API" => Cat::P2pApi,
            "GROUP_API" => Cat::GroupApi,
            "GROUP" => Cat::Group,
            "KERNEL_LAUNCH" => Cat::KernelLaunch,
            "GPU" => Cat::Gpu,
            "PROXY" => Cat::Proxy,
            "NET" => Cat::Net,
            "NET_IB" => Cat::NetIb,
            "NET_SOCK" => Cat::NetSock,
            "CE_COLL" => Cat::CeColl,
            "CE_SYNC" => Cat::CeSync,
            "CE_BATCH" => Cat::CeBatch,
            _ => Cat::Other,
        }
    }
}

/// One span of an example-plugin dump. Its args are kept as the numbers and strings its
/// category uses (missing or mistyped: 0 / ""), in `n` and `s` (ids into [`Dump::strings`]):
///
/// | cat | `n` | `s` |
/// |---|---|---|
/// | COLL, P2P | CommHash, SeqNum, Count, nChannels, Peer, Rank (i64 bits) | Datatype, Algorithm, Protocol |
/// | COLL_API, P2P_API | root, count | datatype |
/// | CE_COLL | -, count | datatype, strategy |
/// | GROUP_API, GROUP | groupDepth | |
/// | GPU | Channel, StartGpuClk, StopGpuClk | |
/// | PROXY | Steps, Channel, Peer, ChunkSize, transSize, appended | |
/// | NET | Step | |
/// | NET_IB, NET_SOCK | size | |
#[derive(Debug, Clone)]
pub struct Span {
    pub cat: Cat,
    /// Id into [`Dump::strings`].
    pub name: u32,
    pub begin_us: f64,
    pub end_us: Option<f64>,
    pub n: [u64; 6],
    pub s: [u32; 3],
    /// The innermost COLL/P2P span still open when this one began.
    pub parent_op: Option<u32>,
    /// The innermost COLL_API/P2P_API span still open when this one began.
    pub parent_api: Option<u32>,
}

impl Span {
    /// CommHash of a COLL/P2P span.
    pub fn comm_hash(&self) -> u64 {
        self.n[0]
    }
    /// SeqNum of a COLL/P2P span.
    pub fn seq(&self) -> u64 {
        self.n[1]
    }
    /// Rank of a COLL/P2P span.
    pub fn rank(&self) -> i32 {
        self.n[5] as i64 as i32
    }
}

/// A parsed dump file.
#[derive(Debug, Clone)]
pub struct Dump {
    pub path: PathBuf,
    pub pid: u32,
    pub spans: Vec<Span>,
    /// Names and string args of the spans; 0 is "".
    pub strings: Vec<String>,
    pub bad_lines: usize,
    /// From the file name `<prefix>_<commHash>_<rank>.json`.
    pub name_comm: Option<(u64, i32)>,
}

impl Dump {
    pub fn str(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", String::as_str)
    }
}

fn name_comm(path: &Path) -> Option<(u64, i32)> {
    let stem = path.file_stem()?.to_str()?;
    let mut parts = stem.rsplitn(3, '_');
    let rank = parts.next()?.parse().ok()?;
    let hash = parts.next()?.parse().ok()?;
    Some((hash, rank))
}

/// One dump line, as `open` uses it (all fields lenient, like `Value`'s accessors).
#[derive(Default)]
struct Line<'a> {
    cat: Cow<'a, str>,
    name: Cow<'a, str>,
    ph: Cow<'a, str>,
    id: u64,
    pid: u64,
    ts: f64,
    args: LineArgs<'a>,
}

impl<'de> FromMap<'de> for Line<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if key == "args" {
            self.args = map.next_value::<Raw<LineArgs>>()?.0;
            return Ok(());
        }
        let v: Scalar = map.next_value()?;
        match key {
            "cat" => self.cat = v.into_str(),
            "name" => self.name = v.into_str(),
            "ph" => self.ph = v.into_str(),
            "id" => self.id = v.u(),
            "pid" => self.pid = v.u(),
            "ts" => self.ts = v.as_f64().unwrap_or(0.0),
            _ => {}
        }
        Ok(())
    }
}

/// Every arg key any category reads.
#[derive(Default)]
struct LineArgs<'a> {
    comm_hash: u64,
    seq_num: u64,
    count_coll: u64,
    n_channels: u64,
    peer: u64,
    rank: i64,
    root: u64,
    count: u64,
    group_depth: u64,
    channel: u64,
    start_clk: u64,
    stop_clk: u64,
    steps: u64,
    chunk_size: u64,
    trans_size: u64,
    appended: u64,
    step: u64,
    size: u64,
    datatype_coll: Cow<'a, str>,
    algorithm: Cow<'a, str>,
    protocol: Cow<'a, str>,
    datatype: Cow<'a, str>,
    strategy: Cow<'a, str>,
}

impl<'de> FromMap<'de> for LineArgs<'de> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let v: Scalar = map.next_value()?;
        match key {
            "CommHash" => self.comm_hash = v.u(),
            "SeqNum" => self.seq_num = v.u(),
            "Count" => self.count_coll = v.u(),
            "nChannels" => self.n_channels = v.u(),
            "Peer" => self.peer = v.u(),
            "Rank" => self.rank = v.as_i64().unwrap_or(0),
            "root" => self.root = v.u(),
            "count" => self.count = v.u(),
            "groupDepth" => self.group_depth = v.u(),
            "Channel" => self.channel = v.u(),
            "StartGpuClk" => self.start_clk = v.u(),
            "StopGpuClk" => self.stop_clk = v.u(),
            "Steps" => self.steps = v.u(),
            "ChunkSize" => self.chunk_size = v.u(),
            "transSize" => self.trans_size = v.u(),
            "appended" => self.appended = v.u(),
            "Step" => self.step = v.u(),
            "size" => self.size = v.u(),
            "Datatype" => self.datatype_coll = v.into_str(),
            "Algorithm" => self.algorithm = v.into_str(),
            "Protocol" => self.protocol = v.into_str(),
            "datatype" => self.datatype = v.into_str(),
            "strategy" => self.strategy = v.into_str(),
            _ => {}
        }
        Ok(())
    }
}

/// Interned strings of one dump.
struct Interner {
    ids: HashMap<String, u32>,
    strings: Vec<String>,
}

impl Interner {
    fn new() -> Self {
        Interner {
            ids: HashMap::from([(String::new(), 0)]),
            strings: vec![String::new()],
        }
    }
    fn id(&mut self, t: &str) -> u32 {
        if let Some(&i) = self.ids.get(t) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(t.to_string());
        self.ids.insert(t.to_string(), i);
        i
    }
    fn get(&self, t: &str) -> Option<u32> {
        self.ids.get(t).copied()
    }
}

const NO_SPAN: u32 = u32::MAX;

/// Parse a dump line by line.
pub fn parse_dump(path: &Path, text: &str) -> Dump {
    let mut d = Dump {
        path: path.to_path_buf(),
        pid: 0,
        spans: Vec::new(),
        strings: Vec::new(),
        bad_lines: 0,
        name_comm: name_comm(path),
    };
    let mut strings = Interner::new();
    // Open spans by (cat, name, id): the innermost in `open`, each one's next outer in `below`.
    let mut open: HashMap<(u32, u32, u64), u32> = HashMap::new();
    let mut below: Vec<u32> = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    for line in text.lines() {
        let t = line.trim().trim_end_matches(',').trim();
        if t.is_empty() || t == "[" || t == "]" || t == "{}" || t == "{}]" {
            continue;
        }
        let repaired: String;
        let v: Line = match serde_json::from_str::<Raw<Line>>(t) {
            Ok(v) => v.0,
            Err(_) => {
                repaired = repair_line(t);
                match serde_json::from_str::<Raw<Line>>(&repaired) {
                    Ok(v) => v.0,
                    Err(_) => {
                        d.bad_lines += 1;
                        continue;
                    }
                }
            }
        };
        if d.pid == 0 {
            d.pid = v.pid as u32;
        }
        match &*v.ph {
            "b" => {
                let i = d.spans.len();
                let cat = Cat::of(&v.cat);
                let key = (strings.id(&v.cat), strings.id(&v.name), v.id);
                let a = &v.args;
                let (n, s) = match cat {
                    Cat::Coll | Cat::P2p => (
                        [
                            a.comm_hash,
                            a.seq_num,
                            a.count_coll,
                            a.n_channels,
                            a.peer,
                            a.rank as u64,
                        ],
                        [
                            strings.id(&a.datatype_coll),
                            strings.id(&a.algorithm),
                            strings.id(&a.protocol),
                        ],
                    ),
                    Cat::CollApi | Cat::P2pApi => (
                        [a.root, a.count, 0, 0, 0, 0],
                        [strings.id(&a.datatype), 0, 0],
                    ),
                    Cat::CeColl => (
                        [0, a.count, 0, 0, 0, 0],
                        [strings.id(&a.datatype), strings.id(&a.strategy), 0],
                    ),
                    Cat::GroupApi | Cat::Group => ([a.group_depth, 0, 0, 0, 0, 0], [0; 3]),
                    Cat::Gpu => ([a.channel, a.start_clk, a.stop_clk, 0, 0, 0], [0; 3]),
                    Cat::Proxy => (
                        [
                            a.steps,
                            a.channel,
                            a.peer,
                            a.chunk_size,
                            a.trans_size,
                            a.appended,
                        ],
                        [0; 3],
                    ),
                    Cat::Net => ([a.step, 0, 0, 0, 0, 0], [0; 3]),
                    Cat::NetIb | Cat::NetSock => ([a.size, 0, 0, 0, 0, 0], [0; 3]),
                    _ => ([0; 6], [0; 3]),
                };
                let innermost = |cats: [Cat; 2]| {
                    stack
                        .iter()
                        .rev()
                        .find(|&&p| cats.contains(&d.spans[p].cat))
                        .map(|&p| p as u32)
                };
                let parent_op = innermost([Cat::Coll, Cat::P2p]);
                let parent_api = innermost([Cat::CollApi, Cat::P2pApi]);
                d.spans.push(Span {
                    cat,
                    name: key.1,
                    begin_us: v.ts,
                    end_us: None,
                    n,
                    s,
                    parent_op,
                    parent_api,
                });
                below.push(open.insert(key, i as u32).unwrap_or(NO_SPAN));
                stack.push(i);
            }
            "e" => {
                let key = strings
                    .get(&v.cat)
                    .zip(strings.get(&v.name))
                    .map(|(c, n)| (c, n, v.id));
                if let Some(key) = key
                    && let Some(&top) = open.get(&key)
                {
                    let i = top as usize;
                    match below[i] {
                        NO_SPAN => open.remove(&key),
                        next => open.insert(key, next),
                    };
                    if v.ts > 0.0 {
                        d.spans[i].end_us = Some(v.ts);
                    }
                    if let Some(pos) = stack.iter().rposition(|&x| x == i) {
                        stack.remove(pos);
                    }
                }
            }
            _ => d.bad_lines += 1,
        }
    }
    d.strings = strings.strings;
    d
}

/// Per-dump time offsets (µs) from the first Coll of each (commHash, function, seq), by pid
/// group. (NCCL numbers each function's collectives separately: AllGather 7 and
/// ReduceScatter 7 are different collectives, and aligning one with the other is wrong.)
pub fn align(dumps: &[Dump]) -> HashMap<u32, f64> {
    type Key<'a> = (u64, &'a str, u64);
    let mut firsts: BTreeMap<u32, HashMap<Key<'_>, f64>> = BTreeMap::new();
    for d in dumps {
        let m = firsts.entry(d.pid).or_default();
        for sp in &d.spans {
            if sp.cat == Cat::Coll && !d.str(sp.name).is_empty() {
                let k = (sp.comm_hash(), d.str(sp.name), sp.seq());
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
    let mut out = Vec::new();
    dumps_into(dumps, next_src, &mut |m| out.push(m));
    out
}

/// [`dumps_to_frames`], each frame handed to `emit` as soon as it is made.
fn dumps_into(dumps: &[Dump], next_src: &mut u32, emit: &mut dyn FnMut(SourceMsg)) {
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
            if matches!(sp.cat, Cat::Coll | Cat::P2p) {
                let h = sp.comm_hash();
                let r = sp.rank();
                let e = nranks.entry(h).or_insert(0);
                *e = (*e).max(r + 1);
            }
        }
    }
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
        emit(frame(Frame::Hello(PluginHello {
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
        emit(frame(Frame::Meta(Meta {
            comms: b.comms.clone(),
            strings: b
                .strings
                .iter()
                .enumerate()
                .map(|(i, t)| (i as u16 + 1, t.clone()))
                .collect(),
        })));
        for chunk in b.recs.chunks(ncclprof_shared::wire::MAX_RECORDS_PER_FRAME) {
            emit(frame(Frame::Events(chunk.to_vec().into())));
        }
    }
}

fn convert_dump(d: &Dump, b: &mut Builder, ns: &dyn Fn(f64) -> u64) {
    const NONE: usize = usize::MAX;
    // Index of the record made for each span (ops, API calls, proxy ops).
    let mut rec_of: Vec<usize> = vec![NONE; d.spans.len()];
    let rec = |rec_of: &[usize], span: Option<u32>| -> Option<usize> {
        span.and_then(|p| rec_of.get(p as usize).copied())
            .filter(|&r| r != NONE)
    };
    // Step → step record index, for the steps of `last_proxy` (a proxy op never becomes the last
    // one again once another has, so older steps are dropped).
    let mut steps: HashMap<u64, usize> = HashMap::new();
    let mut last_proxy: Option<usize> = None;
    let file_comm = d.name_comm;
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
        let name = d.str(sp.name);
        let n = &sp.n;
        // Comm/rank of a span: its own args, its enclosing op, or the file name.
        let parent_op = rec(&rec_of, sp.parent_op);
        let (comm, rank) = match (sp.cat, parent_op) {
            (Cat::Coll | Cat::P2p, _) => {
                let r = sp.rank();
                (b.comm(sp.comm_hash(), r), r)
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
        match sp.cat {
            Cat::Coll | Cat::P2p => {
                let is_coll = sp.cat == Cat::Coll;
                r.id = b.id();
                r.kind = if is_coll {
                    EventKind::Coll as u8
                } else {
                    EventKind::P2p as u8
                };
                if let Some(ai) = rec(&rec_of, sp.parent_api) {
                    r.parent = b.recs[ai].id;
                    if b.recs[ai].start_ns == 0 {
                        b.recs[ai].start_ns = start;
                    }
                }
                r.sub = n[3].min(255) as u8;
                r.x = n[4] as u32;
                r.p[0] = if is_coll { sp.seq() } else { 0 };
                r.p[1] = n[2];
                let f = b.string(name);
                let dt = b.string(d.str(sp.s[0]));
                let al = b.string(d.str(sp.s[1]));
                let pr = b.string(d.str(sp.s[2]));
                r.p[2] = pack_strings([f, dt, al, pr]);
                rec_of[i] = b.recs.len();
                b.recs.push(r);
            }
            Cat::CollApi | Cat::P2pApi => {
                r.id = b.id();
                r.kind = if sp.cat == Cat::CollApi {
                    EventKind::CollApi as u8
                } else {
                    EventKind::P2pApi as u8
                };
                r.x = n[0] as u32;
                r.p[1] = n[1];
                let f = b.string(name);
                let dt = b.string(d.str(sp.s[0]));
                r.p[2] = pack_strings([f, dt, 0, 0]);
                r.p[3] = end;
                rec_of[i] = b.recs.len();
                b.recs.push(r);
            }
            Cat::GroupApi | Cat::Group => {
                r.id = b.id();
                r.kind = if sp.cat == Cat::Group {
                    EventKind::Group as u8
                } else {
                    EventKind::GroupApi as u8
                };
                r.x = n[0] as u32;
                r.p[3] = end;
                b.recs.push(r);
            }
            Cat::KernelLaunch => {
                r.id = b.id();
                r.kind = EventKind::KernelLaunch as u8;
                if r.start_ns == 0 {
                    r.start_ns = end;
                }
                b.recs.push(r);
            }
            Cat::Gpu => {
                r.id = b.id();
                r.kind = EventKind::KernelCh as u8;
                r.sub = n[0].min(255) as u8;
                r.p = [n[1], n[2], start, end, 0, 0];
                if let Some(pi) = parent_op {
                    r.parent = b.recs[pi].id;
                    let op = &mut b.recs[pi];
                    if start != 0 && (op.p[5] == 0 || start < op.p[5]) {
                        op.p[5] = start;
                    }
                }
                b.recs.push(r);
            }
            Cat::Proxy if name.starts_with("Schedule") || name.starts_with("Progress") => {
                let send = name.ends_with("Send");
                if name.starts_with("Progress")
                    && let Some(pi) = last_proxy
                    && b.recs[pi].p[1] == n[0]
                    && b.recs[pi].sub == n[1] as u8
                    && b.recs[pi].x == n[2] as u32
                {
                    // The Progress half of the last Schedule: extend it.
                    let o = &mut b.recs[pi];
                    if o.p[4] == 0 {
                        o.p[4] = start;
                    }
                    o.end_ns = o.end_ns.max(end);
                    o.flags = (o.flags & !(F_END_KNOWN | F_END_UNKNOWN)) | flags;
                    rec_of[i] = pi;
                    continue;
                }
                r.id = b.id();
                r.kind = EventKind::ProxyOp as u8;
                r.sub = n[1].min(255) as u8;
                r.x = n[2] as u32;
                r.p = [0, n[0], n[3], n[4], end, 0];
                if name.starts_with("Progress") {
                    r.p[4] = start;
                }
                if send {
                    r.flags |= F_SEND;
                }
                if let Some(pi) = parent_op {
                    r.parent = b.recs[pi].id;
                }
                last_proxy = Some(b.recs.len());
                steps.clear();
                rec_of[i] = b.recs.len();
                b.recs.push(r);
            }
            Cat::Proxy => {
                r.id = b.id();
                r.kind = EventKind::ProxyCtrl as u8;
                r.comm = u32::MAX;
                r.rank = -1;
                r.x = n[5] as u32;
                b.recs.push(r);
            }
            Cat::Net => {
                let Some(pi) = last_proxy else { continue };
                let step = n[0];
                let send = name.starts_with("Send");
                let slot = match name {
                    "SendGpuWait" | "RecvWait" => 1,
                    "SendPeerWait" | "RecvFlushWait" => 2,
                    "SendWait" | "RecvGpuWait" => 3,
                    _ => continue,
                };
                let si = *steps.entry(step).or_insert_with(|| {
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
            Cat::NetIb | Cat::NetSock => {
                r.id = b.id();
                r.kind = EventKind::NetPlugin as u8;
                r.p[5] = n[0];
                b.recs.push(r);
            }
            Cat::CeColl => {
                r.id = b.id();
                r.kind = EventKind::CeColl as u8;
                r.p[1] = n[1];
                let f = b.string(name);
                let dt = b.string(d.str(sp.s[0]));
                let st = b.string(d.str(sp.s[1]));
                r.p[2] = pack_strings([f, dt, st, 0]);
                r.p[3] = end;
                b.recs.push(r);
            }
            Cat::CeSync | Cat::CeBatch => {
                r.id = b.id();
                r.kind = if sp.cat == Cat::CeSync {
                    EventKind::CeSync as u8
                } else {
                    EventKind::CeBatch as u8
                };
                r.p[3] = end;
                b.recs.push(r);
            }
            Cat::Other => {}
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
    fn typed_snapshot_reader_reads_fields_like_value_accessors() {
        let text = format!(
            r#"{{"traceEvents": [
                {{"ph": "M", "args": {{"name": "x"}}}},
                {{"args": {{"ncclprof": {{"proc": 0, "id": 7, "rank": "r", "kind": 300, "p": [1, -2, 3.5, "x", 5, 6, 7, 8], "x": {{"a": [1]}}}}}}}},
                {{"args": {{"ncclprof": {{"proc": 0, "id": 1, "id": 9, "rank": -3, "start_ns": 18446744073709551615}}}}}},
                {{"args": {{"ncclprof": 5}}}},
                {{"args": {{"ncclprof": {{"proc": 1}}}}, "args": {{}}}},
                {{"args": {{"ncclprof": {{"proc": 9, "id": 4}}}}}},
                [1, 2], "s", null
            ],
            "otherData": {{"format": "{}", "version": {}, "processes": [{{"pid": 3}}]}}}}"#,
            snapshot::FORMAT,
            snapshot::VERSION
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        let mut n = 1;
        let from_value = format!("{:?}", read_snapshot(&v, &mut n).unwrap());
        let mut frames = Vec::new();
        let mut n = 1;
        read_snapshot_text(text, &mut n, Path::new("s.json"), &mut |m| frames.push(m)).unwrap();
        assert_eq!(format!("{frames:?}"), from_value);
        let Some(SourceMsg::Frame {
            frame: Frame::Events(recs),
            ..
        }) = frames.last()
        else {
            panic!("{frames:?}");
        };
        assert_eq!(recs.len(), 3);
        assert_eq!((recs[0].id, recs[0].rank, recs[0].kind), (7, -1, 44));
        assert_eq!(recs[0].p, [1, 0, 0, 0, 5, 6]);
        assert_eq!(
            (recs[1].id, recs[1].rank, recs[1].start_ns),
            (9, -3, u64::MAX)
        );
        assert_eq!((recs[2].id, recs[2].rank), (0, -1));
    }

    #[test]
    fn dump_lines_read_in_any_key_order_with_escapes() {
        let text = r#"[
{"args": {"SeqNum": 4, "CommHash": 9, "Rank": -1, "Datatype": "f\u0033"}, "ts": 5, "id": 2, "ph": "b", "cat": "COLL", "name": "AllReduce", "pid": 77},
{"name": "AllReduce", "cat": "COLL", "ph": "e", "id": 2, "ts": 6.5},
{"name": "x", "ph": "q"},
7,
{}]"#;
        let d = parse_dump(Path::new("nccl_prof_9_0.json"), text);
        assert_eq!((d.pid, d.bad_lines, d.spans.len()), (77, 2, 1));
        let sp = &d.spans[0];
        assert_eq!((sp.cat, d.str(sp.name)), (Cat::Coll, "AllReduce"));
        assert_eq!((sp.comm_hash(), sp.seq(), sp.rank()), (9, 4, -1));
        assert_eq!(d.str(sp.s[0]), "f3");
        assert_eq!((sp.begin_us, sp.end_us), (5.0, Some(6.5)));
    }

    #[test]
    fn aligns_by_first_coll_of_same_function_and_seq() {
        let span = |name: u32, t: f64| Span {
            cat: Cat::Coll,
            name,
            begin_us: t,
            end_us: Some(t + 10.0),
            n: [5, 0, 0, 0, 0, 0],
            s: [0; 3],
            parent_op: None,
            parent_api: None,
        };
        let mk = |pid: u32, spans: Vec<Span>| Dump {
            path: PathBuf::from(format!("d_{pid}.json")),
            pid,
            spans,
            strings: vec![String::new(), "AllReduce".into(), "AllGather".into()],
            bad_lines: 0,
            name_comm: None,
        };
        let off = align(&[mk(1, vec![span(1, 100.0)]), mk(2, vec![span(1, 40.0)])]);
        assert_eq!(off[&1], 0.0);
        assert_eq!(off[&2], 60.0);
        // Process 2 logged an AllGather 0 earlier than its AllReduce 0: they are different
        // collectives, and its AllReduce 0 still aligns with process 1's.
        let off = align(&[
            mk(1, vec![span(1, 100.0)]),
            mk(2, vec![span(2, 10.0), span(1, 40.0)]),
        ]);
        assert_eq!(off[&2], 60.0);
    }
}
