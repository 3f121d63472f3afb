//! Event handles are ids, not pointers: NCCL only stores them, hands them back and compares
//! them with NULL (spec §4.2, §5.3), so the plugin never allocates per event and never
//! dereferences a handle, a stale CUDA-graph parent or a foreign PXN parent.
//!
//! Layout: bits 63–59 = event kind + 1 (so an id is never 0 and `stop`/`record` know the
//! kind without a lookup), bits 58–48 = capture ring index, bits 47–0 = the ring's sequence.

use ncclprof_shared::kind::EventKind;

const KIND_SHIFT: u32 = 59;
const RING_SHIFT: u32 = 48;
const SEQ_MASK: u64 = (1 << RING_SHIFT) - 1;

/// Make an event id.
#[inline(always)]
pub fn make(kind: EventKind, ring: u32, seq: u64) -> u64 {
    ((kind as u64 + 1) << KIND_SHIFT) | ((u64::from(ring) & 0x7FF) << RING_SHIFT) | (seq & SEQ_MASK)
}

/// The kind encoded in an id, if it is one of ours.
#[inline(always)]
pub fn kind_of(id: u64) -> Option<EventKind> {
    let k = (id >> KIND_SHIFT) as u8;
    if k == 0 {
        return None;
    }
    EventKind::from_u8(k - 1)
}

/// Whether `id` is an id of kind `kind` (one shift and compare: no decoding of the kind).
#[inline(always)]
pub fn is_kind(id: u64, kind: EventKind) -> bool {
    id >> KIND_SHIFT == kind as u64 + 1
}

/// The ring sequence number of an id.
#[inline(always)]
pub fn seq_of(id: u64) -> u64 {
    id & SEQ_MASK
}

/// The capture ring an id was issued from.
#[inline(always)]
pub fn ring_of(id: u64) -> u32 {
    ((id >> RING_SHIFT) & 0x7FF) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_roundtrip_and_are_nonzero() {
        for k in EventKind::ALL {
            let id = make(k, 2047, SEQ_MASK);
            assert_ne!(id, 0);
            assert_eq!(kind_of(id), Some(k));
            assert_eq!(kind_of(make(k, 0, 1)), Some(k));
            for other in EventKind::ALL {
                assert_eq!(is_kind(id, other), other == k);
            }
            assert_eq!(ring_of(id), 2047);
            assert_eq!(ring_of(make(k, 5, 1)), 5);
            assert_eq!(seq_of(id), SEQ_MASK);
            assert_eq!(seq_of(make(k, 5, 77)), 77);
        }
        assert_eq!(kind_of(0x1234), None);
        assert!(!is_kind(0, EventKind::ALL[0]));
        assert_eq!(kind_of(u64::MAX), None);
    }
}
