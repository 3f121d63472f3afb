//! The connection's frame ring: shared memory through which the plugin hands the viewer its
//! large frames. The plugin copies each into memory both processes map, and the viewer
//! ingests its records where they lie; through the socket the kernel copied every frame in
//! and out again, with the socket buffers' allocation and accounting on top: 11–13 % of all
//! CPU at 10 M events/s (BENCHMARKS §2 "Events frames through shared memory"). A copy costs
//! about the same in user space as in the kernel, so the gain is the copy out that no longer
//! happens. The socket still carries one small frame per frame in the ring.
//!
//! The viewer makes the ring (a memfd: ipc-channel's `IpcSharedMemory`) and offers it in its
//! Hello; the plugin maps it. One writer (the plugin's sender thread), one reader (the
//! viewer's receiving thread for that plugin). Positions count the bytes of an endless
//! stream; a frame lies whole at `position % capacity` (one that would straddle the end
//! starts at 0 instead, and the bytes skipped are given back with that frame). For each
//! frame it puts in the ring, the plugin sends an [`IN_RING`](crate::wire::IN_RING) frame
//! on the socket in that frame's place, so frames keep the socket's order and the socket
//! still tells the viewer when the plugin has gone. The writer publishes how far it has
//! written in the ring's header; the reader how far the frames it took have been dropped
//! (ingested), in the order taken ([`RingFrame`]).
//!
//! Neither side trusts the other's numbers. The read position is the only thing the plugin
//! reads from the ring after mapping it: one beyond what it wrote reads as "full", and a
//! frame that finds the ring full goes on the socket as before. The viewer checks every
//! position it is given: aligned, inside the ring, written (the published write position),
//! in order, and clear of every frame it still holds ([`RingError`]). What it reads in place
//! it trusts the plugin to leave alone until given back, as the protocol says; a plugin that
//! did not would change the records being ingested, which the viewer takes as they come
//! (any bit pattern is a record). What neither side can check is the memory itself: ipc-channel's memfd
//! cannot be sealed, so a process that shrank it would make the other's next copy fault
//! (SIGBUS). Only the two ends hold it: the viewer, which checked that the plugin's entry
//! and socket are the user's own, and the plugin, which accepts viewers on a socket in a
//! 0700 directory; a process of the same user could kill the job anyway.
//!
//! Layout: a 192-byte header (the magic at 0 and the capacity at 8, then the write position
//! at 64 and the read position at 128, each on a cache line of its own), then `capacity`
//! bytes of data.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ipc_channel::ipc::IpcSharedMemory;

use crate::wire::MAX_FRAME;

/// "NCPFRING", little-endian: the ring's first word.
const RING_MAGIC: u64 = u64::from_le_bytes(*b"NCPFRING");
/// Bytes before the data: the magic and capacity, then the two positions on lines of their own.
const HEADER: usize = 192;
/// Where the plugin publishes its write position.
const WRITE_AT: usize = 64;
/// Where the viewer publishes its read position.
const READ_AT: usize = 128;
/// Frames start on 16-byte boundaries: copies in and out begin aligned.
const ALIGN: u64 = 16;

/// The ring a viewer offers by default: 16 MiB holds 85 full Events frames, about 80 ms of
/// a 2 M events/s process, for the frames waiting to be ingested while the viewer draws (its
/// queue, shared by every process it watches, holds 128 frames: more than that when they are
/// full); a frame that finds the ring full takes the socket.
pub const DEFAULT_BYTES: usize = 16 << 20;
/// The smallest ring the plugin uses: two of the largest frames.
pub const MIN_BYTES: usize = HEADER + 2 * MAX_FRAME;
/// The largest ring the plugin maps: the pages it writes count in the job's resident memory.
pub const MAX_BYTES: usize = 64 << 20;
/// Frames shorter than this go on the socket even with a ring: copying them there costs
/// about what the [`IN_RING`](crate::wire::IN_RING) frame in their place would.
pub const MIN_FRAME_IN_RING: usize = 4096;

/// Environment variable: the frame ring's size in MiB a viewer offers (`0`: none, every
/// frame on the socket). Read by [`crate::link::connect`].
pub const RING_MIB_ENV: &str = "NCCLPROF_FRAME_RING_MIB";

fn round_up(pos: u64) -> u64 {
    pos.div_ceil(ALIGN) * ALIGN
}

/// A mapped ring: the memory, and where its data starts.
struct Mapped {
    /// Kept for the mapping's lifetime.
    _mem: IpcSharedMemory,
    base: *mut u8,
    capacity: u64,
}

// SAFETY: `base` points into `_mem`'s mapping, which lives as long as the struct and is
// shared memory meant to be used from any thread; every access through it is a raw copy,
// a read of bytes the other side does not write meanwhile, or an atomic.
unsafe impl Send for Mapped {}
// SAFETY: as for Send: nothing in it is changed through a shared reference but atomics.
unsafe impl Sync for Mapped {}

impl Mapped {
    fn data(&self) -> *mut u8 {
        // SAFETY: HEADER < the mapping's length (checked when made).
        unsafe { self.base.add(HEADER) }
    }

    fn position(&self, at: usize) -> &AtomicU64 {
        // SAFETY: WRITE_AT and READ_AT are 8-aligned inside the header of a page-aligned
        // mapping; the other process touches these bytes only as an atomic too.
        unsafe { &*self.base.add(at).cast::<AtomicU64>() }
    }

    fn read_position(&self) -> &AtomicU64 {
        self.position(READ_AT)
    }

    fn write_position(&self) -> &AtomicU64 {
        self.position(WRITE_AT)
    }
}

/// Why a frame could not be taken from the ring: the plugin's numbers do not fit it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RingError {
    #[error(
        "frame ring: the plugin pointed at {len} bytes at {at}, outside a {capacity}-byte ring"
    )]
    Outside { at: u64, len: u64, capacity: u64 },
    #[error(
        "frame ring: the plugin pointed at {len} bytes at {at}, beyond what it wrote ({written})"
    )]
    Unwritten { at: u64, len: u64, written: u64 },
    #[error(
        "frame ring: the plugin pointed at {at}, behind the last frame taken (ending at {taken}): frames out of order"
    )]
    Behind { at: u64, taken: u64 },
    #[error(
        "frame ring: the plugin pointed at {len} bytes at {at}, over frames the viewer still holds (given back up to {released})"
    )]
    Overrun { at: u64, len: u64, released: u64 },
    #[error("frame ring: the plugin pointed into a ring this viewer did not offer")]
    NoRing,
}

/// The viewer's end: makes the ring and hands out the frames the plugin put there, in place.
pub struct RingReader {
    shared: Arc<ReaderShared>,
    /// Where the next frame may start: the end of the last one taken.
    next: u64,
    /// The sequence number of the next frame taken.
    seq: u64,
}

/// What the receiving thread and the holders of its frames share.
struct ReaderShared {
    ring: Mapped,
    /// The frames taken and not yet released, oldest first.
    held: Mutex<Held>,
    /// Bytes of [`BUDGET_BYTES`] this ring holds (0 for a ring made outside the budget).
    granted: usize,
}

impl Drop for ReaderShared {
    fn drop(&mut self) {
        HELD_BYTES.fetch_sub(self.granted, Ordering::Relaxed);
    }
}

/// The most ring memory one viewer holds over all its connections. The viewer writes every
/// page of a ring it makes (ipc-channel fills it), so a viewer watching many processes would
/// hold 16 MiB for each: past this budget a connection gets a smaller ring, or none.
pub const BUDGET_BYTES: usize = 256 << 20;
/// Ring bytes this process holds within [`BUDGET_BYTES`].
static HELD_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Take up to `bytes` of the budget: what was granted, 0 when less than [`MIN_BYTES`] is left.
fn grant(bytes: usize) -> usize {
    let mut held = HELD_BYTES.load(Ordering::Relaxed);
    loop {
        let g = bytes.min(BUDGET_BYTES.saturating_sub(held));
        if g < MIN_BYTES {
            return 0;
        }
        match HELD_BYTES.compare_exchange_weak(held, held + g, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => return g,
            Err(now) => held = now,
        }
    }
}

/// Frames taken, oldest first: the ring's bytes go back to the plugin in that order, so a
/// frame released early waits for the ones before it.
struct Held {
    /// The sequence number of `frames[0]`.
    first: u64,
    /// Each frame's end in the ring (rounded up), and whether it was released.
    frames: VecDeque<(u64, bool)>,
    /// The read position published: everything before it was given back.
    released_to: u64,
}

impl ReaderShared {
    fn release(&self, seq: u64) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = seq.checked_sub(held.first) else {
            return;
        };
        if let Some(f) = held.frames.get_mut(i as usize) {
            f.1 = true;
        }
        let mut read = None;
        while let Some(&(end, true)) = held.frames.front() {
            held.frames.pop_front();
            held.first += 1;
            read = Some(end);
        }
        if let Some(read) = read {
            held.released_to = read;
            self.ring.read_position().store(read, Ordering::Release);
        }
    }
}

/// A frame in the ring, read where it lies; its bytes go back to the plugin when it is dropped
/// (and every frame taken before it has been).
pub struct RingFrame {
    shared: Arc<ReaderShared>,
    offset: usize,
    len: usize,
    seq: u64,
}

impl RingFrame {
    /// The frame's bytes. The plugin does not write them until the frame is dropped: its
    /// writes stop at the read position this frame holds back.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `offset + len <= capacity` (checked when taken), so the bytes lie inside the
        // data, which lives as long as `shared`.
        unsafe { std::slice::from_raw_parts(self.shared.ring.data().add(self.offset), self.len) }
    }
}

impl Drop for RingFrame {
    fn drop(&mut self) {
        self.shared.release(self.seq);
    }
}

impl RingReader {
    /// A fresh ring of about `bytes` bytes (at least [`MIN_BYTES`], at most [`MAX_BYTES`]),
    /// and the handle to offer the plugin in Hello. (ipc-channel panics if the kernel refuses
    /// a memfd: a viewer out of file descriptors.)
    pub fn new(bytes: usize) -> (RingReader, IpcSharedMemory) {
        Self::make(bytes.clamp(MIN_BYTES, MAX_BYTES), 0)
    }

    /// [`new`](Self::new), within this process's [`BUDGET_BYTES`] over every ring it holds:
    /// smaller than `bytes` when less is left, `None` when not even [`MIN_BYTES`] is.
    pub fn within_budget(bytes: usize) -> Option<(RingReader, IpcSharedMemory)> {
        match grant(bytes.clamp(MIN_BYTES, MAX_BYTES)) {
            0 => None,
            g => Some(Self::make(g, g)),
        }
    }

    fn make(bytes: usize, granted: usize) -> (RingReader, IpcSharedMemory) {
        let capacity = ((bytes - HEADER) as u64) / ALIGN * ALIGN;
        let mut mem = IpcSharedMemory::from_byte(0, bytes);
        // SAFETY: nobody else maps this memory yet; the slice ends before `mem` moves.
        let base = unsafe { mem.deref_mut() };
        base[..8].copy_from_slice(&RING_MAGIC.to_le_bytes());
        base[8..16].copy_from_slice(&capacity.to_le_bytes());
        let base = base.as_mut_ptr();
        // (The positions start at 0, as `from_byte` left them.)
        let offer = mem.clone();
        let shared = Arc::new(ReaderShared {
            ring: Mapped {
                _mem: mem,
                base,
                capacity,
            },
            held: Mutex::new(Held {
                first: 0,
                frames: VecDeque::new(),
                released_to: 0,
            }),
            granted,
        });
        (
            RingReader {
                shared,
                next: 0,
                seq: 0,
            },
            offer,
        )
    }

    /// The frame the plugin put at `at`, `len` bytes long, held in the ring until dropped.
    pub fn take(&mut self, at: u64, len: u64) -> Result<RingFrame, RingError> {
        let ring = &self.shared.ring;
        let capacity = ring.capacity;
        let offset = at % capacity;
        let outside = RingError::Outside { at, len, capacity };
        // Frames start aligned (records are read in place), whole inside the ring.
        if len == 0
            || len > MAX_FRAME as u64
            || offset + len > capacity
            || !at.is_multiple_of(ALIGN)
        {
            return Err(outside);
        }
        let end = at
            .checked_add(len)
            .filter(|e| *e <= u64::MAX - ALIGN)
            .ok_or(outside)?;
        if at < self.next {
            return Err(RingError::Behind {
                at,
                taken: self.next,
            });
        }
        // The plugin published its write position after copying the frame in (Release).
        let written = ring.write_position().load(Ordering::Acquire);
        if end > written {
            return Err(RingError::Unwritten { at, len, written });
        }
        let mut held = self.shared.held.lock().unwrap_or_else(|e| e.into_inner());
        // Within a ring's length of what was given back: clear of every frame still held.
        if end - held.released_to > capacity {
            return Err(RingError::Overrun {
                at,
                len,
                released: held.released_to,
            });
        }
        self.next = round_up(end);
        held.frames.push_back((self.next, false));
        drop(held);
        let seq = self.seq;
        self.seq += 1;
        Ok(RingFrame {
            shared: self.shared.clone(),
            offset: offset as usize,
            len: len as usize,
            seq,
        })
    }

    /// [`take`](Self::take), copied out and released (given back once every frame taken
    /// before it is). For tests: the viewer reads frames in place, or copies them out with
    /// the `RingFrame` it took.
    #[cfg(test)]
    pub(crate) fn take_copy(&mut self, at: u64, len: u64) -> Result<Vec<u8>, RingError> {
        Ok(self.take(at, len)?.bytes().to_vec())
    }
}

/// The plugin's end: puts frames in the ring the viewer offered.
pub struct RingWriter {
    ring: Mapped,
    /// Where the next frame may start: the end of the last one put.
    write: u64,
}

impl RingWriter {
    /// The ring in `mem`, if it is one: a size between [`MIN_BYTES`] and [`MAX_BYTES`], the
    /// ring's magic, and a capacity that fits. Anything else (no ring offered, or memory that
    /// is not a ring) is `None`: frames then all go on the socket.
    pub fn new(mut mem: IpcSharedMemory) -> Option<RingWriter> {
        let len = mem.len();
        if !(MIN_BYTES..=MAX_BYTES).contains(&len) {
            return None;
        }
        // SAFETY: only the mapping's address is taken; the memory is read and written through
        // raw pointers and atomics from here on, as the viewer may write it at any time.
        let base = unsafe { mem.deref_mut() }.as_mut_ptr();
        // SAFETY: both words lie inside the mapping (its length is at least MIN_BYTES), and a
        // mapping is page-aligned.
        let word =
            |i: usize| unsafe { u64::from_le(std::ptr::read_volatile(base.add(i).cast::<u64>())) };
        let capacity = word(8);
        if word(0) != RING_MAGIC
            || capacity < 2 * MAX_FRAME as u64
            || capacity > (len - HEADER) as u64
            || capacity % ALIGN != 0
        {
            return None;
        }
        Some(RingWriter {
            ring: Mapped {
                _mem: mem,
                base,
                capacity,
            },
            write: 0,
        })
    }

    /// Copy `frame` into the ring and return where it lies (position, length), for the
    /// [`IN_RING`](crate::wire::IN_RING) frame to send in its place. `None`, with nothing
    /// written, when the viewer has not read enough to make room (or publishes a read
    /// position this writer never reached): send the frame on the socket instead.
    pub fn put(&mut self, frame: &[u8]) -> Option<(u64, u64)> {
        let capacity = self.ring.capacity;
        let len = frame.len() as u64;
        if len == 0 || len > capacity / 2 {
            return None;
        }
        let mut at = self.write;
        let offset = at % capacity;
        if offset + len > capacity {
            at += capacity - offset; // straddles the end: start at 0
        }
        let end = at + len;
        let read = self.ring.read_position().load(Ordering::Acquire);
        if read > self.write || end - read > capacity {
            return None;
        }
        // SAFETY: `at % capacity + len <= capacity`, so the destination lies inside the
        // data; the viewer has released these bytes (its read position is past them).
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.ring.data().add((at % capacity) as usize),
                frame.len(),
            );
        }
        // The bytes before the position that covers them (the viewer loads it with Acquire).
        self.ring.write_position().store(end, Ordering::Release);
        self.write = round_up(end);
        Some((at, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` bytes of `seed`, the first few counting up from it (cheap to make in a debug build).
    fn frame(n: usize, seed: u8) -> Vec<u8> {
        let mut f = vec![seed; n];
        for (i, b) in f.iter_mut().take(64).enumerate() {
            *b = seed.wrapping_add(i as u8);
        }
        f
    }

    /// A deterministic pseudo-random sequence (xorshift64) from `seed`.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// A writer on the memory the reader offered, as the plugin gets it.
    fn pair(bytes: usize) -> (RingReader, RingWriter) {
        let (reader, offer) = RingReader::new(bytes);
        (reader, RingWriter::new(offer).unwrap())
    }

    #[test]
    fn frames_come_out_as_they_went_in_across_many_wraps() {
        let (mut r, mut w) = pair(MIN_BYTES);
        let capacity = w.ring.capacity;
        let mut total = 0u64;
        for i in 0..600usize {
            let f = frame(1 + (i * 7919) % MAX_FRAME, i as u8);
            let (at, len) = w
                .put(&f)
                .expect("room: each frame is taken before the next");
            assert_eq!(len, f.len() as u64);
            assert!(at % capacity + len <= capacity, "a frame lies whole");
            assert_eq!(at % ALIGN, 0);
            assert_eq!(r.take_copy(at, len).unwrap(), f);
            total += len;
        }
        assert!(total > 10 * capacity, "the ring wrapped many times");
    }

    #[test]
    fn a_full_ring_refuses_until_the_reader_releases() {
        let (mut r, mut w) = pair(MIN_BYTES);
        let f = frame(MAX_FRAME, 1);
        let a = w.put(&f).unwrap();
        let b = w.put(&f).unwrap();
        assert_eq!(w.put(&f), None, "two largest frames fill the smallest ring");
        assert_eq!(r.take_copy(a.0, a.1).unwrap(), f);
        let c = w.put(&f).expect("room once the first is read");
        assert_eq!(r.take_copy(b.0, b.1).unwrap(), f);
        assert_eq!(r.take_copy(c.0, c.1).unwrap(), f);
    }

    /// Frames read in place go back to the plugin when dropped, in the order taken: one
    /// dropped early waits for those before it.
    #[test]
    fn frames_held_in_place_are_released_in_order_when_dropped() {
        let (mut r, mut w) = pair(MIN_BYTES);
        let f = frame(MAX_FRAME, 5);
        let a = w.put(&f).unwrap();
        let b = w.put(&f).unwrap();
        let (fa, fb) = (r.take(a.0, a.1).unwrap(), r.take(b.0, b.1).unwrap());
        assert_eq!((fa.bytes(), fb.bytes()), (&f[..], &f[..]));
        assert_eq!(w.put(&f), None, "both held");
        drop(fb);
        assert_eq!(w.put(&f), None, "the second released, the first still held");
        drop(fa);
        let c = w.put(&f).expect("both released");
        let d = w.put(&f);
        assert!(d.is_some(), "both frames' bytes went back");
        assert_eq!(r.take_copy(c.0, c.1).unwrap(), f);
        // A frame outliving its reader keeps the mapping.
        let d = d.unwrap();
        let fd = r.take(d.0, d.1).unwrap();
        drop(r);
        assert_eq!(fd.bytes(), &f[..]);
    }

    /// Frames held at random and given back in random order: the plugin never writes over
    /// one still held, and refuses only while held frames leave no room.
    #[test]
    fn frames_still_held_are_never_written_over() {
        let (mut r, mut w) = pair(MIN_BYTES);
        let capacity = w.ring.capacity;
        let mut rand = xorshift(0x2545_f491_4f6c_dd1du64);
        let mut held: Vec<(RingFrame, u8)> = Vec::new();
        let (mut refused, mut taken) = (0, 0);
        for i in 0..3_000u64 {
            if !rand().is_multiple_of(3) {
                let n = 1 + (rand() % (capacity * 30 / 100)) as usize;
                let tag = i as u8;
                match w.put(&frame(n, tag)) {
                    Some((at, len)) => {
                        held.push((r.take(at, len).unwrap(), tag));
                        taken += 1;
                    }
                    None => refused += 1,
                }
            } else if !held.is_empty() {
                let k = (rand() % held.len() as u64) as usize;
                held.swap_remove(k);
            }
            for (f, tag) in &held {
                assert_eq!(
                    f.bytes(),
                    &frame(f.bytes().len(), *tag)[..],
                    "a held frame changed"
                );
            }
        }
        assert!(
            refused > 20 && taken > 500,
            "{refused} refused, {taken} taken"
        );
    }

    /// The viewer's check: a frame that would overlap frames it still holds is refused, even
    /// if a plugin (ignoring the read position) wrote it there.
    #[test]
    fn the_reader_refuses_a_frame_over_frames_it_holds() {
        let (mut r, mut w) = pair(MIN_BYTES);
        let capacity = w.ring.capacity;
        let f = frame(MAX_FRAME, 6);
        let a = w.put(&f).unwrap();
        let held = r.take(a.0, a.1).unwrap();
        // A ring's length later: the same bytes as the frame held.
        let over = a.0 + capacity;
        w.ring.write_position().store(over + a.1, Ordering::Release);
        assert!(matches!(r.take(over, a.1), Err(RingError::Overrun { .. })));
        // Unaligned, it is refused before anything else.
        assert!(matches!(
            r.take(a.0 + a.1 + 8, 64),
            Err(RingError::Outside { .. })
        ));
        assert_eq!(held.bytes(), &f[..]);
    }

    #[test]
    fn the_writer_trusts_no_read_position_it_did_not_hand_out() {
        let (_r, mut w) = pair(MIN_BYTES);
        let f = frame(10_000, 2);
        w.put(&f).unwrap();
        for bad in [u64::MAX, w.write + 1, 1 << 40] {
            w.ring.read_position().store(bad, Ordering::Relaxed);
            assert_eq!(w.put(&f), None, "read position {bad}");
        }
        w.ring.read_position().store(w.write, Ordering::Relaxed);
        assert!(w.put(&f).is_some());
    }

    #[test]
    fn the_reader_refuses_positions_outside_its_ring_or_behind_it() {
        let (mut r, mut w) = pair(MIN_BYTES);
        let capacity = r.shared.ring.capacity;
        let f = frame(5_000, 3);
        let (at, len) = w.put(&f).unwrap();
        assert!(matches!(
            r.take(capacity - 8, 16),
            Err(RingError::Outside { .. })
        ));
        assert!(matches!(r.take(0, 0), Err(RingError::Outside { .. })));
        assert!(matches!(
            r.take(0, MAX_FRAME as u64 + 1),
            Err(RingError::Outside { .. })
        ));
        assert_eq!(r.take_copy(at, len).unwrap(), f);
        assert!(matches!(r.take(at, len), Err(RingError::Behind { .. })));
    }

    #[test]
    fn memory_that_is_not_a_ring_is_not_used() {
        assert!(RingWriter::new(IpcSharedMemory::from_byte(0, 0)).is_none());
        assert!(RingWriter::new(IpcSharedMemory::from_byte(0, MIN_BYTES)).is_none());
        assert!(RingWriter::new(IpcSharedMemory::from_byte(0, 1024)).is_none());
        let (_r, offer) = RingReader::new(MIN_BYTES);
        let good = offer.to_vec();
        assert!(RingWriter::new(IpcSharedMemory::from_bytes(&good)).is_some());
        // Capacities past the memory, below two largest frames, or not 16-aligned.
        let huge = u64::MAX - 15;
        for capacity in [
            huge,
            (MIN_BYTES - HEADER + 16) as u64,
            2 * MAX_FRAME as u64 - 16,
            2 * MAX_FRAME as u64 + 8,
        ] {
            let mut bytes = good.clone();
            bytes[8..16].copy_from_slice(&capacity.to_le_bytes());
            assert!(
                RingWriter::new(IpcSharedMemory::from_bytes(&bytes)).is_none(),
                "capacity {capacity}"
            );
        }
        let mut too_big = vec![0u8; MAX_BYTES + 4096];
        too_big[..HEADER].copy_from_slice(&good[..HEADER]);
        assert!(RingWriter::new(IpcSharedMemory::from_bytes(&too_big)).is_none());
    }

    /// Random puts and takes with several frames outstanding, sizes up to 45 % of the ring:
    /// frames that straddle the end start at 0 while earlier ones are still unread, and a
    /// put that finds no room waits for a take.
    #[test]
    fn several_frames_outstanding_in_random_order_of_puts_and_takes() {
        let (mut r, mut w) = pair(MIN_BYTES);
        let capacity = w.ring.capacity;
        let mut queue: std::collections::VecDeque<((u64, u64), Vec<u8>)> = Default::default();
        let mut rand = xorshift(0x9e37_79b9_7f4a_7c15u64);
        let (mut refused, mut straddled) = (0, 0);
        for i in 0..4_000u64 {
            if !rand().is_multiple_of(3) {
                let n = 1 + (rand() % (capacity * 45 / 100)) as usize;
                let f = frame(n.min(MAX_FRAME), i as u8);
                match w.put(&f) {
                    Some(at) => {
                        if at.0 % capacity == 0 && at.0 > 0 {
                            straddled += 1;
                        }
                        queue.push_back((at, f));
                    }
                    None => {
                        refused += 1;
                        let unread: u64 = queue.iter().map(|(a, _)| a.1).sum();
                        assert!(unread + f.len() as u64 > capacity / 2, "refused with room");
                    }
                }
            } else if let Some(((at, len), f)) = queue.pop_front() {
                assert_eq!(r.take_copy(at, len).unwrap(), f);
            }
        }
        while let Some(((at, len), f)) = queue.pop_front() {
            assert_eq!(r.take_copy(at, len).unwrap(), f);
        }
        assert!(
            refused > 100 && straddled > 100,
            "{refused} refused, {straddled} at 0"
        );
    }

    #[test]
    fn the_reader_refuses_what_the_writer_did_not_write() {
        let (mut r, mut w) = pair(MIN_BYTES);
        let f = frame(5_000, 4);
        let (at, len) = w.put(&f).unwrap();
        assert!(matches!(
            r.take(at + 4096, len),
            Err(RingError::Unwritten { .. })
        ));
        // A position near the end of the counter's range: no overflow, refused.
        let capacity = r.shared.ring.capacity;
        let far = u64::MAX - u64::MAX % capacity;
        for at in [far, far + 32, u64::MAX - 8] {
            assert!(r.take(at, 64).is_err(), "{at}");
        }
        assert_eq!(r.take_copy(at, len).unwrap(), f);
    }

    /// Rings made within the budget share it: past it a ring is smaller, then none, and a
    /// ring's bytes come back when it and its frames are gone. (The only test that takes
    /// from the budget: tests run in parallel in one process.)
    #[test]
    fn rings_within_the_budget_share_it_and_give_it_back() {
        let n = BUDGET_BYTES / DEFAULT_BYTES;
        let mut rings: Vec<_> = (0..n)
            .map(|_| RingReader::within_budget(DEFAULT_BYTES).expect("within the budget"))
            .collect();
        assert!(
            RingReader::within_budget(DEFAULT_BYTES).is_none(),
            "budget spent"
        );
        let (mut r, offer) = rings.pop().unwrap();
        let mut w = RingWriter::new(offer).unwrap();
        let (at, len) = w.put(&frame(100, 1)).unwrap();
        let held = r.take(at, len).unwrap();
        drop(r);
        assert!(
            RingReader::within_budget(DEFAULT_BYTES).is_none(),
            "a frame keeps its ring"
        );
        drop(held);
        let (smaller, _) = RingReader::within_budget(DEFAULT_BYTES + MAX_BYTES).unwrap();
        assert_eq!(smaller.shared.granted, DEFAULT_BYTES, "what was left");
        drop(smaller);
        drop(rings);
        assert_eq!(HELD_BYTES.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn sizes_are_clamped_and_the_header_is_where_the_plugin_looks() {
        assert_eq!(RingReader::new(usize::MAX).1.len(), MAX_BYTES);
        let (r, offer) = RingReader::new(1);
        assert_eq!(offer.len(), MIN_BYTES);
        assert_eq!(&offer[..8], b"NCPFRING");
        assert_eq!(
            r.shared.ring.capacity,
            ((MIN_BYTES - HEADER) as u64) & !(ALIGN - 1)
        );
        const {
            assert!(WRITE_AT.is_multiple_of(64) && READ_AT.is_multiple_of(64));
            assert!(WRITE_AT >= 16 && WRITE_AT < READ_AT && READ_AT + 8 <= HEADER);
        };
    }
}
