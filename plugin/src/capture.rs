//! What runs on NCCL's threads: timestamp, id, one 64-byte record pushed to this thread's
//! ring — except a ProxyStep's states, which go into the step's entry of the ring's phases
//! table and reach the ring with its stop (`step_phases`), the latest also into a word the
//! drain may read while the step is open (`Ring::publish_state`: what a hung step waits
//! on). Nothing else — no allocation, no lock, no syscall (the clock is a counter read), no
//! waiting. All interpretation happens later on the drain thread (`completion`).

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use ncclprof_shared::kind::EventKind;

use crate::Plugin;
use crate::clock::now_raw;
use crate::handle;
use crate::ring::{OP_START, OP_STATE, OP_STOP, RF_ARGS_NULL, Raw, Ring};
use crate::step_phases::Phases;

const PROXY_STEP: u8 = EventKind::ProxyStep as u8;

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
        // SAFETY: `ring` is this thread's, and no other entry reference is live.
        let ph = unsafe { ring.phases_of(seq) };
        if ph.id != 0 && ph.seen != 0 {
            // The entry still holds an older open step: its states so far go to the ring
            // now (its later ones will be records of their own).
            ring.push(&ph.to_raw(OP_STATE, raw.ts));
        }
        *ph = Phases {
            id,
            start: raw.ts,
            ..Phases::default()
        };
    }
    // A full ring drops the record (counted) but still hands out the id, so children keep a
    // parent to refer to.
    ring.push(&raw);
    id as *mut c_void
}

/// Record a stop.
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
    if kind == PROXY_STEP
        && let Some(ph) = phases_held(ring, id)
    {
        let rec = ph.to_raw(OP_STOP, ts);
        ph.id = 0; // free the entry
        if rec.state != 0 {
            ring.push(&rec);
            return;
        }
    }
    ring.push(&Raw {
        ts,
        id,
        op: OP_STOP,
        kind,
        ..Raw::default()
    });
}

/// Record a state. `args` = the state-args words the shim read (`None` = NULL args pointer).
#[inline(always)]
pub fn state(p: &'static Plugin, h: *mut c_void, state: i32, args: Option<[u64; 2]>) {
    let id = h as u64;
    let kind = handle::kind_of(id).map_or(u8::MAX, |k| k as u8);
    let Some(ring) = p.rings.mine_for(id) else {
        if let Some(c) = p.rings.no_ring.get(kind as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        return;
    };
    let [a0, a1] = args.unwrap_or_default();
    if kind == PROXY_STEP
        && let Some(ph) = phases_held(ring, id)
    {
        // A repeat that only counts (a retried send's SendPeerWait) reads no clock.
        let ts = if ph.needs_time(state) { now_raw() } else { 0 };
        ph.record(state, ts, a0);
        // For the drain, should the step stay open (hung): what it waits on.
        ring.publish_state(handle::seq_of(id), state.clamp(0, 255) as u8);
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
