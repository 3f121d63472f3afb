//! Read-only window queries: the only API the views and the snapshot writer use.

use std::collections::HashMap;

use ncclprof_shared::kind::{EventKind, StepPhase};

use super::analysis;
use super::store::{
    CommGroup, FxBuild, Kernel, LaneKey, Op, OpenRow, Proc, ProcState, ProxyOp, Step, Store,
};

/// Most steps per lane the proxy breakdown reads per frame before sampling.
pub const MAX_STEPS_PER_LANE: usize = 2048;

/// Step phase sums (and step counts) keyed by (channel, peer, send).
pub type StepBreakdown = std::collections::BTreeMap<(u8, u16, bool), ([(StepPhase, u64); 3], u64)>;

/// One row of the timeline: a rank of a communicator.
#[derive(Debug, Clone)]
pub struct LaneRow {
    pub key: LaneKey,
    /// Index into `store.lanes` if any record arrived.
    pub lane: Option<usize>,
    pub rank: i32,
    pub host: String,
    pub pid: u32,
}

/// An op picked in a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpKey {
    pub lane: usize,
    pub id: u64,
    pub start: u64,
}

/// Decoded, view-ready fields of an op.
#[derive(Debug, Clone, PartialEq)]
pub struct OpDetail {
    pub func: String,
    pub kind: &'static str,
    pub seq: u64,
    pub count: u64,
    pub dtype: String,
    pub algo: String,
    pub proto: String,
    pub n_channels: u8,
    pub bytes: u64,
    pub dur_ns: u64,
    pub enqueue_ns: u64,
    pub algbw: f64,
    pub busbw: f64,
    pub rank: i32,
    pub peer_or_root: u32,
}

/// A function's peer medians ([`Store::peer_medians`]): recent run time, and time from
/// start to end.
type Medians = (Option<u64>, Option<u64>);

/// An in-flight op with its hang verdict, borrowing the op and its function's name from the
/// store: a hung 64-rank job lists 32 768 ops, judged every frame, and each was copied (its
/// per-channel step counts are a `Vec`) with its name's `Arc` (BENCHMARKS §4, "A hung job's
/// deep queue, judged without copies").
#[derive(Debug, Clone)]
pub struct OpenView<'a> {
    pub row: &'a OpenRow,
    pub func: &'a str,
    /// Time since its start (enqueue).
    pub age_ns: u64,
    /// Time since it started to run; None while it has not (queued behind others on the
    /// GPU's stream or its connections), or when that is not known.
    pub running_ns: Option<u64>,
    /// In flight for longer than its peers' times allow ([`analysis::is_hung`]).
    pub hung: bool,
    /// The peers' median the verdict compared with: run time for a running op, else time
    /// from start to end.
    pub peer_median: Option<u64>,
}

/// What the hung ops of a communicator say together: which op to name, and, for its
/// collective, which ranks are in it and which have not started it. A collective waits for
/// every rank, so when most ranks hang in one, the ranks not in it are where to look.
///
/// A rank is said not to have started it only on evidence: its process is streaming (or was,
/// in a file), its latest in-flight summary came after the hung op's start and was complete
/// (not cut at the plugin's limit), every op it lists has a known function name, it has no
/// op of that function with that seq or a later one (`Lane::last_seq`, by seq, not by time,
/// so clock skew or ops with unknown ends do not matter), and its lane exists. Any rank that
/// cannot be judged so is counted in `unknown`, never named.
#[derive(Debug, Clone)]
pub struct HangSummary<'a> {
    /// Rank of the oldest hung op, and the op.
    pub rank: i32,
    pub op: OpenView<'a>,
    /// Hung ops besides it, over every rank of the communicator.
    pub more: usize,
    /// Ranks with the oldest hung op's collective in flight (hung or not), of `ranks` seen;
    /// `declared` is the communicator's size as its processes report it (≥ `ranks` when this
    /// viewer sees only some of its ranks, those of one host).
    pub ranks_in: usize,
    pub ranks: usize,
    pub declared: usize,
    /// Ranks that have not started it: each with the last collective of the same function it
    /// ran (seq, end; end 0 if not known) and its own oldest op in flight in this
    /// communicator, if any.
    pub not_started: Vec<NotStarted>,
    /// Ranks whose process has ended or crashed (not judged), with the state.
    pub gone: Vec<(i32, String)>,
    /// Ranks that could not be judged for want of data.
    pub unknown: usize,
}

/// A rank that has not started the hung collective ([`HangSummary`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStarted {
    pub rank: i32,
    pub last: Option<(u64, u64)>,
    /// (function, kind, seq field) of its oldest op in flight here.
    pub busy_in: Option<(std::sync::Arc<str>, u8, u64)>,
}

impl Store {
    pub fn comm_group(&self, i: usize) -> Option<&CommGroup> {
        self.comms.get(i)
    }

    /// Timeline rows of a communicator, ordered by host then rank.
    pub fn lane_rows(&self, comm: usize) -> Vec<LaneRow> {
        let Some(g) = self.comms.get(comm) else {
            return Vec::new();
        };
        let mut rows: Vec<LaneRow> = g
            .members
            .iter()
            .map(|m| {
                let key = LaneKey {
                    proc: m.proc,
                    comm: m.comm,
                    rank: m.rank,
                };
                let p = &self.procs[m.proc];
                LaneRow {
                    key,
                    lane: self.lane_by_key.get(&key).copied(),
                    rank: m.rank,
                    host: p.host.clone(),
                    pid: p.pid,
                }
            })
            .collect();
        rows.sort_by(|a, b| (&a.host, a.rank, a.pid).cmp(&(&b.host, b.rank, b.pid)));
        rows
    }

    pub fn proc_of_lane(&self, lane: usize) -> &Proc {
        &self.procs[self.lanes[lane].key.proc]
    }

    /// Ops of a lane overlapping `[from, to]`, sorted by start.
    pub fn ops_in(&self, lane: usize, from: u64, to: u64) -> Vec<Op> {
        let Some(l) = self.lanes.get(lane) else {
            return Vec::new();
        };
        let mut v: Vec<Op> = l.ops.window(from, to).map(|(_, o)| *o).collect();
        v.sort_by_key(|o| (o.start, o.id));
        v
    }

    /// Ops of a lane in the window, at most about one per `cell` ns (for drawing); sorted.
    pub fn ops_sampled(&self, lane: usize, from: u64, to: u64, cell: u64) -> Vec<Op> {
        let Some(l) = self.lanes.get(lane) else {
            return Vec::new();
        };
        let mut v = Vec::new();
        l.ops.window_sampled(from, to, cell, |_, o| v.push(*o));
        v.sort_by_key(|o| (o.start, o.id));
        v
    }

    /// Ops in the window, sampled down to about `max`, and how many ops of the window each
    /// stands for (1.0: all of them; see `Series::window_strided`).
    pub fn ops_strided(&self, lane: usize, from: u64, to: u64, max: usize) -> (Vec<Op>, f64) {
        let Some(l) = self.lanes.get(lane) else {
            return (Vec::new(), 1.0);
        };
        let mut v = Vec::new();
        let sample = l.ops.sample(from, to, max, |_, o| v.push(*o));
        (v, sample.stands_for())
    }

    /// Kernel channels in the window, sampled down to about `max` (`Series::sample`).
    pub fn kernels_strided(&self, lane: usize, from: u64, to: u64, max: usize) -> Vec<Kernel> {
        let Some(l) = self.lanes.get(lane) else {
            return Vec::new();
        };
        let mut v = Vec::new();
        l.kernels.sample(from, to, max, |_, k| v.push(*k));
        v
    }

    pub fn kernels_in(&self, lane: usize, from: u64, to: u64) -> Vec<Kernel> {
        self.lanes
            .get(lane)
            .map(|l| l.kernels.window(from, to).map(|(_, k)| *k).collect())
            .unwrap_or_default()
    }

    pub fn proxy_ops_in(&self, lane: usize, from: u64, to: u64) -> Vec<ProxyOp> {
        self.lanes
            .get(lane)
            .map(|l| l.proxy_ops.window(from, to).map(|(_, k)| *k).collect())
            .unwrap_or_default()
    }

    /// Steps overlapping the window, calling `f(base, step)` for each (no allocation).
    pub fn for_steps_in(&self, lane: usize, from: u64, to: u64, mut f: impl FnMut(u64, &Step)) {
        if let Some(l) = self.lanes.get(lane) {
            for (b, s) in l.steps.window(from, to) {
                f(b, s);
            }
        }
    }

    /// Look up an op by key.
    pub fn op(&self, k: OpKey) -> Option<Op> {
        let l = self.lanes.get(k.lane)?;
        l.ops
            .window(k.start, k.start)
            .map(|(_, o)| *o)
            .find(|o| o.id == k.id && o.start == k.start)
    }

    /// Function name of an op.
    pub fn func_of(&self, lane: usize, op: &Op) -> &str {
        self.proc_of_lane(lane).string(op.strings[0])
    }

    /// Ranks in the communicator of a lane (1 if unknown).
    pub fn nranks_of(&self, key: LaneKey) -> u32 {
        self.procs
            .get(key.proc)
            .and_then(|p| p.comm(key.comm))
            .map(|c| c.nranks.max(1) as u32)
            .unwrap_or(1)
    }

    /// Everything the details pane shows about an op.
    pub fn detail(&self, lane: usize, op: &Op) -> OpDetail {
        let p = self.proc_of_lane(lane);
        let key = self.lanes[lane].key;
        let n = self.nranks_of(key);
        let func = p.string(op.strings[0]).to_string();
        let dtype = p.string(op.strings[1]).to_string();
        let bytes = analysis::op_bytes(&func, &dtype, op.count, n);
        let dur = op.end.saturating_sub(op.start);
        let a = analysis::algbw(bytes, dur);
        OpDetail {
            kind: EventKind::from_u8(op.kind).map_or("?", EventKind::name),
            seq: op.seq,
            count: op.count,
            algo: p.string(op.strings[2]).to_string(),
            proto: p.string(op.strings[3]).to_string(),
            n_channels: op.n_channels,
            bytes,
            dur_ns: dur,
            enqueue_ns: op.enq_stop.saturating_sub(op.start),
            algbw: a,
            busbw: analysis::busbw(&func, n, a),
            rank: key.rank,
            peer_or_root: op.x,
            func,
            dtype,
        }
    }

    /// Kernel channels belonging to an op.
    pub fn kernels_of(&self, lane: usize, op: &Op) -> Vec<Kernel> {
        let end = op.end.max(op.start);
        let mut v: Vec<Kernel> = self
            .kernels_in(lane, op.start, end)
            .into_iter()
            .filter(|k| k.parent == op.id)
            .collect();
        v.sort_by_key(|k| k.channel);
        v
    }

    /// In-flight ops of a lane with their hang verdicts, oldest first. An op that started to
    /// run is timed from then, against its peers' run times: a collective stuck behind a
    /// deep queue is called hung as soon as it has run ten times too long (at least 1 s),
    /// not ten times the queue's wait. One that has not started is timed from its start,
    /// against its peers' times from start to end, and only the oldest (the others wait
    /// behind it): an op waiting for the GPU to finish the work before it (PyTorch enqueues
    /// ahead) is not hung while its peers waited as long.
    pub fn open_ops(&self, comm: usize, row: &LaneRow) -> Vec<OpenView<'_>> {
        self.open_ops_with(comm, row, &mut HashMap::new())
    }

    /// [`Store::open_ops`] of every row, the peers' medians computed once per function (they
    /// are the communicator's, the same for every row).
    pub fn open_ops_of_rows(&self, comm: usize, rows: &[LaneRow]) -> Vec<Vec<OpenView<'_>>> {
        let mut medians = HashMap::new();
        rows.iter()
            .map(|r| self.open_ops_with(comm, r, &mut medians))
            .collect()
    }

    /// `medians`: peer medians by function name, filled as needed.
    fn open_ops_with<'a>(
        &'a self,
        comm: usize,
        row: &LaneRow,
        medians: &mut HashMap<&'a str, Medians>,
    ) -> Vec<OpenView<'a>> {
        let p = &self.procs[row.key.proc];
        let now = self.open_now(p);
        // The row's lane, looked up once for all its ops (a deep queue lists 512).
        let in_row = self.open_check(row.key);
        let mut open: Vec<&OpenRow> = p
            .open_ops
            .iter()
            .filter(|o| o.comm == row.key.comm && (o.rank == row.rank || o.rank < 0))
            .filter(|o| {
                if self.open_lane_key(row.key.proc, o) == row.key {
                    in_row.is_open(o)
                } else {
                    self.still_open(row.key.proc, o)
                }
            })
            .collect();
        open.sort_by_key(|o| (o.start, o.seq));
        // A deep queue lists hundreds of ops of one function: its name and its peers'
        // medians are looked up once per function id, not hashed by name for each op.
        let mut funcs: HashMap<u16, (&'a str, Medians), FxBuild> = HashMap::default();
        open.into_iter()
            .enumerate()
            .map(|(i, o)| {
                let (func, (med_run, med_total)) = *funcs.entry(o.func).or_insert_with(|| {
                    let name = p.string(o.func);
                    let m = *medians
                        .entry(name)
                        .or_insert_with(|| self.peer_medians(comm, name));
                    (name, m)
                });
                let age = now.saturating_sub(o.start);
                let running = (o.exec_start > 0).then(|| now.saturating_sub(o.exec_start));
                let (hung, med) = match running {
                    Some(r) => (analysis::is_hung(r, med_run), med_run),
                    None => (i == 0 && analysis::is_hung(age, med_total), med_total),
                };
                OpenView {
                    row: o,
                    func,
                    age_ns: age,
                    running_ns: running,
                    hung,
                    peer_median: med,
                }
            })
            .collect()
    }

    /// Communicators (indices into `comms`) with a hung op, so that the header can point to
    /// a hang in one not on screen (a job has several: data, tensor, pipeline parallel).
    /// Only those with an op in flight longer than the hang floor are judged, so a job
    /// without a hang costs one pass over the in-flight lists.
    pub fn hung_comms(&self) -> Vec<usize> {
        self.hung_comms_but(usize::MAX)
    }

    /// [`Store::hung_comms`] but communicator `skip` (the one on screen, which its view has
    /// judged already).
    pub fn hung_comms_but(&self, skip: usize) -> Vec<usize> {
        let mut long: std::collections::HashSet<(usize, u32)> = Default::default();
        for (pi, p) in self.procs.iter().enumerate() {
            let now = self.open_now(p);
            for o in &p.open_ops {
                if now.saturating_sub(o.start) > analysis::HUNG_MIN_NS {
                    long.insert((pi, o.comm));
                }
            }
        }
        if long.is_empty() {
            return Vec::new();
        }
        (0..self.comms.len())
            .filter(|&c| c != skip)
            .filter(|&c| {
                self.comms[c]
                    .members
                    .iter()
                    .any(|m| long.contains(&(m.proc, m.comm)))
            })
            .filter(|&c| {
                let rows = self.lane_rows(c);
                self.open_ops_of_rows(c, &rows)
                    .iter()
                    .flatten()
                    .any(|o| o.hung)
            })
            .collect()
    }

    /// "Now" for a process's in-flight list: its latest summary, or later data.
    fn open_now(&self, p: &Proc) -> u64 {
        p.open_at.max(self.t_max).max(self.t_now)
    }

    /// The hung ops of a communicator over all its ranks (not only those on screen), and for
    /// the oldest one's collective the ranks that have not started it ([`HangSummary`]).
    pub fn hang_summary(&self, comm: usize, rows: &[LaneRow]) -> Option<HangSummary<'_>> {
        self.hang_summary_of(rows, &self.open_ops_of_rows(comm, rows))
    }

    /// [`Store::hang_summary`] from the rows' open ops ([`Store::open_ops_of_rows`]).
    pub fn hang_summary_of<'a>(
        &'a self,
        rows: &[LaneRow],
        open: &[Vec<OpenView<'a>>],
    ) -> Option<HangSummary<'a>> {
        let (rank, op) = rows
            .iter()
            .zip(open)
            .flat_map(|(r, ops)| ops.iter().filter(|o| o.hung).map(move |o| (r.rank, o)))
            .min_by_key(|(_, o)| (o.row.start, o.row.seq))?;
        let more = open.iter().flatten().filter(|o| o.hung).count() - 1;
        let declared = rows
            .iter()
            .map(|r| self.nranks_of(r.key) as usize)
            .max()
            .unwrap_or(0)
            .max(rows.len());
        let mut summary = HangSummary {
            rank,
            op: op.clone(),
            more,
            ranks_in: 1,
            ranks: rows.len(),
            declared,
            not_started: Vec::new(),
            gone: Vec::new(),
            unknown: 0,
        };
        let func: &str = op.func;
        let (seq, start) = (op.row.seq, op.row.start);
        let coll = EventKind::Coll as u8;
        // Only a collective involves every rank; a name not known cannot be matched.
        if op.row.kind != coll || func.is_empty() || func == "?" {
            return Some(summary);
        }
        summary.ranks_in = 0;
        for (r, ops) in rows.iter().zip(open) {
            let mine = || ops.iter().filter(|o| o.row.kind == coll && o.func == func);
            if mine().any(|o| o.row.seq == seq) {
                summary.ranks_in += 1;
                continue;
            }
            // In a later one of the same function: it has passed this one.
            if mine().any(|o| o.row.seq > seq) {
                continue;
            }
            let p = &self.procs[r.key.proc];
            match &p.state {
                ProcState::Live => {}
                // A file keeps no summary for a rank with nothing in flight, nor the state
                // of its process, and hosts' clocks differ: not judged.
                ProcState::Offline => {
                    summary.unknown += 1;
                    continue;
                }
                ProcState::Ended(why) => {
                    summary.gone.push((r.rank, format!("ended ({why})")));
                    continue;
                }
                ProcState::Crashed => {
                    summary.gone.push((r.rank, "crashed".into()));
                    continue;
                }
            }
            // Evidence that it is not in the collective: a summary from the last second, after
            // the hung op's start, listing everything in flight with known names; Coll events
            // captured (mask on, profiling active) and none of its records lost (a lost
            // start or end looks like absence); a NCCL that numbers every collective whether
            // profiled or not (API v3 on; before, seq only counted profiled ones).
            let now = op.row.start + op.age_ns;
            let judged = p.open_at >= start
                && p.open_at.saturating_add(1_000_000_000) >= now
                && p.open_ops.len() >= p.open_total as usize
                && ops.iter().all(|o| !o.func.is_empty() && o.func != "?")
                && p.active
                && p.mask & EventKind::Coll.bit() != 0
                && p.dropped() == 0
                && p.api_version >= 3;
            let Some(l) = r.lane.filter(|_| judged) else {
                summary.unknown += 1;
                continue;
            };
            let last = self.lanes[l]
                .last_seq
                .iter()
                .find(|(id, _)| p.string(**id) == func)
                .map(|(_, &x)| x);
            if last.is_some_and(|(q, _)| q >= seq) {
                continue; // ran it (or a later one)
            }
            let busy_in = ops.first().map(|o| (o.func.into(), o.row.kind, o.row.seq));
            summary.not_started.push(NotStarted {
                rank: r.rank,
                last,
                busy_in,
            });
        }
        Some(summary)
    }

    /// Median recent run time ([`analysis::run_time`]) and time from start to end of `func`
    /// over the ranks of a communicator.
    pub fn peer_medians(&self, comm: usize, func: &str) -> (Option<u64>, Option<u64>) {
        let Some(g) = self.comms.get(comm) else {
            return (None, None);
        };
        let (mut run, mut total) = (Vec::new(), Vec::new());
        for m in &g.members {
            let key = LaneKey {
                proc: m.proc,
                comm: m.comm,
                rank: m.rank,
            };
            let Some(l) = self.lane(key) else { continue };
            let p = &self.procs[m.proc];
            for (id, q) in &l.recent {
                if p.string(*id) == func {
                    run.extend(q.iter().map(|r| r.run));
                    total.extend(q.iter().map(|r| r.total));
                }
            }
        }
        (analysis::median(&run), analysis::median(&total))
    }

    /// Stragglers among the ops of a communicator in a window: ((function, seq) → straggler).
    pub fn stragglers_in(&self, rows: &[LaneRow], from: u64, to: u64) -> analysis::Stragglers<'_> {
        self.stragglers_sampled(rows, from, to, 0, |_| true)
    }

    /// [`Store::stragglers_in`] over sampled ops (at most about one per `cell` ns per rank) of
    /// the functions `keep` accepts (the view's `/` filter).
    pub fn stragglers_sampled(
        &self,
        rows: &[LaneRow],
        from: u64,
        to: u64,
        cell: u64,
        keep: impl Fn(&str) -> bool,
    ) -> analysis::Stragglers<'_> {
        let mut v = Vec::new();
        for r in rows {
            let Some(l) = r.lane else { continue };
            // Sampled only where the timeline samples too (a lane too dense to draw op by
            // op): a sampled lane may keep another instance than its peers keep, and the
            // instance would then be judged without its real last rank.
            let dense =
                cell > 0 && self.lanes[l].ops.count_in(from, to) as u64 > 8 * (to - from) / cell;
            for o in self.ops_sampled(l, from, to, if dense { cell } else { 0 }) {
                let func = self.func_of(l, &o);
                // A name not kept ("", the plugin's string table full) or not received yet
                // ("?") cannot tell two functions' instances apart.
                if o.kind == EventKind::Coll as u8 && !func.is_empty() && func != "?" && keep(func)
                {
                    v.push((
                        r.rank,
                        (func, o.seq),
                        o.start,
                        o.end.saturating_sub(o.start),
                    ));
                }
            }
        }
        analysis::stragglers(&v)
    }

    /// Sum of step phase times of a lane in a window, keyed by (channel, peer, send).
    pub fn step_breakdown(&self, lane: usize, from: u64, to: u64) -> StepBreakdown {
        let mut out = StepBreakdown::new();
        let Some(l) = self.lanes.get(lane) else {
            return out;
        };
        // Bounded work per frame: sampled beyond MAX_STEPS_PER_LANE (shares stay right;
        // absolute sums are scaled back by what the sample looked at).
        let sample = l.steps.sample(from, to, MAX_STEPS_PER_LANE, |b, s| {
            let r = s.unpack(b);
            let ph = r.step_phases();
            let send = s.flags & super::store::S_SEND != 0;
            let e = out
                .entry((s.channel, s.peer, send))
                .or_insert(([(ph[0].0, 0), (ph[1].0, 0), (ph[2].0, 0)], 0));
            for (i, (_, d)) in ph.iter().enumerate() {
                e.0[i].1 += d;
            }
            e.1 += 1;
        });
        for (phases, count) in out.values_mut() {
            for (_, d) in phases.iter_mut() {
                *d = sample.scale(*d);
            }
            *count = sample.scale(*count);
        }
        out
    }

    /// Number of processes that are streaming.
    pub fn live_procs(&self) -> usize {
        self.procs
            .iter()
            .filter(|p| p.state == super::store::ProcState::Live)
            .count()
    }

    /// Distinct ranks known (communicator members).
    pub fn rank_count(&self) -> usize {
        self.comms.iter().map(|g| g.members.len()).sum()
    }
}
