//! Communicator contexts. The `void*` context NCCL stores per communicator is the address of
//! one slot of a static array: the plugin recognises its own contexts by address arithmetic
//! alone, so a foreign (PXN) context pointer from another process is never dereferenced
//! (spec §4.11). Communicator identity for v1–v3 (which only carry it in Coll/P2p
//! descriptors) is filled in lazily from the first descriptor that names it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU32, AtomicU64, Ordering};

/// Most communicators per process the plugin profiles; more get a NULL context.
pub const MAX_CONTEXTS: usize = 1024;

#[derive(Default)]
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
    /// When it was finalized (monotonic ns); reusable [`REUSE_AFTER_NS`] later.
    pub finalized_at: AtomicU64,
}

/// A finalized communicator's slot is reused only after its records have long been drained
/// and left the history window.
pub const REUSE_AFTER_NS: u64 = 10_000_000_000;

pub struct Contexts {
    slots: Box<[Slot]>,
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
        }
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Claim a slot and return its index, or None when all are in use. Slots of communicators
    /// finalized more than [`REUSE_AFTER_NS`] ago are reused (NCCL jobs create and destroy
    /// communicators for the whole run).
    pub fn claim(&self, now_ns: u64) -> Option<u32> {
        let fresh = |s: &Slot| {
            s.finalized.store(false, Ordering::Relaxed);
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
                fresh(s);
                return Some(i as u32);
            }
        }
        for (i, s) in self.slots.iter().enumerate() {
            if s.finalized.load(Ordering::Acquire)
                && now_ns.saturating_sub(s.finalized_at.load(Ordering::Relaxed)) > REUSE_AFTER_NS
                && s.finalized
                    .compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                s.generation.fetch_add(1, Ordering::AcqRel);
                fresh(s);
                return Some(i as u32);
            }
        }
        None
    }

    /// The communicator id records and Meta carry for slot `i`: unique across reuses.
    pub fn wire_id(&self, i: u32) -> u32 {
        match self.get(i) {
            Some(s) => i.wrapping_add(
                (MAX_CONTEXTS as u32).wrapping_mul(s.generation.load(Ordering::Acquire)),
            ),
            None => u32::MAX,
        }
    }

    /// The context pointer NCCL will hand back for slot `i`.
    pub fn ptr(&self, i: u32) -> *mut c_void {
        (&self.slots[i as usize] as *const Slot).cast_mut().cast()
    }

    /// Which of our slots `ctx` is, without dereferencing it. `None` for NULL, foreign or
    /// misaligned pointers.
    #[inline(always)]
    pub fn index_of(&self, ctx: *mut c_void) -> Option<u32> {
        let base = self.slots.as_ptr() as usize;
        let p = ctx as usize;
        let size = std::mem::size_of::<Slot>();
        let off = p.wrapping_sub(base);
        if off >= size * MAX_CONTEXTS || !off.is_multiple_of(size) {
            return None;
        }
        Some((off / size) as u32)
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
        let i = c.claim(0).unwrap();
        let j = c.claim(0).unwrap();
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
        while let Some(i) = c.claim(0) {
            all.push(i);
        }
        assert_eq!(all.len(), MAX_CONTEXTS);
        let s = c.get(5).unwrap();
        s.finalized.store(true, Ordering::Release);
        s.finalized_at.store(1, Ordering::Relaxed);
        assert_eq!(c.claim(2), None, "too recent");
        let before = c.wire_id(5);
        assert_eq!(c.claim(REUSE_AFTER_NS + 10), Some(5));
        assert_ne!(c.wire_id(5), before);
        assert_eq!(c.wire_id(5) % MAX_CONTEXTS as u32, 5);
    }
}
