//! Per-thread capture rings: the only hand-off between NCCL's threads and ours.
//!
//! Every thread that calls the plugin claims one single-producer/single-consumer ring from a
//! pool allocated at the first `init` (zeroed virtual memory: untouched pages cost nothing).
//! The producer writes a slot and publishes it with a release store of `head`; the drain
//! thread reads up to `head` and releases slots with `tail`. A full ring drops the record and
//! counts it: the producer never waits. A thread's ring is released by a pthread key
//! destructor when the thread exits; the drain thread empties it and returns it to the pool.
//!
//! The drain thread also faults each active ring's pages in ahead of its producer
//! ([`Ring::populate_ahead`]): a first touch of an anonymous page is a kernel entry (2–10 µs
//! in a VM), and without this every NCCL thread took one per 64 records until its ring had
//! wrapped once — 0.5–3 s of system time in a 64-rank fake job.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ncclprof_shared::kind::EventKind;

use crate::step_phases::{self, Phases};

/// What a raw record describes.
pub const OP_START: u8 = 1;
pub const OP_STOP: u8 = 2;
pub const OP_STATE: u8 = 3;

/// Raw-record flags.
pub const RF_ARGS_NULL: u8 = 1 << 0;
pub const RF_PARENT_NULL: u8 = 1 << 1;
pub const RF_FOREIGN: u8 = 1 << 2;
/// A ProxyStep stop or state that carries the step's accumulated states
/// ([`crate::step_phases`]): `w[0..3]` = phase times (raw ticks in the ring, host ns once the
/// drain hands the record to completion), `parent` = bytes, `ctx` = SendPeerWait count,
/// `state` = the states seen.
pub const RF_PHASES: u8 = 1 << 3;

/// One captured callback: 64 bytes, written on NCCL's thread, read on the drain thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Raw {
    /// Raw clock value (see `clock`).
    pub ts: u64,
    /// Start: the new event's id. Stop/state: the handle NCCL passed.
    pub id: u64,
    /// Start: `parentObj` as an integer (never dereferenced). State: args word 0.
    pub parent: u64,
    pub op: u8,
    pub kind: u8,
    /// State number (states fit in a byte; larger values are clamped to 255).
    pub state: u8,
    pub flags: u8,
    /// Context slot index (`u32::MAX` unknown).
    pub ctx: u32,
    /// Kind-specific payload (see `descr`).
    pub w: [u64; 4],
}

const _: () = assert!(std::mem::size_of::<Raw>() == 64);

/// Ring states.
const FREE: u32 = 0;
const OWNED: u32 = 1;
/// The owning thread exited; the drain thread frees the ring once it is empty.
const RETIRED: u32 = 2;

#[repr(align(64))]
struct Padded<T>(T);

/// One thread's ring.
pub struct Ring {
    head: Padded<AtomicU64>,
    tail: Padded<AtomicU64>,
    state: AtomicU32,
    /// Next event-id sequence number of this ring (producer-only while owned).
    seq: UnsafeCell<u64>,
    /// Records dropped because the ring was full, by kind (producer writes, drain reads).
    dropped: [AtomicU64; EventKind::COUNT],
    /// Stamp of the newest record dropped (0: none yet): tells the drain which open events
    /// may have lost a record (`Completion::ring_dropped`).
    last_drop_ts: AtomicU64,
    index: u32,
    mask: u64,
    slots: *mut Raw,
    /// The owner's open ProxySteps' states ([`step_phases::SLOTS`] entries, owner-only).
    phases: *mut Phases,
    /// Bytes of the ring's mapping (phases, then slots), from the start, the drain has
    /// faulted in (drain-only).
    populated: AtomicUsize,
}

// SAFETY: `slots` is accessed SPSC-style (producer writes below head, consumer reads between
// tail and head) with acquire/release ordering; `seq` and `phases` are touched only by the
// owning thread.
unsafe impl Sync for Ring {}
// SAFETY: as above; the allocation is owned by the pool for the process's lifetime.
unsafe impl Send for Ring {}

impl Ring {
    /// Index of this ring in the pool (part of every event id it issues).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Next sequence number for an event id (producer side).
    #[inline(always)]
    pub fn next_seq(&self) -> u64 {
        // SAFETY: only the owning thread calls this while the ring is OWNED.
        unsafe {
            let s = &mut *self.seq.get();
            *s += 1;
            *s
        }
    }

    /// The phases entry of the step whose id has sequence number `seq` (producer side).
    ///
    /// # Safety
    /// Only the thread that owns the ring may call this, and it must not hold two of these
    /// references at once.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)] // owner-only, like `next_seq`
    pub unsafe fn phases_of(&self, seq: u64) -> &mut Phases {
        // SAFETY: the index is masked into the table; only the owner touches it (contract).
        unsafe { &mut *self.phases.add(seq as usize & (step_phases::SLOTS - 1)) }
    }

    /// Push a record; false (and counted) if the ring is full. Producer side only.
    #[inline(always)]
    pub fn push(&self, rec: &Raw) -> bool {
        let head = self.head.0.load(Ordering::Relaxed);
        let tail = self.tail.0.load(Ordering::Acquire);
        if head.wrapping_sub(tail) > self.mask {
            if let Some(c) = self.dropped.get(rec.kind as usize) {
                c.fetch_add(1, Ordering::Relaxed);
            }
            self.last_drop_ts.store(rec.ts, Ordering::Relaxed);
            return false;
        }
        // SAFETY: the slot at `head & mask` is not visible to the consumer until the release
        // store below, and the consumer has released it (tail passed it).
        unsafe { self.slots.add((head & self.mask) as usize).write(*rec) };
        self.head.0.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Drain side: the records published so far, as (start, end) sequence numbers.
    pub fn readable(&self) -> (u64, u64) {
        (
            self.tail.0.load(Ordering::Relaxed),
            self.head.0.load(Ordering::Acquire),
        )
    }

    /// Drain side: read the record with sequence number `i` (must be within `readable`).
    pub fn get(&self, i: u64) -> Raw {
        // SAFETY: i is between tail and head, so the producer has published and will not
        // overwrite the slot until tail moves past it.
        unsafe { self.slots.add((i & self.mask) as usize).read() }
    }

    /// Drain side: the records with sequence numbers `t..h` where they are, as the part up
    /// to the ring's end and the part that wrapped to its start.
    ///
    /// # Safety
    /// `t..h` must lie within what [`Ring::readable`] returned, and the slices must not be
    /// used after the drain releases those records ([`Ring::release`]): from then on the
    /// producer may overwrite them. (Their lifetime is the ring's, which the compiler cannot
    /// tie to the release.)
    pub unsafe fn slices(&self, t: u64, h: u64) -> (&[Raw], &[Raw]) {
        let capacity = self.mask + 1;
        debug_assert!(
            h.wrapping_sub(t) <= capacity,
            "{t}..{h} is not a readable range"
        );
        let len = h.wrapping_sub(t).min(capacity) as usize;
        let start = (t & self.mask) as usize;
        let first = len.min(capacity as usize - start);
        // SAFETY: t..h is between tail and head (the caller's contract): published by the
        // producer, which writes no slot of it again until tail moves past it; both parts lie
        // inside the allocation.
        unsafe {
            (
                std::slice::from_raw_parts(self.slots.add(start), first),
                std::slice::from_raw_parts(self.slots, len - first),
            )
        }
    }

    /// Drain side: release records up to `upto`.
    pub fn release(&self, upto: u64) {
        self.tail.0.store(upto, Ordering::Release);
    }

    /// Drain side: fault in up to `budget` more bytes of this ring's slots, lowest first
    /// (producers fill from slot 0), so that NCCL's thread does not take the page faults.
    /// Returns the bytes populated now (0 once the whole ring is, or where the kernel lacks
    /// `MADV_POPULATE_WRITE`, Linux < 5.14: then producers fault pages in as before).
    /// Populating never touches the slots' contents, so it is safe while the producer writes.
    pub fn populate_ahead(&self, budget: usize) -> usize {
        let total = mapping_bytes(self.capacity() as usize);
        let done = self.populated.load(Ordering::Relaxed);
        // Whole pages only: `total` is a multiple of 4096 (at least 64 slots of 64 B).
        let len = (total - done).min(budget) & !4095;
        if len == 0 {
            return 0;
        }
        // SAFETY: the range lies inside this ring's private anonymous mapping; POPULATE_WRITE
        // only allocates page-table entries, it never reads or writes the memory.
        let rc = unsafe {
            libc::madvise(
                self.phases.cast::<u8>().add(done).cast(),
                len,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            // Unsupported kernel or no memory now: leave the rest to first touch.
            self.populated.store(total, Ordering::Relaxed);
            return 0;
        }
        self.populated.store(done + len, Ordering::Relaxed);
        len
    }

    /// Slots in this ring.
    pub fn capacity(&self) -> u64 {
        self.mask + 1
    }

    /// Drops by kind so far.
    pub fn dropped(&self, kind: usize) -> u64 {
        self.dropped[kind].load(Ordering::Relaxed)
    }

    /// Stamp (raw clock) of the newest record this ring dropped; 0 if none.
    pub fn last_drop_ts(&self) -> u64 {
        self.last_drop_ts.load(Ordering::Relaxed)
    }

    pub fn is_active(&self) -> bool {
        self.state.load(Ordering::Acquire) != FREE
    }
}

/// Bytes of one ring's mapping: its phases table, then `cap` slots (whole pages: both are
/// multiples of 4096 bytes).
fn mapping_bytes(cap: usize) -> usize {
    step_phases::SLOTS * std::mem::size_of::<Phases>() + cap * std::mem::size_of::<Raw>()
}

/// The pool of rings, allocated once.
pub struct RingPool {
    rings: Box<[Ring]>,
    /// Records lost because no ring was free, by kind.
    pub no_ring: [AtomicU64; EventKind::COUNT],
    key: libc::pthread_key_t,
}

impl RingPool {
    /// Allocate `count` rings of `capacity` records (rounded up to a power of two).
    pub fn new(count: usize, capacity: usize) -> Option<RingPool> {
        let cap = capacity.clamp(64, 1 << 24).next_power_of_two();
        let count = count.clamp(1, 2047);
        let mut rings = Vec::with_capacity(count);
        for i in 0..count {
            // Anonymous mmap: zero pages the kernel provides on first touch, so rings of
            // threads that never record cost address space only (malloc could memset them).
            // The phases table comes first, so the drain faults it in first.
            let bytes = mapping_bytes(cap);
            // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
            let m = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if m == libc::MAP_FAILED {
                return None;
            }
            let phases = m.cast::<Phases>();
            // SAFETY: the slots follow the table inside the mapping (`mapping_bytes`).
            let slots = unsafe { phases.add(step_phases::SLOTS) }.cast::<Raw>();
            rings.push(Ring {
                head: Padded(AtomicU64::new(0)),
                tail: Padded(AtomicU64::new(0)),
                state: AtomicU32::new(FREE),
                seq: UnsafeCell::new(0),
                dropped: Default::default(),
                last_drop_ts: AtomicU64::new(0),
                index: i as u32,
                mask: (cap - 1) as u64,
                slots,
                phases,
                populated: AtomicUsize::new(0),
            });
        }
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: key is a valid out-pointer; the destructor is an extern "C" fn.
        if unsafe { libc::pthread_key_create(&mut key, Some(release_on_thread_exit)) } != 0 {
            return None;
        }
        Some(RingPool {
            rings: rings.into_boxed_slice(),
            no_ring: Default::default(),
            key,
        })
    }

    pub fn rings(&self) -> &[Ring] {
        &self.rings
    }

    /// Drain side: after emptying a retired ring, return it to the pool.
    pub fn recycle_if_retired(&self, ring: &Ring) {
        let (t, h) = ring.readable();
        if t == h && ring.state.load(Ordering::Acquire) == RETIRED {
            ring.state.store(FREE, Ordering::Release);
        }
    }

    /// Records published and not yet read by the drain, over all rings.
    pub fn unread(&self) -> u64 {
        self.rings
            .iter()
            .map(|r| {
                let (t, h) = r.readable();
                h.saturating_sub(t)
            })
            .sum()
    }

    /// Rings currently owned or waiting to be emptied.
    pub fn in_use(&self) -> u32 {
        self.rings.iter().filter(|r| r.is_active()).count() as u32
    }

    /// The calling thread's ring, claiming one on first use. `None` if none is free.
    #[inline(always)]
    pub fn mine(&'static self) -> Option<&'static Ring> {
        let p = MY_RING.with(Cell::get);
        if p.is_null() {
            return self.claim();
        }
        if p == EXITED {
            // A pthread-key destructor that runs after ours called NCCL: this thread's ring
            // is retired and may already be another thread's. Counted as `no ring`.
            return None;
        }
        // SAFETY: MY_RING only ever holds null, EXITED or a pointer into this 'static pool.
        Some(unsafe { &*p })
    }

    #[cold]
    fn claim(&'static self) -> Option<&'static Ring> {
        for r in self.rings.iter() {
            if r.state
                .compare_exchange(FREE, OWNED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                MY_RING.with(|c| c.set(r));
                // SAFETY: the key was created in `new`; the value is a pointer to a 'static ring
                // that the destructor marks retired. The first keys live in the thread
                // descriptor, so this does not allocate.
                unsafe { libc::pthread_setspecific(self.key, (r as *const Ring).cast()) };
                return Some(r);
            }
        }
        None
    }
}

thread_local! {
    /// This thread's ring (null until claimed). Const-initialised, no destructor: the fast
    /// path is one TLS load.
    static MY_RING: Cell<*const Ring> = const { Cell::new(std::ptr::null()) };
}

extern "C" fn release_on_thread_exit(p: *mut libc::c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: the value was set by `claim` to a ring of the 'static pool.
    let ring = unsafe { &*(p as *const Ring) };
    // Later destructors on this thread that call NCCL must not push to the retired ring,
    // which the drain may free and another thread claim.
    let _ = MY_RING.try_with(|c| c.set(EXITED));
    ring.state.store(RETIRED, Ordering::Release);
}

/// `MY_RING` of a thread whose ring was retired by the key destructor (never dereferenced).
const EXITED: *const Ring = std::ptr::dangling();

/// Forget this thread's ring without releasing it (used in a forked child, whose rings are
/// copies the parent's drain thread will never see).
pub fn forget_my_ring() {
    let _ = MY_RING.try_with(|c| c.set(std::ptr::null()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> &'static RingPool {
        Box::leak(Box::new(RingPool::new(4, 64).unwrap()))
    }

    /// Pages of `len` bytes at `p` that are resident.
    fn resident_pages(p: *const Raw, len: usize) -> usize {
        let mut v = vec![0u8; len.div_ceil(4096)];
        // SAFETY: the range is a mapping of the ring; `v` has one byte per page.
        let rc = unsafe { libc::mincore(p as *mut libc::c_void, len, v.as_mut_ptr()) };
        assert_eq!(rc, 0);
        v.iter().filter(|b| **b & 1 != 0).count()
    }

    #[test]
    fn drain_populates_ring_pages_ahead_of_the_producer() {
        // The phases table (1024 entries of 64 B = 16 pages), then 1024 slots of 64 B = 16
        // pages: the table is faulted in first.
        let table = step_phases::SLOTS * 64;
        let p = Box::leak(Box::new(RingPool::new(1, 1024).unwrap()));
        let r = &p.rings()[0];
        let all = |r: &Ring| resident_pages(r.phases.cast(), table + 65536);
        assert_eq!(all(r), 0);
        assert_eq!(r.populate_ahead(8192 + 100), 8192);
        assert_eq!(resident_pages(r.phases.cast(), table), 2);
        assert_eq!(r.populate_ahead(table - 8192), table - 8192);
        assert_eq!(resident_pages(r.slots, 65536), 0, "table first");
        assert_eq!(r.populate_ahead(8192), 8192);
        assert_eq!(resident_pages(r.slots, 65536), 2);
        assert_eq!(r.populate_ahead(1 << 20), 65536 - 8192);
        assert_eq!(all(r), 32);
        assert_eq!(r.populate_ahead(1 << 20), 0);
        // Contents untouched: still the kernel's zero pages' values, and pushes still work.
        let r = p.mine().unwrap();
        assert_eq!(r.get(0), Raw::default());
        let rec = Raw {
            kind: 3,
            ts: 7,
            ..Raw::default()
        };
        assert!(r.push(&rec));
        assert_eq!(r.get(0), rec);
    }

    #[test]
    fn push_drain_and_drop_when_full() {
        let p = pool();
        let r = p.mine().unwrap();
        let rec = Raw {
            kind: 1,
            ..Default::default()
        };
        for _ in 0..64 {
            assert!(r.push(&rec));
        }
        assert!(!r.push(&rec));
        assert_eq!(r.dropped(1), 1);
        let (t, h) = r.readable();
        assert_eq!(h - t, 64);
        assert_eq!(r.get(t), rec);
        r.release(h);
        assert!(r.push(&rec));
    }

    #[test]
    fn slices_give_the_readable_records_in_order_across_the_wrap() {
        let p = pool();
        std::thread::spawn(move || {
            let r = p.mine().unwrap();
            let rec = |ts| Raw {
                ts,
                kind: 1,
                ..Default::default()
            };
            // 40 in and out, then 50 more: slots 40..63 and 0..25 (64 slots).
            for ts in 1..=40 {
                assert!(r.push(&rec(ts)));
            }
            let (t, h) = r.readable();
            // SAFETY: a readable range, used before its release.
            let (a, b) = unsafe { r.slices(t, h) };
            assert_eq!((a.len(), b.len()), (40, 0));
            r.release(h);
            for ts in 41..=90 {
                assert!(r.push(&rec(ts)));
            }
            let (t, h) = r.readable();
            // SAFETY: a readable range, used before its release.
            let (a, b) = unsafe { r.slices(t, h) };
            assert_eq!((a.len(), b.len()), (24, 26));
            let got: Vec<u64> = a.iter().chain(b).map(|x| x.ts).collect();
            assert_eq!(got, (41..=90).collect::<Vec<_>>());
            assert_eq!(a[0], r.get(t));
            assert_eq!(b[25], r.get(h - 1));
            // A part of the range past the wrap: one contiguous part.
            // SAFETY: as above.
            let (a, b) = unsafe { r.slices(t + 30, h) };
            assert_eq!((a.len(), b.len()), (20, 0));
            assert_eq!((a[0].ts, a[19].ts), (71, 90));
            r.release(h);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn threads_get_distinct_rings_and_release_them() {
        let p = pool();
        let a = std::thread::spawn(move || p.mine().unwrap().index())
            .join()
            .unwrap();
        // The first thread exited: its ring is retired, then recycled once empty.
        let ring = &p.rings()[a as usize];
        assert_eq!(ring.state.load(Ordering::Acquire), RETIRED);
        p.recycle_if_retired(ring);
        assert!(!ring.is_active());
        let held = p.mine().unwrap();
        let b = std::thread::spawn(move || p.mine().unwrap().index())
            .join()
            .unwrap();
        assert_ne!(held.index(), b);
    }

    /// A pthread-key destructor that runs after ours and calls NCCL gets no ring instead of
    /// the retired one, which the drain may hand to another thread.
    #[test]
    fn calls_after_the_ring_was_retired_on_thread_exit_get_no_ring() {
        static POOL: std::sync::OnceLock<&'static RingPool> = std::sync::OnceLock::new();
        static AFTER: std::sync::Mutex<Option<bool>> = std::sync::Mutex::new(None);
        extern "C" fn late(_: *mut libc::c_void) {
            let p = POOL.get().unwrap();
            *AFTER.lock().unwrap() = Some(p.mine().is_none());
        }
        let p = *POOL.get_or_init(pool);
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: valid out-pointer; created after the pool's key, so glibc runs it later.
        assert_eq!(unsafe { libc::pthread_key_create(&mut key, Some(late)) }, 0);
        let index = std::thread::spawn(move || {
            let i = p.mine().unwrap().index();
            // SAFETY: any non-null value makes the destructor run.
            unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<u8>().cast()) };
            i
        })
        .join()
        .unwrap();
        assert_eq!(*AFTER.lock().unwrap(), Some(true));
        assert_eq!(
            p.rings()[index as usize].state.load(Ordering::Acquire),
            RETIRED
        );
    }
}
