//! What runs on NCCL's threads: timestamp, id, one 64-byte record pushed to this thread's
//! ring — except a ProxyStep, most events, which stays in its entry of the ring's phases
//! table from its start to its stop and then goes to the ring as one whole record
//! (`step_phases`). While it is open the ring's published entry says it exists, since when,
//! under which op and what it waits on (`Ring::open_step`, `Ring::publish_keyed`), for the
//! drain's in-flight summary (a hung step). Its start record is pushed on its own only when
//! the drain must know the step before its stop: a NetPlugin event names it as parent, a
//! newer step takes its entry, or its stop does not fit one record. A kernel channel's GPU
//! stop (record 22), which its stop follows at once, is kept on the ring and carried by the
//! stop's record (`Ring::kernel_gpu_stop`). Nothing else — no
//! allocation, no lock, no syscall (the clock is a counter read), no waiting. All
//! interpretation happens later on the drain thread (`completion`).

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use ncclprof_shared::kind::EventKind;

use crate::Plugin;
use crate::clock::{counter, now_raw};
use crate::context::SlotsAt;
use crate::handle;
use crate::ring::{
    self, OP_START, OP_STATE, OP_STOP, RF_ARGS_NULL, RF_RESTARTED, Raw, RecentStart, Ring,
    first_sweep_record,
};
use crate::step_phases::Phases;

const PROXY_STEP: u8 = EventKind::ProxyStep as u8;
const KERNEL_CH: u8 = EventKind::KernelCh as u8;
const KERNEL_CH_STOP: i32 = ncclprof_shared::kind::state::KERNEL_CH_STOP as i32;

/// The phases entry of step `id` if this thread's ring issued it and it still holds it.
#[inline(always)]
#[allow(clippy::mut_from_ref)] // the ring's owner only, like `Ring::phases_of`
fn phases_held(ring: &Ring, id: u64) -> Option<&mut Phases> {
    if handle::ring_of(id) != ring.index() {
        return None; // another thread's step (NCCL keeps a step on one thread)
    }
    // SAFETY: `ring` is this thread's (from `mine`), and no other entry reference is live.
    let ph = unsafe { ring.phases_of(handle::seq_of(id)) };
    (ph.id == id).then_some(ph)
}

/// Context index for a start, or `None` if the event must not be recorded (NULL context =
/// a communicator the plugin chose not to profile). A non-NULL context that is not ours is a
/// foreign PXN context (spec §4.11): recorded with an unknown context, never dereferenced.
#[inline(always)]
fn context_index(p: &Plugin, ctx: *mut c_void) -> Option<u32> {
    if ctx.is_null() {
        return None;
    }
    Some(p.contexts.index_of(ctx).unwrap_or(u32::MAX))
}

/// Record a start. `raw` has kind, parent and payload filled by the version shim.
/// Returns the handle to give NCCL (NULL if nothing was recorded).
#[inline(always)]
pub fn start(p: &'static Plugin, ctx: *mut c_void, kind: EventKind, mut raw: Raw) -> *mut c_void {
    let Some(ci) = context_index(p, ctx) else {
        return std::ptr::null_mut();
    };
    // A step's parent, its ProxyOp, was started on this (proxy) thread, which finds the ring
    // without a TLS lookup (`RingPool::mine_for`); steps are most starts. Other kinds' parents
    // are often another thread's (a ProxyOp's Coll, on the user's thread) or another
    // process's (PXN): those go through `MY_RING` directly.
    let ring = if kind == EventKind::ProxyStep {
        p.rings.mine_for(raw.parent)
    } else {
        p.rings.mine()
    };
    let Some(ring) = ring else {
        p.rings.no_ring[kind as usize].fetch_add(1, Ordering::Relaxed);
        return std::ptr::null_mut();
    };
    let seq = ring.next_seq();
    let id = handle::make(kind, ring.index(), seq);
    raw.ts = now_raw();
    raw.id = id;
    raw.op = OP_START;
    raw.kind = kind as u8;
    raw.ctx = ci;
    if kind == EventKind::ProxyStep {
        step_start(p, ring, seq, &mut raw);
        // Not pushed: the step goes to the ring whole at its stop (`step_phases`).
        return id as *mut c_void;
    }
    if kind == EventKind::NetPlugin
        && handle::kind_of(raw.parent) == Some(EventKind::ProxyStep)
        && let Some(ph) = phases_held(ring, raw.parent)
    {
        // Its parent step must be open at the drain before it (completion links by id).
        announce(p, ring, ph, raw.ts);
    }
    // A full ring drops the record (counted) but still hands out the id, so children keep a
    // parent to refer to.
    if first_sweep_record(OP_START, kind as u8) {
        ring.push_marked(&raw);
    } else {
        ring.push(&raw);
    }
    id as *mut c_void
}

/// A ProxyStep's start `raw` (sequence number `seq`), kept in its phases entry and published
/// for the drain instead of pushed.
#[inline(always)]
fn step_start(p: &Plugin, ring: &Ring, seq: u64, raw: &mut Raw) {
    let step = raw.w[0] as u32;
    if restarts_unannounced(ring, raw.parent, step, seq) {
        raw.flags |= RF_RESTARTED;
    }
    // SAFETY: `ring` is this thread's, and no other entry reference is live.
    let ph = unsafe { ring.phases_of(seq) };
    if ph.id != 0 {
        if abandoned_unannounced(ring, ph) {
            // A restart's abandoned handle the restart did not tell (`restarts_unannounced`
            // runs before this, on the newer start): forgotten now, as the drain would.
        } else {
            // The entry still holds an older open step: to the ring with what it has so far
            // (its later states and its stop will be records of their own).
            announce(p, ring, ph, raw.ts);
            if ph.seen != 0 {
                ring.push(&ph.to_raw(OP_STATE, raw.ts));
            }
        }
    }
    let key = ring.open_step(seq, raw.ts, raw.parent, step, raw.ctx, raw.flags);
    *ph = Phases {
        id: raw.id,
        start: raw.ts,
        rflags: raw.flags,
        key,
        ..Phases::default()
    };
}

/// Record a ProxyStep's start (most starts) on its short path, where `guard::short_paths`,
/// the context is one of ours, its op `parent` is this thread's (a step is started on its
/// op's proxy thread), the step's phases entry is free and the table of recent starts holds
/// no start of the same op and step number (which this start may restart: spec §4.6).
/// Returns its id, as [`start`] would record it; `None`, having changed nothing, where any
/// of that does not hold: the caller then records it the general way ([`start`]). No call,
/// as [`step_state`]'s short path, so that it can be inlined into the entry point and the
/// panic guard around it costs nothing (BENCHMARKS.md §1, "A step's start without a call").
#[inline(always)]
pub fn step_start_short(
    contexts: SlotsAt,
    rings: &'static [Ring],
    ctx: *mut c_void,
    parent: u64,
    step: u32,
) -> Option<u64> {
    if parent == 0 {
        return None; // RF_PARENT_NULL, and no restart check (`restarts_unannounced`)
    }
    let ci = contexts.index_of(ctx)?;
    let ring = ring::mine_by_id(rings, parent)?;
    // The clock before the ring's loads, as in `step_stop`.
    let ts = counter();
    let seq = ring.coming_seq();
    // SAFETY: `ring` is this thread's (`mine_by_id`), and no other entry reference is live.
    let ph = unsafe { ring.phases_of(seq) };
    if ph.id != 0 {
        return None; // an older step still holds the entry (`step_start` announces it)
    }
    // SAFETY: as above, for the table of recent starts (the phases entry is another table).
    let (recent, key) = unsafe { ring.recent_start(parent, step) };
    if recent.seq != 0 && recent.key == key {
        return None; // perhaps a restart: `restarts_unannounced` tells
    }
    let seq = ring.next_seq();
    let id = handle::make(EventKind::ProxyStep, ring.index(), seq);
    *recent = RecentStart { key, seq };
    let key = ring.open_step(seq, ts, parent, step, ci, 0);
    *ph = Phases {
        id,
        start: ts,
        key,
        ..Phases::default()
    };
    Some(id)
}

/// Whether the step starting now (`seq`, under `parent`, step number `step`) restarts one its
/// thread started earlier and never stopped, which NCCL then abandons (spec §4.6: a receive
/// step whose buffer was not posted is started again on the next progress pass). When the
/// abandoned step never reached the drain, it is forgotten here, as the drain forgets one
/// it knows (`Completion::start`); the drain tells those itself.
#[inline(always)]
fn restarts_unannounced(ring: &Ring, parent: u64, step: u32, seq: u64) -> bool {
    if parent == 0 {
        // Without its op nothing tells one op's step from another's (NCCL records no state
        // of such a step, spec §4.2): as the drain, which finds restarts under their op.
        return false;
    }
    // SAFETY: `ring` is this thread's, and no other reference into its table is live.
    let (recent, key) = unsafe { ring.recent_start(parent, step) };
    let prev = std::mem::replace(recent, RecentStart { key, seq });
    if prev.seq == 0 || prev.key != key {
        return false;
    }
    // SAFETY: as above, for the phases table (the reference ends in this block).
    let old = unsafe { ring.phases_of(prev.seq) };
    if old.id != handle::make(EventKind::ProxyStep, ring.index(), prev.seq)
        || old.announced
        || old.seen != 0
    {
        return false; // stopped, announced (the drain tells), or it has run
    }
    let (old_parent, old_step, _) = ring.step_fields(prev.seq);
    if old_parent != parent || old_step != step {
        return false; // a hash collision
    }
    old.id = 0;
    ring.close_step(prev.seq);
    true
}

/// Whether the open step in `ph` (this thread's, its entry about to be taken) never reached
/// the drain, recorded no state, and its op started the same step number again since: NCCL
/// abandoned it (spec §4.6). The newer start's restart check misses it when another step's
/// start took their entry in the table of recent starts in between.
#[inline]
fn abandoned_unannounced(ring: &Ring, ph: &Phases) -> bool {
    let seq = handle::seq_of(ph.id);
    if ph.announced || ph.seen != 0 {
        return false;
    }
    let (parent, step, _) = ring.step_fields(seq);
    if parent == 0 {
        return false;
    }
    // SAFETY: this thread's ring; no other reference into its recent-starts table is live.
    let (recent, key) = unsafe { ring.recent_start(parent, step) };
    recent.key == key && recent.seq > seq
}

/// Push the start record of the open step in `ph` (this thread's), if it was not pushed:
/// the drain must know the step before a record that names it other than its stop. `now`:
/// the record's place in the ring's time order (see `Phases::start_raw`).
#[inline]
fn announce(p: &Plugin, ring: &Ring, ph: &mut Phases, now: u64) {
    if ph.announced {
        return;
    }
    let seq = handle::seq_of(ph.id);
    let (parent, step, ctx) = ring.step_fields(seq);
    let rank = p.contexts.rank(ctx);
    ring.close_step(seq);
    ring.push(&ph.start_raw(parent, step, ctx, rank, now));
    ph.announced = true;
    ph.key = Ring::announced_key(ph.key);
}

/// Record a ProxyStep's stop (most stops) on its short path, where `guard::short_paths`, the
/// step is this thread's, its entry holds it, it was not announced, it fits one whole record
/// and the ring takes that record without the push's cold work: the whole record, as
/// `step_stopped` would push it, written straight into its ring slot. Returns false where
/// any of that does not hold, having changed nothing the drain or the general path can see
/// (the slot may be partly written, but it is not published, and the next push writes it
/// whole): the caller then records it the general way ([`stop`]). No call, as
/// [`step_state`]'s short path.
#[inline(always)]
pub fn step_stop(rings: &'static [Ring], h: *mut c_void) -> bool {
    let id = h as u64;
    let Some(ring) = ring::mine_by_id(rings, id) else {
        return false;
    };
    let seq = handle::seq_of(id);
    // SAFETY: `ring` is this thread's (`mine_by_id`), and no other entry reference is live.
    let ph = unsafe { ring.phases_of(seq) };
    if ph.id != id || ph.announced {
        return false;
    }
    // The clock before the ring's loads, where the general path reads it: a counter read
    // that follows them waits for them (BENCHMARKS.md §1, "Short paths without a call").
    let ts = counter();
    let Some(slot) = ring.plain_slot() else {
        return false;
    };
    let (parent, step, ctx) = ring.step_fields(seq);
    // SAFETY: the slot is the producer's until published.
    if !unsafe { ph.write_whole(ring.slot_ptr(&slot), ts, parent, step, ctx) } {
        return false;
    }
    // Closed before the record is published (as in `step_stopped`).
    ring.close_step(seq);
    ph.id = 0; // free the entry
    ring.publish_at(slot);
    true
}

/// The stop of step `id`, whose phases entry `ph` on this thread's `ring` holds it, at `ts`:
/// one whole record if it fits and its start was not pushed, else a stop record carrying
/// its states. False, with the entry freed, where it recorded no state: the caller pushes
/// the plain stop record any kind's stop is.
#[inline(always)]
fn step_stopped(p: &Plugin, ring: &Ring, ph: &mut Phases, id: u64, ts: u64) -> bool {
    if !ph.announced {
        let seq = handle::seq_of(id);
        let (parent, step, ctx) = ring.step_fields(seq);
        if let Some(whole) = ph.to_whole(ts, parent, step, ctx) {
            // Closed before the push, which publishes it: a drain that reads the
            // record no longer finds the step open in the published entries.
            ring.close_step(seq);
            ph.id = 0; // free the entry
            ring.push(&whole);
            return true;
        }
        announce(p, ring, ph, ts); // too long or too large for one record: start, then stop
    }
    let rec = ph.to_raw(OP_STOP, ts);
    ph.id = 0; // free the entry
    if rec.state == 0 {
        return false;
    }
    ring.push(&rec);
    true
}

/// Record a stop of any kind (the general path: [`step_stop`] is a ProxyStep's short one).
#[inline(always)]
pub fn stop(p: &'static Plugin, h: *mut c_void) {
    let id = h as u64;
    let kind = handle::kind_of(id).map_or(u8::MAX, |k| k as u8);
    let Some(ring) = p.rings.mine_for(id) else {
        if let Some(c) = p.rings.no_ring.get(kind as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        return;
    };
    let ts = now_raw();
    if kind == KERNEL_CH {
        // SAFETY: `ring` is this thread's, and no other reference to the slot is live.
        let kept = unsafe { ring.kernel_gpu_stop() };
        if kept.0 == id {
            // Its GPU stop, recorded just before: carried by this record (`state`).
            let gpu_stop = std::mem::take(kept).1;
            ring.push(&Raw {
                ts,
                id,
                op: OP_STOP,
                kind,
                state: KERNEL_CH_STOP as u8,
                w: [gpu_stop, 0, 0, 0],
                ..Raw::default()
            });
            return;
        }
        if kept.0 != 0 {
            // Another channel's, whose stop is evidently not next (not NCCL's order): out as
            // its own record now, ahead of this stop, rather than kept for who knows how long.
            // SAFETY: this thread's ring; `kept` is not used after this.
            unsafe { ring.flush_kernel_gpu_stop() };
        }
    }
    if kind == PROXY_STEP
        && let Some(ph) = phases_held(ring, id)
        && step_stopped(p, ring, ph, id, ts)
    {
        return;
    }
    ring.push(&Raw {
        ts,
        id,
        op: OP_STOP,
        kind,
        ..Raw::default()
    });
}

/// Record a ProxyStep's state (most calls) on its short path, where `guard::short_paths`
/// (the raw clock is the counter), the step is this thread's and its entry holds it.
/// Returns false, having changed nothing, where the step is not: the caller then records it
/// the general way ([`state`]). The short path makes no call, so the entry point that inlines
/// it saves no register (BENCHMARKS.md §1, "Short paths without a call"). `arg`: the
/// state-args word (0 for a NULL args pointer, as the general path reads it).
#[inline(always)]
pub fn step_state(rings: &'static [Ring], h: *mut c_void, state: i32, arg: u64) -> bool {
    let id = h as u64;
    // A state that always takes a time reads the clock before the step's entry: the counter
    // read then overlaps the entry's load (with a proxy thread's many steps open, seldom an
    // L1 hit) instead of waiting behind it (BENCHMARKS.md §1, "The clock before the entry").
    // The others read it only where they use it.
    let t = if Phases::always_needs_time(state) {
        counter()
    } else {
        0
    };
    let Some(ring) = ring::mine_by_id(rings, id) else {
        return false;
    };
    // SAFETY: `ring` is this thread's (`mine_by_id`), and no other entry reference is live.
    let ph = unsafe { ring.phases_of(handle::seq_of(id)) };
    if ph.id != id {
        return false;
    }
    // A repeat that only counts (a retried send's SendPeerWait) reads no clock.
    if ph.record_timed(state, arg, t, counter) {
        publish_step_state(ring, ph, id, state);
    }
    true
}

/// For the drain, should step `id` (held in `ph` on this thread's `ring`) stay open (hung):
/// the state it recorded last, what it waits on. Only a state a step has (`Phases::record_timed`
/// said so, a value below 256): one it does not have, ignored, leaves the last one shown.
#[inline(always)]
fn publish_step_state(ring: &Ring, ph: &Phases, id: u64, state: i32) {
    ring.publish_keyed(handle::seq_of(id), ph.key, state as u8);
}

/// Record a state. `kind`: the handle's (`handle::kind_of`, which the shim decoded to read
/// the args); `args` = the state-args words the shim read (`None` = NULL args pointer).
#[inline(always)]
pub fn state(
    p: &'static Plugin,
    h: *mut c_void,
    kind: Option<EventKind>,
    state: i32,
    args: Option<[u64; 2]>,
) {
    let id = h as u64;
    let kind = kind.map_or(u8::MAX, |k| k as u8);
    let Some(ring) = p.rings.mine_for(id) else {
        if let Some(c) = p.rings.no_ring.get(kind as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        return;
    };
    let [a0, a1] = args.unwrap_or_default();
    if kind == KERNEL_CH && state == KERNEL_CH_STOP && args.is_some() {
        // The GPU stop, followed at once by the event's stop on this thread (spec §4.4):
        // kept for the stop's record to carry, no clock read (its host time would go unused).
        // One kept before it whose stop did not come goes out as its own record first.
        // SAFETY: `ring` is this thread's, and no other reference to the slot is live.
        let kept = unsafe { ring.kernel_gpu_stop() };
        if kept.0 != 0 && kept.0 != id {
            // SAFETY: this thread's ring; `kept` is not used after this.
            unsafe { ring.flush_kernel_gpu_stop() };
        }
        // SAFETY: as above; the flush's reference has ended.
        *unsafe { ring.kernel_gpu_stop() } = (id, a0);
        return;
    }
    if kind == PROXY_STEP
        && let Some(ph) = phases_held(ring, id)
    {
        // A repeat that only counts (a retried send's SendPeerWait) reads no clock.
        if ph.record_now(state, a0, now_raw) {
            publish_step_state(ring, ph, id, state);
        }
        return;
    }
    ring.push(&Raw {
        ts: now_raw(),
        id,
        parent: a0,
        op: OP_STATE,
        kind,
        state: state.clamp(0, 255) as u8,
        flags: if args.is_none() { RF_ARGS_NULL } else { 0 },
        ctx: u32::MAX,
        w: [a1, 0, 0, 0],
    });
}
