//! A ProxyStep, kept on NCCL's thread from its start to its stop, then sent whole.
//!
//! ProxySteps are most events, and a step is five callbacks: start, three or more states,
//! stop. Pushing every state as its own 64-byte record made the drain read (and NCCL's
//! thread write) a cache line per state, three quarters of them for a step's three phase
//! times. Instead each ring keeps a small direct-mapped table of its open steps' phases,
//! indexed by the step id's sequence number: a state updates its step's entry (a few stores
//! into a line the thread just used), and the stop carries the phases to the drain in its
//! one record ([`crate::ring::RF_PHASES`]).
//!
//! The start does not go to the ring either: the stop's record carries it too, a whole step
//! ([`crate::ring::RF_WHOLE`], [`Phases::to_whole`]), so the drain reads one record per step
//! and completes it at once, never holding it open (`Completion::whole_step`). Keeping its
//! start with its stop halved what the drain did per step: it was the drain's largest cost,
//! and the drain the stream's bottleneck (`BENCHMARKS.md` §2). What the drain learnt from a
//! step's start while it was open comes another way:
//! - where a collective waits while it is in flight (a hung one): the ring's published
//!   entry of each open step ([`crate::ring::Ring::open_step`]), which the drain reads
//!   before each in-flight summary, learning of the open steps it finds there
//!   (`Drain::announce_published_steps`);
//! - a NetPlugin event's parent: on the step's thread the event's start pushes the step's
//!   start record first (`capture::announce`); on a helper thread (NCCL's socket transport),
//!   which may not touch the step's entry, the drain finds the step issued in its ring's
//!   published entry (`PassRecords::step_issued`);
//! - a restarted receive step (spec §4.6): told on NCCL's thread by a table of recent starts
//!   by op and step number, the abandoned handle forgotten there and the new one flagged
//!   (`crate::ring::RF_RESTARTED`), as the drain does for one it knows. When another start
//!   took that table entry in between (about one restart in fifty with ten starts between),
//!   the abandoned handle stays in its phases entry: forgotten when a newer step takes the
//!   entry if the table then shows its restart, else it reaches the drain, which forgets it
//!   if its restart is still open there and otherwise counts it abandoned, the restart's
//!   record unflagged;
//! - a step whose entry a newer step takes while it is open (more than [`SLOTS`] ids issued
//!   meanwhile on that thread), or whose stop does not fit one record (a phase of more than
//!   2^32 ticks, 4 GiB, step number or retry count of 65 536 or more): its start record goes
//!   to the ring then, and the rest as before (below).
//!
//! Only the thread that owns the ring touches its table, so there is nothing to
//! synchronise. A step whose entry was taken by a newer step while it was open, or whose
//! state comes from another thread, falls back to the old way: its phases so far go out as
//! one `RF_PHASES` state record and its later states as ordinary state records. The drain's
//! result is the same either way: [`Phases::record`] applies the rules of the per-state path
//! to raw ticks, and [`merge_record`] applies a run of accumulated states to what the drain
//! already holds exactly as the states one by one would have (tested below against
//! [`crate::completion`]'s rules).
//!
//! One case is not covered: a step stopped from a thread other than the one that started it
//! would leave the states its own thread accumulated in a table the stopping thread may not
//! read, and its stop names a step the drain may not know yet (counted as an unknown
//! handle). NCCL starts, updates and stops a ProxyStep on its proxy progress thread (the ABI
//! spec's §4.1 threading table: "ProxyStep everything — the proxy progress thread"), so that
//! split does not happen. A stray state from elsewhere is kept by the drain until its step
//! comes (`Completion::park_stray_state`) and applied before the run its step's own thread
//! accumulated, so for a "first" phase (a, or b from the first SendPeerWait) the stray one
//! can win where the order of the calls says otherwise — as it could before, since records
//! of two rings were never ordered by time within a pass.
//!
//! A RF_PHASES state for a step the drain no longer knows (restarted, or abandoned with its
//! op) is ignored without a count: the step was counted when it was lost. A step whose start
//! was lost is counted once, at its stop, not once per state as before.

use ncclprof_shared::kind::{EventKind, state as st};
use ncclprof_shared::record::{EventRecord, F_SEND};

use crate::ring::{OP_START, OP_STOP, RF_LATE_START, RF_PHASES, RF_WHOLE, Raw};

/// Entries per ring (64 B each: 64 KiB, of which a thread touches the lines of its open
/// steps). A proxy thread keeps at most `NCCL_STEPS` (8) steps in flight per channel and
/// peer, so a step loses its entry only when more than this many ids are issued on its
/// thread while it is open.
pub const SLOTS: usize = 1024;

// Bits of `Phases::seen`: which ProxyStep states the run held.
const SEEN_SEND_GPU_WAIT: u8 = 1 << 0;
const SEEN_SEND_WAIT: u8 = 1 << 1;
const SEEN_RECV_WAIT: u8 = 1 << 2;
const SEEN_RECV_FLUSH_WAIT: u8 = 1 << 3;
const SEEN_RECV_GPU_WAIT: u8 = 1 << 4;
const SEEN_SEND_PEER_WAIT: u8 = 1 << 5;
/// `t[0]` is the step's start tick (a SendGPUWait that took it, see [`Phases::needs_time`]):
/// the merge gives phase a the step's start in ns exactly, where converting the same tick again
/// could differ by the drain's calibration refresh in between (found in review).
const A_IS_START: u8 = 1 << 6;
const SEEN_SEND: u8 = SEEN_SEND_GPU_WAIT | SEEN_SEND_WAIT | SEEN_SEND_PEER_WAIT;

/// One open step's states since its start (or since its phases last went to the ring), in
/// raw clock ticks. `id` 0 = free.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phases {
    pub id: u64,
    /// The step's start, raw ticks (0 = not known): a send step's SendGPUWait takes this
    /// time instead of reading the clock (see [`Phases::needs_time`]).
    pub start: u64,
    /// The step's phase boundaries a, b, c (see `record.rs`), raw ticks, 0 = not seen.
    pub t: [u64; 3],
    /// Argument of the last SendWait / RecvFlushWait (bytes).
    pub arg: u64,
    /// SendPeerWait count (saturating; 4 billion retries of one step are not a case).
    pub retries: u32,
    /// `SEEN_*` bits.
    pub seen: u8,
    /// The step's start record went to the ring ([`Phases::start_raw`]): its stop is a stop
    /// record, not a whole step ([`Phases::to_whole`]).
    pub announced: bool,
    /// The start record's `RF_*` flags (`RF_PARENT_NULL`, `RF_FOREIGN`, `RF_RESTARTED`).
    pub rflags: u8,
    /// The step's published key without its state (`Ring::open_step`'s, through
    /// `Ring::announced_key` once announced): what each of its states publishes with its own.
    pub key: u64,
}

const _: () = assert!(std::mem::size_of::<Phases>() == 64);

impl Phases {
    /// A state of this step at raw time `ts` with args word `arg` (0 for NULL args): the
    /// rules of `completion::step_state`, in ticks. States a step does not have are ignored,
    /// as there.
    #[inline(always)]
    pub fn record(&mut self, state: i32, ts: u64, arg: u64) {
        self.record_now(state, arg, || ts);
    }

    /// [`Phases::record`] with the time read by `now` where the state uses it (exactly where
    /// [`Phases::needs_time`] says so), in one dispatch on the state: NCCL's thread asking
    /// `needs_time` first and then recording made two (`capture::state`). Whether the state
    /// is one a step has (see [`Phases::record_timed`]).
    #[inline(always)]
    pub fn record_now(&mut self, state: i32, arg: u64, mut now: impl FnMut() -> u64) -> bool {
        let t = if Self::always_needs_time(state) {
            now()
        } else {
            0
        };
        self.record_timed(state, arg, t, now)
    }

    /// [`Phases::record_now`] where the caller has read the clock, into `t`, if the state is
    /// one [`Phases::always_needs_time`] names (those take `t`; the others read `now` where
    /// they use it, and ignore `t`). NCCL's thread reads it before it looks at the entry
    /// (`capture::step_state`). Whether the state is one a step has (false: ignored), which
    /// NCCL's thread then publishes for the drain (`capture::publish_step_state`), a value
    /// below 256.
    #[inline(always)]
    pub fn record_timed(
        &mut self,
        state: i32,
        arg: u64,
        t: u64,
        now: impl FnOnce() -> u64,
    ) -> bool {
        match state as u32 {
            st::PROXY_STEP_SEND_GPU_WAIT => {
                self.seen |= SEEN_SEND_GPU_WAIT;
                if self.t[0] == 0 {
                    if self.start != 0 {
                        self.t[0] = self.start;
                        self.seen |= A_IS_START;
                    } else {
                        self.t[0] = now();
                    }
                }
            }
            st::PROXY_STEP_SEND_PEER_WAIT => {
                self.seen |= SEEN_SEND_PEER_WAIT;
                if self.t[1] == 0 {
                    self.t[1] = now();
                }
                self.retries = self.retries.saturating_add(1);
            }
            st::PROXY_STEP_SEND_WAIT => {
                self.seen |= SEEN_SEND_WAIT;
                self.t[2] = t;
                self.arg = arg;
            }
            st::PROXY_STEP_RECV_WAIT => {
                self.seen |= SEEN_RECV_WAIT;
                if self.t[0] == 0 {
                    self.t[0] = now();
                }
            }
            st::PROXY_STEP_RECV_FLUSH_WAIT => {
                self.seen |= SEEN_RECV_FLUSH_WAIT;
                self.t[1] = t;
                self.arg = arg;
            }
            st::PROXY_STEP_RECV_GPU_WAIT => {
                self.seen |= SEEN_RECV_GPU_WAIT;
                self.t[2] = t;
            }
            _ => return false,
        }
        true
    }

    /// Whether [`Phases::record`] would use the time of `state`: the first SendGPUWait,
    /// SendPeerWait or RecvWait of a step sets a phase boundary, and a repeat only counts
    /// (NCCL records SendPeerWait again on every progress pass while the network refuses
    /// the send, which is when a receiver is slow); the other states keep the last one's
    /// time; states a step does not have are ignored. A state that needs no time reads no
    /// clock, the dearest part of a call (`capture::state`).
    ///
    /// A send step's SendGPUWait takes its start's time when the entry holds it. NCCL records
    /// that state in the same block of its send progress as the start (ABI spec §4.6,
    /// "immediately after"). Between the two calls there is at most a shared-buffer lookup,
    /// a fence or two and, before 2.27 with ProxyOp in the mask, a ProxyOp SendPosted
    /// callback; 2.23 starts a transfer's slice steps together and then records SendGPUWait
    /// for each (RCCL's send progress has the same block). That is well under a
    /// microsecond, where the phase that begins there lasts microseconds to milliseconds.
    /// Reading the clock again cost one counter read in each send step's five calls. The
    /// drain then gives phase a the step's start exactly (`A_IS_START`).
    #[inline(always)]
    pub fn needs_time(&self, state: i32) -> bool {
        match state as u32 {
            st::PROXY_STEP_SEND_GPU_WAIT => self.t[0] == 0 && self.start == 0,
            st::PROXY_STEP_RECV_WAIT => self.t[0] == 0,
            st::PROXY_STEP_SEND_PEER_WAIT => self.t[1] == 0,
            st::PROXY_STEP_SEND_WAIT
            | st::PROXY_STEP_RECV_FLUSH_WAIT
            | st::PROXY_STEP_RECV_GPU_WAIT => true,
            _ => false,
        }
    }

    /// Whether [`Phases::record`] uses the time of `state` whatever the entry holds (SendWait,
    /// RecvFlushWait, RecvGPUWait: each sets its phase's end again): NCCL's thread may read
    /// the clock for these before it looks at the entry (`capture::step_state`).
    #[inline(always)]
    pub fn always_needs_time(state: i32) -> bool {
        matches!(
            state as u32,
            st::PROXY_STEP_SEND_WAIT
                | st::PROXY_STEP_RECV_FLUSH_WAIT
                | st::PROXY_STEP_RECV_GPU_WAIT
        )
    }

    /// The ring record that carries this entry's states: `op` = `OP_STOP` for the step's stop
    /// at `ts`, `OP_STATE` when a newer step takes the entry at `ts` (see [`RF_PHASES`]).
    #[inline(always)]
    pub fn to_raw(&self, op: u8, ts: u64) -> Raw {
        // The phase times are read one by one (volatile reads are never merged): the states
        // just before wrote them with separate 8-byte stores, and a 16-byte load that spans
        // two stores still in the store buffer cannot be forwarded from them. On Intel such a
        // load waits until both stores reach the cache, behind every older store, the
        // ring's records among them. That wait was most of a step's stop there (`BENCHMARKS.md` §1).
        // SAFETY: reads of this entry's own fields.
        let t = unsafe {
            [
                std::ptr::read_volatile(&self.t[0]),
                std::ptr::read_volatile(&self.t[1]),
                std::ptr::read_volatile(&self.t[2]),
            ]
        };
        Raw {
            ts,
            id: self.id,
            parent: self.arg,
            op,
            kind: EventKind::ProxyStep as u8,
            state: self.seen,
            flags: RF_PHASES,
            ctx: self.retries,
            w: [t[0], t[1], t[2], 0],
        }
    }
}

impl Phases {
    /// The step's start record, for when it must reach the drain before its stop (see the
    /// module docs): from this entry and the fields [`crate::ring::Ring::open_step`] kept.
    /// `rank` goes where the version shims put the descriptor's (`descr`). Stamped `now`, with
    /// the start in `w[1]` ([`RF_LATE_START`]): a ring's records stay in time order, which the
    /// drain's pass relies on (its time cut).
    #[inline]
    pub fn start_raw(&self, parent: u64, step: u32, ctx: u32, rank: i32, now: u64) -> Raw {
        Raw {
            ts: now,
            id: self.id,
            parent,
            op: OP_START,
            kind: EventKind::ProxyStep as u8,
            state: 0,
            flags: self.rflags | RF_LATE_START,
            ctx,
            w: [
                u64::from(step) | u64::from(rank as u32) << 32,
                self.start,
                0,
                0,
            ],
        }
    }

    /// The whole step, start, states and stop at `ts`, as one record ([`RF_WHOLE`]), if its
    /// fields fit: phase times within 2^32 - 2 ticks of the start (1.6 s at 2.6 GHz), bytes
    /// below 4 GiB, step number and SendPeerWait count below 65 536. Else `None`: the step
    /// goes as a start and a stop record, as an announced one does.
    #[inline(always)]
    pub fn to_whole(&self, ts: u64, parent: u64, step: u32, ctx: u32) -> Option<Raw> {
        let mut whole = std::mem::MaybeUninit::<Raw>::uninit();
        // SAFETY: a local's storage; where `write_whole` says the step fits it wrote every
        // field of the record (a `Raw` has no padding).
        unsafe {
            self.write_whole(whole.as_mut_ptr(), ts, parent, step, ctx)
                .then(|| whole.assume_init())
        }
    }

    /// [`Phases::to_whole`]'s record written at `out`, each field as soon as it is known
    /// (NCCL's thread writes it straight into its ring slot, `capture::step_stop`: building
    /// the record first held every field in a register at once, and the short path spilled
    /// five to the stack and read them back; BENCHMARKS.md §1, "Fewer instructions around
    /// the short paths"). Whether the step fits one record; where not, `out` is partly
    /// written.
    ///
    /// # Safety
    /// `out` must be valid for writes of a `Raw`, and nothing may read it meanwhile.
    #[inline(always)]
    pub unsafe fn write_whole(
        &self,
        out: *mut Raw,
        ts: u64,
        parent: u64,
        step: u32,
        ctx: u32,
    ) -> bool {
        // Offset + 1 from the start, 0 = not seen. A time 2^32 - 1 ticks or more after the
        // start does not fit, nor one before it (never: one thread, one invariant clock),
        // whose offset wraps to 2^64 - 2^32 or more (the start would be a counter within
        // 2^32 ticks of 2^64, centuries away).
        let start = self.start;
        let off = |x: u64| -> Option<u64> {
            if x == 0 {
                return Some(0);
            }
            let d = x.wrapping_sub(start);
            (d < u64::from(u32::MAX)).then_some(d + 1)
        };
        // The phase times are read one by one (volatile reads), as in `to_raw`.
        // SAFETY: reads of this entry's own fields; `out` is writable (contract).
        unsafe {
            let Some(a) = off(std::ptr::read_volatile(&self.t[0])) else {
                return false;
            };
            let Some(b) = off(std::ptr::read_volatile(&self.t[1])) else {
                return false;
            };
            (&raw mut (*out).w[1]).write(a | b << 32);
            let Some(c) = off(std::ptr::read_volatile(&self.t[2])) else {
                return false;
            };
            (&raw mut (*out).w[2]).write(c);
            if self.arg > u64::from(u32::MAX) || self.retries > 0xFFFF || step > 0xFFFF {
                return false;
            }
            (&raw mut (*out).w[3]).write(whole_packed(self.arg, self.retries, step));
            (&raw mut (*out).w[0]).write(start);
            (&raw mut (*out).ts).write(ts);
            (&raw mut (*out).id).write(self.id);
            (&raw mut (*out).parent).write(parent);
            (&raw mut (*out).op).write(OP_STOP);
            (&raw mut (*out).kind).write(EventKind::ProxyStep as u8);
            (&raw mut (*out).state).write(self.seen);
            (&raw mut (*out).flags).write(RF_PHASES | RF_WHOLE | self.rflags);
            (&raw mut (*out).ctx).write(ctx);
        }
        true
    }
}

/// A whole step's bytes, SendPeerWait count and step number in one word (`Raw::w[3]` of an
/// [`RF_WHOLE`] record, in the ring and as the drain hands it to completion).
#[inline(always)]
pub fn whole_packed(arg: u64, retries: u32, step: u32) -> u64 {
    arg | u64::from(retries) << 32 | u64::from(step) << 48
}

/// [`whole_packed`]'s fields: bytes, SendPeerWait count, step number.
#[inline(always)]
pub fn whole_unpacked(w: u64) -> (u64, u32, u32) {
    (
        w & 0xFFFF_FFFF,
        ((w >> 32) & 0xFFFF) as u32,
        (w >> 48) as u32,
    )
}

/// An [`RF_WHOLE`] record's phase times as raw ticks (0 = not seen), from the ring's form.
#[inline(always)]
pub fn whole_times(r: &Raw) -> [u64; 3] {
    let at = |d: u64| {
        let d = d & 0xFFFF_FFFF;
        if d == 0 {
            0
        } else {
            r.w[0].wrapping_add(d - 1)
        }
    };
    [at(r.w[1]), at(r.w[1] >> 32), at(r.w[2])]
}

/// Apply a run of a step's states, accumulated by [`Phases::record`] and carried by the
/// record [`Phases::to_raw`] made (times already host ns), to the step's record: the same
/// result as applying each state in turn after the ones `rec` already holds.
#[inline]
pub fn merge_record(rec: &mut EventRecord, r: &Raw) {
    merge(rec, r.state, [r.w[0], r.w[1], r.w[2]], r.parent, r.ctx);
}

/// [`merge_record`]'s work, on the record's fields (also a whole step's, see
/// `Completion::whole_step`).
#[inline]
pub fn merge(rec: &mut EventRecord, seen: u8, t: [u64; 3], arg: u64, retries: u32) {
    if seen & SEEN_SEND != 0 {
        rec.flags |= F_SEND;
    }
    // a: the first SendGPUWait / RecvWait (the step's start where the first took its time).
    if seen & (SEEN_SEND_GPU_WAIT | SEEN_RECV_WAIT) != 0 && rec.p[1] == 0 {
        rec.p[1] = if seen & A_IS_START != 0 {
            rec.start_ns
        } else {
            t[0]
        };
    }
    // b: the last RecvFlushWait, else the first SendPeerWait.
    if seen & SEEN_RECV_FLUSH_WAIT != 0 || (seen & SEEN_SEND_PEER_WAIT != 0 && rec.p[2] == 0) {
        rec.p[2] = t[1];
    }
    // c: the last SendWait / RecvGPUWait; bytes: the last SendWait / RecvFlushWait.
    if seen & (SEEN_SEND_WAIT | SEEN_RECV_GPU_WAIT) != 0 {
        rec.p[3] = t[2];
    }
    if seen & (SEEN_SEND_WAIT | SEEN_RECV_FLUSH_WAIT) != 0 {
        rec.p[4] = arg;
    }
    rec.p[5] += u64::from(retries);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::step_state;
    use crate::ring::{OP_STOP, RF_RESTARTED};

    /// Deterministic pseudo-random numbers (xorshift), so a failure reproduces.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    const STATES: [i32; 9] = [
        st::PROXY_STEP_SEND_GPU_WAIT as i32,
        st::PROXY_STEP_SEND_PEER_WAIT as i32,
        st::PROXY_STEP_SEND_WAIT as i32,
        st::PROXY_STEP_RECV_WAIT as i32,
        st::PROXY_STEP_RECV_FLUSH_WAIT as i32,
        st::PROXY_STEP_RECV_GPU_WAIT as i32,
        0,
        255,
        -1,
    ];

    /// Any sequence of states, cut into runs anywhere (a run = what one entry held before
    /// its phases went to the ring, the rest sent one by one), gives the record the
    /// per-state path gives. Times here are already ns (the drain converts each run's ticks).
    #[test]
    fn accumulated_runs_merge_to_what_the_states_one_by_one_give() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..20_000 {
            let n = (rng.next() % 12) as usize;
            // Mostly one direction, as NCCL records, sometimes both (odd input).
            let mix = rng.next() % 4;
            let seq: Vec<(i32, u64, u64)> = (0..n)
                .map(|i| {
                    let s = match mix {
                        0 => STATES[(rng.next() % 3) as usize],
                        1 => STATES[3 + (rng.next() % 3) as usize],
                        _ => STATES[(rng.next() % STATES.len() as u64) as usize],
                    };
                    (s, 1000 + i as u64 * 10 + rng.next() % 7, rng.next() % 3)
                })
                .collect();
            let mut want = EventRecord::default();
            for &(s, t, a) in &seq {
                step_state(&mut want, s.clamp(0, 255) as u32, a, t);
            }
            // Split into runs at random points; each run accumulated then merged.
            let mut got = EventRecord::default();
            let mut i = 0;
            while i < n {
                let len = 1 + (rng.next() % (n - i) as u64) as usize;
                let mut ph = Phases::default();
                for &(s, t, a) in &seq[i..i + len] {
                    // As `capture::state` does: no time where none is needed.
                    ph.record(s, if ph.needs_time(s) { t } else { 0 }, a);
                }
                merge_record(&mut got, &ph.to_raw(OP_STOP, 0));
                i += len;
            }
            assert_eq!(got, want, "case {case}: {seq:?}");
        }
    }

    /// `record_now` (one dispatch, on NCCL's thread) is `needs_time` then `record`: the same
    /// entry, the clock read exactly when `needs_time` says so, for random runs of every
    /// state (and some a step does not have), on entries with and without their start; and
    /// so is `record_timed` with the time read first for `always_needs_time`'s states.
    #[test]
    fn record_now_is_needs_time_then_record() {
        let states: Vec<i32> = (-2..=25).chain([255, 1 << 20]).collect();
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..4_000u64 {
            let start = if case % 2 == 0 { 0 } else { 50 };
            let mut two = Phases {
                id: 9,
                start,
                ..Phases::default()
            };
            let mut one = two;
            for i in 0..(rng.next() % 16) {
                let s = states[(rng.next() % states.len() as u64) as usize];
                let (t, arg) = (100 + i, rng.next() % 5);
                let needs = two.needs_time(s);
                two.record(s, if needs { t } else { 0 }, arg);
                let mut read = false;
                let mut early = one;
                one.record_now(s, arg, || {
                    read = true;
                    t
                });
                assert_eq!(read, needs, "case {case}, state {s}");
                assert_eq!(one, two, "case {case}, state {s}");
                // `record_timed` with the time read first for the states that always use
                // it (as NCCL's thread does): the same entry, and the clock read later only
                // where `needs_time` says so of the others.
                let always = Phases::always_needs_time(s);
                assert!(!always || needs, "case {case}, state {s}");
                let mut read_late = false;
                early.record_timed(s, arg, if always { t } else { 0 }, || {
                    read_late = true;
                    t
                });
                assert_eq!(read_late, needs && !always, "case {case}, state {s}");
                assert_eq!(early, two, "case {case}, state {s}");
            }
        }
    }

    /// A step retried 1 000 times (SendPeerWait on every progress pass) reads the clock
    /// three times for its states (an entry without its start's time; with it, twice: the
    /// next test), and keeps the first SendPeerWait's time and the count.
    #[test]
    fn repeated_states_need_no_time() {
        let mut ph = Phases::default();
        let mut reads = 0;
        let mut clock = 100;
        let mut state = |ph: &mut Phases, s: u32| {
            clock += 10;
            let ts = if ph.needs_time(s as i32) {
                reads += 1;
                clock
            } else {
                0
            };
            ph.record(s as i32, ts, 7);
        };
        state(&mut ph, st::PROXY_STEP_SEND_GPU_WAIT);
        for _ in 0..1_000 {
            state(&mut ph, st::PROXY_STEP_SEND_PEER_WAIT);
        }
        state(&mut ph, st::PROXY_STEP_SEND_WAIT);
        assert_eq!(reads, 3);
        assert_eq!(ph.t, [110, 120, 10_120]);
        assert_eq!(ph.retries, 1_000);
        for s in [0, 1, 7, 13, 19, 21, 255, -5, 1 << 20] {
            assert!(!Phases::default().needs_time(s), "state {s}");
        }
    }

    /// A send step's entry made at its start (as `capture::start` makes it) reads the clock
    /// for two of its states, not three: SendGPUWait takes the start's time. A receive
    /// step's RecvWait still reads it (NCCL posts the receive buffer in between).
    #[test]
    fn a_send_steps_gpu_wait_takes_its_starts_time() {
        let reads = |states: &[u32]| {
            let mut ph = Phases {
                id: 9,
                start: 100,
                ..Phases::default()
            };
            let mut reads = 0;
            for (i, &s) in states.iter().enumerate() {
                let ts = if ph.needs_time(s as i32) {
                    reads += 1;
                    1_000 + i as u64
                } else {
                    0
                };
                ph.record(s as i32, ts, 7);
            }
            (reads, ph.t)
        };
        let send = [
            st::PROXY_STEP_SEND_GPU_WAIT,
            st::PROXY_STEP_SEND_GPU_WAIT,
            st::PROXY_STEP_SEND_PEER_WAIT,
            st::PROXY_STEP_SEND_WAIT,
        ];
        assert_eq!(reads(&send), (2, [100, 1_002, 1_003]));
        let recv = [
            st::PROXY_STEP_RECV_WAIT,
            st::PROXY_STEP_RECV_FLUSH_WAIT,
            st::PROXY_STEP_RECV_GPU_WAIT,
        ];
        assert_eq!(reads(&recv), (3, [1_000, 1_001, 1_002]));
        // Without the start (an entry the merge tests make), the state reads its own time.
        let mut ph = Phases::default();
        assert!(ph.needs_time(st::PROXY_STEP_SEND_GPU_WAIT as i32));
        ph.record(st::PROXY_STEP_SEND_GPU_WAIT as i32, 55, 0);
        assert_eq!(ph.t[0], 55);
    }

    /// Phase a of a send step whose SendGPUWait took the start's tick is the record's start in
    /// ns, whatever the carried tick converts to (the drain's calibration may be refreshed
    /// between reading the start and reading the stop); a later RecvWait (odd input) does not
    /// move it, as one by one it would not.
    #[test]
    fn a_taken_from_the_start_is_the_records_start_exactly() {
        let mut ph = Phases {
            id: 9,
            start: 100,
            ..Phases::default()
        };
        ph.record(st::PROXY_STEP_SEND_GPU_WAIT as i32, 0, 0);
        ph.record(st::PROXY_STEP_RECV_WAIT as i32, 150, 0);
        ph.record(st::PROXY_STEP_SEND_WAIT as i32, 200, 4096);
        // The drain converts the carried ticks to ns (`w`), then merges them into the step's
        // record, which starts at 5 000 ns.
        let merged = |ph: &Phases, w: [u64; 4]| {
            let mut raw = ph.to_raw(OP_STOP, 300);
            raw.w = w;
            let mut rec = EventRecord {
                start_ns: 5_000,
                ..EventRecord::default()
            };
            merge_record(&mut rec, &raw);
            rec
        };
        // Here the start's tick converts 654 ns off.
        let rec = merged(&ph, [5_654, 5_200, 5_300, 0]);
        assert_eq!(rec.p[1], 5_000);
        assert_eq!(rec.p[3], 5_300);
        assert_eq!(rec.p[4], 4096);
        // The same entry without a start: a is the carried time.
        let mut ph = Phases::default();
        ph.record(st::PROXY_STEP_SEND_GPU_WAIT as i32, 120, 0);
        let rec = merged(&ph, [5_654, 0, 0, 0]);
        assert_eq!(rec.p[1], 5_654);
    }

    /// A whole step's record carries exactly the entry's fields (times back from their
    /// offsets, bytes, count, step number), and is refused where one does not fit.
    #[test]
    fn a_whole_record_carries_the_entry_or_is_refused() {
        let mut rng = Rng(0x5eed);
        for _ in 0..10_000 {
            let start = rng.next() >> 2;
            let mut t = [0; 3];
            for x in &mut t {
                *x = match rng.next() % 3 {
                    0 => 0,
                    1 => start + rng.next() % 1000,
                    _ => start + rng.next() % (u64::from(u32::MAX) - 1),
                };
            }
            let ph = Phases {
                id: 42,
                start,
                t,
                arg: rng.next() % (1 << 32),
                retries: (rng.next() % 65_536) as u32,
                seen: rng.next() as u8,
                announced: false,
                rflags: RF_RESTARTED,
                key: 0,
            };
            let step = (rng.next() % 65_536) as u32;
            let r = ph.to_whole(99, 0xABC, step, 7).unwrap();
            assert_eq!(
                (r.ts, r.id, r.parent, r.ctx, r.state),
                (99, 42, 0xABC, 7, ph.seen)
            );
            assert_eq!(r.flags, RF_PHASES | RF_WHOLE | RF_RESTARTED);
            assert_eq!(r.w[0], start);
            assert_eq!(whole_times(&r), t);
            assert_eq!(whole_unpacked(r.w[3]), (ph.arg, ph.retries, step));
        }
        let ph = Phases {
            id: 1,
            start: 1000,
            t: [1000, 2000, 3000],
            arg: 5,
            ..Phases::default()
        };
        assert!(ph.to_whole(4000, 0, 65_535, 0).is_some());
        assert!(ph.to_whole(4000, 0, 65_536, 0).is_none(), "step number");
        let long = 1000 + u64::from(u32::MAX) - 1; // 2^32 - 2 ticks after the start
        let edge = Phases {
            t: [1000, 2000, long],
            ..ph
        };
        assert!(edge.to_whole(long, 0, 0, 0).is_some());
        let over = Phases {
            t: [1000, 2000, long + 1],
            ..ph
        };
        assert!(
            over.to_whole(long, 0, 0, 0).is_none(),
            "a time too far after the start"
        );
        let big = Phases { arg: 1 << 32, ..ph };
        assert!(big.to_whole(4000, 0, 0, 0).is_none(), "bytes");
        let tries = Phases {
            retries: 65_536,
            ..ph
        };
        assert!(
            tries.to_whole(4000, 0, 0, 0).is_none(),
            "SendPeerWait count"
        );
    }

    /// `write_whole` writes every byte of the record where the step fits: over a slot full
    /// of another record's bytes, the whole record, as `to_whole` builds it field by field.
    #[test]
    fn a_whole_record_written_in_place_leaves_no_old_byte() {
        let ph = Phases {
            id: 42,
            start: 1000,
            t: [1000, 2000, 3000],
            arg: 4096,
            retries: 3,
            seen: 0x67,
            announced: false,
            rflags: RF_RESTARTED,
            key: 7,
        };
        let mut slot = std::mem::MaybeUninit::<Raw>::uninit();
        // SAFETY: a local's storage, written whole (0xAA in every byte) before the write.
        unsafe { slot.as_mut_ptr().cast::<u8>().write_bytes(0xAA, 64) };
        // SAFETY: as above; read back only where it says it wrote the record.
        let r = unsafe {
            assert!(ph.write_whole(slot.as_mut_ptr(), 4000, 0xABC, 9, 5));
            slot.assume_init()
        };
        let want = Raw {
            ts: 4000,
            id: 42,
            parent: 0xABC,
            op: OP_STOP,
            kind: EventKind::ProxyStep as u8,
            state: 0x67,
            flags: RF_PHASES | RF_WHOLE | RF_RESTARTED,
            ctx: 5,
            w: [1000, 1 | 1001 << 32, 2001, whole_packed(4096, 3, 9)],
        };
        assert_eq!(r, want);
        assert_eq!(ph.to_whole(4000, 0xABC, 9, 5), Some(want));
    }

    #[test]
    fn states_of_other_kinds_leave_an_entry_untouched() {
        let mut ph = Phases::default();
        for s in [0, 1, 7, 13, 19, 21, 255, -5, 1 << 20] {
            ph.record(s, 5, 6);
            assert!(
                !ph.record_timed(s, 6, 5, || 5),
                "{s}: not a step's, so not published"
            );
        }
        assert_eq!(ph, Phases::default());
    }

    /// Exactly a step's six states say they are one (and are published, as a byte: each is
    /// below 256).
    #[test]
    fn a_steps_states_say_so() {
        for s in [
            st::PROXY_STEP_SEND_GPU_WAIT,
            st::PROXY_STEP_SEND_PEER_WAIT,
            st::PROXY_STEP_SEND_WAIT,
            st::PROXY_STEP_RECV_WAIT,
            st::PROXY_STEP_RECV_FLUSH_WAIT,
            st::PROXY_STEP_RECV_GPU_WAIT,
        ] {
            assert!(s < 256);
            let mut ph = Phases::default();
            assert!(ph.record_timed(s as i32, 6, 5, || 5), "{s}");
        }
    }
}
