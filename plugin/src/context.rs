//! Communicator contexts. The `void*` context NCCL stores per communicator is the address of
//! one slot of a static array: the plugin recognises its own contexts by address arithmetic
//! alone, so a foreign (PXN) context pointer from another process is never dereferenced
//! (spec §4.11). Communicator identity for v1–v3 (which only carry it in Coll/P2p
//! descriptors) is filled in lazily from the first descriptor that names it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// Most communicators per process the plugin profiles; more get a NULL context.
pub const MAX_CONTEXTS: usize = 1024;

/// One communicator's slot. A cache line each: NCCL's threads find a context's slot by its
/// address (`Contexts::index_of`), and a power-of-two size makes that a shift, not a
/// division by a multiply (BENCHMARKS.md §1, "Instructions per call"); slots written at a
/// communicator's init share no line with another's.
#[derive(Default)]
#[repr(align(64))]
pub struct Slot {
    pub used: AtomicBool,
    pub finalized: AtomicBool,
    pub comm_hash: AtomicU64,
    pub name_id: AtomicU16,
    pub nranks: AtomicI32,
    pub nnodes: AtomicI32,
    pub rank: AtomicI32,
    pub api: AtomicU32,
    /// Bumped when identity fields change, so the drain thread re-publishes.
    pub version: AtomicU32,
    /// Bumped each time the slot is reused for a new communicator (see [`Contexts::wire_id`]).
    pub generation: AtomicU32,
    /// When it was finalized (monotonic ns); see [`Contexts::claim`] for when it is reused.
    pub finalized_at: AtomicU64,
    /// `generation + 1` once the drain is done with the finalized communicator of that
    /// generation: every record stamped before its finalize read, and an attached viewer
    /// sent its final state (see `stream::Drain::retire_finalized`). Tagged with the
    /// generation so that a drain that checked the slot's previous communicator cannot mark
    /// the next one.
    pub retired: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 64);

impl Slot {
    /// Its communicator's identity, under the id `wire_id` (fields read relaxed: a caller
    /// that races a reuse checks the generation around it, as `stream::comm_infos` does).
    pub fn identity(&self, wire_id: u32) -> SlotIdentity {
        SlotIdentity {
            wire_id,
            comm_hash: self.comm_hash.load(Ordering::Relaxed),
            name_id: self.name_id.load(Ordering::Relaxed),
            nranks: self.nranks.load(Ordering::Relaxed),
            nnodes: self.nnodes.load(Ordering::Relaxed),
            rank: self.rank.load(Ordering::Relaxed),
            api: self.api.load(Ordering::Relaxed),
        }
    }
}

/// A finalized communicator's slot is reused once the drain retired it, and never sooner
/// than this after its finalize (a late callback on its context must not land on a new
/// communicator); the caller may ask for longer ([`Contexts::claim`]).
pub const REUSE_MIN_NS: u64 = 1_000_000_000;

/// A finalized communicator's slot is reused after this even without the drain (not running,
/// or stopped): its records have long been drained or lost by then.
pub const REUSE_AFTER_NS: u64 = 10_000_000_000;

/// A slot's communicator as read at one moment ([`Slot::identity`]): what Meta describes it
/// by, and what is kept of it when its slot is claimed again ([`Contexts::past`]), since its
/// records (carrying its wire id) may still be in the history, which is not aged when a
/// dump file is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotIdentity {
    /// [`Contexts::wire_id`] of the slot in that generation.
    pub wire_id: u32,
    pub comm_hash: u64,
    pub name_id: u16,
    pub nranks: i32,
    pub nnodes: i32,
    pub rank: i32,
    pub api: u32,
}

/// The id records carry for slot `i` in generation `generation` ([`Contexts::wire_id`]).
pub fn wire_id_of(i: u32, generation: u32) -> u32 {
    i.wrapping_add((MAX_CONTEXTS as u32).wrapping_mul(generation))
}

/// Most past communicators kept (the newest; 32 B each). A job that makes a communicator a
/// minute keeps the last 2.8 days'.
pub const MAX_PAST: usize = 4096;

/// The address of a [`Contexts`]' slots (they never move): [`SlotsAt::index_of`] is
/// [`Contexts::index_of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotsAt(pub usize);

impl SlotsAt {
    /// [`Contexts::index_of`] of the contexts whose slots lie here.
    #[inline(always)]
    pub fn index_of(self, ctx: *mut c_void) -> Option<u32> {
        let size = std::mem::size_of::<Slot>();
        let off = (ctx as usize).wrapping_sub(self.0);
        if off >= size * MAX_CONTEXTS || !off.is_multiple_of(size) {
            return None;
        }
        Some((off / size) as u32)
    }
}

pub struct Contexts {
    slots: Box<[Slot]>,
    /// Communicators whose slots were reused, oldest first, at most [`MAX_PAST`]. Locked only
    /// when a slot is reused (a communicator's init) and when a dump is written.
    past: std::sync::Mutex<std::collections::VecDeque<SlotIdentity>>,
}

impl Default for Contexts {
    fn default() -> Self {
        Self::new()
    }
}

impl Contexts {
    pub fn new() -> Contexts {
        Contexts {
            slots: (0..MAX_CONTEXTS).map(|_| Slot::default()).collect(),
            past: Default::default(),
        }
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Claim a slot and return its index, or None when all are in use. NCCL jobs create and
    /// destroy communicators for the whole run: the slot of a finalized one is reused once
    /// the drain retired it, at least `min_age_ns` (and [`REUSE_MIN_NS`]) after its finalize,
    /// and after [`REUSE_AFTER_NS`] in any case. (Only the 10 s bound once: a process that
    /// created 1 024 communicators in 10 s profiled none after them.)
    pub fn claim(&self, now_ns: u64, min_age_ns: u64) -> Option<u32> {
        let fresh = |s: &Slot| {
            s.comm_hash.store(0, Ordering::Relaxed);
            s.name_id.store(0, Ordering::Relaxed);
            s.rank.store(-1, Ordering::Relaxed);
            s.nranks.store(0, Ordering::Relaxed);
            s.nnodes.store(0, Ordering::Relaxed);
        };
        for (i, s) in self.slots.iter().enumerate() {
            if s.used
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                s.finalized.store(false, Ordering::Relaxed);
                fresh(s);
                return Some(i as u32);
            }
        }
        let min_age = min_age_ns.max(REUSE_MIN_NS);
        let reusable = |s: &Slot| {
            let age = now_ns.saturating_sub(s.finalized_at.load(Ordering::Relaxed));
            let generation = s.generation.load(Ordering::Acquire);
            let retired = s.retired.load(Ordering::Acquire) == generation.wrapping_add(1);
            age > min_age && (retired || age > REUSE_AFTER_NS)
        };
        for (i, s) in self.slots.iter().enumerate() {
            // `finalized` first: its Acquire makes the finalize's `finalized_at` visible (read
            // first, a stale time could let a slot finalized a moment ago pass for old).
            if !s.finalized.load(Ordering::Acquire) || !reusable(s) {
                continue;
            }
            if s.finalized
                .compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // Checked again now that the slot is ours: another thread may have reused it and
            // its next communicator been finalized between the check and the exchange.
            if !reusable(s) {
                s.finalized.store(true, Ordering::Release);
                // A Meta read in between may have said "not finalized": send it again.
                s.version.fetch_add(1, Ordering::Release);
                continue;
            }
            self.remember(i as u32);
            s.generation.fetch_add(1, Ordering::AcqRel);
            // A reader that sees any identity field reset below sees the new generation
            // too (it checks the generation around its reads: `stream::comm_infos`).
            std::sync::atomic::fence(Ordering::Release);
            fresh(s);
            return Some(i as u32);
        }
        None
    }

    /// Keep the identity slot `i` holds now, before it is reused (see [`SlotIdentity`]).
    fn remember(&self, i: u32) {
        let Some(s) = self.get(i) else { return };
        let c = s.identity(self.wire_id(i));
        let mut past = self.past.lock().unwrap_or_else(|e| e.into_inner());
        if past.len() == MAX_PAST {
            past.pop_front();
        }
        past.push_back(c);
    }

    /// Communicators whose slots were reused, oldest first (the newest [`MAX_PAST`]).
    pub fn past(&self) -> Vec<SlotIdentity> {
        let past = self.past.lock().unwrap_or_else(|e| e.into_inner());
        past.iter().copied().collect()
    }

    /// The communicator id records and Meta carry for slot `i`: unique across reuses.
    pub fn wire_id(&self, i: u32) -> u32 {
        match self.get(i) {
            Some(s) => wire_id_of(i, s.generation.load(Ordering::Acquire)),
            None => u32::MAX,
        }
    }

    /// The rank of slot `i`'s communicator (-1: unknown or no such slot).
    pub fn rank(&self, i: u32) -> i32 {
        self.get(i).map_or(-1, |s| s.rank.load(Ordering::Relaxed))
    }

    /// The context pointer NCCL will hand back for slot `i`.
    pub fn ptr(&self, i: u32) -> *mut c_void {
        (&self.slots[i as usize] as *const Slot).cast_mut().cast()
    }

    /// Which of our slots `ctx` is, without dereferencing it. `None` for NULL, foreign or
    /// misaligned pointers.
    #[inline(always)]
    pub fn index_of(&self, ctx: *mut c_void) -> Option<u32> {
        self.slots_at().index_of(ctx)
    }

    /// Where the slots lie: [`Contexts::index_of`] without this (a ProxyStep's start on its
    /// short path finds it beside the rings, `guard::ShortPaths::contexts`).
    pub fn slots_at(&self) -> SlotsAt {
        SlotsAt(self.slots.as_ptr() as usize)
    }

    pub fn get(&self, i: u32) -> Option<&Slot> {
        self.slots.get(i as usize)
    }

    /// v1–v3: record the communicator identity carried by a Coll/P2p descriptor.
    #[inline]
    pub fn learn_identity(&self, i: u32, comm_hash: u64, name_id: u16, rank: i32) {
        if let Some(s) = self.get(i)
            && s.comm_hash.load(Ordering::Relaxed) != comm_hash
        {
            s.comm_hash.store(comm_hash, Ordering::Relaxed);
            s.name_id.store(name_id, Ordering::Relaxed);
            s.rank.store(rank, Ordering::Relaxed);
            s.version.fetch_add(1, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_map_back_and_foreign_ones_do_not() {
        let c = Contexts::new();
        let i = c.claim(0, 0).unwrap();
        let j = c.claim(0, 0).unwrap();
        assert_ne!(i, j);
        assert_eq!(c.index_of(c.ptr(i)), Some(i));
        assert_eq!(c.index_of(c.ptr(j)), Some(j));
        assert_eq!(c.index_of(std::ptr::null_mut()), None);
        assert_eq!(c.index_of(0xdead_beef_usize as *mut c_void), None);
        let mis = (c.ptr(i) as usize + 1) as *mut c_void;
        assert_eq!(c.index_of(mis), None);
    }

    #[test]
    fn finalized_slots_are_reused_with_a_new_wire_id() {
        let c = Contexts::new();
        let mut all = Vec::new();
        while let Some(i) = c.claim(0, 0) {
            all.push(i);
        }
        assert_eq!(all.len(), MAX_CONTEXTS);
        let s = c.get(5).unwrap();
        s.finalized.store(true, Ordering::Release);
        s.finalized_at.store(1, Ordering::Relaxed);
        assert_eq!(c.claim(2, 0), None, "too recent");
        let before = c.wire_id(5);
        assert_eq!(c.claim(REUSE_AFTER_NS + 10, 0), Some(5));
        assert_ne!(c.wire_id(5), before);
        assert_eq!(c.wire_id(5) % MAX_CONTEXTS as u32, 5);
    }

    /// A slot the drain retired is reused from [`REUSE_MIN_NS`] (or the age asked for) after
    /// its finalize; one it did not, or retired for an earlier generation, only after
    /// [`REUSE_AFTER_NS`].
    #[test]
    fn a_retired_slot_is_reused_sooner() {
        let c = Contexts::new();
        while c.claim(0, 0).is_some() {}
        for (i, retired) in [(7, 1), (9, 0), (11, 1)] {
            let s = c.get(i).unwrap();
            s.finalized_at.store(1, Ordering::Relaxed);
            s.finalized.store(true, Ordering::Release);
            s.retired.store(retired, Ordering::Release); // generation 0: retired is 1
        }
        // Slot 11 is at generation 1: its mark is generation 0's.
        c.get(11).unwrap().generation.store(1, Ordering::Release);
        assert_eq!(c.claim(REUSE_MIN_NS, 0), None, "too recent, retired or not");
        assert_eq!(
            c.claim(REUSE_MIN_NS + 10, 5 * REUSE_MIN_NS),
            None,
            "younger than asked"
        );
        assert_eq!(c.claim(REUSE_MIN_NS + 10, 0), Some(7));
        assert_eq!(
            c.claim(REUSE_MIN_NS + 10, 0),
            None,
            "not retired, or not this generation"
        );
        assert_eq!(c.claim(REUSE_AFTER_NS + 10, 0), Some(9));
        assert_eq!(c.claim(REUSE_AFTER_NS + 10, 0), Some(11));
    }

    /// A reused slot's previous communicator is remembered with the id its records carry;
    /// only the newest [`MAX_PAST`] are kept.
    #[test]
    fn a_reused_slots_communicator_is_remembered() {
        let c = Contexts::new();
        while c.claim(0, 0).is_some() {}
        let s = c.get(3).unwrap();
        s.comm_hash.store(0xfeed, Ordering::Relaxed);
        s.name_id.store(12, Ordering::Relaxed);
        s.rank.store(5, Ordering::Relaxed);
        s.nranks.store(8, Ordering::Relaxed);
        let before = c.wire_id(3);
        for round in 0..MAX_PAST as u64 + 2 {
            let s = c.get(3).unwrap();
            s.finalized_at.store(1, Ordering::Relaxed);
            s.finalized.store(true, Ordering::Release);
            assert_eq!(c.claim(REUSE_AFTER_NS + 10 + round, 0), Some(3));
            if round == 0 {
                let past = c.past();
                assert_eq!(past.len(), 1);
                assert_eq!(
                    (past[0].wire_id, past[0].comm_hash, past[0].name_id),
                    (before, 0xfeed, 12)
                );
                assert_eq!((past[0].rank, past[0].nranks), (5, 8));
                assert_ne!(c.wire_id(3), before, "a new id for the new communicator");
                assert_eq!(c.get(3).unwrap().comm_hash.load(Ordering::Relaxed), 0);
            }
        }
        let past = c.past();
        assert_eq!(past.len(), MAX_PAST);
        assert_eq!(
            past.last().unwrap().wire_id + MAX_CONTEXTS as u32,
            c.wire_id(3)
        );
    }
}
