//! Open ProxySteps and kernel channels, found without hashing.
//!
//! Steps are most of all events (8 per ProxyOp per channel per collective), and kernel
//! channels most of a job without network traffic (one per channel per collective); both
//! live for microseconds, are leaves (no event names one as its parent, but a NetPlugin
//! event its step) and get ids that are sequential per capture ring (see `handle`). A
//! direct-mapped table indexed by the id's ring and sequence therefore finds nearly every
//! open one in one array access, its record built and finished where it lies; one whose slot
//! is still held by an older open event is kept by the caller in the general table instead,
//! so nothing is ever lost to a collision.

use ncclprof_shared::record::EventRecord;

/// Open ProxySteps: 16 384 slots × 104 B ≈ 1.7 MB, allocated once (steps of thousands of
/// ops may be open at once in one pass, see `Completion::pass`).
pub type OpenSteps = OpenSlab<{ 1 << 14 }>;

/// Open kernel channels: 256 slots × 104 B = 26 KB. A process has at most 64 channels of
/// each of the few collectives its GPU runs at once open, and a proxy thread starts a
/// collective's channels one after the other, so they fill neighbouring slots; more go to
/// the general table. Small, because every event takes a sequence number: in a job with
/// network traffic a channel's slot is one its ring's steps have moved far past, and 1 024
/// slots (104 KB) cost the drain bench's step mix 11 % more last-level write misses than
/// the general table they replace, 256 slots 1.6 %.
pub type OpenKernelChs = OpenSlab<256>;

/// A direct-mapped table of open events' records, `SLOTS` (a power of two) of them.
pub struct OpenSlab<const SLOTS: usize> {
    /// Id of the event in each slot (0 = free).
    ids: Box<[u64]>,
    recs: Box<[EventRecord]>,
    len: usize,
}

impl<const SLOTS: usize> OpenSlab<SLOTS> {
    #[inline(always)]
    fn slot(id: u64) -> usize {
        const { assert!(SLOTS.is_power_of_two()) };
        // Sequence in the low 48 bits, ring index above it: spread rings over the table.
        let seq = id & ((1 << 48) - 1);
        let ring = (id >> 48) & 0x7FF;
        (seq.wrapping_add(ring.wrapping_mul(0x9E37)) as usize) & (SLOTS - 1)
    }
}

impl<const SLOTS: usize> Default for OpenSlab<SLOTS> {
    fn default() -> Self {
        OpenSlab {
            ids: vec![0; SLOTS].into_boxed_slice(),
            recs: vec![EventRecord::default(); SLOTS].into_boxed_slice(),
            len: 0,
        }
    }
}

impl<const SLOTS: usize> OpenSlab<SLOTS> {
    /// Events held here.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keep `rec` (an open event with id `rec.id`); gives it back if its slot is taken.
    #[inline]
    pub fn insert(&mut self, rec: EventRecord) -> Result<(), EventRecord> {
        match self.claim(rec.id) {
            Some(slot) => {
                *slot = rec;
                Ok(())
            }
            None => Err(rec),
        }
    }

    /// The slot of event `id`, now held for it, if free: the caller writes the event's whole
    /// record there (built in place, not copied in: the drain's most frequent write).
    #[inline]
    pub fn claim(&mut self, id: u64) -> Option<&mut EventRecord> {
        let i = Self::slot(id);
        if self.ids[i] != 0 || id == 0 {
            return None;
        }
        self.ids[i] = id;
        self.len += 1;
        Some(&mut self.recs[i])
    }

    #[inline]
    pub fn contains(&self, id: u64) -> bool {
        self.ids[Self::slot(id)] == id && id != 0
    }

    #[inline]
    pub fn get(&self, id: u64) -> Option<&EventRecord> {
        let i = Self::slot(id);
        (self.ids[i] == id && id != 0).then(|| &self.recs[i])
    }

    #[inline]
    pub fn get_mut(&mut self, id: u64) -> Option<&mut EventRecord> {
        let i = Self::slot(id);
        (self.ids[i] == id && id != 0).then(|| &mut self.recs[i])
    }

    #[inline]
    pub fn remove(&mut self, id: u64) -> Option<EventRecord> {
        self.take_mut(id).map(|r| *r)
    }

    /// Remove event `id` and lend its record where it lies, to be finished and handed on
    /// without a copy. The slot is free again: the loan ends before anything can claim it.
    #[inline]
    pub fn take_mut(&mut self, id: u64) -> Option<&mut EventRecord> {
        let i = Self::slot(id);
        if self.ids[i] != id || id == 0 {
            return None;
        }
        self.ids[i] = 0;
        self.len -= 1;
        Some(&mut self.recs[i])
    }

    /// Every event held, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &EventRecord> {
        self.ids
            .iter()
            .zip(self.recs.iter())
            .filter(|(id, _)| **id != 0)
            .map(|(_, rec)| rec)
    }

    /// Remove every event for which `stale` says so; returns how many.
    pub fn remove_where(&mut self, mut stale: impl FnMut(&EventRecord) -> bool) -> usize {
        if self.len == 0 {
            return 0; // the usual case since a step travels whole: no pass over the table
        }
        let mut n = 0;
        for (id, rec) in self.ids.iter_mut().zip(self.recs.iter()) {
            if *id != 0 && stale(rec) {
                *id = 0;
                n += 1;
            }
        }
        self.len -= n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle;
    use ncclprof_shared::kind::EventKind;

    fn step(ring: u32, seq: u64) -> EventRecord {
        EventRecord {
            id: handle::make(EventKind::ProxyStep, ring, seq),
            start_ns: seq,
            ..EventRecord::default()
        }
    }

    #[test]
    fn insert_find_remove() {
        let mut t = OpenSteps::default();
        let a = step(0, 1);
        t.insert(a).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t.get_mut(a.id).unwrap().start_ns, 1);
        assert!(t.get_mut(step(0, 2).id).is_none());
        assert_eq!(t.remove(a.id), Some(a));
        assert!(t.remove(a.id).is_none());
        assert!(t.is_empty());
    }

    #[test]
    fn a_collision_is_refused_not_overwritten() {
        let mut t = OpenSteps::default();
        let a = step(0, 5);
        let b = step(0, 5 + (1 << 14)); // same slot, later step
        t.insert(a).unwrap();
        assert_eq!(t.insert(b), Err(b));
        assert_eq!(t.get_mut(a.id).unwrap().id, a.id);
        assert!(t.get_mut(b.id).is_none());
        // Rings do not share slots for the same sequence.
        t.insert(step(1, 5)).unwrap();
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn remove_where_counts() {
        let mut t = OpenSteps::default();
        for s in 1..=10 {
            t.insert(step(2, s)).unwrap();
        }
        assert_eq!(t.remove_where(|r| r.start_ns <= 4), 4);
        assert_eq!(t.len(), 6);
        assert!(t.get_mut(step(2, 4).id).is_none());
        assert!(t.get_mut(step(2, 5).id).is_some());
    }
}
