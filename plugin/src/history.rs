//! The drain's history of completed records, kept as ready-to-send Events frames.
//!
//! Completion writes each record it completes straight into the open frame's bytes
//! ([`Sink::put`]); a full frame is sealed (its header written) and shared, unchanged, with
//! the sender thread ([`History::sealed_from`]), so a record is copied once on its way from
//! completion to the socket. Keeping records in a deque and encoding frames from it copied
//! every record twice more, through memory last touched a history ago (a third of the
//! drain's time at 6-8 M events/s).
//!
//! The history is also the viewer's backlog (it reads it from a cursor, frame by frame) and
//! what a newly attached viewer is sent first. It is bounded by records and by age, trimmed a
//! whole frame (at most [`MAX_RECORDS_PER_FRAME`] records) at a time: it keeps the newest
//! `NCCLPROF_HISTORY_EVENTS` records and at most a frame more.

use std::collections::VecDeque;
use std::sync::Arc;

use ncclprof_shared::record::{EventRecord, RECORD_SIZE};
use ncclprof_shared::wire::{self, HEADER_SIZE, MAX_RECORDS_PER_FRAME};

/// Where completion puts the records it completes.
pub trait Sink {
    fn put(&mut self, rec: &EventRecord);

    /// Put `rec` as `finish` leaves it, changed where it lies: a record built on the stack
    /// with narrow field writes and then copied in wide moves waits for those writes to
    /// reach memory (a store-forwarding stall), which was the most sampled part of the
    /// drain's most frequent record (`Completion::whole_step`).
    #[inline]
    fn put_with(&mut self, rec: EventRecord, finish: impl FnOnce(&mut EventRecord)) {
        let mut rec = rec;
        finish(&mut rec);
        self.put(&rec);
    }
}

impl Sink for Vec<EventRecord> {
    #[inline]
    fn put(&mut self, rec: &EventRecord) {
        self.push(*rec);
    }
}

/// Bytes of a full frame.
const FRAME_BYTES: usize = HEADER_SIZE + MAX_RECORDS_PER_FRAME * RECORD_SIZE;
/// How many records ahead of the one being written [`Sink::put`] and [`Sink::put_with`]
/// prefetch the frame.
const PREFETCH_AHEAD: usize = 8;
/// Full-size buffers of trimmed frames kept for new frames: in steady state a frame is
/// trimmed for every frame filled, so the drain allocates no frame buffer.
const SPARES: usize = 4;

/// A sealed Events frame: header and records, never changed again.
pub struct SealedFrame {
    pub bytes: Arc<Vec<u8>>,
    pub records: u32,
    /// The latest start or end among its records (ns): the age bound trims by it.
    newest_ns: u64,
}

pub struct History {
    sealed: VecDeque<SealedFrame>,
    /// Sequence number of `sealed[0]`; frames are numbered in the order they were sealed.
    base: u64,
    /// The frame records are added to: header space, then records.
    open: Vec<u8>,
    open_newest: u64,
    /// Records held, sealed and open.
    records: usize,
    spare: Vec<Vec<u8>>,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl Sink for History {
    #[inline]
    fn put(&mut self, rec: &EventRecord) {
        self.prefetch_ahead();
        self.open.extend_from_slice(rec.bytes());
        self.put_done(rec.end_ns.max(rec.start_ns));
    }

    #[inline]
    fn put_with(&mut self, rec: EventRecord, finish: impl FnOnce(&mut EventRecord)) {
        self.put_built(rec, finish, true);
    }
}

/// What [`History::trim`] removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Trimmed {
    /// Records in frames at or after the cursor given: never sent to the viewer.
    pub unsent: u64,
}

impl History {
    /// The open frame's buffer is a trimmed frame's, last written a history ago: its line
    /// [`PREFETCH_AHEAD`] records on is asked for now (8 measured best of 4, 8 and 16, by
    /// 1–2 ns per record; the drain 13 % faster, BENCHMARKS.md §2 "The history's writes
    /// prefetched").
    #[inline(always)]
    fn prefetch_ahead(&self) {
        let ahead = self.open.len() + PREFETCH_AHEAD * RECORD_SIZE;
        crate::prefetch::for_write(self.open.as_ptr().wrapping_add(ahead));
    }

    /// A record whose latest time is `newest` (ns) was added to the open frame.
    #[inline(always)]
    fn put_done(&mut self, newest: u64) {
        self.open_newest = self.open_newest.max(newest);
        self.records += 1;
        if self.open.len() + RECORD_SIZE > FRAME_BYTES {
            self.seal();
        }
    }

    /// [`Sink::put_with`], built where it lies if `in_place` and the slot is aligned, else
    /// on the stack and copied (`in_place` false: the tests' way to that path).
    #[inline(always)]
    fn put_built(
        &mut self,
        rec: EventRecord,
        finish: impl FnOnce(&mut EventRecord),
        in_place: bool,
    ) {
        self.prefetch_ahead();
        let at = self.open.len();
        self.open.reserve(RECORD_SIZE);
        // SAFETY: `reserve` made room for a record after `at`.
        let slot = unsafe { self.open.as_mut_ptr().add(at) }.cast::<EventRecord>();
        // Built where it lies when that is aligned, which it is: the buffers come from
        // `malloc`, 16-byte aligned, and records start 16 bytes in, 96 apart. (One call of
        // `finish`, so that it is inlined.)
        let mut unaligned = std::mem::MaybeUninit::<EventRecord>::uninit();
        let at_slot = in_place && slot.is_aligned();
        let target = if at_slot {
            slot
        } else {
            unaligned.as_mut_ptr()
        };
        // SAFETY: `target` is aligned, writable for a record and not aliased (the buffer's
        // spare capacity, or the local); the record is written whole before it is
        // referenced. The buffer counts it only below, once `finish` has returned: a panic
        // in `finish` leaves the buffer as it was (it is bytes).
        let rec = unsafe {
            target.write(rec);
            &mut *target
        };
        finish(rec);
        let newest = rec.end_ns.max(rec.start_ns);
        if at_slot {
            // SAFETY: the record's bytes, after `at`, are initialised (written above).
            unsafe { self.open.set_len(at + RECORD_SIZE) };
        } else {
            // SAFETY: written whole above.
            let rec = unsafe { unaligned.assume_init_ref() };
            self.open.extend_from_slice(rec.bytes());
        }
        self.put_done(newest);
    }

    pub fn new() -> History {
        History {
            sealed: VecDeque::new(),
            base: 0,
            open: empty_frame(),
            open_newest: 0,
            records: 0,
            spare: Vec::new(),
        }
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Sequence number of the oldest frame held (a cursor before it has lost records).
    pub fn first_frame(&self) -> u64 {
        self.base
    }

    /// Sequence number the next frame sealed will have.
    pub fn end_frame(&self) -> u64 {
        self.base + self.sealed.len() as u64
    }

    /// Seal the open frame if it holds records, so that everything completed so far can be
    /// sent. A frame sealed well short of full moves to a buffer of its size, and the open
    /// frame keeps its full-size one: at low rates the viewer is sent a small frame every
    /// few ms, and a full-size buffer each would hold ~200 KiB per record.
    pub fn seal(&mut self) {
        let n = (self.open.len() - HEADER_SIZE) / RECORD_SIZE;
        if n == 0 {
            return;
        }
        wire::write_events_header(&mut self.open);
        let bytes = if n >= MAX_RECORDS_PER_FRAME / 2 {
            let next = self.spare.pop().unwrap_or_else(empty_frame);
            std::mem::replace(&mut self.open, next)
        } else {
            let small = self.open.clone();
            self.open.truncate(HEADER_SIZE);
            small
        };
        self.sealed.push_back(SealedFrame {
            bytes: Arc::new(bytes),
            records: n as u32,
            newest_ns: std::mem::take(&mut self.open_newest),
        });
    }

    /// Sealed frames from sequence number `from` on (the oldest held if `from` is older).
    pub fn sealed_from(&self, from: u64) -> impl Iterator<Item = (u64, &SealedFrame)> + '_ {
        let skip = (from.saturating_sub(self.base) as usize).min(self.sealed.len());
        let first = self.base + skip as u64;
        (first..).zip(self.sealed.range(skip..))
    }

    /// Drop the oldest frames while the rest hold at least `keep` records, and those whose
    /// records all ended before `horizon` (ns). Frames at or after `cursor` that go were
    /// never sent: their records are counted in the result.
    pub fn trim(&mut self, keep: usize, horizon: u64, cursor: Option<u64>) -> Trimmed {
        let mut trimmed = Trimmed::default();
        while let Some(front) = self.sealed.front() {
            let rest = self.records - front.records as usize;
            if rest < keep && front.newest_ns >= horizon {
                break;
            }
            let Some(f) = self.sealed.pop_front() else {
                break;
            };
            if cursor.is_some_and(|c| c <= self.base) {
                trimmed.unsent += u64::from(f.records);
            }
            self.base += 1;
            self.records -= f.records as usize;
            // The sender may still hold the frame (queued, not yet sent): then it frees it.
            if let Some(bytes) = Arc::into_inner(f.bytes)
                && bytes.capacity() >= FRAME_BYTES
                && self.spare.len() < SPARES
            {
                let mut bytes = bytes;
                bytes.truncate(HEADER_SIZE);
                self.spare.push(bytes);
            }
        }
        // The open frame is aged too: without a viewer it is sealed only when full, and at a
        // low rate it would hold records of any age (newer than every sealed frame's, so only
        // once they are all gone).
        let open = (self.open.len() - HEADER_SIZE) / RECORD_SIZE;
        if self.sealed.is_empty() && open > 0 && self.open_newest < horizon {
            self.open.truncate(HEADER_SIZE);
            self.open_newest = 0;
            self.records -= open;
            if cursor.is_some() {
                trimmed.unsent += open as u64;
            }
        }
        trimmed
    }

    /// The communicator ids the records held name (read in place: a viewer's attach).
    pub fn comm_ids(&self) -> std::collections::HashSet<u32> {
        const COMM: usize = std::mem::offset_of!(EventRecord, comm);
        let frames = self.sealed.iter().map(|f| &f.bytes[..]);
        frames
            .chain(std::iter::once(&self.open[..]))
            .flat_map(|bytes| bytes[HEADER_SIZE..].chunks_exact(RECORD_SIZE))
            .map(|r| u32::from_ne_bytes([r[COMM], r[COMM + 1], r[COMM + 2], r[COMM + 3]]))
            .collect()
    }

    /// The newest `limit` records held, in the order they completed (finalize's dump).
    pub fn records(&self, limit: usize) -> Vec<EventRecord> {
        let mut out = Vec::with_capacity(self.records.min(limit));
        let mut skip = self.records.saturating_sub(limit);
        let frames = self.sealed.iter().map(|f| &f.bytes[..]);
        for bytes in frames.chain(std::iter::once(&self.open[..])) {
            let body = &bytes[HEADER_SIZE..];
            let n = body.len() / RECORD_SIZE;
            if skip >= n {
                skip -= n;
                continue;
            }
            out.extend(EventRecord::from_bytes(&body[skip * RECORD_SIZE..]).unwrap_or_default());
            skip = 0;
        }
        out
    }
}

/// A frame buffer with room for a full frame and its header's space taken.
fn empty_frame() -> Vec<u8> {
    let mut v = Vec::with_capacity(FRAME_BYTES);
    v.resize(HEADER_SIZE, 0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use ncclprof_shared::wire::{Frame, decode};

    fn rec(i: u64) -> EventRecord {
        EventRecord {
            id: i + 1,
            start_ns: i * 10,
            end_ns: i * 10 + 5,
            ..EventRecord::default()
        }
    }

    fn decoded(f: &SealedFrame) -> Vec<EventRecord> {
        match decode(&f.bytes).unwrap() {
            Frame::Events(r) => r.to_vec(),
            _ => panic!("not an Events frame"),
        }
    }

    #[test]
    fn comm_ids_are_read_from_sealed_and_open_frames() {
        let mut h = History::new();
        let n = MAX_RECORDS_PER_FRAME as u64 + 5;
        for i in 0..n {
            let mut r = rec(i);
            r.comm = (i % 3) as u32 * 1024 + u32::from(i + 1 == n) * 7;
            h.put(&r);
        }
        let mut ids: Vec<u32> = h.comm_ids().into_iter().collect();
        ids.sort_unstable();
        assert_eq!(
            ids,
            vec![0, 1024, 2048, 2055],
            "the last one is in the open frame"
        );
    }

    #[test]
    fn frames_fill_seal_and_decode_to_the_records_in_order() {
        let mut h = History::new();
        let n = MAX_RECORDS_PER_FRAME as u64 * 2 + 10;
        for i in 0..n {
            h.put(&rec(i));
        }
        assert_eq!(h.len(), n as usize);
        // Two full frames sealed themselves; the rest waits in the open frame.
        assert_eq!(h.end_frame(), 2);
        h.seal();
        assert_eq!(h.end_frame(), 3);
        h.seal(); // nothing open: no empty frame
        assert_eq!(h.end_frame(), 3);
        let all: Vec<EventRecord> = h.sealed_from(0).flat_map(|(_, f)| decoded(f)).collect();
        assert_eq!(all, (0..n).map(rec).collect::<Vec<_>>());
        assert_eq!(h.records(usize::MAX), all);
        assert_eq!(h.records(5), all[all.len() - 5..]);
        assert_eq!(h.records(15), all[all.len() - 15..]);
        let counts: Vec<u32> = h.sealed_from(0).map(|(_, f)| f.records).collect();
        assert_eq!(
            counts,
            [
                MAX_RECORDS_PER_FRAME as u32,
                MAX_RECORDS_PER_FRAME as u32,
                10
            ]
        );
        // A small frame does not keep a full-size buffer.
        let small = h.sealed_from(2).next().unwrap().1;
        assert!(small.bytes.capacity() < FRAME_BYTES / 2);
        assert_eq!(h.sealed_from(1).next().unwrap().0, 1);
        assert_eq!(h.sealed_from(7).count(), 0);
    }

    /// A record put with `put_with` (built where it lies, then changed there) is the record
    /// `put` would have put, as changed, through frames sealing themselves on the way; the
    /// newest time the age bound uses is the changed record's.
    #[test]
    fn put_with_puts_the_record_as_finish_leaves_it() {
        let finish = |r: &mut EventRecord| {
            r.p[3] = r.id * 7;
            r.end_ns += 1_000;
        };
        let n = MAX_RECORDS_PER_FRAME as u64 + 10;
        let mut plain = History::new();
        for i in 0..n {
            let mut r = rec(i);
            finish(&mut r);
            plain.put(&r);
        }
        plain.seal();
        let frames = |h: &History| -> Vec<Vec<u8>> {
            h.sealed_from(0).map(|(_, f)| f.bytes.to_vec()).collect()
        };
        // Built in the frame (`put_with`), and on the stack and copied (its way where the
        // frame's slot is not aligned for a record, which `malloc`'s buffers always are).
        for in_place in [true, false] {
            let mut with = History::new();
            for i in 0..n {
                if in_place {
                    with.put_with(rec(i), finish);
                } else {
                    with.put_built(rec(i), finish, false);
                }
            }
            with.seal();
            assert_eq!(frames(&with), frames(&plain), "in place: {in_place}");
            assert_eq!(with.len(), n as usize);
            let last = with.sealed_from(1).next().unwrap().1;
            assert_eq!(last.newest_ns, (n - 1) * 10 + 5 + 1_000);
        }
    }

    #[test]
    fn trimming_counts_unsent_records_and_reuses_buffers() {
        let mut h = History::new();
        let per = MAX_RECORDS_PER_FRAME as u64;
        for i in 0..per * 3 {
            h.put(&rec(i));
        }
        assert_eq!(h.end_frame(), 3);
        // The sender still holds frame 0: it cannot be reused, and is freed by the sender.
        let queued = h.sealed_from(0).next().unwrap().1.bytes.clone();
        // Keeping the newest `per` leaves one frame; the viewer has been sent frame 0 only.
        let t = h.trim(per as usize, 0, Some(1));
        assert_eq!(t.unsent, per); // frame 1 was never sent
        assert_eq!(h.first_frame(), 2);
        assert_eq!(h.len(), per as usize);
        assert_eq!(h.spare.len(), 1); // frame 1's buffer
        assert_eq!(
            decode(&queued).unwrap(),
            Frame::Events((0..per).map(rec).collect::<Vec<_>>().into())
        );
        // The age bound: frame 2's records all ended before the horizon.
        let t = h.trim(usize::MAX, per * 3 * 10, None);
        assert_eq!(t, Trimmed { unsent: 0 });
        assert!(h.is_empty());
        assert_eq!(h.first_frame(), 3);
        // Frame 2's buffer was free too. The next frame to fill seals its buffer and opens
        // the spare last kept.
        assert_eq!(h.spare.len(), 2);
        let last = h.spare[1].as_ptr();
        for i in 0..per {
            h.put(&rec(i));
        }
        assert_eq!(h.end_frame(), 4);
        assert_eq!(h.spare.len(), 1);
        assert_eq!(h.open.as_ptr(), last);
        // Records too old in the open frame go once every sealed frame has: unsent if a
        // viewer is attached.
        let late = |i: u64| EventRecord {
            id: i + 1,
            start_ns: 1_000_000 + i,
            end_ns: 1_000_000 + i,
            ..EventRecord::default()
        };
        for i in 0..5 {
            h.put(&late(i));
        }
        // Frame 3 ended before the horizon and goes, unsent to a viewer at frame 3; the open
        // frame's records are newer and stay.
        assert_eq!(h.trim(0, 10 * per, Some(3)), Trimmed { unsent: per });
        assert_eq!(h.len(), 5);
        assert_eq!(h.trim(0, u64::MAX, Some(4)), Trimmed { unsent: 5 });
        assert!(h.is_empty());
        assert_eq!(h.records(usize::MAX), []);
    }
}
