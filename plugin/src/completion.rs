//! Reconstruction on the drain thread: raw start/state/stop records → completed
//! [`EventRecord`]s, with true completion found by reference counting (spec §4.4, §6.2).
//!
//! - Coll/P2p `stopEvent` only means "enqueued". A Coll/P2p completes when every network
//!   ProxyOp under it stopped and every expected KernelCh (one per channel when KernelCh is on)
//!   stopped; its end is the latest child end and its execution start the earliest child start.
//! - ProxyOps that never record InProgress are non-network (spec §4.6): they never stop and
//!   do not hold their parent; they are reported with `F_NOT_NETWORK` once the parent is done.
//! - API events and groups complete when their stop was seen and their children completed.
//! - Where no completion signal exists, the op is reported with `F_END_UNKNOWN` and its
//!   enqueue stop as end — never an invented time: at once where none can come ([`Signals`]:
//!   a send/recv to self, or neither KernelCh nor ProxyOp events in the mask), else after a
//!   timeout.
//! - Parents are looked up by id in this table only; an unknown parent (stale CUDA-graph
//!   handle, dropped record, NULL) is flagged `F_PARENT_UNKNOWN`. Foreign (PXN) ProxyOps are
//!   never linked to a local parent.
//! - Open events are entries of `table` (an `Open` each: what a parent counts of its
//!   children), except the two leaves that are most events, proxy steps and kernel channels:
//!   their records are built in the slots of direct-mapped tables (`steps_open`,
//!   `kernels_open`: [`crate::open_steps`]) at their start and finished there at their stop.
//!
//! Processing is two-phase per drain pass (the starts that may parent another ring's records,
//! then everything else in ring order: see [`Completion::pass`]) so records of different
//! threads' rings need not be merged by time.

#![allow(clippy::collapsible_match)] // one arm per state reads better than match guards

use std::collections::VecDeque;

use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use ncclprof_shared::kind::{EventKind, state as st};
use ncclprof_shared::record::*;
use ncclprof_shared::wire::{DropReason, InFlight, OpenOp, OpenStep};

use crate::gpuclock::GpuClock;
use crate::history::Sink;
use crate::open_steps::{OpenKernelChs, OpenSteps};
use crate::ring::{
    OP_START, OP_STATE, OP_STOP, RF_FOREIGN, RF_LATE_START, RF_PARENT_NULL, RF_PHASES,
    RF_RESTARTED, RF_WHOLE, Raw, first_sweep_record,
};
use crate::step_phases::{merge, merge_record, whole_unpacked};

/// ProxySteps the capture rings show were issued (open, or stopped a moment ago), named as
/// parent by NetPlugin events of this pass and the one before (see
/// `Completion::parent_is_open_step`). Empty, and free, without NetPlugin events.
#[derive(Default)]
struct IssuedSteps {
    this_pass: FxHashSet<u64>,
    last_pass: FxHashSet<u64>,
}

impl IssuedSteps {
    fn next_pass(&mut self) {
        std::mem::swap(&mut self.this_pass, &mut self.last_pass);
        self.this_pass.clear();
    }

    fn note(&mut self, id: u64) {
        self.this_pass.insert(id);
    }

    fn contains(&self, id: u64) -> bool {
        self.this_pass.contains(&id) || self.last_pass.contains(&id)
    }
}

/// The open-events table's least room (see [`Completion::fit_table`]): what a pass of a
/// small job holds (hashbrown makes it 128 buckets, room for 112: 28 KB of entries).
const TABLE_MIN: usize = 64;

/// Most ProxyStep states waiting for their step ([`Completion::park_stray_state`]).
const MAX_STRAY: usize = 1024;

/// Events counted abandoned while still open (leaked past 60 timeouts, their stop taken for
/// lost, their op stopped without them). Should one's stop or whole record come after all
/// (a step of more than a minute, a stop late rather than dropped), it is ignored: it was
/// counted when it was given up, and counting it again as an unknown handle, or delivering
/// it beside its abandoned count, would count one event twice. Bounded: the oldest are
/// forgotten first (abandoned events are few; one that stops after
/// [`CountedLost::MAX`] others were given up is counted again, as an unknown handle).
#[derive(Default)]
struct CountedLost {
    order: VecDeque<u64>,
    ids: FxHashSet<u64>,
}

impl CountedLost {
    const MAX: usize = 4096;

    fn insert(&mut self, id: u64) {
        if self.ids.insert(id) {
            self.order.push_back(id);
            if self.order.len() > Self::MAX
                && let Some(old) = self.order.pop_front()
            {
                self.ids.remove(&old);
            }
        }
    }

    fn contains(&self, id: u64) -> bool {
        !self.ids.is_empty() && self.ids.contains(&id)
    }

    /// Whether `id` was counted lost; forgotten here (an event ends once).
    fn take(&mut self, id: u64) -> bool {
        !self.ids.is_empty() && self.ids.remove(&id)
    }
}

/// Per-context facts completion needs (filled by the drain thread from the context slots).
#[derive(Clone, Copy, Debug, Default)]
pub struct CtxInfo {
    pub rank: i32,
}

#[derive(Debug, Clone)]
struct Open {
    rec: EventRecord,
    stopped: bool,
    stop_ns: u64,
    /// Children started and not finished (unprogressed ProxyOps included).
    pending: u32,
    /// ProxyOp children that have not (yet) recorded InProgress.
    unprogressed: u32,
    children_done: u32,
    kernels_expected: u32,
    kernels_done: u32,
    end_max: u64,
    /// Earliest child start: kernels (GPU time) if any, else ProxyOp InProgress.
    exec_min: u64,
    kernel_min: u64,
    /// Coll/P2p, while open: host time of its first kernel channel's start callback
    /// (u64::MAX = none yet). For the in-flight summary: an op that has started running is
    /// timed from then ([`OpenOp::exec_start_ns`]).
    kernel_started: u64,
    last_activity: u64,
    /// ProxyOp: progressed (InProgress or a legacy state seen).
    progressed: bool,
    /// ProxyOp: a sweep already found it unprogressed (see [`Completion::sweep`]).
    swept: bool,
    /// ProxyOp: counted in its parent's `unprogressed` (an op not progressed yet, not known
    /// to wait behind its connection's earlier ops: see [`Conn`]).
    counted_unprogressed: bool,
    /// ProxyOp: open steps (step index, id), of those the drain knows open: a step's start
    /// record came (a NetPlugin event needed it, a newer step took its phases entry, or its
    /// stop did not fit a whole record: `step_phases`), or the drain learnt of it from its
    /// ring's published entries (`announce`). Most steps come whole, so most ops never have
    /// one: the list takes no room until its first step (then room for NCCL's 8,
    /// `NCCL_STEPS`, at once: one allocation per such op, where growing cost four). Kept
    /// inline it was 144 of the entry's 328 bytes (208 now), copied with every entry into
    /// and out of the table.
    steps: Vec<(u32, u64)>,
    /// Coll/P2p: proxy steps done per channel by its ProxyOps that left the table (for the
    /// in-flight summary, which adds those of its open ops).
    steps_done: Option<Box<[u32; 64]>>,
    /// ProxyOp: its steps that stopped. Counted here, on the op the step's stop finds anyway,
    /// and handed to the Coll/P2p once when the op leaves the table: one lookup per op
    /// instead of one per step.
    steps_finished: u32,
    /// Passes since completion first looked possible.
    quiet: u8,
    /// Coll/P2p: no child can tell its completion (see [`Signals`]); complete at its stop.
    no_signal: bool,
}

impl Open {
    /// When this open Coll/P2p started to run, for the in-flight summary (0 = not yet, or not
    /// known): its first kernel channel's start. Not its ProxyOps' progress: a ProxyOp
    /// progresses as soon as it is posted, while the GPU may still be busy with what precedes
    /// the op on its stream, and the viewer compares this time with its peers' run times
    /// (from their first kernel); nor only when the mask in force expects kernels (the mask
    /// NCCL copied into the op decides, and a review found the two disagreeing).
    fn exec_started(&self) -> u64 {
        if self.kernel_started == u64::MAX {
            0
        } else {
            self.kernel_started
        }
    }

    fn new(rec: EventRecord, now: u64) -> Open {
        Open {
            rec,
            stopped: false,
            stop_ns: 0,
            pending: 0,
            unprogressed: 0,
            children_done: 0,
            kernels_expected: 0,
            kernels_done: 0,
            end_max: 0,
            exec_min: u64::MAX,
            kernel_min: u64::MAX,
            kernel_started: u64::MAX,
            last_activity: now,
            progressed: false,
            swept: false,
            counted_unprogressed: false,
            steps: Vec::new(),
            steps_done: None,
            steps_finished: 0,
            quiet: 0,
            no_signal: false,
        }
    }
}

/// One raw record with its host time and, for a start, its context's rank and the context's
/// wire id in `raw.ctx` (states and stops name no context: completion reads neither from
/// them). What a deferred record is kept as, and what tests and benches feed a pass.
#[derive(Clone, Copy, Debug)]
pub struct Item {
    pub raw: Raw,
    pub ns: u64,
    pub rank: i32,
}

/// The records of one drain pass, each ring's in its order, rings one after another. The
/// drain's are still in the rings' slots (`stream::InRings`): copying every record (64 B)
/// into a pass buffer as an [`Item`] first was a third of the drain's time. Tests and
/// benches pass a slice of items.
pub trait PassRecords {
    /// Call `f` with every record `take` accepts, its host time and, for a start, its
    /// context's rank (for a state or stop: -1 from the rings, what the item holds from a
    /// slice; completion does not read it). `take` sees only the raw record, so the records it
    /// passes over are not converted. A state or stop is handed over where it lies; a start
    /// as a copy whose `ctx` is the context's wire id.
    fn visit(&self, take: impl FnMut(&Raw) -> bool, f: impl FnMut(&Raw, u64, i32));

    /// As [`PassRecords::visit`], but free to pass over records that no
    /// [`first_sweep_record`] is among: from the rings, those of rings without a record
    /// pushed by [`crate::ring::Ring::push_marked`] since the pass's first (a proxy thread's,
    /// most of a pass). `take` must accept first-sweep records only.
    fn visit_first_sweep(&self, take: impl FnMut(&Raw) -> bool, f: impl FnMut(&Raw, u64, i32)) {
        self.visit(take, f)
    }

    /// Whether ProxyStep `id` was issued by a capture ring and its published entry still
    /// holds it (open, or stopped a moment ago): known only where the rings are.
    fn step_issued(&self, _id: u64) -> bool {
        false
    }
}

impl PassRecords for [Item] {
    #[inline]
    fn visit(&self, mut take: impl FnMut(&Raw) -> bool, mut f: impl FnMut(&Raw, u64, i32)) {
        for it in self {
            if take(&it.raw) {
                f(&it.raw, it.ns, it.rank);
            }
        }
    }
}

/// Which children can signal that a Coll/P2p finished on the GPU, by the event mask (the
/// drain's view of it: [`SignalsWatch`]). Without KernelCh and ProxyOp events nothing will
/// ever come, and a Coll/P2p held open for the completion timeout pinned itself, its API
/// parent and its group in the open table for a second (a burst of small groups filled it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Signals {
    /// KernelCh events are on: one per channel of each Coll/P2p (spec §4.10).
    pub kernel_ch: bool,
    /// Host time after which a Coll/P2p can get neither a KernelCh nor a ProxyOp child: the
    /// mask has had both off since well before (see [`SignalsWatch`]). `None`: they can.
    pub none_after: Option<u64>,
}

impl Signals {
    /// KernelCh events on, children always possible.
    pub const ALL: Signals = Signals {
        kernel_ch: true,
        none_after: None,
    };

    /// Whether a Coll/P2p started at `ns` can get no child at all.
    fn none_at(&self, ns: u64) -> bool {
        self.none_after.is_some_and(|t| ns > t)
    }
}

/// The drain's view of [`Signals`] from the mask in force, pass after pass. NCCL copies the
/// mask into each task when the user calls, and a task may start (at group end) a while
/// after: an event can get children if it started less than `settle_ns` after the drain
/// first saw both KernelCh and ProxyOp off. Any mask change the drain did not see between two
/// passes (`Control::changes` moved) starts the wait again.
#[derive(Debug, Default)]
pub struct SignalsWatch {
    /// Since when (host ns) the drain has seen the mask without KernelCh and ProxyOp.
    off_since: Option<u64>,
    changes: u32,
}

impl SignalsWatch {
    pub fn at(&mut self, mask: u32, changes: u32, now: u64, settle_ns: u64) -> Signals {
        let children = EventKind::KernelCh.bit() | EventKind::ProxyOp.bit();
        if mask & children != 0 || changes != self.changes {
            self.off_since = None;
        }
        self.changes = changes;
        if mask & children == 0 && self.off_since.is_none() {
            self.off_since = Some(now);
        }
        Signals {
            kernel_ch: mask & EventKind::KernelCh.bit() != 0,
            none_after: self.off_since.map(|t| t.saturating_add(settle_ns)),
        }
    }
}

fn holds_net_plugin(items: &[Item]) -> bool {
    items
        .iter()
        .any(|i| i.raw.kind == EventKind::NetPlugin as u8)
}

/// Whether a parent waits for a child of kind `k` (counts it in `Open::pending`).
fn held_by_parent(k: EventKind) -> bool {
    matches!(
        k,
        EventKind::ProxyOp
            | EventKind::KernelCh
            | EventKind::Coll
            | EventKind::P2p
            | EventKind::CollApi
            | EventKind::P2pApi
            | EventKind::KernelLaunch
            | EventKind::CeColl
            | EventKind::CeSync
            | EventKind::CeBatch
    )
}

fn is_container(k: EventKind) -> bool {
    matches!(
        k,
        EventKind::GroupApi
            | EventKind::CollApi
            | EventKind::P2pApi
            | EventKind::Group
            | EventKind::Coll
            | EventKind::P2p
            | EventKind::CeColl
    )
}

/// A capture ring's dropped records as the drain heard of them (host ns, 0: none). A ring
/// that keeps overflowing reports a newer drop at every pass, beyond what has been read:
/// keeping only the newest, none would ever be reached.
#[derive(Clone, Copy, Debug, Default)]
struct RingDrops {
    /// The newest known to lie in the part of the ring read so far.
    reached: u64,
    /// The oldest reported and not yet reached.
    pending: u64,
    /// The newest reported.
    latest: u64,
}

/// A proxy connection as its ProxyOps name it: context, rank, channel, peer and direction,
/// packed (one 128-bit hash instead of five fields': two lookups per ProxyOp on the drain).
type ConnKey = u128;

fn conn_key(rec: &EventRecord) -> ConnKey {
    (u128::from(rec.comm) << 96)
        | (u128::from(rec.rank as u32) << 64)
        | (u128::from(rec.x) << 32)
        | (u128::from(rec.sub) << 1)
        | u128::from(rec.flags & F_SEND != 0)
}

/// What the ProxyOps of one connection showed. NCCL chains a connection's ops and progresses
/// them in order: an op appended behind a second of queued work records InProgress a second
/// later. Such an op, in line on a connection whose ops progress, is queued, not non-network
/// (which never progresses): it holds its collective from its start, and is judged by the
/// non-network rule only once nothing on its connection is progressing and the connection
/// has been quiet for the timeout. An op that a later op of its connection overtook is not
/// in that line, and is judged as an op of a connection never seen progressing.
#[derive(Debug, Default, Clone, Copy)]
struct Conn {
    /// Its ops that progressed and have not stopped.
    progressing: u32,
    /// Latest InProgress or stop of one of its ops (0: none yet).
    last_activity: u64,
    /// Start of the newest op that progressed.
    newest_progressed_start: u64,
}

impl Conn {
    /// Whether an unprogressed op that started at `start` waits in this connection's line.
    fn in_line(&self, start: u64) -> bool {
        self.last_activity != 0 && self.newest_progressed_start <= start
    }
}

/// An open event quiet for this many completion timeouts, whose ring dropped records since
/// its last sign of life, is taken to have lost its stop (see `Completion::sweep`).
const LOST_AFTER_TIMEOUTS: u64 = 10;

/// An open leaf (a step, a kernel channel, a launch …) quiet for this many completion
/// timeouts without such drops is given up as leaked (see `Completion::sweep`).
const LEAKED_AFTER_TIMEOUTS: u64 = 60;

/// Completion state, putting what it completes into `S`: the drain's [`History`] frames,
/// or a `Vec` of records (tests, benches, [`Completion::take`]).
///
/// [`History`]: crate::history::History
pub struct Completion<S = Vec<EventRecord>> {
    table: HashMap<u64, Open>,
    /// Proxy connections seen progressing (see [`Conn`]).
    conns: HashMap<ConnKey, Conn>,
    /// Open ProxySteps (most events): direct-mapped; a step whose slot is taken is in `table`.
    steps_open: OpenSteps,
    /// Open kernel channels (most events of a job without network traffic), as `steps_open`:
    /// one whose slot is taken is in `table`.
    kernels_open: OpenKernelChs,
    max_open: usize,
    timeout_ns: u64,
    gpu: HashMap<u32, GpuClock>,
    gpu_timer_hz: f64,
    /// Where completed records go.
    out: S,
    dirty: Vec<u64>,
    /// Records whose parent (or own start) was not seen yet: another thread's ring may hold
    /// it beyond this pass's snapshot. Retried once in the next pass.
    deferred: Vec<Item>,
    deferred_ids: FxHashSet<u64>,
    pub captured: [u64; EventKind::COUNT],
    pub completed: [u64; EventKind::COUNT],
    pub dropped: [u64; DropReason::COUNT],
    last_sweep: u64,
    /// The most entries `table` held since the last [`Completion::fit_table`] (counted where
    /// a start inserts one; a step that misses `steps_open` goes in uncounted: rare).
    table_peak: usize,
    /// Steps NetPlugin events of this pass and the one before name, found issued in the
    /// capture rings ([`Completion::parent_is_open_step`]).
    issued_steps: IssuedSteps,
    /// Steps started by [`Completion::announce`] and still open, or given up as abandoned
    /// since (in `lost`): their whole record is their stop ([`Completion::whole_step`]).
    announced: FxHashSet<u64>,
    /// ProxyStep states read before their step was known, with their host times
    /// ([`Completion::park_stray_state`]).
    stray: Vec<(Raw, u64)>,
    /// Events given up as abandoned while open: a late record of one is not counted again.
    lost: CountedLost,
    /// Steps `announce` had no room for, or whose deferred start found none (`start`), for
    /// the drain's scan to offer again ([`Completion::take_refused_announces`]).
    refused_announces: Vec<u64>,
    /// Per capture ring, host times of dropped records it reported (0: none). An event whose
    /// ring dropped a record after its last sign of life may have lost its stop.
    ring_drops: Vec<RingDrops>,
}

/// A ProxyStep state (spec §2.3) into its record: p1..p3 = the step's phase boundaries,
/// p4 = bytes, p5 = SendPeerWait count.
#[inline]
pub(crate) fn step_state(rec: &mut EventRecord, s: u32, arg: u64, ns: u64) {
    match s {
        st::PROXY_STEP_SEND_GPU_WAIT => {
            rec.flags |= F_SEND;
            if rec.p[1] == 0 {
                rec.p[1] = ns;
            }
        }
        st::PROXY_STEP_SEND_PEER_WAIT => {
            rec.flags |= F_SEND;
            if rec.p[2] == 0 {
                rec.p[2] = ns;
            }
            rec.p[5] += 1;
        }
        st::PROXY_STEP_SEND_WAIT => {
            rec.flags |= F_SEND;
            rec.p[3] = ns;
            rec.p[4] = arg;
        }
        st::PROXY_STEP_RECV_WAIT => {
            if rec.p[1] == 0 {
                rec.p[1] = ns;
            }
        }
        st::PROXY_STEP_RECV_FLUSH_WAIT => {
            rec.p[2] = ns;
            rec.p[4] = arg;
        }
        st::PROXY_STEP_RECV_GPU_WAIT => rec.p[3] = ns,
        _ => {}
    }
}

/// A ProxyStep state record: one state, or a run of them (`RF_PHASES`, see `step_phases`).
#[inline]
/// The latest state an open step's record holds (0: none), by the phase boundaries its states
/// set ([`step_state`]): a later boundary means a later state.
fn latest_step_state(rec: &EventRecord) -> u8 {
    let send = rec.flags & F_SEND != 0;
    let s = match (send, rec.p[3] != 0, rec.p[2] != 0, rec.p[1] != 0) {
        (true, true, ..) => st::PROXY_STEP_SEND_WAIT,
        (true, false, true, _) => st::PROXY_STEP_SEND_PEER_WAIT,
        (true, false, false, true) => st::PROXY_STEP_SEND_GPU_WAIT,
        (false, true, ..) => st::PROXY_STEP_RECV_GPU_WAIT,
        (false, false, true, _) => st::PROXY_STEP_RECV_FLUSH_WAIT,
        (false, false, false, true) => st::PROXY_STEP_RECV_WAIT,
        _ => return 0,
    };
    s as u8
}

/// Where a ProxyStep state comes in a step's life (0: not a step state): send GPU wait, peer
/// wait, network wait; receive network wait, flush, GPU wait.
fn step_state_order(s: u8) -> u8 {
    match u32::from(s) {
        st::PROXY_STEP_SEND_GPU_WAIT | st::PROXY_STEP_RECV_WAIT => 1,
        st::PROXY_STEP_SEND_PEER_WAIT | st::PROXY_STEP_RECV_FLUSH_WAIT => 2,
        st::PROXY_STEP_SEND_WAIT | st::PROXY_STEP_RECV_GPU_WAIT => 3,
        _ => 0,
    }
}

fn step_state_or_phases(rec: &mut EventRecord, r: &Raw, ns: u64) {
    if r.flags & RF_PHASES != 0 {
        merge_record(rec, r);
    } else {
        step_state(rec, u32::from(r.state), r.parent, ns);
    }
}

/// Whether the open step `id` started after host time `ns` (false if it is not open).
fn started_after(steps_open: &OpenSteps, table: &HashMap<u64, Open>, id: u64, ns: u64) -> bool {
    steps_open
        .get(id)
        .or_else(|| table.get(&id).map(|o| &o.rec))
        .is_some_and(|r| r.start_ns > ns)
}

/// A kernel channel's state `r` at host time `ns` on its record `rec`: the GPU stop (record
/// 22), when it came as a record of its own rather than on the stop (`capture::stop`). Any
/// state is a sign of life: kept in `p[3]` while the channel is open (its stop's host time
/// from its stop on), for the sweep of `kernels_open`, as `Open::last_activity` is for one
/// in the table.
#[inline(always)]
fn kernel_state(rec: &mut EventRecord, r: &Raw, ns: u64) {
    if u32::from(r.state) == st::KERNEL_CH_STOP {
        rec.p[1] = r.parent;
    }
    rec.p[3] = ns;
}

/// A kernel channel's stop `r` at host time `ns` on its record `rec` (end already set to
/// `ns`): its GPU stop if the stop carries it, its host times in `p[2..4]`, and its span
/// converted to host time by its context's GPU clock when it has both GPU times.
#[inline(always)]
fn finish_kernel_ch(
    gpu: &mut HashMap<u32, GpuClock>,
    gpu_timer_hz: f64,
    rec: &mut EventRecord,
    r: &Raw,
    ns: u64,
) {
    if r.state == st::KERNEL_CH_STOP as u8 {
        // The GPU stop, carried by the stop record (`capture::stop`).
        rec.p[1] = r.w[0];
    }
    rec.p[2] = rec.start_ns;
    rec.p[3] = ns;
    if rec.p[0] != 0 && rec.p[1] != 0 {
        let clock = gpu
            .entry(rec.comm)
            .or_insert_with(|| GpuClock::new(gpu_timer_hz));
        clock.observe(rec.start_ns, rec.p[0]);
        clock.observe(ns, rec.p[1]);
        let (s, e) = clock.convert_span(rec.p[0], rec.start_ns, rec.p[1], ns);
        rec.start_ns = s;
        rec.end_ns = e;
        rec.flags |= F_GPU_CONVERTED;
    }
}

/// A step's stop `r`, applied to its record `rec` (see [`Completion::step_stopped`]).
#[inline(always)]
fn finish_step(table: &mut HashMap<u64, Open>, rec: &mut EventRecord, r: &Raw, ns: u64) {
    if r.flags & RF_PHASES != 0 {
        merge_record(rec, r);
    }
    rec.end_ns = ns;
    rec.flags |= F_END_KNOWN;
    if let Some(op) = table.get_mut(&rec.parent) {
        step_done_in(op, rec, ns);
        let step = rec.p[0] as u32;
        if let Some(i) = op.steps.iter().position(|s| s.0 == step && s.1 == rec.id) {
            op.steps.swap_remove(i); // (order does not matter)
        }
    } else if rec.parent != 0 {
        rec.flags |= F_PARENT_UNKNOWN;
    }
}

/// A finished step `rec` (its bytes in `p[4]`) in its op `op`: it takes channel, peer,
/// communicator, rank and direction from the op, adds its bytes to the op's and counts as
/// one of its finished steps.
#[inline(always)]
fn step_done_in(op: &mut Open, rec: &mut EventRecord, ns: u64) {
    op.last_activity = ns; // a sign of life of the op (see `sweep`)
    rec.sub = op.rec.sub;
    rec.x = op.rec.x;
    rec.comm = op.rec.comm;
    rec.rank = op.rec.rank;
    rec.flags |= op.rec.flags & (F_SEND | F_FOREIGN);
    op.rec.p[3] += rec.p[4];
    op.steps_finished += 1;
}

/// Steps NCCL keeps in flight per proxy op (`NCCL_STEPS`).
const NCCL_STEPS: usize = 8;

#[inline]
fn lo(w: u64) -> u32 {
    w as u32
}
#[inline]
fn hi(w: u64) -> u32 {
    (w >> 32) as u32
}

impl Completion {
    /// Completion into a `Vec` of records (see [`Completion::take`]).
    pub fn new(max_open: usize, timeout_ms: u64, gpu_timer_hz: f64) -> Completion {
        Completion::with_sink(Vec::with_capacity(4096), max_open, timeout_ms, gpu_timer_hz)
    }

    /// Take the records completed so far.
    pub fn take(&mut self, into: &mut impl Extend<EventRecord>) {
        into.extend(self.out.drain(..));
    }
}

impl<S: Sink> Completion<S> {
    pub fn with_sink(out: S, max_open: usize, timeout_ms: u64, gpu_timer_hz: f64) -> Self {
        Completion {
            table: HashMap::with_capacity_and_hasher(TABLE_MIN, Default::default()),
            conns: HashMap::default(),
            steps_open: OpenSteps::default(),
            kernels_open: OpenKernelChs::default(),
            max_open,
            timeout_ns: timeout_ms.max(1) * 1_000_000,
            gpu: HashMap::default(),
            gpu_timer_hz,
            out,
            dirty: Vec::new(),
            deferred: Vec::new(),
            deferred_ids: FxHashSet::default(),
            captured: [0; EventKind::COUNT],
            completed: [0; EventKind::COUNT],
            dropped: [0; DropReason::COUNT],
            last_sweep: 0,
            table_peak: 0,
            stray: Vec::new(),
            lost: CountedLost::default(),
            refused_announces: Vec::new(),
            announced: FxHashSet::default(),
            issued_steps: IssuedSteps::default(),
            ring_drops: Vec::new(),
        }
    }

    /// How long an open event may wait for a sign of progress before it is reported.
    pub fn timeout_ns(&self) -> u64 {
        self.timeout_ns
    }

    /// Capture ring `ring` dropped a record (a full ring) stamped at host time `at`.
    pub fn ring_dropped(&mut self, ring: u32, at: u64) {
        let i = ring as usize;
        if self.ring_drops.len() <= i {
            self.ring_drops.resize(i + 1, RingDrops::default());
        }
        let d = &mut self.ring_drops[i];
        d.latest = d.latest.max(at);
        if d.pending == 0 {
            d.pending = at;
        }
    }

    /// The rings have been read up to host time `now`: the drops stamped before it are
    /// reached.
    fn reach_drops(&mut self, now: u64) {
        for d in &mut self.ring_drops {
            if d.latest != 0 && d.latest <= now {
                d.reached = d.reached.max(d.latest);
                d.pending = 0;
            } else if d.pending != 0 && d.pending <= now {
                d.reached = d.reached.max(d.pending);
                d.pending = d.latest; // the next to reach
            }
        }
    }

    /// Whether open event `id`, last seen alive at host time `last`, is taken to have lost
    /// its stop at `now`: quiet for `LOST_AFTER_TIMEOUTS` timeouts, and its ring dropped
    /// records since.
    fn lost_its_stop(&self, id: u64, last: u64, now: u64) -> bool {
        now.saturating_sub(last) > LOST_AFTER_TIMEOUTS * self.timeout_ns
            && self.lost_since(id, last)
    }

    /// Whether the ring `id` was issued from dropped a record, in the part read so far,
    /// stamped after host time `t`.
    fn lost_since(&self, id: u64, t: u64) -> bool {
        self.ring_drops
            .get(crate::handle::ring_of(id) as usize)
            .is_some_and(|d| d.reached > t)
    }

    /// Records waiting for a parent from another thread's ring (see [`Completion::pass`]).
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }

    pub fn open_events(&self) -> usize {
        self.table.len() + self.steps_open.len() + self.kernels_open.len()
    }

    /// Forget an open step wherever it is kept; whether it was open.
    fn forget_step(&mut self, id: u64) -> bool {
        self.steps_open.remove(id).is_some() || self.table.remove(&id).is_some()
    }

    /// Open event `id`, no longer held, is given up as abandoned: counted once, and a late
    /// record of it ignored ([`CountedLost`]).
    fn count_abandoned(&mut self, id: u64) {
        self.dropped[DropReason::Abandoned as usize] += 1;
        self.lost.insert(id);
    }

    /// Where completed records went.
    pub fn sink(&self) -> &S {
        &self.out
    }

    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.out
    }

    #[inline]
    fn emit(&mut self, rec: EventRecord) {
        if let Some(k) = rec.kind() {
            self.completed[k as usize] += 1;
        }
        self.out.put(&rec);
    }

    /// One drain pass over the records read from all rings: first every new start, then the
    /// records deferred by the previous pass (starts first), then every new state and stop.
    ///
    /// ProxySteps, most records, are the exception when no NetPlugin event is in the pass:
    /// their starts are taken with their states and stops, in ring order. A step's parent
    /// ProxyOp is on the same thread, so it started earlier in its ring (or an earlier pass)
    /// and stops after its steps; only a NetPlugin child, possibly on another thread, needs
    /// its step open before phase B. Started in phase A, every step of the pass was open at
    /// once: thousands, which with several rings collided in `steps_open`'s direct-mapped
    /// slots and went to the hash table (with 4 producer threads, more than one step in
    /// eight). A proxy thread's other starts (ProxyOps, KernelChs, ProxyCtrls) too start in
    /// ring order then, unless records deferred by the last pass are retried (a deferred
    /// step's op may be among this pass's starts): their parents, collectives, started in
    /// phase A, and an op's entry is in cache when its steps come. Phase A then reads only
    /// the rings that hold a start it takes ([`first_sweep_record`]). When a NetPlugin start
    /// is in the pass, the proxy thread's starts, then steps start in phase A after every
    /// other start, and NetPlugin events after the steps (nothing but a NetPlugin event has a
    /// step for parent, and nothing has a NetPlugin event for parent). With the table full
    /// (`max_open`), what starts later in this order is what is dropped.
    pub fn pass(&mut self, records: &(impl PassRecords + ?Sized), signals: Signals) {
        let mut carried = std::mem::take(&mut self.deferred);
        self.deferred_ids.clear();
        let step = EventKind::ProxyStep as u8;
        let net = EventKind::NetPlugin as u8;
        // Parents were captured before their children (one invariant clock for all threads):
        // time order lets a deferred child find a parent deferred in the same pass.
        carried.sort_by_key(|i| i.raw.ts);
        // New starts first: a deferred child's parent may be among them (it sat beyond the
        // previous snapshot). A new record whose parent is itself deferred is deferred in turn
        // and finds it next pass. This sweep also finds out whether the pass holds a
        // NetPlugin start. It reads only the rings that hold such records
        // ([`first_sweep_record`]: the launch thread's, not a proxy thread's, whose records
        // all start in ring order below); the others are read once, by the last sweep.
        let mut net_in_pass = false;
        records.visit_first_sweep(
            |r| {
                if !first_sweep_record(r.op, r.kind) {
                    return false;
                }
                net_in_pass |= r.kind == net;
                r.kind != net
            },
            |r, ns, rank| self.start(r, ns, rank, signals, false),
        );
        self.issued_steps.next_pass();
        let steps_in_order = !net_in_pass && !holds_net_plugin(&carried);
        // A proxy thread's other starts (ProxyOp, KernelCh, ProxyCtrl) come in its ring's
        // order too: an op just before its steps, which need its entry (the op's parent, a
        // collective, started above), so that the entry is still in cache when they come —
        // started with this sweep's other starts, a pass's thousands of ops were out of the
        // cache again by their steps (`whole_step`'s most sampled line). Not when records
        // deferred from the last pass are retried below: a deferred step's op may be among
        // this pass's starts.
        let ops_in_order = steps_in_order && carried.is_empty();
        if !ops_in_order {
            // Every step before any NetPlugin event: a helper thread's ring may come before
            // the ring of the step its event belongs to.
            let ops: fn(u8) -> bool =
                |k| !first_sweep_record(OP_START, k) && k != EventKind::ProxyStep as u8;
            let in_turn: &[fn(u8) -> bool] = if steps_in_order {
                &[ops]
            } else {
                &[
                    ops,
                    |k| k == EventKind::ProxyStep as u8,
                    |k| k == EventKind::NetPlugin as u8,
                ]
            };
            for take in in_turn {
                records.visit(
                    |r| r.op == OP_START && take(r.kind),
                    |r, ns, rank| {
                        self.note_issued_parent(records, r);
                        self.start(r, ns, rank, signals, false)
                    },
                );
            }
        }
        let mut carried_starts = false;
        for it in carried.iter().filter(|i| i.raw.op == OP_START) {
            self.note_issued_parent(records, &it.raw);
            self.start(&it.raw, it.ns, it.rank, signals, true);
            carried_starts = true;
        }
        // A new record deferred above may have had its parent among the carried starts (a
        // chain: Coll late → its ProxyOp deferred → the op's steps and their NetPlugin events
        // deferred with it). Waiting another pass could find the parent already finished —
        // steps last microseconds — so such records start now, in time order.
        if carried_starts && !self.deferred.is_empty() {
            let mut waiting = std::mem::take(&mut self.deferred);
            waiting.sort_by_key(|i| i.raw.ts);
            for it in waiting {
                if it.raw.op == OP_START && self.parent_open(&it.raw) {
                    self.deferred_ids.remove(&it.raw.id);
                    self.start(&it.raw, it.ns, it.rank, signals, true);
                } else {
                    self.deferred.push(it);
                }
            }
        }
        for it in carried.iter().filter(|i| i.raw.op != OP_START) {
            if it.raw.flags & RF_WHOLE != 0 && it.raw.kind == step {
                self.whole_step(&it.raw, it.ns, it.rank, true);
            } else {
                self.state_or_stop(&it.raw, it.ns, true);
            }
        }
        records.visit(
            |r| {
                r.op != OP_START
                    || (steps_in_order && r.kind == step)
                    || (ops_in_order && !first_sweep_record(r.op, r.kind))
            },
            |r, ns, rank| {
                if r.op == OP_START {
                    // A proxy thread's start, in ring order (see above).
                    self.start(r, ns, rank, signals, false);
                    return;
                }
                // Most records are a state of an open step: handled here, without the general
                // path's call (its prologue alone was a tenth of the instructions per record).
                if r.kind == step && r.flags & RF_WHOLE != 0 {
                    self.whole_step(r, ns, rank, false);
                    return;
                }
                if r.kind == step
                    && (self.deferred_ids.is_empty() || !self.deferred_ids.contains(&r.id))
                {
                    if r.op == OP_STATE
                        && let Some(rec) = self.steps_open.get_mut(r.id)
                    {
                        step_state_or_phases(rec, r, ns);
                        return;
                    }
                    if r.op == OP_STOP && self.open_step_stopped(r, ns) {
                        return;
                    }
                }
                self.state_or_stop(r, ns, false);
            },
        );
    }

    /// Whether a start's parent is open here (in `table`, or an open step for a NetPlugin).
    fn parent_open(&self, r: &Raw) -> bool {
        self.table.contains_key(&r.parent) || self.parent_is_open_step(r)
    }

    /// A NetPlugin's parent is a ProxyStep, kept in `steps_open` (in `table` only when its
    /// direct-mapped slot was taken); it holds nothing for its children, so finding it is all
    /// the linking there is.
    ///
    /// A step that goes to the ring whole is never open here: a NetPlugin event on the
    /// step's thread pushes the step's start first (`capture`), and one on a helper thread
    /// (NCCL's socket transport) finds it in its capture ring's published entries, open or
    /// stopped a moment ago ([`PassRecords::step_issued`], noted by `pass`).
    fn parent_is_open_step(&self, r: &Raw) -> bool {
        r.kind == EventKind::NetPlugin as u8
            && (self.steps_open.contains(r.parent) || self.issued_steps.contains(r.parent))
    }

    /// Before a NetPlugin start `r` is taken: whether its parent step was issued, from the
    /// capture rings (see [`Completion::parent_is_open_step`]).
    fn note_issued_parent(&mut self, records: &(impl PassRecords + ?Sized), r: &Raw) {
        if r.kind == EventKind::NetPlugin as u8
            && !self.steps_open.contains(r.parent)
            && records.step_issued(r.parent)
        {
            self.issued_steps.note(r.parent);
        }
    }

    /// Phase A: a start record; `signals`: what the mask in force lets complete a Coll/P2p.
    /// A start whose parent is
    /// not known yet is deferred once (`retry` = this is the second try): the parent may sit
    /// in another thread's ring beyond this pass's snapshot.
    fn start(&mut self, r: &Raw, ns: u64, rank: i32, signals: Signals, retry: bool) {
        let ctx = CtxInfo { rank };
        let Some(kind) = EventKind::from_u8(r.kind) else {
            return;
        };
        if kind == EventKind::ProxyStep && r.flags & RF_LATE_START != 0 {
            if self.announced.contains(&r.id) {
                // Its start record, pushed late, after the drain learnt of it from its ring's
                // published entries (`announce`): nothing new.
                return;
            }
            if self.restarted_since(r, ns) {
                // An abandoned handle whose start record was pushed late (its phases entry
                // taken, `capture`), after the start of the step that restarted it:
                // forgotten, as a restart's abandoned handle is (below).
                self.captured[kind as usize] += 1;
                return;
            }
        }
        // The parent is looked up once, here, and linked below (never for foreign ops: their
        // parent lives in another process).
        let linkable = r.flags & (RF_PARENT_NULL | RF_FOREIGN) == 0 && r.parent != 0;
        let open_now = self.open_events();
        // (A step is open in exactly one of `steps_open` and `table`, a kernel channel in
        // exactly one of `kernels_open` and `table`.)
        let parent_is_open_step = linkable && self.parent_is_open_step(r);
        let parent = if linkable {
            self.table.get_mut(&r.parent)
        } else {
            None
        };
        if parent.is_none()
            && !parent_is_open_step
            && linkable
            && !retry
            && crate::handle::kind_of(r.parent).is_some()
        {
            self.deferred.push(Item { raw: *r, ns, rank });
            self.deferred_ids.insert(r.id);
            return;
        }
        // Work captured in a CUDA graph, or under a parent no longer here (a graph replay's
        // stale handle), carries the mask of its capture: the mask in force says nothing
        // about which children it gets (spec §4.12). (A closure, called for Coll/P2p only:
        // computed for every start, it was 15 % of `start`'s instructions.)
        let replayable = |parent: &Option<&mut Open>| {
            linkable
                && parent
                    .as_ref()
                    .is_none_or(|p| p.rec.flags & F_GRAPH_CAPTURED != 0)
        };
        if open_now >= self.max_open
            && kind == EventKind::ProxyStep
            && !self.announced.is_empty()
            && self.announced.remove(&r.id)
        {
            // An announced step deferred for its op (`announce`), no room now: counted by
            // neither, as an announce without room, and offered again by the drain's next
            // scan ([`Completion::take_refused_announces`]); its whole record counts it.
            self.refused_announces.push(r.id);
            return;
        }
        self.captured[kind as usize] += 1;
        if open_now >= self.max_open {
            self.dropped[DropReason::TableFull as usize] += 1;
            return;
        }
        if kind == EventKind::ProxyStep {
            // Most events: kept in `steps_open`, their record built in its slot (not on
            // the stack and copied in), without an `Open`.
            let step = lo(r.w[0]);
            let mut flags = if r.flags & RF_RESTARTED != 0 {
                F_RESTARTED
            } else {
                0
            };
            let mut abandoned = None;
            match parent {
                Some(op) => {
                    op.last_activity = ns;
                    // A receive step started again without a stop: the old handle is
                    // abandoned by NCCL (spec §4.6).
                    match op.steps.iter_mut().find(|s| s.0 == step) {
                        Some(s) => {
                            abandoned = Some(std::mem::replace(&mut s.1, r.id));
                            flags |= F_RESTARTED;
                        }
                        None => {
                            if op.steps.capacity() == 0 {
                                op.steps.reserve_exact(NCCL_STEPS);
                            }
                            op.steps.push((step, r.id));
                        }
                    }
                }
                None if r.flags & RF_PARENT_NULL == 0 && r.parent != 0 => flags |= F_PARENT_UNKNOWN,
                None => {}
            }
            if let Some(old) = abandoned {
                self.forget_step(old);
            }
            let record = || EventRecord {
                id: r.id,
                parent: if r.flags & RF_PARENT_NULL != 0 {
                    0
                } else {
                    r.parent
                },
                start_ns: ns,
                comm: r.ctx,
                rank: hi(r.w[0]) as i32,
                kind: kind as u8,
                flags,
                p: [u64::from(step), 0, 0, 0, 0, 0],
                ..EventRecord::default()
            };
            let rec = match self.steps_open.claim(r.id) {
                Some(slot) => {
                    *slot = record();
                    slot
                }
                None => {
                    &mut self
                        .table
                        .entry(r.id)
                        .or_insert(Open::new(record(), ns))
                        .rec
                }
            };
            if !self.stray.is_empty() {
                Self::apply_stray(&mut self.stray, rec);
            }
            return;
        }
        if kind == EventKind::KernelCh {
            // Most events of a job without network traffic: kept in `kernels_open`, their
            // record built in its slot, without an `Open` (whose 208 bytes went into the
            // table and out again, with its hashing: a third of the drain's instructions in a job
            // of kernel channels).
            let parent_id = if r.flags & RF_PARENT_NULL != 0 {
                0
            } else {
                r.parent
            };
            let mut flags = 0;
            if parent_id != 0 {
                match parent {
                    Some(parent) => {
                        parent.last_activity = ns;
                        parent.kernel_started = parent.kernel_started.min(ns);
                        parent.pending += 1; // (`held_by_parent`)
                    }
                    None if parent_is_open_step => {}
                    None => flags |= F_PARENT_UNKNOWN,
                }
            }
            let record = EventRecord {
                id: r.id,
                parent: parent_id,
                start_ns: ns,
                comm: r.ctx,
                rank: ctx.rank,
                kind: kind as u8,
                flags,
                sub: r.w[0] as u8,
                // GPU start; GPU id = context (one GPU per rank).
                p: [r.w[1], 0, 0, 0, u64::from(r.ctx), 0],
                ..EventRecord::default()
            };
            match self.kernels_open.claim(r.id) {
                Some(slot) => *slot = record,
                None => {
                    self.table.insert(r.id, Open::new(record, ns));
                    self.table_peak = self.table_peak.max(self.table.len());
                }
            }
            return;
        }
        let mut rec = EventRecord {
            id: r.id,
            parent: if r.flags & RF_PARENT_NULL != 0 {
                0
            } else {
                r.parent
            },
            start_ns: ns,
            comm: r.ctx,
            rank: ctx.rank,
            kind: kind as u8,
            ..EventRecord::default()
        };
        let w = r.w;
        let mut o;
        match kind {
            EventKind::Coll => {
                rec.p[0] = w[0];
                rec.p[1] = w[1];
                rec.p[2] = w[2];
                rec.x = lo(w[3]);
                rec.sub = hi(w[3]) as u8;
                rec.p[4] = u64::from((hi(w[3]) >> 8) as u8);
                o = Open::new(rec, ns);
                if signals.kernel_ch {
                    o.kernels_expected = u32::from(rec.sub).min(64);
                }
                o.no_signal = signals.none_at(ns) && !replayable(&parent);
            }
            EventKind::P2p => {
                rec.x = lo(w[0]);
                rec.sub = hi(w[0]) as u8;
                rec.p[1] = w[1];
                rec.p[2] = w[2];
                o = Open::new(rec, ns);
                // NCCL plans neither a network nor a profiler proxy op for a send/recv to
                // self (`addP2pToPlan`: `nProxyOps = selfSend ? 0 : 2`), so no ProxyOp and no
                // KernelCh ever comes for it.
                let to_self = ctx.rank >= 0 && rec.x == ctx.rank as u32;
                o.no_signal = to_self || (signals.none_at(ns) && !replayable(&parent));
                if signals.kernel_ch && !o.no_signal {
                    o.kernels_expected = u32::from(rec.sub).min(64);
                }
            }
            EventKind::CollApi | EventKind::P2pApi => {
                rec.p[1] = w[0];
                rec.p[2] = w[1];
                rec.p[4] = w[2];
                rec.x = lo(w[3]);
                if hi(w[3]) != 0 {
                    rec.flags |= F_GRAPH_CAPTURED;
                }
                o = Open::new(rec, ns);
            }
            EventKind::GroupApi => {
                rec.x = lo(w[0]);
                if hi(w[0]) != 0 {
                    rec.flags |= F_GRAPH_CAPTURED;
                }
                o = Open::new(rec, ns);
            }
            EventKind::KernelLaunch => {
                rec.p[4] = w[2];
                o = Open::new(rec, ns);
            }
            EventKind::ProxyOp => {
                rec.p[0] = u64::from(lo(w[0]));
                rec.rank = hi(w[0]) as i32;
                rec.sub = w[1] as u8;
                if (w[1] >> 8) & 1 != 0 {
                    rec.flags |= F_SEND;
                }
                rec.x = hi(w[1]);
                rec.p[1] = u64::from(lo(w[2]));
                rec.p[2] = u64::from(hi(w[2]));
                if r.flags & RF_FOREIGN != 0 {
                    rec.flags |= F_FOREIGN;
                    rec.comm = u32::MAX;
                }
                o = Open::new(rec, ns);
            }
            EventKind::ProxyStep => return, // started above
            EventKind::KernelCh => return,  // started above
            EventKind::NetPlugin => {
                rec.p[0] = w[0];
                match (w[0] as i64) & ncclprof_shared::kind::net::TYPE_MASK {
                    ncclprof_shared::kind::net::TYPE_IB => {
                        rec.sub = w[1] as u16 as u8;
                        rec.p[2] = u64::from((w[1] >> 16) as u16);
                        rec.x = hi(w[1]);
                        rec.p[1] = w[2];
                    }
                    _ => {
                        rec.x = lo(w[1]);
                        rec.sub = hi(w[1]) as u8;
                    }
                }
                rec.p[3] = w[3];
                o = Open::new(rec, ns);
            }
            EventKind::CeColl => {
                rec.p[0] = w[0];
                rec.p[1] = w[1];
                rec.p[2] = w[2];
                rec.x = lo(w[3]);
                o = Open::new(rec, ns);
            }
            EventKind::CeSync => {
                rec.x = lo(w[0]);
                if hi(w[0]) != 0 {
                    rec.flags |= F_CE_FLAG;
                }
                o = Open::new(rec, ns);
            }
            EventKind::CeBatch => {
                rec.x = lo(w[0]);
                if hi(w[0]) != 0 {
                    rec.flags |= F_CE_FLAG;
                }
                rec.p[1] = w[1];
                o = Open::new(rec, ns);
            }
            EventKind::Group | EventKind::ProxyCtrl => {
                o = Open::new(rec, ns);
            }
        }
        if o.rec.parent != 0 && o.rec.flags & F_FOREIGN == 0 {
            match parent {
                Some(parent) => {
                    parent.last_activity = ns;
                    if held_by_parent(kind) {
                        parent.pending += 1;
                        // In line on a connection seen progressing (see `Conn`): queued from
                        // its start, holding its collective (a sweep, 100 ms on, came after
                        // a multi-channel collective had completed without it).
                        if kind == EventKind::ProxyOp
                            && !self
                                .conns
                                .get(&conn_key(&o.rec))
                                .is_some_and(|c| c.in_line(o.rec.start_ns))
                        {
                            parent.unprogressed += 1;
                            o.counted_unprogressed = true;
                        }
                    }
                }
                None if parent_is_open_step => {}
                None => o.rec.flags |= F_PARENT_UNKNOWN,
            }
        } else if o.rec.parent != 0 && o.rec.flags & F_FOREIGN != 0 {
            // keep the foreign parent value for matching with the other process
        }
        self.table.insert(r.id, o);
        self.table_peak = self.table_peak.max(self.table.len());
    }

    /// Phase B: a state or stop record (deferred with its start if that was deferred).
    fn state_or_stop(&mut self, r: &Raw, ns: u64, retry: bool) {
        if !retry && !self.deferred_ids.is_empty() && self.deferred_ids.contains(&r.id) {
            self.deferred.push(Item {
                raw: *r,
                ns,
                rank: -1,
            });
            return;
        }
        // (A whole step never comes here: `pass` hands it to `whole_step` first.)
        if r.op == OP_STOP {
            self.stop(r, ns);
        } else if r.op == OP_STATE {
            self.state(r, ns);
        }
    }

    fn unknown(&mut self) {
        self.dropped[DropReason::UnknownHandle as usize] += 1;
    }

    fn state(&mut self, r: &Raw, ns: u64) {
        if r.kind == EventKind::ProxyStep as u8
            && let Some(rec) = self.steps_open.get_mut(r.id)
        {
            step_state_or_phases(rec, r, ns);
            return;
        }
        if r.kind == EventKind::KernelCh as u8
            && let Some(rec) = self.kernels_open.get_mut(r.id)
        {
            kernel_state(rec, r, ns);
            return;
        }
        let Some(o) = self.table.get_mut(&r.id) else {
            // A step's states sent because a newer step took its phases entry: the step may
            // be one NCCL restarted or abandoned, already forgotten here (and counted then).
            if r.flags & RF_PHASES == 0 {
                if r.kind == EventKind::ProxyStep as u8 {
                    self.park_stray_state(r, ns);
                } else if !self.lost.contains(r.id) {
                    self.unknown(); // (one given up as abandoned was counted then)
                }
            }
            return;
        };
        // A sign of life (see `sweep`: an op quiet for long on a ring that dropped records
        // is taken to have lost its stop). Containers time out on their own rules.
        if !o.rec.kind().is_some_and(is_container) {
            o.last_activity = ns;
        }
        let s = u32::from(r.state);
        let arg = r.parent;
        let rec = &mut o.rec;
        let mut progressed_now = false;
        match rec.kind() {
            Some(EventKind::GroupApi) => match s {
                st::GROUP_START_API_STOP => rec.p[0] = ns,
                st::GROUP_END_API_START => rec.p[1] = ns,
                _ => {}
            },
            Some(EventKind::ProxyOp) => {
                if s == st::PROXY_OP_IN_PROGRESS || s <= st::PROXY_OP_RECV_DONE {
                    if rec.p[4] == 0 {
                        rec.p[4] = ns;
                    }
                    if s <= st::PROXY_OP_RECV_DONE {
                        rec.p[5] |= 1 << s;
                        if arg != 0 {
                            rec.p[3] = rec.p[3].max(arg);
                        }
                    }
                    if !o.progressed {
                        o.progressed = true;
                        progressed_now = true;
                    }
                }
            }
            Some(EventKind::ProxyStep) => step_state_or_phases(rec, r, ns),
            Some(EventKind::ProxyCtrl) => {
                if rec.p[0] == 0 {
                    rec.p[0] = u64::from(s) + 1;
                }
                rec.sub = r.state;
                if s == st::PROXY_CTRL_APPEND_END {
                    rec.x = arg as u32;
                }
            }
            Some(EventKind::KernelCh) => kernel_state(rec, r, ns),
            Some(EventKind::NetPlugin) => {
                if s == st::NET_PLUGIN_UPDATE {
                    rec.p[4] += 1;
                    rec.p[5] = ns;
                }
            }
            _ => {}
        }
        if progressed_now {
            let (parent, flags, key) = (o.rec.parent, o.rec.flags, conn_key(&o.rec));
            let started = o.rec.start_ns;
            let counted = std::mem::take(&mut o.counted_unprogressed);
            let conn = self.conns.entry(key).or_default();
            conn.progressing += 1;
            conn.last_activity = ns;
            conn.newest_progressed_start = conn.newest_progressed_start.max(started);
            if flags & F_FOREIGN == 0
                && let Some(p) = self.table.get_mut(&parent)
            {
                if counted {
                    p.unprogressed = p.unprogressed.saturating_sub(1);
                }
                p.last_activity = ns;
            }
        }
    }

    fn stop(&mut self, r: &Raw, ns: u64) {
        if r.kind == EventKind::ProxyStep as u8 && self.open_step_stopped(r, ns) {
            return;
        }
        if r.kind == EventKind::KernelCh as u8 && self.open_kernel_stopped(r, ns) {
            return;
        }
        let Some(kind) = self.table.get(&r.id).and_then(|o| o.rec.kind()) else {
            if !self.lost.take(r.id) {
                self.unknown();
            }
            return;
        };
        if is_container(kind) {
            if let Some(o) = self.table.get_mut(&r.id)
                && !o.stopped
            {
                o.stopped = true;
                o.stop_ns = ns;
                o.last_activity = ns;
                self.dirty.push(r.id);
            }
            return;
        }
        let Some(mut o) = self.table.remove(&r.id) else {
            return;
        };
        o.rec.end_ns = ns;
        o.rec.flags |= F_END_KNOWN;
        let (mut child_start, mut child_end) = (o.rec.start_ns, ns);
        match kind {
            EventKind::ProxyOp => {
                for &(_, id) in &o.steps {
                    // Steps still open when their op stops were abandoned by NCCL: lost, counted.
                    if self.forget_step(id) {
                        self.count_abandoned(id);
                    }
                }
                if o.rec.p[4] != 0 {
                    child_start = o.rec.p[4];
                }
                self.op_left(&o);
                let conn = self.conns.entry(conn_key(&o.rec)).or_default();
                conn.last_activity = ns;
                if o.progressed {
                    conn.progressing = conn.progressing.saturating_sub(1);
                } else if o.counted_unprogressed {
                    // Stopped without progress: still not holding the parent.
                    self.progress_parent(o.rec.parent, o.rec.flags, ns);
                }
            }
            EventKind::ProxyStep => {
                self.step_stopped(o.rec, r, ns);
                return;
            }
            EventKind::KernelCh => {
                // (One whose slot in `kernels_open` was taken.)
                finish_kernel_ch(&mut self.gpu, self.gpu_timer_hz, &mut o.rec, r, ns);
                child_start = o.rec.start_ns;
                child_end = o.rec.end_ns;
            }
            _ => {}
        }
        let parent = o.rec.parent;
        let flags = o.rec.flags;
        self.emit(o.rec);
        if flags & (F_FOREIGN | F_PARENT_UNKNOWN) == 0 && parent != 0 {
            self.child_done(parent, kind, child_start, child_end, ns);
        }
    }

    /// A step's stop `r` (which may carry the step's states, `RF_PHASES`: merged here, so no
    /// path that stops a step can miss them): it takes channel, peer, communicator and
    /// direction from its ProxyOp, adds its bytes to the op's, and counts towards the
    /// collective's progress per channel.
    fn step_stopped(&mut self, mut rec: EventRecord, r: &Raw, ns: u64) {
        finish_step(&mut self.table, &mut rec, r, ns);
        self.emit(rec);
    }

    /// [`Completion::step_stopped`] for a step in `steps_open`, finished where it lies and
    /// handed to the sink from there (no copy out of the table and none into a call: a
    /// step's stop is the drain's most frequent record). False if the step is not there.
    #[inline]
    fn open_step_stopped(&mut self, r: &Raw, ns: u64) -> bool {
        let Some(rec) = self.steps_open.take_mut(r.id) else {
            return false;
        };
        finish_step(&mut self.table, rec, r, ns);
        self.completed[EventKind::ProxyStep as usize] += 1;
        self.out.put(rec);
        true
    }

    /// A kernel channel's stop `r` for one in `kernels_open`, finished where it lies and
    /// handed to the sink from there, as [`Completion::open_step_stopped`] does for a step.
    /// False if the channel is not there.
    #[inline]
    fn open_kernel_stopped(&mut self, r: &Raw, ns: u64) -> bool {
        let Some(rec) = self.kernels_open.take_mut(r.id) else {
            return false;
        };
        rec.end_ns = ns;
        rec.flags |= F_END_KNOWN;
        finish_kernel_ch(&mut self.gpu, self.gpu_timer_hz, rec, r, ns);
        let (parent, flags, start, end) = (rec.parent, rec.flags, rec.start_ns, rec.end_ns);
        self.completed[EventKind::KernelCh as usize] += 1;
        self.out.put(rec);
        if flags & (F_FOREIGN | F_PARENT_UNKNOWN) == 0 && parent != 0 {
            self.child_done(parent, EventKind::KernelCh, start, end, ns);
        }
        true
    }

    /// A whole step in one record (`RF_WHOLE`, as `InRings` hands it over: `ts` = start and
    /// `w[0..3]` = phase times in host ns, `ns` = its stop): what its start and its stop would
    /// have done, without keeping it open in between. `rank`: its context's (-1 unknown).
    fn whole_step(&mut self, r: &Raw, ns: u64, rank: i32, retry: bool) {
        let (arg, retries, step) = whole_unpacked(r.w[3]);
        if !self.announced.is_empty() && self.announced.remove(&r.id) {
            // The drain learnt of it while it was open (`announce`): this is its stop. (Only
            // such a step can be open here: one whose start record NCCL's thread pushed
            // ends with a stop record, not a whole one.)
            let stop = Raw {
                ts: 0,
                id: r.id,
                parent: arg,
                op: OP_STOP,
                kind: r.kind,
                state: r.state,
                flags: RF_PHASES,
                ctx: retries,
                w: [r.w[0], r.w[1], r.w[2], 0],
            };
            self.stop(&stop, ns);
            return;
        }
        let linkable = r.flags & (RF_PARENT_NULL | RF_FOREIGN) == 0 && r.parent != 0;
        let mut flags = if r.flags & RF_RESTARTED != 0 {
            F_RESTARTED
        } else {
            0
        };
        // Its op: one lookup (this is the drain's most frequent record). A step the drain
        // knows open under the same number, started before this one, was abandoned by NCCL
        // (spec §4.6), as in `start`: this one replaces it. The drain knows open steps only
        // as `announce` and late start records make them, so an op's list is mostly empty.
        let mut op = if linkable {
            self.table.get_mut(&r.parent)
        } else {
            None
        };
        if op
            .as_ref()
            .is_some_and(|o| o.steps.iter().any(|s| s.0 == step))
        {
            let abandoned = self.table[&r.parent]
                .steps
                .iter()
                .find(|s| s.0 == step && !started_after(&self.steps_open, &self.table, s.1, r.ts))
                .map(|s| s.1);
            if let Some(old) = abandoned {
                if let Some(o) = self.table.get_mut(&r.parent) {
                    o.steps.retain(|s| s.1 != old);
                }
                self.forget_step(old);
                flags |= F_RESTARTED;
            }
            op = self.table.get_mut(&r.parent);
        }
        if op.is_none() && linkable && !retry && crate::handle::kind_of(r.parent).is_some() {
            // Its op may sit in another thread's ring beyond this pass's snapshot, as for a
            // start (`start`); `Item::rank` keeps the rank for the retry.
            self.deferred.push(Item { raw: *r, ns, rank });
            self.deferred_ids.insert(r.id);
            return;
        }
        if op.is_none() && r.flags & RF_PARENT_NULL == 0 && r.parent != 0 {
            flags |= F_PARENT_UNKNOWN;
        }
        let rec = EventRecord {
            id: r.id,
            parent: if r.flags & RF_PARENT_NULL != 0 {
                0
            } else {
                r.parent
            },
            start_ns: r.ts,
            end_ns: ns,
            comm: r.ctx,
            rank,
            kind: EventKind::ProxyStep as u8,
            flags: flags | F_END_KNOWN,
            p: [u64::from(step), 0, 0, 0, 0, 0],
            ..EventRecord::default()
        };
        let stray = &mut self.stray;
        self.out.put_with(rec, |rec| {
            if !stray.is_empty() {
                Self::apply_stray(stray, rec);
            }
            merge(rec, r.state, [r.w[0], r.w[1], r.w[2]], arg, retries);
            if let Some(op) = op {
                step_done_in(op, rec, ns);
            }
        });
        self.captured[EventKind::ProxyStep as usize] += 1;
        self.completed[EventKind::ProxyStep as usize] += 1;
    }

    /// A ProxyStep state for a step not known here: recorded on a thread other than the
    /// step's, whose start has not reached the drain (a step goes to the ring whole at its
    /// stop, `step_phases`). Kept until that step's record comes ([`Completion::apply_stray`]);
    /// counted unknown if none comes within the lost-stop wait (`sweep`), or when more
    /// than [`MAX_STRAY`] wait.
    fn park_stray_state(&mut self, r: &Raw, ns: u64) {
        if self.lost.contains(r.id) {
            return; // its step was given up (counted) while it was open
        }
        if self.stray.len() >= MAX_STRAY {
            self.stray.remove(0);
            self.unknown();
        }
        self.stray.push((*r, ns));
    }

    /// Apply the parked states of step `rec.id` (see [`Completion::park_stray_state`]), as
    /// they would have been applied had the step been open when they were read.
    fn apply_stray(stray: &mut Vec<(Raw, u64)>, rec: &mut EventRecord) {
        stray.retain(|(r, ns)| {
            if r.id != rec.id {
                return true;
            }
            step_state_or_phases(rec, r, *ns);
            false
        });
    }

    /// Whether the step start `r` (at `ns`) is older than an open step of its op under the
    /// same number: then that one restarted it (spec §4.6), and `r` is the abandoned handle.
    fn restarted_since(&self, r: &Raw, ns: u64) -> bool {
        if r.flags & (RF_PARENT_NULL | RF_FOREIGN) != 0 {
            return false;
        }
        let step = lo(r.w[0]);
        self.table.get(&r.parent).is_some_and(|op| {
            op.steps
                .iter()
                .any(|s| s.0 == step && started_after(&self.steps_open, &self.table, s.1, ns))
        })
    }

    /// Whether completion holds the step `id` open or deferred (the drain's published-steps
    /// scan asks before announcing one, `stream`). (Not for a kernel channel, which may be
    /// in `kernels_open`.)
    pub fn knows(&self, id: u64) -> bool {
        self.steps_open.contains(id)
            || self.table.contains_key(&id)
            || (!self.deferred_ids.is_empty() && self.deferred_ids.contains(&id))
    }

    /// A step the drain found open in a ring's published entries, its start record never
    /// pushed (`Ring::open_published_steps`): started here as its start record would have,
    /// so that the in-flight summary sees where a hung collective waits. Its stop, a whole
    /// step, then finds it open (`whole_step`).
    ///
    /// False if the table had no room: nothing is counted then (the step's whole record
    /// counts it when it comes), and the scan offers the step again next time
    /// ([`Completion::take_refused_announces`]).
    pub fn announce(&mut self, r: &Raw, ns: u64, rank: i32, signals: Signals) -> bool {
        // (One older than an open step of the same number is that step's abandoned handle,
        // as for a late start record: the scan finds entries in no particular order. One
        // given up as abandoned is not learnt again.)
        if self.knows(r.id) || self.lost.contains(r.id) || self.restarted_since(r, ns) {
            return true;
        }
        if self.open_events() >= self.max_open {
            self.refused_announces.push(r.id);
            return false;
        }
        self.start(r, ns, rank, signals, false);
        if self.knows(r.id) {
            self.announced.insert(r.id);
        }
        true
    }

    /// Steps [`Completion::announce`] had no room for, or learnt of and dropped since for
    /// want of room (their start deferred for its op, retried into a full table), uncounted:
    /// the drain's scan offers them again.
    pub fn take_refused_announces(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.refused_announces)
    }

    /// Forget the announced steps completion no longer holds (stopped by a stop record,
    /// forgotten): called before each scan, so the set holds open steps only — and those
    /// given up as abandoned while `lost` remembers them, so that a late whole
    /// record of one is taken for its stop and ignored there, with no lookup in `lost` for
    /// every whole step.
    pub fn prune_announced(&mut self) {
        if !self.announced.is_empty() {
            let mut a = std::mem::take(&mut self.announced);
            a.retain(|&id| self.knows(id) || self.lost.contains(id));
            self.announced = a;
        }
    }

    /// A ProxyOp left the table: its finished steps now count on its Coll/P2p's channel.
    fn op_left(&mut self, op: &Open) {
        if op.steps_finished == 0 || op.rec.flags & F_FOREIGN != 0 {
            return;
        }
        if let Some(c) = self.table.get_mut(&op.rec.parent) {
            let sd = c.steps_done.get_or_insert_with(|| Box::new([0; 64]));
            sd[usize::from(op.rec.sub) % 64] += op.steps_finished;
        }
    }

    fn progress_parent(&mut self, parent: u64, flags: u16, ns: u64) {
        if flags & F_FOREIGN == 0
            && let Some(p) = self.table.get_mut(&parent)
        {
            p.unprogressed = p.unprogressed.saturating_sub(1);
            p.last_activity = ns;
        }
    }

    fn child_done(&mut self, parent: u64, kind: EventKind, start: u64, end: u64, now: u64) {
        let Some(p) = self.table.get_mut(&parent) else {
            return;
        };
        p.pending = p.pending.saturating_sub(1);
        p.children_done += 1;
        if kind == EventKind::KernelCh {
            p.kernels_done += 1;
        }
        if end != 0 {
            p.end_max = p.end_max.max(end);
        }
        if start != 0 {
            if kind == EventKind::KernelCh {
                p.kernel_min = p.kernel_min.min(start);
            } else {
                p.exec_min = p.exec_min.min(start);
            }
        }
        p.last_activity = now;
        p.quiet = 0;
        // A collective's 32 kernel channels (or 8 ops) mostly stop one after another: once
        // in the list is enough (`end_pass` sorts it and drops repeats anyway).
        if self.dirty.last() != Some(&parent) {
            self.dirty.push(parent);
        }
    }

    /// Whether an open container is complete at `now` (and how).
    fn ready(&self, o: &Open, now: u64) -> Option<bool> {
        if !o.stopped {
            return None;
        }
        let timed_out = now.saturating_sub(o.last_activity.max(o.stop_ns)) > self.timeout_ns;
        let active = o.pending.saturating_sub(o.unprogressed);
        match o.rec.kind()? {
            EventKind::Coll | EventKind::P2p => {
                if active > 0 {
                    return None; // in flight (possibly hung): stays visible in InFlight
                }
                if o.no_signal && o.children_done == 0 && o.quiet >= 1 {
                    // Nothing will tell its end: the enqueue stop, flagged. (After a quiet
                    // pass, as for a signalled end: a child read a pass late still links.)
                    return Some(false);
                }
                if o.children_done > 0 && o.kernels_done >= o.kernels_expected && o.quiet >= 1 {
                    return Some(true);
                }
                timed_out.then_some(o.children_done > 0)
            }
            EventKind::GroupApi | EventKind::Group | EventKind::CeColl => {
                if o.pending == 0 {
                    Some(o.children_done > 0)
                } else {
                    timed_out.then_some(o.children_done > 0)
                }
            }
            _ => {
                // CollApi / P2pApi: children start after the API call returns (at group end).
                if o.pending == 0 && o.children_done > 0 && o.quiet >= 1 {
                    Some(true)
                } else if timed_out && o.pending == 0 {
                    Some(o.children_done > 0)
                } else {
                    None
                }
            }
        }
    }

    fn complete(&mut self, id: u64, known: bool) {
        let Some(o) = self.table.remove(&id) else {
            return;
        };
        let mut rec = o.rec;
        let kind = rec.kind();
        rec.p[3] = o.stop_ns;
        if known && o.end_max != 0 {
            rec.end_ns = o.end_max.max(
                if kind == Some(EventKind::Coll) || kind == Some(EventKind::P2p) {
                    0
                } else {
                    o.stop_ns
                },
            );
            rec.flags |= F_END_KNOWN;
        } else {
            rec.end_ns = o.stop_ns;
            rec.flags |= if matches!(kind, Some(EventKind::GroupApi | EventKind::Group))
                && o.children_done == 0
            {
                F_END_KNOWN
            } else {
                F_END_UNKNOWN
            };
        }
        let exec = if o.kernel_min != u64::MAX {
            o.kernel_min
        } else {
            o.exec_min
        };
        if exec != u64::MAX && matches!(kind, Some(EventKind::Coll | EventKind::P2p)) {
            rec.p[5] = exec;
        }
        let (parent, flags, start, end) = (
            rec.parent,
            rec.flags,
            rec.p[5].max(rec.start_ns),
            rec.end_ns,
        );
        self.emit(rec);
        if flags & F_PARENT_UNKNOWN == 0 && parent != 0 {
            self.child_done(parent, kind.unwrap_or(EventKind::Group), start, end, end);
        }
    }

    /// The open-events table sized to what it held at most since the last call (every
    /// periodic sweep, 100 ms). Hashing spreads entries over the whole table, so in one left
    /// large by a burst (or made large up front) every start writes its 216-byte entry into
    /// cold cache lines: 4 L1 write misses a start, most of them L2 misses too, in a drain
    /// bench of kernel channels (when they were kept here, not in `kernels_open`). Shrunk
    /// when that peak is under an eighth of its room (to twice the peak, at least
    /// [`TABLE_MIN`]), it grows again as needed. The peak, not what it holds now: ProxyOps
    /// leave the table within the pass that filled it, and a table shrunk to a pass's end
    /// would grow again every pass.
    fn fit_table(&mut self) {
        let peak = self.table_peak.max(self.table.len());
        self.table_peak = self.table.len();
        if self.table.capacity() > 2 * TABLE_MIN && peak * 8 < self.table.capacity() {
            self.table.shrink_to((peak * 2).max(TABLE_MIN));
        }
    }

    /// End of a drain pass: complete what became complete, time out what never will.
    pub fn end_pass(&mut self, now: u64) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        let mut again = Vec::new();
        for id in dirty {
            let Some(o) = self.table.get(&id) else {
                continue;
            };
            match self.ready(o, now) {
                Some(known) => self.complete(id, known),
                None => {
                    if let Some(o) = self.table.get_mut(&id)
                        && o.stopped
                    {
                        o.quiet = o.quiet.saturating_add(1);
                        again.push(id);
                    }
                }
            }
        }
        // Containers waiting only for a quiet pass are re-checked next pass.
        // (Timeouts of containers that never see another child are found by `sweep`.)
        self.dirty.extend(
            again
                .into_iter()
                .filter(|id| self.table.get(id).is_some_and(|o| o.quiet <= 2)),
        );
        if now.saturating_sub(self.last_sweep) > 100_000_000 {
            self.last_sweep = now;
            self.sweep(now);
            self.fit_table();
        }
    }

    /// Periodic scan: timeouts, non-network ProxyOps whose parent is gone, leaked steps.
    fn sweep(&mut self, now: u64) {
        // Leaked steps (e.g. a restarted step NCCL never stopped), as for the table below.
        let leak_ns = LEAKED_AFTER_TIMEOUTS * self.timeout_ns;
        let lost = &mut self.lost;
        let leaked = self.steps_open.remove_where(|r| {
            let leaked = now.saturating_sub(r.start_ns) > leak_ns;
            if leaked {
                lost.insert(r.id);
            }
            leaked
        });
        self.dropped[DropReason::Abandoned as usize] += leaked as u64;
        let wait_ns = LOST_AFTER_TIMEOUTS * self.timeout_ns;
        let before = self.stray.len();
        self.stray
            .retain(|(_, ns)| now.saturating_sub(*ns) <= wait_ns);
        self.dropped[DropReason::UnknownHandle as usize] += (before - self.stray.len()) as u64;
        self.reach_drops(now);
        let mut finish = Vec::new();
        let mut orphans = Vec::new();
        let mut suspects = Vec::new();
        let mut lost_stops = Vec::new();
        let mut lost_leaves = Vec::new();
        let mut queued = Vec::new();
        for (&id, o) in &self.table {
            // Quiet for 10 timeouts while its ring dropped records since: its stop was likely
            // among them. Without that, an open event is in flight, perhaps hung, and stays
            // visible (leaves for 60 timeouts). Orphans of a loss burst filled the open table
            // for a minute and dropped good events as `table full` (scale bench), and a
            // progressed ProxyOp stayed open, its collective "in flight", until finalize.
            // (10, not 1: a step can take seconds on a slow network, and a hang that begins
            // while a ring is full must stay visible a while.)
            let lost = self.lost_its_stop(id, o.last_activity, now);
            let Some(kind) = o.rec.kind() else { continue };
            if is_container(kind) {
                if o.stopped && self.ready(o, now).is_some() {
                    finish.push(id);
                }
            } else if kind == EventKind::ProxyOp && !o.progressed {
                // Waiting in line on a connection whose ops progress (see `Conn`): it holds
                // its collective from now on, and is not judged while its line moves.
                let conn = self
                    .conns
                    .get(&conn_key(&o.rec))
                    .copied()
                    .unwrap_or_default();
                let in_line = conn.in_line(o.rec.start_ns);
                if in_line && o.counted_unprogressed {
                    queued.push(id);
                }
                let judged = if in_line {
                    // Whether or not its parent is here (a PXN op, a dropped collective): a
                    // sweep between one op's stop and the next one's InProgress is no sign.
                    conn.progressing == 0
                        && now.saturating_sub(o.rec.start_ns.max(conn.last_activity))
                            > self.timeout_ns
                } else {
                    !self.table.contains_key(&o.rec.parent)
                        || now.saturating_sub(o.rec.start_ns) > self.timeout_ns
                };
                if judged {
                    // Non-network only if a whole sweep period went by without InProgress:
                    // an op read just before this sweep may have its InProgress in the next
                    // pass (one whose parent is not here, a PXN op or one whose collective
                    // was dropped, was taken for non-network at once, and its states and
                    // stop became unknown handles: a few per 30 s in the stream bench).
                    if o.swept {
                        orphans.push(id);
                    } else {
                        suspects.push(id);
                    }
                }
            } else if kind == EventKind::ProxyOp && o.progressed && lost {
                lost_stops.push(id);
            } else if kind != EventKind::ProxyOp && lost {
                lost_leaves.push(id);
            } else if kind != EventKind::ProxyOp
                && now.saturating_sub(o.last_activity) > LEAKED_AFTER_TIMEOUTS * self.timeout_ns
            {
                orphans.push(id); // leaked leaf (e.g. a restarted step NCCL never stopped)
            }
        }
        // Where the table's lost leaves are released: a collective one releases completes at
        // the next pass, not in this sweep (`finish` is already taken), as it did when they
        // were kept in the table.
        self.sweep_kernels_open(now);
        for id in lost_leaves {
            // Its stop went with its ring's dropped records: a leaf its parent counts (a
            // KernelCh, a launch, a CE event) releases it. A leaked leaf (60 timeouts, no
            // drops) does not: that may be a hang, and its parent must stay in flight.
            if let Some(o) = self.table.remove(&id) {
                self.count_abandoned(id);
                self.release_parent(&o.rec, false);
            }
        }
        for id in lost_stops {
            self.op_lost_its_stop(id);
        }
        for id in suspects {
            if let Some(o) = self.table.get_mut(&id) {
                o.swept = true;
            }
        }
        // Before `finish` is re-checked: a collective whose ops wait in line is in flight.
        for id in queued {
            let Some(o) = self.table.get_mut(&id) else {
                continue;
            };
            o.counted_unprogressed = false;
            let (parent, flags) = (o.rec.parent, o.rec.flags);
            if flags & F_FOREIGN == 0
                && let Some(p) = self.table.get_mut(&parent)
            {
                p.unprogressed = p.unprogressed.saturating_sub(1);
            }
        }
        let horizon = 60 * self.timeout_ns;
        self.conns
            .retain(|_, c| c.progressing > 0 || now.saturating_sub(c.last_activity) < horizon);
        for id in finish {
            if let Some(o) = self.table.get(&id)
                && let Some(known) = self.ready(o, now)
            {
                self.complete(id, known);
            }
        }
        for id in orphans {
            if let Some(mut o) = self.table.remove(&id) {
                if o.rec.kind() == Some(EventKind::ProxyOp) {
                    self.op_left(&o);
                    o.rec.flags |= F_NOT_NETWORK | F_END_UNKNOWN;
                    o.rec.end_ns = 0;
                    self.release_parent(&o.rec, o.counted_unprogressed);
                    self.emit(o.rec);
                } else {
                    self.count_abandoned(id);
                }
            }
        }
    }

    /// The sweep's rules for leaves (above, for `table`) applied to `kernels_open`: a kernel
    /// channel quiet for `LOST_AFTER_TIMEOUTS` timeouts whose ring dropped records since its
    /// last sign of life (its start, or a state: `kernel_state`) lost its stop with them, and
    /// releases its collective; one quiet for 60 timeouts without such drops is abandoned
    /// but does not (it may be a hung kernel, and its collective must stay in flight). Both
    /// are counted abandoned.
    fn sweep_kernels_open(&mut self, now: u64) {
        if self.kernels_open.is_empty() {
            return;
        }
        let leak_ns = LEAKED_AFTER_TIMEOUTS * self.timeout_ns;
        let gone: Vec<(u64, bool)> = self
            .kernels_open
            .iter()
            .filter_map(|rec| {
                let last = rec.start_ns.max(rec.p[3]);
                if self.lost_its_stop(rec.id, last, now) {
                    Some((rec.id, true))
                } else {
                    (now.saturating_sub(last) > leak_ns).then_some((rec.id, false))
                }
            })
            .collect();
        for (id, lost_its_stop) in gone {
            if let Some(rec) = self.kernels_open.remove(id) {
                self.count_abandoned(id);
                if lost_its_stop {
                    self.release_parent(&rec, false);
                }
            }
        }
    }

    /// A child of `rec.parent` left the table without a stop: the parent no longer waits
    /// for it (nor for its progress, for a ProxyOp that never made any).
    fn release_parent(&mut self, rec: &EventRecord, unprogressed: bool) {
        let held = rec.kind().is_some_and(held_by_parent);
        if !held || rec.flags & (F_FOREIGN | F_PARENT_UNKNOWN) != 0 || rec.parent == 0 {
            return;
        }
        if let Some(p) = self.table.get_mut(&rec.parent) {
            p.pending = p.pending.saturating_sub(1);
            if unprogressed {
                p.unprogressed = p.unprogressed.saturating_sub(1);
            }
            self.dirty.push(rec.parent);
        }
    }

    /// A progressed ProxyOp whose stop was lost with its ring's dropped records: reported
    /// with its end unknown, its open steps counted abandoned, its collective no longer
    /// waiting for it.
    fn op_lost_its_stop(&mut self, id: u64) {
        let Some(mut o) = self.table.remove(&id) else {
            return;
        };
        for &(_, step) in &o.steps {
            if self.forget_step(step) {
                self.count_abandoned(step);
            }
        }
        self.op_left(&o);
        if let Some(conn) = self.conns.get_mut(&conn_key(&o.rec)) {
            conn.progressing = conn.progressing.saturating_sub(1);
        }
        o.rec.flags |= F_END_UNKNOWN;
        o.rec.end_ns = 0;
        self.release_parent(&o.rec, false);
        self.emit(o.rec);
    }

    /// Report everything still open (finalize of the last communicator): containers with
    /// their best-known end, flagged in flight.
    pub fn flush_open(&mut self, now: u64) {
        self.end_pass(now);
        // Non-network ProxyOps never stop: report them now (their parents may be waiting).
        let orphans: Vec<u64> = self
            .table
            .iter()
            .filter(|(_, o)| o.rec.kind() == Some(EventKind::ProxyOp) && !o.progressed)
            .map(|(&id, _)| id)
            .collect();
        for id in orphans {
            if let Some(mut o) = self.table.remove(&id) {
                self.op_left(&o);
                o.rec.flags |= F_NOT_NETWORK | F_END_UNKNOWN;
                let (parent, flags, counted) = (o.rec.parent, o.rec.flags, o.counted_unprogressed);
                self.emit(o.rec);
                if flags & F_FOREIGN == 0
                    && let Some(p) = self.table.get_mut(&parent)
                {
                    p.pending = p.pending.saturating_sub(1);
                    if counted {
                        p.unprogressed = p.unprogressed.saturating_sub(1);
                    }
                    self.dirty.push(parent);
                }
            }
        }
        self.end_pass(now);
        let ids: Vec<u64> = self
            .table
            .iter()
            .filter(|(_, o)| o.rec.kind().is_some_and(is_container))
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            if let Some(o) = self.table.get_mut(&id) {
                o.rec.flags |= F_IN_FLIGHT;
                if !o.stopped {
                    o.stopped = true;
                    o.stop_ns = now;
                }
                let known = o.children_done > 0 && o.pending == 0;
                self.complete(id, known);
            }
        }
        self.conns.clear();
    }

    /// Open collectives and p2p ops, oldest first (at most `limit`); `state_of` gives the
    /// state an open ProxyStep last published, by its id ([`crate::ring::Ring::published_state`]).
    pub fn in_flight(
        &self,
        now: u64,
        limit: usize,
        state_of: impl Fn(u64) -> Option<u8>,
    ) -> InFlight {
        let mut ops: Vec<OpenOp> = self
            .table
            .values()
            .filter(|o| matches!(o.rec.kind(), Some(EventKind::Coll | EventKind::P2p)))
            .map(|o| {
                let n = usize::from(o.rec.sub).clamp(1, 64);
                let p2p = o.rec.kind == EventKind::P2p as u8;
                OpenOp {
                    comm: o.rec.comm,
                    rank: o.rec.rank,
                    kind: o.rec.kind,
                    id: o.rec.id,
                    // A send/recv has no seq: its peer instead (`OpenOp::seq`).
                    seq: if p2p { u64::from(o.rec.x) } else { o.rec.p[0] },
                    func: o.rec.strings()[0],
                    start_ns: o.rec.start_ns,
                    exec_start_ns: o.exec_started(),
                    // Up to the last channel with steps: a send/recv's channels need not
                    // start at 0 (NCCL spreads them by peer), so `n` may not reach them.
                    steps_done: o
                        .steps_done
                        .as_ref()
                        .map(|s| {
                            let used = s.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
                            s[..n.max(used)].to_vec()
                        })
                        .unwrap_or_default(),
                    channels_done: o.kernels_done,
                    n_channels: u32::from(o.rec.sub),
                    oldest_step: None,
                }
            })
            .collect();
        // Its ProxyOps still open: the steps they finished count too (a hung collective shows
        // how far each channel got), and their oldest open step is where it waits.
        let at: HashMap<u64, usize> = ops.iter().enumerate().map(|(i, o)| (o.id, i)).collect();
        for o in self.table.values() {
            if o.rec.flags & F_FOREIGN != 0 {
                continue;
            }
            let Some(&i) = at.get(&o.rec.parent) else {
                continue;
            };
            let coll = &mut ops[i];
            if o.steps_finished > 0 {
                // (Channel index as `op_left` counts it, so an op's steps stay on one channel
                // when it stops.)
                let ch = usize::from(o.rec.sub) % 64;
                let len = (coll.n_channels.clamp(1, 64) as usize).max(ch + 1);
                if coll.steps_done.len() < len {
                    coll.steps_done.resize(len, 0);
                }
                coll.steps_done[ch] += o.steps_finished;
            }
            for &(step, id) in &o.steps {
                // (In `table` when its slot in `steps_open` was taken.)
                let Some(rec) = self
                    .steps_open
                    .get(id)
                    .or_else(|| self.table.get(&id).map(|s| &s.rec))
                else {
                    continue;
                };
                let start = rec.start_ns;
                if start != 0 && coll.oldest_step.is_none_or(|s| start < s.start_ns) {
                    // What it published, or what its states that reached the drain say if
                    // later: a step whose phases entry a newer step took sends its states as
                    // records, and its published word stays until the newer step publishes.
                    let held = latest_step_state(rec);
                    let state = match state_of(id) {
                        Some(p) if step_state_order(p) >= step_state_order(held) => p,
                        _ => held,
                    };
                    coll.oldest_step = Some(OpenStep {
                        channel: o.rec.sub,
                        step,
                        start_ns: start,
                        state,
                    });
                }
            }
        }
        let total = ops.len() as u32;
        ops.sort_unstable_by_key(|o| o.start_ns);
        ops.truncate(limit);
        InFlight {
            at_ns: now,
            ops,
            total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle;
    use crate::step_phases::Phases;

    /// What these tests feed: ProxyOps and steps, no KernelCh events.
    const PROXY_ONLY: Signals = Signals {
        kernel_ch: false,
        none_after: None,
    };

    /// Builds raw records the way the capture path does (one ring, increasing sequence).
    struct Feed {
        seq: u64,
        ts: u64,
        items: Vec<Item>,
    }

    impl Feed {
        fn new() -> Feed {
            Feed {
                seq: 0,
                ts: 1_000_000,
                items: Vec::new(),
            }
        }
        fn id(&mut self, k: EventKind) -> u64 {
            self.seq += 1;
            handle::make(k, 3, self.seq)
        }
        fn push(&mut self, op: u8, kind: EventKind, id: u64, parent: u64, state: u8, w: [u64; 4]) {
            self.ts += 10;
            // As the drain hands them over: only a start carries a context and a rank, so a
            // test would see completion read either from a state or stop.
            let start = op == OP_START;
            self.items.push(Item {
                raw: Raw {
                    ts: self.ts,
                    id,
                    parent,
                    op,
                    kind: kind as u8,
                    state,
                    flags: 0,
                    ctx: if start { 0 } else { u32::MAX },
                    w,
                },
                ns: self.ts,
                rank: if start { 0 } else { -1 },
            });
        }
        fn op_start(&mut self, channel: u64) -> u64 {
            self.op_on(0, channel)
        }
        /// A send ProxyOp of `parent` on `channel`, started and in progress.
        fn op_on(&mut self, parent: u64, channel: u64) -> u64 {
            let op = self.id(EventKind::ProxyOp);
            let w = [0, channel | (1 << 8), 8, 0];
            self.push(OP_START, EventKind::ProxyOp, op, parent, 0, w);
            let s = st::PROXY_OP_IN_PROGRESS as u8;
            self.push(OP_STATE, EventKind::ProxyOp, op, 0, s, [0; 4]);
            op
        }
        fn step_start(&mut self, op: u64, step: u64) -> u64 {
            let id = self.id(EventKind::ProxyStep);
            self.push(OP_START, EventKind::ProxyStep, id, op, 0, [step, 0, 0, 0]);
            id
        }
        fn step_end(&mut self, id: u64) {
            for s in [
                st::PROXY_STEP_SEND_GPU_WAIT,
                st::PROXY_STEP_SEND_PEER_WAIT,
                st::PROXY_STEP_SEND_WAIT,
            ] {
                self.push(OP_STATE, EventKind::ProxyStep, id, 4096, s as u8, [0; 4]);
            }
            self.push(OP_STOP, EventKind::ProxyStep, id, 0, 0, [0; 4]);
        }
        fn stop(&mut self, kind: EventKind, id: u64) {
            self.push(OP_STOP, kind, id, 0, 0, [0; 4]);
        }
        /// The start of Coll `id` (sequence 7, 1 024 elements) on one channel.
        fn coll_start(&mut self, id: u64) {
            let w = [7, 1024, 0, 1u64 << 32];
            self.push(OP_START, EventKind::Coll, id, 0, 0, w);
        }
        /// A Coll on `channels` channels, started and stopped (enqueued).
        fn coll(&mut self, channels: u64) -> u64 {
            let id = self.id(EventKind::Coll);
            self.push(
                OP_START,
                EventKind::Coll,
                id,
                0,
                0,
                [0, 0, 0, channels << 32],
            );
            self.stop(EventKind::Coll, id);
            id
        }
        fn run(&mut self, c: &mut Completion) -> Vec<EventRecord> {
            c.pass(std::mem::take(&mut self.items).as_slice(), PROXY_ONLY);
            c.end_pass(self.ts);
            let mut out = Vec::new();
            c.take(&mut out);
            out
        }
    }

    /// NCCL chains the ProxyOps of one connection (channel, peer, direction) and progresses
    /// them in order, so an op appended behind a second of queued work records InProgress a
    /// second later (seen with real NCCL, 3 ranks on one GPU, 200 all-reduces enqueued at
    /// once: 261 collectives reported "end unknown" after the 1 s timeout, their ProxyOps as
    /// non-network, 608 of their later states and stops dropped as unknown handles). While
    /// its connection is busy such an op is queued, not non-network, and holds its
    /// collective, which completes when the op does.
    #[test]
    fn an_op_queued_behind_a_busy_connection_holds_its_collective() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let send_to_peer_1 = [0, 1 | (1 << 8) | (1 << 32), 8, 0];
        let coll_a = f.coll(1);
        let op_a = f.id(EventKind::ProxyOp);
        f.push(
            OP_START,
            EventKind::ProxyOp,
            op_a,
            coll_a,
            0,
            send_to_peer_1,
        );
        let coll_b = f.coll(1);
        let op_b = f.id(EventKind::ProxyOp);
        f.push(
            OP_START,
            EventKind::ProxyOp,
            op_b,
            coll_b,
            0,
            send_to_peer_1,
        );
        let s = st::PROXY_OP_IN_PROGRESS as u8;
        f.push(OP_STATE, EventKind::ProxyOp, op_a, 0, s, [0; 4]);
        let mut out = f.run(&mut c);
        // Op A moves a step every 100 ms for 2.5 s; op B waits behind it.
        for i in 1..=25u64 {
            f.ts = i * 100_000_000;
            let step = f.step_start(op_a, i);
            f.step_end(step);
            out.extend(f.run(&mut c));
        }
        assert!(
            !out.iter().any(|r| r.id == coll_b || r.id == op_b),
            "taken for done while queued: {:?}",
            out.iter()
                .filter(|r| r.id == coll_b || r.id == op_b)
                .collect::<Vec<_>>()
        );
        f.stop(EventKind::ProxyOp, op_a);
        f.push(OP_STATE, EventKind::ProxyOp, op_b, 0, s, [0; 4]);
        let step = f.step_start(op_b, 0);
        f.step_end(step);
        f.stop(EventKind::ProxyOp, op_b);
        let op_b_stop = f.ts;
        out.extend(f.run(&mut c));
        f.ts += 1_000;
        out.extend(f.run(&mut c));
        assert_eq!(c.dropped.iter().sum::<u64>(), 0, "{:?}", c.dropped);
        let b = out.iter().find(|r| r.id == op_b).expect("op B");
        assert_eq!(b.flags & (F_NOT_NETWORK | F_END_UNKNOWN), 0);
        let cb = out.iter().find(|r| r.id == coll_b).expect("coll B");
        assert_eq!(cb.flags & F_END_UNKNOWN, 0);
        assert_eq!(cb.end_ns, op_b_stop);
        let ca = out.iter().find(|r| r.id == coll_a).expect("coll A");
        assert_eq!(ca.flags & F_END_UNKNOWN, 0);
    }

    /// A ProxyOp on `channel` to `peer` (send or receive) under `parent`.
    fn op_on(f: &mut Feed, parent: u64, channel: u64, send: bool, peer: u64) -> u64 {
        let op = f.id(EventKind::ProxyOp);
        let w = [0, channel | (u64::from(send) << 8) | (peer << 32), 8, 0];
        f.push(OP_START, EventKind::ProxyOp, op, parent, 0, w);
        op
    }

    fn in_progress(f: &mut Feed, op: u64) {
        let s = st::PROXY_OP_IN_PROGRESS as u8;
        f.push(OP_STATE, EventKind::ProxyOp, op, 0, s, [0; 4]);
    }

    /// (From a review.) A collective on 2 channels whose channel-0 op runs at once while its
    /// channel-1 op waits behind a busy line: the queued op holds it from its start. Marked
    /// only at a sweep (every 100 ms), the collective was completed by the quiet-pass rule
    /// first, with channel 0's end.
    #[test]
    fn a_multi_channel_collective_waits_for_its_queued_op_before_any_sweep() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        f.ts = 200_000_000;
        let coll_a = f.coll(1);
        let op_a = op_on(&mut f, coll_a, 1, true, 1);
        in_progress(&mut f, op_a);
        let mut out = f.run(&mut c); // (a sweep here: nothing queued yet)
        let coll_b = f.coll(2);
        let op_b0 = op_on(&mut f, coll_b, 0, true, 1);
        let op_b1 = op_on(&mut f, coll_b, 1, true, 1); // behind op A
        in_progress(&mut f, op_b0);
        let st0 = f.step_start(op_b0, 0);
        f.step_end(st0);
        f.stop(EventKind::ProxyOp, op_b0);
        for _ in 0..5 {
            f.ts += 1_000_000; // passes 1 ms apart, no sweep
            out.extend(f.run(&mut c));
        }
        for i in 1..=5u64 {
            f.ts += 100_000_000; // op A moves for 0.5 s
            let s = f.step_start(op_a, i);
            f.step_end(s);
            out.extend(f.run(&mut c));
        }
        f.stop(EventKind::ProxyOp, op_a);
        in_progress(&mut f, op_b1);
        let s = f.step_start(op_b1, 0);
        f.step_end(s);
        f.stop(EventKind::ProxyOp, op_b1);
        let b1_stop = f.ts;
        for _ in 0..3 {
            out.extend(f.run(&mut c));
            f.ts += 1_000;
        }
        let cb = out.iter().find(|r| r.id == coll_b).expect("coll B");
        assert_eq!(cb.end_ns, b1_stop, "ended with its channel-0 op");
        assert_eq!(cb.flags & F_END_UNKNOWN, 0);
    }

    /// (From a review.) Foreign (PXN) ops in line: their parent is not here, and sweeps that
    /// fall between one op's stop and the next one's InProgress are no sign of a
    /// non-network op; twice, they took the last op for one.
    #[test]
    fn a_foreign_op_in_line_is_not_judged_at_hand_overs() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        f.ts = 200_000_000;
        let foreign = |f: &mut Feed| {
            let op = op_on(f, 0xdead_0000, 1, true, 1);
            f.items.last_mut().unwrap().raw.flags |= RF_FOREIGN;
            op
        };
        let a = foreign(&mut f);
        let b = foreign(&mut f);
        let x = foreign(&mut f);
        in_progress(&mut f, a);
        let mut out = f.run(&mut c);
        for (op, next) in [(a, b), (b, x)] {
            f.ts += 150_000_000;
            let s = f.step_start(op, 0);
            f.step_end(s);
            f.stop(EventKind::ProxyOp, op);
            out.extend(f.run(&mut c)); // a sweep sees the hand-over
            in_progress(&mut f, next);
        }
        let s = f.step_start(x, 0);
        f.step_end(s);
        f.stop(EventKind::ProxyOp, x);
        out.extend(f.run(&mut c));
        let xr = out.iter().find(|r| r.id == x).expect("x");
        assert_eq!(
            xr.flags & F_NOT_NETWORK,
            0,
            "x judged non-network while in line"
        );
        assert_eq!(c.dropped[DropReason::UnknownHandle as usize], 0);
    }

    /// (From a review.) An op that never progresses on the key of a busy network line (not
    /// seen with NCCL, whose non-network transports do not share a peer's key with the
    /// network) is not in that line once a later op of the key has progressed: judged
    /// non-network after the timeout, its collective released, not held while the line
    /// stays busy.
    #[test]
    fn an_op_overtaken_in_its_line_is_judged_as_usual() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        f.ts = 200_000_000;
        let coll_r = f.coll(1);
        let mut prev = op_on(&mut f, coll_r, 1, false, 1);
        in_progress(&mut f, prev);
        let mut out = f.run(&mut c);
        let coll_x = f.coll(1);
        let nn = op_on(&mut f, coll_x, 1, false, 1); // never progresses, never stops
        out.extend(f.run(&mut c));
        for _ in 0..30 {
            f.ts += 100_000_000; // receives keep the line busy for 3 s, overlapping
            let coll = f.coll(1);
            let op = op_on(&mut f, coll, 1, false, 1);
            in_progress(&mut f, op);
            f.stop(EventKind::ProxyOp, prev);
            prev = op;
            out.extend(f.run(&mut c));
        }
        let r = out.iter().find(|r| r.id == nn).expect("the op, reported");
        assert_ne!(r.flags & F_NOT_NETWORK, 0);
        assert!(
            out.iter().any(|r| r.id == coll_x),
            "its collective still held"
        );
    }

    /// A sweep between a ProxyOp's start and its InProgress (read a pass later) does not take
    /// it for a non-network op, even with no parent here (PXN, a dropped collective); a second
    /// sweep with still no progress does.
    #[test]
    fn a_sweep_before_an_ops_progress_leaves_it_open() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.id(EventKind::ProxyOp);
        f.push(
            OP_START,
            EventKind::ProxyOp,
            op,
            0,
            0,
            [0, 1 | (1 << 8), 8, 0],
        );
        c.pass(std::mem::take(&mut f.items).as_slice(), PROXY_ONLY);
        c.end_pass(200_000_000); // a sweep
        let s = st::PROXY_OP_IN_PROGRESS as u8;
        f.push(OP_STATE, EventKind::ProxyOp, op, 0, s, [0; 4]);
        let step = f.step_start(op, 0);
        f.step_end(step);
        f.stop(EventKind::ProxyOp, op);
        c.pass(std::mem::take(&mut f.items).as_slice(), PROXY_ONLY);
        c.end_pass(210_000_000);
        let mut out = Vec::new();
        c.take(&mut out);
        assert_eq!(c.dropped[DropReason::UnknownHandle as usize], 0);
        let op_rec = out.iter().find(|r| r.id == op).expect("the op");
        assert_eq!(op_rec.flags & F_NOT_NETWORK, 0);
        assert!(out.iter().any(|r| r.id == step && r.parent == op));
        // An op that never progresses is reported as non-network at the second sweep (on a
        // channel of its own: one in line behind the op above waits for its connection to
        // go quiet, see `Conn`).
        let idle = f.id(EventKind::ProxyOp);
        f.push(
            OP_START,
            EventKind::ProxyOp,
            idle,
            0,
            0,
            [0, 2 | (1 << 8), 8, 0],
        );
        c.pass(std::mem::take(&mut f.items).as_slice(), PROXY_ONLY);
        c.end_pass(400_000_000);
        c.take(&mut out);
        assert!(!out.iter().any(|r| r.id == idle));
        c.end_pass(600_000_000);
        c.take(&mut out);
        let idle_rec = out.iter().find(|r| r.id == idle).expect("reported");
        assert_ne!(idle_rec.flags & F_NOT_NETWORK, 0);
    }

    /// After a burst the open-events table gives its room back (hashing spreads a few live
    /// entries over all of it, each start writing cold lines), at the first periodic sweep
    /// whose window's peak is under an eighth of its room, keeping the entries still open;
    /// and grows again for the next burst.
    #[test]
    fn the_table_shrinks_after_a_burst() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let sweep_window = 150_000_000; // past the periodic sweep's 100 ms
        let starts = |f: &mut Feed, n: usize| -> Vec<u64> {
            (0..n)
                .map(|_| {
                    let g = f.id(EventKind::GroupApi);
                    f.push(OP_START, EventKind::GroupApi, g, 0, 0, [1, 0, 0, 0]);
                    g
                })
                .collect()
        };
        let burst = |c: &mut Completion, f: &mut Feed| {
            let burst = starts(f, 5_000);
            let kept = starts(f, 10);
            c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
            f.ts += sweep_window;
            c.end_pass(f.ts);
            assert_eq!(c.open_events(), 5_010);
            let grown = c.table.capacity();
            for g in burst {
                f.stop(EventKind::GroupApi, g);
            }
            c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
            f.ts += sweep_window;
            c.end_pass(f.ts);
            assert_eq!(c.open_events(), 10);
            assert_eq!(c.table.capacity(), grown, "the window held 5 010");
            f.ts += sweep_window;
            c.end_pass(f.ts);
            assert!(
                c.table.capacity() < 4 * TABLE_MIN,
                "room for {} left",
                c.table.capacity()
            );
            // What stayed open through the shrink is still there to finish.
            for g in kept {
                f.stop(EventKind::GroupApi, g);
            }
            c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
            c.end_pass(f.ts);
            assert_eq!(c.open_events(), 0);
        };
        burst(&mut c, &mut f);
        burst(&mut c, &mut f);
        let mut out = Vec::new();
        c.take(&mut out);
        assert_eq!(out.len(), 10_020);
        assert!(out.iter().all(|r| r.flags & F_END_KNOWN != 0));
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
    }

    /// A kernel channel's stop that carries its GPU stop (`capture` keeps record 22 for the
    /// stop that follows it) makes the same channel as the GPU stop's own record followed by
    /// a plain stop: converted, with its GPU length. Also when the channel waits a pass for
    /// its collective (deferred with its stop, which keeps what it carries).
    #[test]
    fn a_kernel_channels_stop_carries_its_gpu_stop() {
        const EPOCH: u64 = 1_790_000_000_000_000_000;
        let run = |carried: bool, deferred: bool| {
            let mut c = Completion::new(262_144, 1000, 0.0);
            let mut f = Feed::new();
            let coll = f.id(EventKind::Coll);
            let start_coll = |f: &mut Feed| {
                f.coll_start(coll);
                f.stop(EventKind::Coll, coll);
            };
            if !deferred {
                start_coll(&mut f);
            }
            let k = f.id(EventKind::KernelCh);
            // The GPU's stamps 5 ns before their callbacks.
            let gpu_start = EPOCH + f.ts + 10 - 5;
            f.push(
                OP_START,
                EventKind::KernelCh,
                k,
                coll,
                0,
                [2, gpu_start, 0, 0],
            );
            let gpu_stop = EPOCH + f.ts + 10 - 5;
            let kernel_stop = st::KERNEL_CH_STOP as u8;
            if carried {
                f.push(
                    OP_STOP,
                    EventKind::KernelCh,
                    k,
                    0,
                    kernel_stop,
                    [gpu_stop, 0, 0, 0],
                );
            } else {
                f.push(
                    OP_STATE,
                    EventKind::KernelCh,
                    k,
                    gpu_stop,
                    kernel_stop,
                    [0; 4],
                );
                f.stop(EventKind::KernelCh, k);
            }
            let mut out = f.run(&mut c);
            if deferred {
                assert!(out.is_empty(), "the channel waits for its collective");
                assert!(c.deferred() > 0);
                start_coll(&mut f);
                out = f.run(&mut c);
            }
            assert_eq!(c.dropped.iter().sum::<u64>(), 0, "{:?}", c.dropped);
            let r = *out
                .iter()
                .find(|r| r.id == k)
                .expect("the channel completes");
            assert_ne!(r.flags & F_GPU_CONVERTED, 0, "{r:?}");
            assert_eq!((r.p[0], r.p[1]), (gpu_start, gpu_stop), "{r:?}");
            assert_eq!(r.end_ns - r.start_ns, gpu_stop - gpu_start, "{r:?}");
            assert_eq!((r.parent, r.sub), (coll, 2));
            (r.start_ns, r.end_ns, r.flags)
        };
        for deferred in [false, true] {
            assert_eq!(
                run(true, deferred),
                run(false, deferred),
                "deferred: {deferred}"
            );
        }
    }

    /// Kernel channels live in a direct-mapped table of 256 slots (`kernels_open`), and
    /// those whose slot is taken in the general table: 40 collectives × 64 channels open at
    /// once, so both hold some; every channel completes the same way, its GPU span converted
    /// exactly, linked to its collective, which completes once its 64 channels have.
    #[test]
    fn more_open_kernel_channels_than_direct_slots_all_complete() {
        const EPOCH: u64 = 1_790_000_000_000_000_000;
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let colls: Vec<u64> = (0..40).map(|_| f.coll(64)).collect();
        let mut channels = Vec::new();
        for (i, &coll) in colls.iter().enumerate() {
            for ch in 0..64u64 {
                let k = f.id(EventKind::KernelCh);
                let gpu_start = EPOCH + f.ts + 10 - 5;
                f.push(
                    OP_START,
                    EventKind::KernelCh,
                    k,
                    coll,
                    0,
                    [ch, gpu_start, 0, 0],
                );
                f.items.last_mut().unwrap().raw.ctx = 5; // its context slot (and GPU id)
                channels.push((k, coll, ch, gpu_start, 1000 + 7 * (i as u64) + ch));
            }
        }
        c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
        c.end_pass(f.ts);
        assert_eq!(c.open_events(), 40 + 40 * 64);
        assert_eq!(c.kernels_open.len(), 256, "a full direct-mapped table");
        assert_eq!(
            c.table.len(),
            40 + 40 * 64 - 256,
            "the rest in the general table"
        );
        for &(k, _, _, gpu_start, len) in &channels {
            let stop = st::KERNEL_CH_STOP as u8;
            f.push(
                OP_STOP,
                EventKind::KernelCh,
                k,
                0,
                stop,
                [gpu_start + len, 0, 0, 0],
            );
        }
        c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
        let mut out = Vec::new();
        for t in [0, 1, 2] {
            c.end_pass(f.ts + t);
            c.take(&mut out);
        }
        assert_eq!(c.dropped.iter().sum::<u64>(), 0, "{:?}", c.dropped);
        for &(k, coll, ch, gpu_start, len) in &channels {
            let r = out
                .iter()
                .find(|r| r.id == k)
                .expect("the channel completes");
            assert_eq!((r.parent, u64::from(r.sub)), (coll, ch), "{r:?}");
            assert_eq!((r.comm, r.p[4]), (5, 5), "context and GPU id: {r:?}");
            assert_eq!((r.p[0], r.p[1]), (gpu_start, gpu_start + len), "{r:?}");
            assert_eq!(r.end_ns - r.start_ns, len, "{r:?}");
            assert_eq!(r.flags & F_PARENT_UNKNOWN, 0, "{r:?}");
            assert_ne!(r.flags & F_GPU_CONVERTED, 0, "{r:?}");
            assert_ne!(r.flags & F_END_KNOWN, 0, "{r:?}");
        }
        for &coll in &colls {
            let r = out.iter().find(|r| r.id == coll).expect("the collective");
            assert_eq!(r.flags & (F_END_UNKNOWN | F_IN_FLIGHT), 0, "{r:?}");
        }
        assert_eq!(out.len(), 40 + 40 * 64);
        assert_eq!(c.open_events(), 0);
    }

    /// A step deferred with its op (the op's collective arrives a pass later) still gets the
    /// states its stop carries (`RF_PHASES`): the same record as with its states one by one.
    #[test]
    fn deferred_step_keeps_the_states_its_stop_carries() {
        let run = |carried: bool| {
            let mut c = Completion::new(262_144, 1000, 0.0);
            let mut f = Feed::new();
            let coll = f.id(EventKind::Coll);
            let op = f.id(EventKind::ProxyOp);
            let w = [0, 1 | (1 << 8), 8, 0];
            f.push(OP_START, EventKind::ProxyOp, op, coll, 0, w);
            let step = f.step_start(op, 0);
            if carried {
                // What `step_end` pushes, as capture sends it: the states in the step's
                // entry, carried by its stop.
                let mut ph = crate::step_phases::Phases {
                    id: step,
                    ..Default::default()
                };
                for s in [
                    st::PROXY_STEP_SEND_GPU_WAIT,
                    st::PROXY_STEP_SEND_PEER_WAIT,
                    st::PROXY_STEP_SEND_WAIT,
                ] {
                    f.ts += 10;
                    ph.record(s as i32, f.ts, 4096);
                }
                f.stop(EventKind::ProxyStep, step);
                let last = &mut f.items.last_mut().unwrap().raw;
                *last = ph.to_raw(OP_STOP, last.ts);
            } else {
                f.step_end(step);
            }
            let first = f.run(&mut c);
            assert!(
                first.is_empty(),
                "the op and its step wait for the collective"
            );
            assert!(c.deferred() > 0);
            f.coll_start(coll);
            f.stop(EventKind::ProxyOp, op);
            f.stop(EventKind::Coll, coll);
            let out = f.run(&mut c);
            *out.iter()
                .find(|r| r.kind == EventKind::ProxyStep as u8)
                .expect("the step completes")
        };
        let carried = run(true);
        let one_by_one = run(false);
        assert_eq!(carried, one_by_one);
        assert!(carried.has(F_SEND));
        assert_eq!(carried.p[4], 4096);
        assert_eq!(carried.p[5], 1);
        assert!(carried.p[1] != 0 && carried.p[1] < carried.p[2] && carried.p[2] < carried.p[3]);
    }

    #[test]
    fn in_flight_counts_steps_per_channel_of_finished_and_open_ops() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let coll = f.id(EventKind::Coll);
        f.push(
            OP_START,
            EventKind::Coll,
            coll,
            0,
            0,
            [7, 1024, 0, 4u64 << 32],
        );
        f.stop(EventKind::Coll, coll);
        let op_on = |f: &mut Feed, channel: u64| f.op_on(coll, channel);
        // Channel 1: an op that finished its 3 steps and stopped. Channel 2: an op with 2
        // steps done and one still open (the collective is in flight, perhaps hung there).
        let done = op_on(&mut f, 1);
        for s in 0..3 {
            let id = f.step_start(done, s);
            f.step_end(id);
        }
        f.stop(EventKind::ProxyOp, done);
        let open = op_on(&mut f, 2);
        for s in 0..2 {
            let id = f.step_start(open, s);
            f.step_end(id);
        }
        let waiting = f.step_start(open, 2);
        f.run(&mut c);
        // The state it published, asked for by its id.
        let state_of = |id| (id == waiting).then_some(st::PROXY_STEP_SEND_PEER_WAIT as u8);
        let inflight = c.in_flight(f.ts, 16, state_of);
        assert_eq!(inflight.total, 1);
        let o = &inflight.ops[0];
        assert_eq!(o.id, coll);
        assert_eq!(o.steps_done, vec![0, 3, 2, 0]);
        // Where it waits: channel 2's step 2, open.
        let oldest = o.oldest_step.expect("an open step");
        assert_eq!((oldest.channel, oldest.step), (2, 2));
        assert_eq!(u32::from(oldest.state), st::PROXY_STEP_SEND_PEER_WAIT);
        assert!(oldest.start_ns > 0);
        // An op on channel 66 (beyond 64: bad input, or a future NCCL) counts on channel 2 the
        // same way while open and once stopped.
        let odd = op_on(&mut f, 66);
        let id = f.step_start(odd, 0);
        f.step_end(id);
        f.run(&mut c);
        assert_eq!(
            c.in_flight(f.ts, 16, |_| None).ops[0].steps_done,
            vec![0, 3, 3, 0]
        );
        f.stop(EventKind::ProxyOp, odd);
        f.run(&mut c);
        assert_eq!(
            c.in_flight(f.ts, 16, |_| None).ops[0].steps_done,
            vec![0, 3, 3, 0]
        );
        // The open op finishing moves its steps onto the collective, counted once.
        let last = handle::make(EventKind::ProxyStep, 3, f.seq - 2);
        f.step_end(last);
        f.stop(EventKind::ProxyOp, open);
        f.run(&mut c);
        // (Still in flight: a collective completes after one quiet pass.)
        let inflight = c.in_flight(f.ts, 16, |_| None);
        assert_eq!(inflight.total, 1);
        assert_eq!(inflight.ops[0].steps_done, vec![0, 3, 4, 0]);
        // No step open any more (channel 66's op stopped with its step done).
        assert_eq!(inflight.ops[0].oldest_step, None);
    }

    /// The state of a collective's oldest open step when its states reached the drain as
    /// records (its phases entry taken by a newer step): the latest of them, also over an
    /// earlier state its published word still holds.
    #[test]
    fn in_flight_oldest_step_state_from_its_records() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let coll = f.id(EventKind::Coll);
        f.push(
            OP_START,
            EventKind::Coll,
            coll,
            0,
            0,
            [7, 1024, 0, 1u64 << 32],
        );
        f.stop(EventKind::Coll, coll);
        let op = f.id(EventKind::ProxyOp);
        f.push(OP_START, EventKind::ProxyOp, op, coll, 0, [0, 0, 8, 0]);
        let s = st::PROXY_OP_IN_PROGRESS as u8;
        f.push(OP_STATE, EventKind::ProxyOp, op, 0, s, [0; 4]);
        // A receive step: RecvWait, then RecvFlushWait, as records.
        let step = f.step_start(op, 0);
        for s in [st::PROXY_STEP_RECV_WAIT, st::PROXY_STEP_RECV_FLUSH_WAIT] {
            f.push(OP_STATE, EventKind::ProxyStep, step, 64, s as u8, [0; 4]);
        }
        f.run(&mut c);
        let state = |published: Option<u32>| {
            let i = c.in_flight(f.ts, 16, |id| {
                published.filter(|_| id == step).map(|p| p as u8)
            });
            u32::from(i.ops[0].oldest_step.expect("open").state)
        };
        assert_eq!(state(None), st::PROXY_STEP_RECV_FLUSH_WAIT);
        assert_eq!(
            state(Some(st::PROXY_STEP_RECV_WAIT)),
            st::PROXY_STEP_RECV_FLUSH_WAIT,
            "a stale published word"
        );
        assert_eq!(
            state(Some(st::PROXY_STEP_RECV_GPU_WAIT)),
            st::PROXY_STEP_RECV_GPU_WAIT,
            "published later than the records"
        );
    }

    /// A send/recv in flight: its peer in `seq` (it has no seq), and the steps of channels
    /// beyond its channel count (NCCL spreads a p2p's channels by peer) not dropped.
    #[test]
    fn in_flight_p2p_carries_its_peer_and_its_channels_beyond_its_count() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let p2p = f.id(EventKind::P2p);
        // Peer 5, 2 channels.
        f.push(
            OP_START,
            EventKind::P2p,
            p2p,
            0,
            0,
            [5 | 2u64 << 32, 0, 0, 0],
        );
        f.stop(EventKind::P2p, p2p);
        let op_on = |f: &mut Feed, channel: u64| f.op_on(p2p, channel);
        // Channel 2: stopped after 2 steps; channel 3: 1 step done, one open.
        let done = op_on(&mut f, 2);
        for s in 0..2 {
            let id = f.step_start(done, s);
            f.step_end(id);
        }
        f.stop(EventKind::ProxyOp, done);
        let open = op_on(&mut f, 3);
        let id = f.step_start(open, 0);
        f.step_end(id);
        f.step_start(open, 1);
        f.run(&mut c);
        let inflight = c.in_flight(f.ts, 16, |_| None);
        let o = &inflight.ops[0];
        assert_eq!((o.id, o.seq, o.n_channels), (p2p, 5, 2));
        assert_eq!(o.steps_done, vec![0, 0, 2, 1]);
        let oldest = o.oldest_step.expect("an open step");
        assert_eq!((oldest.channel, oldest.step), (3, 1));
    }

    /// Only a NetPlugin *start* takes a pass's steps out of ring order (it needs its step
    /// open first); a NetPlugin stop names its own event. In ring order each of these split
    /// steps opens and closes before the next: with room for 4 open events nothing is
    /// dropped, where all ten open at once (out of order) overflow the table.
    #[test]
    fn a_netplugin_stop_leaves_a_passs_steps_in_ring_order() {
        let mut c = Completion::new(4, 1000, 0.0);
        let mut f = Feed::new();
        let net = f.id(EventKind::NetPlugin);
        f.push(OP_START, EventKind::NetPlugin, net, 0, 0, [0; 4]);
        f.run(&mut c);
        let op = f.op_start(0);
        for s in 0..10 {
            let id = f.step_start(op, s);
            f.step_end(id);
        }
        f.stop(EventKind::NetPlugin, net);
        f.stop(EventKind::ProxyOp, op);
        let out = f.run(&mut c);
        assert_eq!(c.dropped[DropReason::TableFull as usize], 0);
        let steps = out
            .iter()
            .filter(|r| r.kind() == Some(EventKind::ProxyStep));
        assert_eq!(steps.count(), 10);
    }

    /// A proxy thread's starts (ProxyOp, KernelCh, ProxyCtrl) are taken in ring order, after
    /// the pass's first sweep started the collective they belong to: none is deferred to the
    /// next pass when the collective's ring comes after theirs (the launch thread claimed its
    /// ring after the proxy thread). KernelCh starts went with the first sweep, in ring order,
    /// and waited a pass for a collective read after them.
    #[test]
    fn a_proxy_threads_starts_wait_for_no_collective_read_after_them() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        // The proxy thread's ring, read first: the op, its kernel channel, a ProxyCtrl.
        let coll = f.id(EventKind::Coll);
        let op = f.op_on(coll, 0);
        let k = f.id(EventKind::KernelCh);
        f.push(OP_START, EventKind::KernelCh, k, coll, 0, [0; 4]);
        let kernel_stop = st::KERNEL_CH_STOP as u8;
        f.push(OP_STATE, EventKind::KernelCh, k, 0, kernel_stop, [0; 4]);
        f.stop(EventKind::KernelCh, k);
        let ctrl = f.id(EventKind::ProxyCtrl);
        f.push(OP_START, EventKind::ProxyCtrl, ctrl, 0, 0, [0; 4]);
        f.stop(EventKind::ProxyCtrl, ctrl);
        f.stop(EventKind::ProxyOp, op);
        // The launch thread's ring: the collective, on one channel.
        f.push(OP_START, EventKind::Coll, coll, 0, 0, [0, 0, 0, 1 << 32]);
        f.stop(EventKind::Coll, coll);
        c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
        assert!(c.deferred.is_empty(), "deferred: {:?}", c.deferred.len());
        let mut out = Vec::new();
        for _ in 0..2 {
            c.end_pass(f.ts);
            c.pass(&[][..], Signals::ALL);
        }
        c.end_pass(f.ts);
        c.take(&mut out);
        let kinds: Vec<_> = out.iter().filter_map(EventRecord::kind).collect();
        for kind in [
            EventKind::ProxyOp,
            EventKind::KernelCh,
            EventKind::ProxyCtrl,
            EventKind::Coll,
        ] {
            assert!(kinds.contains(&kind), "{kind:?} in {kinds:?}");
        }
        let coll = out.iter().find(|r| r.id == coll).unwrap();
        assert_ne!(
            coll.flags & F_END_KNOWN,
            0,
            "ended by its kernel channel and op"
        );
        for child in out.iter().filter(|r| r.parent == coll.id) {
            assert_eq!(child.flags & F_PARENT_UNKNOWN, 0, "{child:?}");
        }
        assert_eq!(out.iter().filter(|r| r.parent == coll.id).count(), 2);
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
    }

    /// The in-flight summary says when an open collective started to run: its first kernel
    /// channel's start, whether or not the mask in force expects kernels (the mask NCCL
    /// copied into the op decides); a ProxyOp's progress does not count (it progresses as
    /// soon as it is posted, while the GPU may still be busy with what precedes the op).
    #[test]
    fn in_flight_ops_carry_when_they_started_to_run() {
        let exec = |c: &Completion, f: &Feed| c.in_flight(f.ts, 16, |_| None).ops[0].exec_start_ns;
        let progress = |f: &mut Feed, coll: u64| {
            let op = f.id(EventKind::ProxyOp);
            f.push(OP_START, EventKind::ProxyOp, op, coll, 0, [0, 1 << 8, 8, 0]);
            let s = st::PROXY_OP_IN_PROGRESS as u8;
            f.push(OP_STATE, EventKind::ProxyOp, op, 0, s, [0; 4]);
        };
        let kernels = |f: &mut Feed, coll: u64| {
            let at = f.ts + 10;
            for _ in 0..2 {
                let k = f.id(EventKind::KernelCh);
                f.push(OP_START, EventKind::KernelCh, k, coll, 0, [0; 4]);
            }
            at
        };
        for signals in [Signals::ALL, PROXY_ONLY] {
            let mut c = Completion::new(262_144, 1000, 0.0);
            let mut f = Feed::new();
            let pass = |c: &mut Completion, f: &mut Feed| {
                c.pass(std::mem::take(&mut f.items).as_slice(), signals);
                c.end_pass(f.ts);
                c.take(&mut Vec::new());
            };
            let coll = f.coll(2);
            pass(&mut c, &mut f);
            assert_eq!(exec(&c, &f), 0, "enqueued only");
            progress(&mut f, coll);
            f.ts += 500_000_000; // the GPU busy with what precedes it
            pass(&mut c, &mut f);
            assert_eq!(
                exec(&c, &f),
                0,
                "a proxy op progressing is not the op running"
            );
            let kernel_at = kernels(&mut f, coll);
            pass(&mut c, &mut f);
            assert_eq!(
                exec(&c, &f),
                kernel_at,
                "{signals:?}: the first kernel's start"
            );
        }
    }

    /// The time the in-flight summary gives an op that runs is the execution start its record
    /// gets (from a review: with the mask in force not expecting kernels, it was the op's
    /// proxy progress, 0.5 s before its kernel, where the record has the kernel's start).
    #[test]
    fn in_flight_exec_start_is_the_exec_start_its_record_gets() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let coll = f.coll(1);
        let op = f.id(EventKind::ProxyOp);
        f.push(OP_START, EventKind::ProxyOp, op, coll, 0, [0, 1 << 8, 8, 0]);
        let s = st::PROXY_OP_IN_PROGRESS as u8;
        f.push(OP_STATE, EventKind::ProxyOp, op, 0, s, [0; 4]);
        let mut out = f.run(&mut c); // PROXY_ONLY: the mask in force has no kernel channels
        f.ts += 500_000_000; // the GPU busy with what precedes it
        let k = f.id(EventKind::KernelCh);
        f.push(OP_START, EventKind::KernelCh, k, coll, 0, [0; 4]);
        let kernel_at = f.ts;
        out.extend(f.run(&mut c));
        let in_flight = c.in_flight(f.ts, 16, |_| None).ops[0].exec_start_ns;
        f.push(
            OP_STATE,
            EventKind::KernelCh,
            k,
            0,
            st::KERNEL_CH_STOP as u8,
            [0; 4],
        );
        f.stop(EventKind::KernelCh, k);
        f.stop(EventKind::ProxyOp, op);
        out.extend(f.run(&mut c));
        out.extend(f.run(&mut c));
        let rec = out.iter().find(|r| r.id == coll).expect("completed");
        assert_eq!(rec.p[5], kernel_at);
        assert_eq!(in_flight, rec.p[5]);
    }

    /// Four proxy threads' rings in one big pass (each ring's records in a block, as the drain
    /// reads them), more steps than `steps_open` has slots: every step completes, linked to
    /// its op, and none is left open.
    #[test]
    fn steps_of_several_rings_in_one_pass_all_complete_linked() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut items = Vec::new();
        let mut ts = 1_000_000u64;
        let mut push = |op: u8, kind: EventKind, id: u64, parent: u64, state: u8, w| {
            ts += 10;
            let raw = Raw {
                ts,
                id,
                parent,
                op,
                kind: kind as u8,
                state,
                w,
                ..Raw::default()
            };
            items.push(Item {
                raw,
                ns: ts,
                rank: 0,
            });
        };
        let steps_per_ring = 6_000u64;
        for ring in 0..4u32 {
            let op = handle::make(EventKind::ProxyOp, ring, 1);
            push(OP_START, EventKind::ProxyOp, op, 0, 0, [0, 1 << 8, 8, 0]);
            let s = st::PROXY_OP_IN_PROGRESS as u8;
            push(OP_STATE, EventKind::ProxyOp, op, 0, s, [0; 4]);
            for i in 0..steps_per_ring {
                let id = handle::make(EventKind::ProxyStep, ring, 2 + i);
                push(OP_START, EventKind::ProxyStep, id, op, 0, [i, 0, 0, 0]);
                let s = st::PROXY_STEP_SEND_WAIT as u8;
                push(OP_STATE, EventKind::ProxyStep, id, 4096, s, [0; 4]);
                push(OP_STOP, EventKind::ProxyStep, id, 0, 0, [0; 4]);
            }
            push(OP_STOP, EventKind::ProxyOp, op, 0, 0, [0; 4]);
        }
        c.pass(items.as_slice(), PROXY_ONLY);
        c.end_pass(ts);
        let mut out = Vec::new();
        c.take(&mut out);
        let steps: Vec<&EventRecord> = out
            .iter()
            .filter(|r| r.kind == EventKind::ProxyStep as u8)
            .collect();
        assert_eq!(steps.len() as u64, 4 * steps_per_ring);
        assert!(
            steps
                .iter()
                .all(|r| r.has(F_END_KNOWN) && !r.has(F_PARENT_UNKNOWN))
        );
        assert!(steps.iter().all(|r| r.p[4] == 4096 && r.has(F_SEND)));
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
        assert_eq!(c.open_events(), 0);
    }

    /// A NetPlugin event on a helper thread whose ring the drain reads before the ring of
    /// its ProxyStep, in the same pass: it finds the step (steps start before NetPlugin
    /// events), is linked to it and nothing waits for a later pass. When starts were taken
    /// in ring order it was deferred, and the step had stopped by the next pass.
    #[test]
    fn net_plugin_event_read_before_its_step_finds_it() {
        let mut c = Completion::new(4096, 1000, 0.0);
        let op = handle::make(EventKind::ProxyOp, 0, 1);
        let step = handle::make(EventKind::ProxyStep, 0, 2);
        let net = handle::make(EventKind::NetPlugin, 1, 1);
        let rec = |ts, op, kind: EventKind, id, parent, state| Item {
            raw: Raw {
                ts,
                id,
                parent,
                op,
                kind: kind as u8,
                state,
                w: if kind == EventKind::ProxyOp {
                    [0, 1 << 8, 8, 0]
                } else {
                    [0; 4]
                },
                ..Raw::default()
            },
            ns: ts,
            rank: 0,
        };
        let in_progress = st::PROXY_OP_IN_PROGRESS as u8;
        let send_wait = st::PROXY_STEP_SEND_WAIT as u8;
        let items = [
            // Ring 1 (the helper thread) first.
            rec(130, OP_START, EventKind::NetPlugin, net, step, 0),
            rec(140, OP_STOP, EventKind::NetPlugin, net, 0, 0),
            // Ring 0: the proxy thread.
            rec(100, OP_START, EventKind::ProxyOp, op, 0, 0),
            rec(110, OP_STATE, EventKind::ProxyOp, op, 0, in_progress),
            rec(120, OP_START, EventKind::ProxyStep, step, op, 0),
            rec(150, OP_STATE, EventKind::ProxyStep, step, 4096, send_wait),
            rec(160, OP_STOP, EventKind::ProxyStep, step, 0, 0),
            rec(170, OP_STOP, EventKind::ProxyOp, op, 0, 0),
        ];
        c.pass(items.as_slice(), PROXY_ONLY);
        assert_eq!(c.deferred(), 0);
        c.end_pass(200);
        let mut out = Vec::new();
        c.take(&mut out);
        let net_rec = out
            .iter()
            .find(|r| r.kind == EventKind::NetPlugin as u8)
            .expect("the NetPlugin event completed");
        assert_eq!(net_rec.parent, step);
        assert!(!net_rec.has(F_PARENT_UNKNOWN));
        let step_rec = out
            .iter()
            .find(|r| r.kind == EventKind::ProxyStep as u8)
            .expect("the step completed");
        assert!(step_rec.has(F_END_KNOWN) && !step_rec.has(F_PARENT_UNKNOWN));
        assert_eq!(c.open_events(), 0);
    }

    #[test]
    fn more_open_steps_than_direct_slots_all_complete() {
        // 20 000 steps open at once (20 ops × 1000): more than the direct-mapped table holds,
        // so some live in the general table; every one must complete, linked to its op.
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let ops: Vec<u64> = (0..20).map(|ch| f.op_start(ch)).collect();
        let steps: Vec<(u64, u64)> = (0..20_000u64)
            .map(|i| {
                (
                    ops[(i / 1000) as usize],
                    f.step_start(ops[(i / 1000) as usize], i % 1000),
                )
            })
            .collect();
        assert!(f.run(&mut c).is_empty());
        assert_eq!(c.open_events(), 20_020);
        for &(_, s) in &steps {
            f.step_end(s);
        }
        for &op in &ops {
            f.stop(EventKind::ProxyOp, op);
        }
        let out = f.run(&mut c);
        let done: Vec<&EventRecord> = out
            .iter()
            .filter(|r| r.kind() == Some(EventKind::ProxyStep))
            .collect();
        assert_eq!(done.len(), 20_000);
        for r in &done {
            let op = ops
                .iter()
                .position(|&o| o == r.parent)
                .expect("linked to its op");
            assert_eq!(usize::from(r.sub), op, "channel from the op");
            assert_ne!(r.flags & F_END_KNOWN, 0);
            assert_eq!(r.flags & (F_PARENT_UNKNOWN | F_RESTARTED), 0);
            assert_eq!(r.p[4], 4096, "bytes");
            assert!(r.p[1] > r.start_ns && r.p[2] > r.p[1] && r.p[3] > r.p[2]);
            assert!(r.end_ns > r.p[3]);
        }
        for &op in &ops {
            let op_rec = out.iter().find(|r| r.id == op).expect("op completes");
            assert_eq!(op_rec.p[3], 1000 * 4096, "op bytes = sum of its steps'");
        }
        assert_eq!(c.open_events(), 0);
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
    }

    #[test]
    fn a_steps_record_carries_its_start_its_ops_fields_and_its_own_flags() {
        // The step start is built in its open-steps slot (not through the general path):
        // every field it sets, and what its stop takes from the op, checked once.
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(5);
        let s = f.id(EventKind::ProxyStep);
        f.push(
            OP_START,
            EventKind::ProxyStep,
            s,
            op,
            0,
            [9 | (3 << 32), 0, 0, 0],
        );
        let started = f.ts;
        f.step_end(s);
        let lost_op = handle::make(EventKind::ProxyOp, 3, 999_999); // never started here
        let orphan = f.step_start(lost_op, 2);
        f.step_end(orphan);
        let no_parent = f.id(EventKind::ProxyStep);
        f.push(
            OP_START,
            EventKind::ProxyStep,
            no_parent,
            0,
            0,
            [4, 0, 0, 0],
        );
        f.items.last_mut().unwrap().raw.flags = RF_PARENT_NULL;
        f.step_end(no_parent);
        f.stop(EventKind::ProxyOp, op);
        let mut out = f.run(&mut c);
        out.extend(f.run(&mut c)); // the orphan, deferred once for its parent
        let find = |id| *out.iter().find(|r| r.id == id).expect("completed");
        let r = find(s);
        assert_eq!(r.kind(), Some(EventKind::ProxyStep));
        assert_eq!((r.parent, r.start_ns, r.p[0]), (op, started, 9));
        assert_eq!((r.sub, r.x, r.comm, r.rank), (5, 0, 0, 0), "from the op");
        assert_eq!(r.flags & !F_SEND, F_END_KNOWN, "{:#x}", r.flags);
        assert_eq!(r.p[4], 4096);
        let r = find(orphan);
        assert_eq!((r.parent, r.p[0]), (lost_op, 2));
        assert_eq!(r.flags & (F_PARENT_UNKNOWN | F_RESTARTED), F_PARENT_UNKNOWN);
        let r = find(no_parent);
        assert_eq!((r.parent, r.p[0]), (0, 4));
        assert_eq!(r.flags & (F_PARENT_UNKNOWN | F_RESTARTED), 0);
        assert_eq!(c.open_events(), 0);
    }

    #[test]
    fn restarted_step_replaces_the_abandoned_one() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(1);
        let first = f.step_start(op, 7);
        let again = f.step_start(op, 7); // NCCL restarted receive step 7 (spec §4.6)
        f.step_end(again);
        f.stop(EventKind::ProxyOp, op);
        let out = f.run(&mut c);
        let steps: Vec<&EventRecord> = out
            .iter()
            .filter(|r| r.kind() == Some(EventKind::ProxyStep))
            .collect();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].id, again);
        assert_ne!(steps[0].flags & F_RESTARTED, 0);
        // The abandoned handle is gone: its late stop is an unknown handle, not a record.
        f.step_end(first);
        assert!(f.run(&mut c).is_empty());
        assert_eq!(c.open_events(), 0);
    }

    #[test]
    fn steps_open_when_their_op_stops_are_counted_abandoned() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(2);
        f.step_start(op, 0);
        f.step_start(op, 1);
        f.stop(EventKind::ProxyOp, op);
        let out = f.run(&mut c);
        assert_eq!(out.len(), 1, "only the op");
        assert_eq!(c.dropped[DropReason::Abandoned as usize], 2);
        assert_eq!(c.open_events(), 0);
    }

    /// A send step's phases as NCCL's thread keeps them (`step_phases`), times in ns (the
    /// tests' clock: one tick a nanosecond, as `Feed` stamps).
    fn send_phases(id: u64, start: u64, flags: u8) -> Phases {
        let mut ph = Phases {
            id,
            start,
            rflags: flags,
            ..Phases::default()
        };
        ph.record(st::PROXY_STEP_SEND_GPU_WAIT as i32, 0, 0);
        ph.record(st::PROXY_STEP_SEND_PEER_WAIT as i32, start + 3, 0);
        ph.record(st::PROXY_STEP_SEND_PEER_WAIT as i32, start + 4, 0);
        ph.record(st::PROXY_STEP_SEND_WAIT as i32, start + 5, 4096);
        ph
    }

    impl Feed {
        /// Step `step` of `op` as one whole record (`RF_WHOLE`), as the drain hands it over.
        fn whole(&mut self, op: u64, step: u32, flags: u8) -> u64 {
            let id = self.id(EventKind::ProxyStep);
            self.whole_of(op, step, send_phases(id, self.ts + 1, flags));
            id
        }
        fn whole_of(&mut self, op: u64, step: u32, ph: Phases) {
            self.ts += 10;
            let raw = ph.to_whole(self.ts, op, step, 0).unwrap();
            let [a, b, c] = crate::step_phases::whole_times(&raw);
            self.items.push(Item {
                raw: Raw {
                    ts: raw.w[0],
                    w: [a, b, c, raw.w[3]],
                    ..raw
                },
                ns: self.ts,
                rank: 0,
            });
        }
        /// The same step as a start record and a stop that carries its phases.
        fn start_and_stop_of(&mut self, op: u64, step: u32, ph: Phases) {
            let mut start = ph.start_raw(op, step, 0, 0, ph.start);
            start.ts = ph.start;
            self.items.push(Item {
                raw: start,
                ns: ph.start,
                rank: 0,
            });
            self.ts += 10;
            self.items.push(Item {
                raw: ph.to_raw(OP_STOP, self.ts),
                ns: self.ts,
                rank: -1,
            });
        }
    }

    /// A whole step gives the record its start and its stop give: the same fields, linked
    /// to its op the same way (bytes, steps finished), nothing left open.
    #[test]
    fn a_whole_step_completes_as_its_start_and_stop_would() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let coll = f.coll(1);
        let op = f.op_on(coll, 2);
        let (a, b) = (f.id(EventKind::ProxyStep), f.id(EventKind::ProxyStep));
        let start = f.ts + 1;
        f.start_and_stop_of(op, 70, send_phases(a, start, 0));
        f.whole_of(op, 70, send_phases(b, start, 0));
        f.stop(EventKind::ProxyOp, op);
        let out = f.run(&mut c);
        let find = |id| *out.iter().find(|r| r.id == id).unwrap();
        let (ra, rb) = (find(a), find(b));
        assert_eq!(
            EventRecord {
                id: a,
                end_ns: ra.end_ns,
                ..rb
            },
            ra
        );
        assert_eq!(rb.sub, 2, "its op's channel");
        assert_eq!((rb.p[0], rb.p[4], rb.p[5]), (70, 4096, 2));
        assert_eq!(rb.p[1], rb.start_ns, "a taken from the start");
        assert_ne!(rb.flags & F_END_KNOWN, 0);
        let rop = out.iter().find(|r| r.id == op).unwrap();
        assert_eq!(rop.p[3], 2 * 4096, "both steps' bytes on the op");
        assert_eq!(
            c.open_events(),
            1,
            "only the collective (its kernel never came)"
        );
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
        assert_eq!(c.captured[EventKind::ProxyStep as usize], 2);
    }

    /// A step the drain learnt of while open (`announce`, from the published entries) is
    /// stopped by its whole record; its start record, pushed later, adds nothing.
    #[test]
    fn a_whole_record_stops_an_announced_step() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(1);
        assert!(f.run(&mut c).is_empty());
        let id = f.id(EventKind::ProxyStep);
        let ph = send_phases(id, f.ts + 1, 0);
        let start = ph.start_raw(op, 5, 0, 0, ph.start);
        c.announce(&start, ph.start, 0, PROXY_ONLY);
        c.announce(&start, ph.start, 0, PROXY_ONLY);
        assert!(c.knows(id));
        assert_eq!(c.open_events(), 2, "the op and the step, once");
        f.items.push(Item {
            raw: start,
            ns: ph.start,
            rank: 0,
        });
        f.whole_of(op, 5, ph);
        let out = f.run(&mut c);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].id, out[0].p[0], out[0].p[4]), (id, 5, 4096));
        assert_eq!(out[0].start_ns, ph.start);
        assert_eq!(c.open_events(), 1, "the op");
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
        assert_eq!(c.captured[EventKind::ProxyStep as usize], 1);
    }

    /// A step the drain learnt of while open and gave up as leaked (60 timeouts) is counted
    /// once, abandoned, whenever its whole record still comes: before the scan prunes it
    /// from the announced steps (the record is its stop), or after (a whole step); it is not
    /// counted again as an unknown handle, nor delivered beside its count, nor learnt again.
    #[test]
    fn an_announced_step_given_up_as_leaked_is_counted_once() {
        for pruned_first in [false, true] {
            let mut c = Completion::new(262_144, 1, 0.0);
            let mut f = Feed::new();
            let id = f.id(EventKind::ProxyStep);
            let ph = send_phases(id, f.ts + 1, 0);
            // Its op is not here (dropped): the step alone is open.
            let start = ph.start_raw(0xdead, 5, 0, 0, ph.start);
            assert!(c.announce(&start, ph.start, 0, PROXY_ONLY));
            assert!(c.knows(id));
            f.ts += 61_000_000 + 200_000_000; // past 60 × the 1 ms timeout
            assert!(f.run(&mut c).is_empty());
            assert!(!c.knows(id), "{pruned_first}");
            assert_eq!(c.dropped[DropReason::Abandoned as usize], 1);
            if pruned_first {
                c.prune_announced();
            }
            assert!(c.announce(&start, ph.start, 0, PROXY_ONLY));
            assert!(!c.knows(id), "not learnt again ({pruned_first})");
            f.whole_of(0xdead, 5, ph);
            assert!(f.run(&mut c).is_empty(), "{pruned_first}");
            assert_eq!(c.dropped[DropReason::Abandoned as usize], 1);
            assert_eq!(
                c.dropped.iter().sum::<u64>(),
                1,
                "one count in all ({pruned_first})"
            );
        }
    }

    /// A step held open with a start record of its own and given up as leaked: its late
    /// stop is not counted a second time, as an unknown handle.
    #[test]
    fn a_stop_after_a_leak_sweep_is_not_counted_again() {
        let mut c = Completion::new(262_144, 1, 0.0);
        let mut f = Feed::new();
        let s = f.id(EventKind::ProxyStep);
        f.push(OP_START, EventKind::ProxyStep, s, 0, 0, [0; 4]);
        f.run(&mut c);
        f.ts += 61_000_000 + 200_000_000;
        f.run(&mut c);
        assert_eq!(c.dropped[DropReason::Abandoned as usize], 1);
        f.stop(EventKind::ProxyStep, s);
        assert!(f.run(&mut c).is_empty());
        assert_eq!(c.dropped.iter().sum::<u64>(), 1, "abandoned, once");
        // Any other unknown stop still counts.
        let never = f.id(EventKind::ProxyStep);
        f.stop(EventKind::ProxyStep, never);
        f.run(&mut c);
        assert_eq!(c.dropped[DropReason::UnknownHandle as usize], 1);
    }

    /// A step the table has no room for is not learnt of from the published entries, and
    /// nothing is counted for it then: its whole record counts it (captured and delivered
    /// once, no drop). The scan offers it again meanwhile (`Drain`), and once there is
    /// room it is learnt of.
    #[test]
    fn an_announce_without_room_counts_nothing() {
        let mut c = Completion::new(2, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(1);
        let other = f.step_start(op, 1);
        assert!(f.run(&mut c).is_empty());
        assert_eq!(c.open_events(), 2, "the table is full");
        let id = f.id(EventKind::ProxyStep);
        let ph = send_phases(id, f.ts + 1, 0);
        let start = ph.start_raw(op, 5, 0, 0, ph.start);
        assert!(!c.announce(&start, ph.start, 0, PROXY_ONLY));
        assert!(!c.knows(id));
        assert_eq!(
            c.captured[EventKind::ProxyStep as usize],
            1,
            "the other step"
        );
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
        f.step_end(other);
        assert_eq!(f.run(&mut c).len(), 1);
        assert!(c.announce(&start, ph.start, 0, PROXY_ONLY), "room now");
        assert!(c.knows(id));
        f.whole_of(op, 5, ph);
        let out = f.run(&mut c);
        assert_eq!(out.iter().map(|r| r.id).collect::<Vec<_>>(), [id]);
        assert_eq!(c.captured[EventKind::ProxyStep as usize], 2);
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
    }

    /// A step learnt of while there was room, deferred for its op (not here: another ring's
    /// record beyond the snapshot, or dropped), and retried when the table has filled is
    /// counted by neither (found in review: it counted `captured` and a table-full drop,
    /// then again at its whole record); the whole record counts it once.
    #[test]
    fn an_announced_step_deferred_into_a_full_table_counts_nothing() {
        let mut c = Completion::new(2, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.id(EventKind::ProxyOp); // never started here
        let id = f.id(EventKind::ProxyStep);
        let ph = send_phases(id, f.ts + 1, 0);
        // As the drain's scan makes it (`Drain::announce_published_steps`): no late start.
        let mut start = ph.start_raw(op, 5, 0, 0, ph.start);
        start.flags &= !RF_LATE_START;
        assert!(c.announce(&start, ph.start, 0, PROXY_ONLY));
        assert!(c.knows(id), "deferred for its op");
        // The next pass: two collectives fill the table before the deferred step's retry.
        let (a, b) = (f.id(EventKind::Coll), f.id(EventKind::Coll));
        for coll in [a, b] {
            f.push(OP_START, EventKind::Coll, coll, 0, 0, [0, 0, 0, 1 << 32]);
        }
        assert!(f.run(&mut c).is_empty());
        assert!(!c.knows(id));
        assert_eq!(c.captured[EventKind::ProxyStep as usize], 0);
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
        // For the scan to offer again (found in review: a step NCCL then never stopped was
        // counted nowhere, never shown in flight).
        assert_eq!(c.take_refused_announces(), [id]);
        assert!(c.take_refused_announces().is_empty());
        f.stop(EventKind::Coll, a);
        f.stop(EventKind::Coll, b);
        f.run(&mut c);
        f.whole_of(op, 5, ph);
        f.run(&mut c); // deferred for its op once more
        f.ts += 10;
        let out = f.run(&mut c);
        assert_eq!(out.iter().filter(|r| r.id == id).count(), 1);
        assert_eq!(c.captured[EventKind::ProxyStep as usize], 1);
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
    }

    /// The published-entries scan finds open steps in no particular order: an abandoned
    /// handle found after the step that restarted it is not taken for a restart of it.
    #[test]
    fn an_announced_step_older_than_its_restart_is_not_opened() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(1);
        assert!(f.run(&mut c).is_empty());
        let (old, new) = (f.id(EventKind::ProxyStep), f.id(EventKind::ProxyStep));
        let at = |id, start| Phases {
            id,
            start,
            ..Phases::default()
        };
        let (old_start, new_start) = (f.ts + 1, f.ts + 50);
        let restart = at(new, new_start).start_raw(op, 6, 0, 0, new_start);
        c.announce(&restart, new_start, 0, PROXY_ONLY);
        let abandoned = at(old, old_start).start_raw(op, 6, 0, 0, old_start);
        c.announce(&abandoned, old_start, 0, PROXY_ONLY);
        assert!(c.knows(new) && !c.knows(old));
        f.ts += 100;
        f.whole_of(op, 6, send_phases(new, new_start, 0));
        let out = f.run(&mut c);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, new);
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
        assert_eq!(c.open_events(), 1, "the op");
    }

    /// A restart the drain can see (the abandoned step was announced) flags the whole step
    /// that replaces it and forgets the old; one NCCL's thread saw (`RF_RESTARTED`) is
    /// flagged as it says.
    #[test]
    fn whole_steps_that_restart_one_are_flagged() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(1);
        let first = f.step_start(op, 7);
        let again = f.whole(op, 7, 0);
        let told = f.whole(op, 8, RF_RESTARTED);
        let plain = f.whole(op, 9, 0);
        f.stop(EventKind::ProxyOp, op);
        let out = f.run(&mut c);
        let flags = |id| {
            out.iter()
                .find(|r| r.id == id)
                .map(|r| r.flags & F_RESTARTED)
        };
        assert_eq!(flags(first), None, "forgotten");
        assert_eq!(flags(again), Some(F_RESTARTED));
        assert_eq!(flags(told), Some(F_RESTARTED));
        assert_eq!(flags(plain), Some(0));
        assert_eq!(c.dropped[DropReason::Abandoned as usize], 0);
        assert_eq!(c.open_events(), 0);
    }

    /// An abandoned handle's start record can come after its restart's (its phases entry
    /// was taken later, `capture`): older than the open step of the same number, it is
    /// forgotten, not taken for a restart of that one; nothing is lost or counted.
    #[test]
    fn a_late_start_older_than_its_restart_is_the_abandoned_one() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(1);
        let (old, new) = (f.id(EventKind::ProxyStep), f.id(EventKind::ProxyStep));
        let old_start = f.ts + 1;
        f.ts += 100;
        f.push(OP_START, EventKind::ProxyStep, new, op, 0, [4, 0, 0, 0]);
        let new_start = f.ts;
        let late = Phases {
            id: old,
            start: old_start,
            ..Phases::default()
        };
        f.items.push(Item {
            raw: late.start_raw(op, 4, 0, 0, f.ts + 5),
            ns: old_start,
            rank: 0,
        });
        f.step_end(new);
        f.stop(EventKind::ProxyOp, op);
        let out = f.run(&mut c);
        let steps: Vec<_> = out.iter().filter(|r| r.id == new || r.id == old).collect();
        assert_eq!(steps.len(), 1);
        assert_eq!((steps[0].id, steps[0].start_ns), (new, new_start));
        assert_eq!(
            steps[0].flags & F_RESTARTED,
            0,
            "what restarted it is unknown here"
        );
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
        assert_eq!(c.open_events(), 0);
    }

    /// A whole step whose op is not known yet waits a pass for it (the op may sit beyond the
    /// pass in another ring); then it is linked. Without the op then, it is kept unlinked.
    #[test]
    fn a_whole_step_waits_one_pass_for_its_op() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.id(EventKind::ProxyOp);
        let step = f.whole(op, 1, 0);
        assert!(f.run(&mut c).is_empty());
        f.push(
            OP_START,
            EventKind::ProxyOp,
            op,
            0,
            0,
            [0, 4 | (1 << 8), 8, 0],
        );
        let out = f.run(&mut c);
        let r = out.iter().find(|r| r.id == step).unwrap();
        assert_eq!((r.sub, r.flags & F_PARENT_UNKNOWN), (4, 0));
        let orphan = f.whole(handle::make(EventKind::ProxyOp, 3, 999_999), 1, 0);
        assert!(f.run(&mut c).is_empty());
        let out = f.run(&mut c);
        let r = out.iter().find(|r| r.id == orphan).unwrap();
        assert_ne!(r.flags & F_PARENT_UNKNOWN, 0);
    }

    /// A step's state read before the step is known (recorded on another thread; the step
    /// reaches the ring whole at its stop) is applied when the step comes; one whose step
    /// never comes is counted as an unknown handle after the lost-stop wait.
    #[test]
    fn a_stray_step_state_waits_for_its_step() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let op = f.op_start(1);
        let id = f.id(EventKind::ProxyStep);
        let mut ph = send_phases(id, f.ts + 1, 0);
        ph.t[1] = 0; // its SendPeerWaits were recorded on the other thread
        ph.retries = 0;
        ph.seen &= !(1 << 5);
        let s = st::PROXY_STEP_SEND_PEER_WAIT as u8;
        f.push(OP_STATE, EventKind::ProxyStep, id, 0, s, [0; 4]);
        let stray_at = f.ts;
        assert!(f.run(&mut c).is_empty());
        f.whole_of(op, 3, ph);
        let out = f.run(&mut c);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].p[2], out[0].p[5]),
            (stray_at, 1),
            "b and the count from it"
        );
        assert_eq!(c.dropped.iter().sum::<u64>(), 0);
        let never = f.id(EventKind::ProxyStep);
        f.push(OP_STATE, EventKind::ProxyStep, never, 0, s, [0; 4]);
        assert!(f.run(&mut c).is_empty());
        assert_eq!(c.dropped[DropReason::UnknownHandle as usize], 0, "not yet");
        f.ts += (LOST_AFTER_TIMEOUTS + 1) * c.timeout_ns() + 200_000_000;
        f.run(&mut c);
        assert_eq!(c.dropped[DropReason::UnknownHandle as usize], 1);
    }

    /// Whole steps completed into the history (each built where it lies in the open frame,
    /// `Sink::put_with`) are the records completion makes into a `Vec`: linked to their op,
    /// one with a state parked for it, one restarted.
    #[test]
    fn whole_steps_into_the_history_are_the_records_completion_makes() {
        let mut f = Feed::new();
        let op = f.op_start(1);
        for step in 0..5 {
            f.whole(op, step, 0);
        }
        f.whole(op, 9, RF_RESTARTED);
        let id = f.id(EventKind::ProxyStep);
        let mut ph = send_phases(id, f.ts + 1, 0);
        ph.t[1] = 0; // its SendPeerWait recorded on another thread, read first
        ph.retries = 0;
        ph.seen &= !(1 << 5);
        let s = st::PROXY_STEP_SEND_PEER_WAIT as u8;
        f.push(OP_STATE, EventKind::ProxyStep, id, 0, s, [0; 4]);
        f.whole_of(op, 6, ph);
        f.stop(EventKind::ProxyOp, op);
        let items = std::mem::take(&mut f.items);
        let mut into_vec = Completion::new(262_144, 1000, 0.0);
        into_vec.pass(items.as_slice(), PROXY_ONLY);
        into_vec.end_pass(f.ts);
        let mut want = Vec::new();
        into_vec.take(&mut want);
        let history = crate::history::History::new();
        let mut into_history = Completion::with_sink(history, 262_144, 1000, 0.0);
        into_history.pass(items.as_slice(), PROXY_ONLY);
        into_history.end_pass(f.ts);
        into_history.sink_mut().seal();
        let got = into_history.sink().records(usize::MAX);
        assert_eq!(
            want.iter()
                .filter(|r| r.kind == EventKind::ProxyStep as u8)
                .count(),
            7
        );
        assert!(
            want.iter().any(|r| r.id == id && r.p[5] == 1),
            "the parked state applied"
        );
        assert_eq!(got, want);
    }

    #[test]
    fn leaked_steps_are_swept_and_counted() {
        let mut c = Completion::new(262_144, 1, 0.0);
        let mut f = Feed::new();
        // A step whose op is unknown (NULL-parent rules, stale handle): never stopped.
        let s = f.id(EventKind::ProxyStep);
        f.push(OP_START, EventKind::ProxyStep, s, 0, 0, [0; 4]);
        f.run(&mut c);
        assert_eq!(c.open_events(), 1);
        c.end_pass(f.ts + 61_000_000 + 200_000_000); // past 60 × the 1 ms timeout
        assert_eq!(c.open_events(), 0);
        assert_eq!(c.dropped[DropReason::Abandoned as usize], 1);
    }

    /// A group of one send/recv pair to `peer` (the feed's rank is 0), as NCCL calls it: the
    /// API events during the user's calls, the P2p tasks at group end. Returns the ids
    /// (group, [api, p2p] per direction).
    fn p2p_group(f: &mut Feed, peer: u32) -> (u64, Vec<(u64, u64)>) {
        let group = f.id(EventKind::GroupApi);
        f.push(OP_START, EventKind::GroupApi, group, 0, 0, [0; 4]);
        let mut pairs = Vec::new();
        for _ in 0..2 {
            let api = f.id(EventKind::P2pApi);
            f.push(OP_START, EventKind::P2pApi, api, group, 0, [0; 4]);
            f.stop(EventKind::P2pApi, api);
            pairs.push((api, 0));
        }
        f.stop(EventKind::GroupApi, group);
        for pair in &mut pairs {
            let p2p = f.id(EventKind::P2p);
            let w0 = u64::from(peer) | (2 << 32); // 2 channels
            f.push(OP_START, EventKind::P2p, p2p, pair.0, 0, [w0, 4096, 0, 0]);
            f.stop(EventKind::P2p, p2p);
            pair.1 = p2p;
        }
        (group, pairs)
    }

    /// A send/recv to self gets no ProxyOp and no KernelCh (NCCL plans no proxy op for it):
    /// it completes at its stop, end unknown, and its API event and group right after,
    /// without waiting for the timeout. One to another rank still waits for its kernels.
    #[test]
    fn a_send_to_self_completes_without_waiting_for_signals() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let (group, pairs) = p2p_group(&mut f, 0);
        let mut out = Vec::new();
        for _ in 0..4 {
            c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
            c.end_pass(f.ts); // far inside the 1 s timeout
            c.take(&mut out);
        }
        assert_eq!(out.len(), 5, "group, 2 API events, 2 P2p: {out:?}");
        assert_eq!(c.open_events(), 0);
        for &(api, p2p) in &pairs {
            let r = out.iter().find(|r| r.id == p2p).expect("the P2p");
            assert_ne!(r.flags & F_END_UNKNOWN, 0);
            assert_eq!(r.end_ns, r.p[3], "its enqueue stop, not an invented end");
            assert!(out.iter().any(|r| r.id == api));
        }
        assert!(out.iter().any(|r| r.id == group));

        let (_, pairs) = p2p_group(&mut f, 1);
        for _ in 0..3 {
            c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
            c.end_pass(f.ts);
        }
        let p2p = pairs[0].1;
        out.clear();
        c.take(&mut out);
        assert!(
            out.is_empty(),
            "a P2p to rank 1 waits for its KernelCh: {out:?}"
        );
        let k = f.id(EventKind::KernelCh);
        f.push(OP_START, EventKind::KernelCh, k, p2p, 0, [0; 4]);
        f.stop(EventKind::KernelCh, k);
        let k = f.id(EventKind::KernelCh);
        f.push(OP_START, EventKind::KernelCh, k, p2p, 0, [0; 4]);
        f.stop(EventKind::KernelCh, k);
        for _ in 0..2 {
            c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
            c.end_pass(f.ts);
        }
        c.take(&mut out);
        let r = out
            .iter()
            .find(|r| r.id == p2p)
            .expect("completed by its kernels");
        assert_ne!(r.flags & F_END_KNOWN, 0);
    }

    /// With neither KernelCh nor ProxyOp events in the mask nothing can signal a Coll's
    /// end: it is reported at its stop. With ProxyOps possible it waits for the timeout.
    #[test]
    fn a_coll_with_no_possible_signal_completes_at_its_stop() {
        let none = Signals {
            kernel_ch: false,
            none_after: Some(0),
        };
        for (signals, done_at_once) in [(none, true), (PROXY_ONLY, false)] {
            let mut c = Completion::new(262_144, 1000, 0.0);
            let mut f = Feed::new();
            f.coll(4);
            let mut out = Vec::new();
            for _ in 0..2 {
                c.pass(std::mem::take(&mut f.items).as_slice(), signals);
                c.end_pass(f.ts);
                c.take(&mut out);
            }
            assert_eq!(out.len(), usize::from(done_at_once), "{signals:?}");
            if done_at_once {
                assert_ne!(out[0].flags & F_END_UNKNOWN, 0);
            } else {
                c.end_pass(f.ts + 1_200_000_000); // past the timeout, at a sweep
                c.take(&mut out);
                assert_eq!(out.len(), 1);
                assert_ne!(out[0].flags & F_END_UNKNOWN, 0);
            }
        }
    }

    /// A Coll started before the mask had settled without KernelCh and ProxyOp (its task
    /// may carry the old mask) still waits for the KernelCh that completes it.
    #[test]
    fn a_coll_started_before_the_mask_settled_waits_for_its_kernel() {
        let mut c = Completion::new(262_144, 1000, 0.0);
        let mut f = Feed::new();
        let signals = Signals {
            kernel_ch: false,
            none_after: Some(f.ts + 1_000),
        };
        let coll = f.coll(1);
        let mut out = Vec::new();
        for _ in 0..3 {
            c.pass(std::mem::take(&mut f.items).as_slice(), signals);
            c.end_pass(f.ts);
            c.take(&mut out);
        }
        assert!(out.is_empty(), "{out:?}");
        let k = f.id(EventKind::KernelCh);
        f.push(OP_START, EventKind::KernelCh, k, coll, 0, [0; 4]);
        f.stop(EventKind::KernelCh, k);
        for _ in 0..2 {
            c.pass(std::mem::take(&mut f.items).as_slice(), signals);
            c.end_pass(f.ts);
            c.take(&mut out);
        }
        let r = out
            .iter()
            .find(|r| r.id == coll)
            .expect("completed by its kernel");
        assert_ne!(r.flags & F_END_KNOWN, 0);
        assert!(out.iter().all(|r| r.flags & F_PARENT_UNKNOWN == 0));
    }

    /// Children stay possible for events started within `settle` of the drain first seeing
    /// KernelCh and ProxyOp off; a change it did not see between two passes restarts that.
    #[test]
    fn children_count_as_possible_until_the_mask_has_settled() {
        let all = EventKind::ALL.iter().fold(0, |m, k| m | k.bit());
        let off = all & !EventKind::ProxyOp.bit() & !EventKind::KernelCh.bit();
        let only_kernel = off | EventKind::KernelCh.bit();
        let mut w = SignalsWatch::default();
        let s = w.at(all, 0, 10, 100);
        assert!(s.kernel_ch && s.none_after.is_none());
        assert!(
            w.at(only_kernel, 1, 15, 100).none_after.is_none(),
            "KernelCh alone"
        );
        let s = w.at(off, 2, 20, 100);
        assert!(!s.kernel_ch);
        assert!(!s.none_at(120), "started within the settle");
        assert!(s.none_at(121));
        assert_eq!(
            w.at(off, 2, 500, 100).none_after,
            Some(120),
            "unchanged since"
        );
        // Off, on and off again between two passes: the wait starts again.
        assert_eq!(w.at(off, 4, 600, 100).none_after, Some(700));
        assert!(w.at(all, 5, 700, 100).none_after.is_none());
    }

    /// A progressed ProxyOp whose stop (and its step's) went with records its ring dropped
    /// leaves the open table 10 timeouts after its last sign of life: end unknown, its
    /// step counted abandoned, its collective done waiting. Without drops on its ring it
    /// stays open, in flight (perhaps hung), as before.
    #[test]
    fn an_op_whose_ring_dropped_its_stop_leaves_the_table() {
        for ring_dropped in [true, false] {
            let mut c = Completion::new(262_144, 1, 0.0); // 1 ms timeout
            let mut f = Feed::new();
            let coll = f.coll(0);
            let op = f.id(EventKind::ProxyOp);
            f.push(
                OP_START,
                EventKind::ProxyOp,
                op,
                coll,
                0,
                [0, 1 | (1 << 8), 8, 0],
            );
            let s = st::PROXY_OP_IN_PROGRESS as u8;
            f.push(OP_STATE, EventKind::ProxyOp, op, 0, s, [0; 4]);
            let step = f.step_start(op, 0);
            let last_activity = f.ts;
            let out = f.run(&mut c); // the step's and the op's stops are never seen
            assert!(out.is_empty());
            if ring_dropped {
                c.ring_dropped(handle::ring_of(op), last_activity + 1);
            }
            let mut out = Vec::new();
            // Past 10 timeouts, at sweeps (every 100 ms).
            for t in [200_000_000, 400_000_000, 600_000_000] {
                c.end_pass(last_activity + t);
                c.take(&mut out);
            }
            if ring_dropped {
                let r = out.iter().find(|r| r.id == op).expect("the op, reported");
                assert_ne!(r.flags & F_END_UNKNOWN, 0);
                assert_eq!(r.flags & F_NOT_NETWORK, 0);
                assert!(out.iter().any(|r| r.id == coll), "its collective completes");
                assert!(!out.iter().any(|r| r.id == step));
                assert_eq!(c.dropped[DropReason::Abandoned as usize], 1, "the step");
                assert_eq!(c.open_events(), 0);
            } else {
                assert!(out.is_empty(), "in flight, perhaps hung: {out:?}");
                // The collective and the op (the step went at the leak sweep, 60 timeouts).
                assert_eq!(c.open_events(), 2);
            }
        }
    }

    /// A step's stop is a sign of life of its op: an op whose last step stopped after a drop
    /// on its ring is not taken for one that lost its stop (found in review: only step starts
    /// counted, so an op waiting for a sibling channel could be swept while in flight).
    #[test]
    fn a_step_stop_keeps_its_op_alive() {
        let mut c = Completion::new(262_144, 1, 0.0); // 1 ms timeout: lost after 10 ms quiet
        let mut f = Feed::new();
        f.ts = 1_000_000_000;
        c.end_pass(f.ts); // a sweep now, the next one 100 ms later
        let op = f.op_start(1);
        let step = f.step_start(op, 0);
        c.ring_dropped(handle::ring_of(op), f.ts + 1);
        f.ts += 95_000_000;
        f.step_end(step);
        let out = f.run(&mut c);
        assert!(out.iter().any(|r| r.id == step));
        // The next sweep: 101 ms after the step's start, 6 after its stop.
        c.end_pass(f.ts + 6_000_000);
        assert_eq!(c.open_events(), 1, "the op, in flight");
        assert_eq!(c.dropped[DropReason::Abandoned as usize], 0);
        // Quiet 10 timeouts after its last sign of life, with the drop before it: still in
        // flight (the drop cannot have taken a record after the step's stop).
        c.end_pass(f.ts + 120_000_000);
        assert_eq!(c.open_events(), 1);
    }

    /// A KernelCh quiet for 10 timeouts on a ring that dropped records leaves the table and
    /// its collective stops waiting for it (it stayed in flight for good, found in review).
    #[test]
    fn a_lost_kernel_channel_releases_its_collective() {
        // One channel, then 5 collectives of 60: more than `kernels_open` holds, so some
        // are in the general table, whose sweep must do the same.
        for (colls, channels) in [(1, 1), (5, 60)] {
            let mut c = Completion::new(262_144, 1, 0.0);
            let mut f = Feed::new();
            f.ts = 1_000_000_000;
            let ids: Vec<u64> = (0..colls).map(|_| f.coll(channels)).collect();
            let mut ring = 0;
            for &coll in &ids {
                for _ in 0..channels {
                    let k = f.id(EventKind::KernelCh);
                    f.push(OP_START, EventKind::KernelCh, k, coll, 0, [0; 4]);
                    ring = handle::ring_of(k);
                }
            }
            c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
            c.end_pass(f.ts);
            let n = (colls * channels) as usize;
            assert_eq!(c.kernels_open.len(), n.min(256));
            c.ring_dropped(ring, f.ts + 1);
            let mut out = Vec::new();
            for t in [20_000_000, 200_000_000, 400_000_000] {
                c.end_pass(f.ts + t);
                c.take(&mut out);
            }
            let abandoned = c.dropped[DropReason::Abandoned as usize];
            assert_eq!(abandoned, n as u64, "the KernelChs");
            for &coll in &ids {
                let r = out
                    .iter()
                    .find(|r| r.id == coll)
                    .expect("the collective completes");
                assert_ne!(r.flags & F_END_UNKNOWN, 0);
            }
            assert_eq!(c.open_events(), 0);
        }
    }

    /// A kernel channel's state is a sign of life: one whose ring dropped records before its
    /// GPU stop came as a record of its own (and none since) did not lose its stop with them.
    #[test]
    fn a_kernel_channels_state_is_a_sign_of_life() {
        // Timeout 10 ms: lost after 100 ms quiet with a drop since, leaked after 600 ms.
        let mut c = Completion::new(262_144, 10, 0.0);
        let mut f = Feed::new();
        f.ts = 1_000_000_000;
        let coll = f.coll(1);
        let k = f.id(EventKind::KernelCh);
        f.push(OP_START, EventKind::KernelCh, k, coll, 0, [0; 4]);
        c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
        c.end_pass(f.ts);
        c.ring_dropped(handle::ring_of(k), f.ts + 1);
        f.ts += 5_000_000;
        let gpu_stop = st::KERNEL_CH_STOP as u8;
        f.push(OP_STATE, EventKind::KernelCh, k, 1234, gpu_stop, [0; 4]);
        c.pass(std::mem::take(&mut f.items).as_slice(), Signals::ALL);
        let mut out = Vec::new();
        for t in [20_000_000, 200_000_000] {
            c.end_pass(f.ts + t);
            c.take(&mut out);
        }
        assert_eq!(c.dropped.iter().sum::<u64>(), 0, "{:?}", c.dropped);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(
            c.open_events(),
            2,
            "the channel, and its collective in flight"
        );
    }

    /// A KernelCh quiet for 60 timeouts without drops on its ring is a leak, or a hang: it
    /// is counted abandoned but its collective stays in flight (found in review: releasing
    /// it reported a hung collective as finished).
    #[test]
    fn a_leaked_kernel_channel_leaves_its_collective_in_flight() {
        // 300 channels of another collective first: some are in the general table, whose
        // sweep must do the same.
        let mut c = Completion::new(262_144, 1, 0.0);
        let mut f = Feed::new();
        f.ts = 1_000_000_000;
        let many = f.coll(64);
        for _ in 0..300 {
            let k = f.id(EventKind::KernelCh);
            f.push(OP_START, EventKind::KernelCh, k, many, 0, [0; 4]);
        }
        let coll = f.coll(1);
        let k = f.id(EventKind::KernelCh);
        f.push(OP_START, EventKind::KernelCh, k, coll, 0, [0; 4]);
        let mut out = f.run(&mut c);
        assert_eq!((c.kernels_open.len(), c.table.len()), (256, 2 + 45));
        for t in [200_000_000, 400_000_000] {
            c.end_pass(f.ts + t);
            c.take(&mut out);
        }
        let abandoned = c.dropped[DropReason::Abandoned as usize];
        assert_eq!(abandoned, 301, "the KernelChs");
        assert!(!out.iter().any(|r| r.id == coll || r.id == many), "{out:?}");
        assert_eq!(c.open_events(), 2, "the collectives, in flight");
        c.dropped = [0; DropReason::COUNT];
        // Should its state and stop come after all, it was counted once (abandoned), not
        // again as an unknown handle (the state, found in review, and the stop).
        f.ts += 400_000_000;
        f.push(OP_STATE, EventKind::KernelCh, k, 0, 0, [0; 4]);
        f.stop(EventKind::KernelCh, k);
        f.run(&mut c);
        assert_eq!(c.dropped.iter().sum::<u64>(), 0, "{:?}", c.dropped);
    }

    /// A ring that keeps overflowing reports a newer drop at every pass, beyond what has
    /// been read; the older ones are still reached, and an op that lost its stop leaves
    /// (found in review: keeping only the newest, none was ever reached).
    #[test]
    fn drops_reported_beyond_the_read_part_are_reached_later() {
        let mut c = Completion::new(262_144, 1, 0.0);
        let mut f = Feed::new();
        f.ts = 1_000_000_000;
        let op = f.op_start(1);
        f.step_start(op, 0);
        let t0 = f.ts;
        f.run(&mut c);
        let ring = handle::ring_of(op);
        let mut out = Vec::new();
        for k in 1..=3u64 {
            let now = t0 + k * 200_000_000;
            c.ring_dropped(ring, now + 50_000_000); // always past what has been read
            c.end_pass(now);
            c.take(&mut out);
        }
        let r = out.iter().find(|r| r.id == op).expect("the op, reported");
        assert_ne!(r.flags & F_END_UNKNOWN, 0);
    }
}
