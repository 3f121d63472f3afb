//! The store: compact, chunked, time-indexed retention of records per lane (process, comm,
//! rank), with a memory cap that evicts the oldest chunks (counted and shown).
//!
//! Every table is a [`Series`]: a deque of chunks, each sorted by start time, with its time
//! range and longest item, so a window query touches only the chunks and items it overlaps.
//! Proxy steps, by far the most numerous records, are packed into 32-byte [`Step`]s with u32
//! offsets from their chunk's base time.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use ncclprof_shared::record::EventRecord;

/// Drop reasons, as the views name them (re-exported so views need no wire types).
pub use ncclprof_shared::wire::DropReason;

/// Fx hashing (as in `rustc-hash`) for the store's small integer keys: a multiply per word
/// instead of SipHash's rounds. The keys are ours (process/comm/rank indexes), not an
/// attacker's, so DoS resistance buys nothing here.
#[derive(Debug, Clone, Copy, Default)]
pub struct FxBuild;

impl BuildHasher for FxBuild {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

/// The hasher of [`FxBuild`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut it = bytes.chunks_exact(8);
        for c in &mut it {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        for &b in it.remainder() {
            self.add(u64::from(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Something with a start and end time, possibly relative to its chunk's base.
pub trait Timed: Copy {
    fn start(&self, base: u64) -> u64;
    fn end(&self, base: u64) -> u64;
}

/// A run of items sorted by start time.
#[derive(Debug, Clone)]
pub struct Chunk<T> {
    pub base: u64,
    pub min_start: u64,
    pub max_end: u64,
    pub max_dur: u64,
    pub items: Vec<T>,
    /// Items the chunk is accounted for, never less than `items.len()`. A chunk that grows by
    /// reallocation is accounted at its capacity (64, 128, … items); a chunk allocated at full
    /// size up front (see [`Series::new`]) at the 4 KiB pages its items have reached, which is
    /// what a fresh allocation costs in resident memory. A chunk made on an evicted chunk's
    /// allocation (`Series::spare`) starts at that chunk's count: those pages stay resident.
    acct: usize,
    /// `items[..i]` is sorted and nothing after it starts before `items[i - 1]`: sorting
    /// `items[i..]` ([`Series::settle`]) sorts the chunk. Late items are appended and sorted
    /// once per batch: inserting each in place moved the chunk's tail every time, quadratic
    /// when several threads' records for one lane interleave (36 % of the viewer's CPU with
    /// four producer threads in the stream bench).
    unsorted_from: Option<usize>,
}

/// A late item that belongs at most this many items from a sorted chunk's end is inserted
/// there; one that belongs further back is appended and sorted at `settle`.
const INSERT_IN_PLACE: usize = 64;

/// Where an item starting at `s` belongs in `items` (sorted by start): after every item that
/// starts at or before it, as `partition_point` would say. Late items are usually late by a
/// little, so this searches back from the end, doubling the stride, then bisects the last
/// stride (fewer probes, and only the tail is touched).
fn insertion_point<T: Timed>(items: &[T], base: u64, s: u64) -> usize {
    let n = items.len();
    let mut lo_back = 0; // items[n - lo_back..] all start after s
    let mut hi_back = 1;
    while hi_back <= n && items[n - hi_back].start(base) > s {
        lo_back = hi_back;
        hi_back *= 2;
    }
    // items[n - hi_back] (if it exists) starts at or before s: the answer is after it.
    let lo = if hi_back <= n { n - hi_back + 1 } else { 0 };
    lo + items[lo..n - lo_back].partition_point(|x| x.start(base) <= s)
}

impl<T: Timed> Chunk<T> {
    /// The items that may overlap `[from, to]` (settled chunk): from the first that starts at
    /// or after `from - max_dur` (none before it reaches `from`) to the last that starts at or
    /// before `to`. An end of the chunk inside the window needs no search there: over a long
    /// window every chunk is inside, and a binary search over a chunk not in cache is a miss
    /// per probe (a third of the Proxy view's frame over 10 s of 9 M events).
    fn candidates(&self, from: u64, to: u64) -> (usize, usize) {
        let lo_t = from.saturating_sub(self.max_dur);
        // Sorted: the first item starts at `min_start`.
        let lo = if self.min_start >= lo_t {
            0
        } else {
            self.items.partition_point(|x| x.start(self.base) < lo_t)
        };
        let hi = match self.items.last() {
            Some(l) if l.start(self.base) <= to => self.items.len(),
            _ => self.items.partition_point(|x| x.start(self.base) <= to),
        };
        (lo, hi)
    }

    fn settle(&mut self) {
        if let Some(from) = self.unsorted_from.take() {
            let base = self.base;
            // Stable: items that start together keep their arrival order.
            self.items[from..].sort_by_key(|x| x.start(base));
        }
    }
}

/// Full chunks at least this large are allocated at their full size when the chunk is made,
/// instead of growing by doubling: no reallocation copies, and the untouched tail costs no
/// memory until it is written (a fresh allocation's pages are faulted in as they are filled).
const PRESIZE_BYTES: usize = 128 << 10;

/// Items of type `T` in `bytes` (at least 1).
const fn items_in<T>(bytes: usize) -> usize {
    let n = bytes / std::mem::size_of::<T>();
    if n == 0 { 1 } else { n }
}

/// Items of type `T` in one 4 KiB page (at least 1).
const fn page_items<T>() -> usize {
    items_in::<T>(4096)
}

/// How many consecutive items `Series::window_strided` takes at a time when it samples:
/// 512 bytes' worth (16 proxy steps), at least one.
pub const fn sample_run<T>() -> usize {
    items_in::<T>(512)
}

/// A fixed scramble of a 64-bit value (splitmix64's finalizer): where a sample run falls in
/// its stratum, the same every frame.
const fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// What a [`Series::sample`] of a window stands for: the window's items (`count_in`) and
/// how many of them the sample looked at.
#[derive(Debug, Clone, Copy)]
pub struct Sampled {
    pub in_window: usize,
    pub looked_at: usize,
}

impl Sampled {
    /// `x`, summed over the sample, scaled back to the window (unchanged if all was read).
    pub fn scale(&self, x: u64) -> u64 {
        if self.looked_at >= self.in_window {
            return x;
        }
        (x as u128 * self.in_window as u128 / self.looked_at.max(1) as u128) as u64
    }

    /// How many of the window's items each sampled one stands for (1.0: all were read).
    pub fn stands_for(&self) -> f64 {
        self.in_window as f64 / self.looked_at.max(1) as f64
    }
}

/// A time-indexed table of one record type.
///
/// Only the newest chunk takes items. It is owned (`open`), so a push costs no atomic; the
/// chunks before it never change again and are shared (`sealed`), so cloning a series, which
/// the live viewer's snapshot does on the UI thread, copies at most one chunk's items.
#[derive(Debug, Clone)]
pub struct Series<T> {
    /// Older chunks, oldest first: full, or superseded by a chunk with an earlier base.
    sealed: VecDeque<Arc<Chunk<T>>>,
    /// The newest chunk.
    open: Option<Chunk<T>>,
    chunk_cap: usize,
    /// Allowance below a new chunk's first start for items that arrive slightly out of order.
    slack: u64,
    len: usize,
    bytes: usize,
    /// Allocate new chunks at `chunk_cap` items at once.
    presize: bool,
    /// The allocation of a chunk this series evicted (emptied, capacity kept) for its next
    /// chunk: at the cap every new chunk was a fresh allocation whose pages the kernel zeroed
    /// as they were filled (4.6 % of the viewer's samples at 8 M events/s). Presized series
    /// only, and one at most. A clone's copy has no capacity, so it is never taken.
    ///
    /// Not in `bytes`: counted there, the eviction that keeps it would free nothing, the cap
    /// would evict a second chunk for each one kept, and since a chunk is made before the
    /// evictions it causes, only every other chunk would find a spare. It is bounded instead:
    /// one chunk per presized table (kernels, proxy ops and steps: 144 + 160 + 256 KiB per
    /// lane), all spares together at most [`SPARE_SHARE`] of the store's cap
    /// ([`Store::enforce_cap`]), and let go when eviction empties the series, so a table that
    /// stopped keeps one only until its last records go.
    spare: Vec<T>,
    /// `acct` of the chunk `spare` came from: the items its resident pages hold.
    spare_acct: usize,
}

impl<T: Timed> Series<T> {
    pub fn new(chunk_cap: usize, slack: u64) -> Self {
        Series {
            sealed: VecDeque::new(),
            open: None,
            chunk_cap,
            slack,
            len: 0,
            bytes: 0,
            presize: chunk_cap.saturating_mul(std::mem::size_of::<T>()) >= PRESIZE_BYTES,
            spare: Vec::new(),
            spare_acct: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held (as accounted: a chunk counts for the items it has grown to hold; the
    /// spare allocation does not, see `spare`).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Insert an item starting at `start` (absolute ns); `pack` builds it relative to a chunk
    /// base and returns None if it cannot be represented against that base. Returns the change
    /// in heap bytes.
    #[inline]
    pub fn push(&mut self, start: u64, pack: impl Fn(u64) -> Option<T>) -> isize {
        let before = self.bytes;
        let mut item = None;
        if let Some(c) = &self.open
            && c.items.len() < self.chunk_cap
            && start >= c.base
        {
            item = pack(c.base);
        }
        let item = match item {
            Some(i) => i,
            None => {
                let base = start.saturating_sub(self.slack);
                let Some(i) = pack(base) else {
                    return 0;
                };
                self.new_chunk(base);
                i
            }
        };
        let size = std::mem::size_of::<T>();
        let chunk_cap = self.chunk_cap;
        let Some(c) = self.open.as_mut() else {
            return 0;
        };
        let (s, e) = (item.start(c.base), item.end(c.base));
        if c.items.len() == c.acct {
            let want = if self.presize {
                c.acct + page_items::<T>()
            } else {
                c.acct * 2
            };
            let want = want.min(chunk_cap).max(1);
            if c.items.capacity() < want {
                c.items.reserve_exact(want - c.items.len());
            }
            self.bytes += (want - c.acct) * size;
            c.acct = want;
        }
        match c.unsorted_from {
            None if c.items.last().is_none_or(|l| l.start(c.base) <= s) => c.items.push(item),
            None => {
                let pos = insertion_point(&c.items, c.base, s);
                if c.items.len() - pos <= INSERT_IN_PLACE {
                    // Late by a little (one thread's steps stop out of start order): a short
                    // move keeps the chunk sorted.
                    c.items.insert(pos, item);
                } else {
                    c.unsorted_from = Some(pos);
                    c.items.push(item);
                }
            }
            Some(from) => {
                if from > 0 && c.items[from - 1].start(c.base) > s {
                    c.unsorted_from = Some(insertion_point(&c.items[..from], c.base, s));
                }
                c.items.push(item);
            }
        }
        c.min_start = c.min_start.min(s);
        c.max_end = c.max_end.max(e);
        c.max_dur = c.max_dur.max(e.saturating_sub(s));
        self.len += 1;
        self.bytes as isize - before as isize
    }

    /// Sort what `push` appended out of order (cheap when nothing was). Every reader below
    /// needs it: call after each batch of pushes.
    #[inline]
    pub fn settle(&mut self) {
        if let Some(c) = self.open.as_mut() {
            c.settle();
        }
    }

    /// Whether every chunk is sorted (no `push` since the last `settle` was out of order).
    pub fn is_settled(&self) -> bool {
        self.open.as_ref().is_none_or(|c| c.unsorted_from.is_none())
    }

    #[cold]
    fn new_chunk(&mut self, base: u64) {
        let (mut acct, alloc) = if self.presize {
            (self.chunk_cap.min(page_items::<T>()), self.chunk_cap)
        } else {
            (self.chunk_cap.min(64), self.chunk_cap.min(64))
        };
        // Only the open chunk takes items, so only it can be unsorted: sorted as it is sealed.
        if let Some(mut full) = self.open.take() {
            full.settle();
            self.sealed.push_back(Arc::new(full));
        }
        let items = if self.spare.capacity() >= alloc {
            acct = acct.max(std::mem::take(&mut self.spare_acct));
            std::mem::take(&mut self.spare)
        } else {
            Vec::with_capacity(alloc)
        };
        self.open = Some(Chunk {
            base,
            min_start: u64::MAX,
            max_end: 0,
            max_dur: 0,
            items,
            acct,
            unsorted_from: None,
        });
        self.bytes += acct * std::mem::size_of::<T>();
    }

    /// Start of the oldest chunk, if any.
    pub fn oldest(&self) -> Option<u64> {
        self.chunks().next().map(|c| c.min_start)
    }

    /// Bytes of the spare allocation (see `spare`).
    pub fn spare_bytes(&self) -> usize {
        self.spare.capacity() * std::mem::size_of::<T>()
    }

    /// Drop the oldest chunk: (items, bytes) freed. With `keep_spare`, its allocation becomes
    /// the spare of a presized series (see `spare`) unless a snapshot still holds the chunk,
    /// which frees it when written.
    pub fn evict_oldest(&mut self, keep_spare: bool) -> (usize, usize) {
        let (items, acct, owned) = match self.sealed.pop_front() {
            Some(c) => (c.items.len(), c.acct, Arc::into_inner(c)),
            None => match self.open.take() {
                Some(c) => (c.items.len(), c.acct, Some(c)),
                None => return (0, 0),
            },
        };
        let b = acct * std::mem::size_of::<T>();
        self.len -= items;
        self.bytes -= b;
        if self.open.is_none() {
            // Emptied: the store evicts the table whose oldest chunk starts first, and this one
            // had no newer chunk, so it has most likely stopped taking records and would hold
            // the spare for nothing.
            self.spare = Vec::new();
            self.spare_acct = 0;
        } else if self.presize
            && keep_spare
            && let Some(mut c) = owned
        {
            c.items.clear();
            self.spare = c.items;
            self.spare_acct = c.acct;
        }
        (items, b)
    }

    /// Every chunk, oldest first.
    fn chunks(&self) -> impl DoubleEndedIterator<Item = &Chunk<T>> + '_ {
        self.sealed.iter().map(|c| &**c).chain(self.open.iter())
    }

    /// Items overlapping `[from, to]`, with their chunk base, roughly in start order.
    pub fn window(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, &T)> + '_ {
        debug_assert!(self.is_settled(), "Series read before settle()");
        self.chunks()
            .filter(move |c| c.min_start <= to && c.max_end >= from)
            .flat_map(move |c| {
                let (lo, hi) = c.candidates(from, to);
                c.items[lo..hi.max(lo)]
                    .iter()
                    .filter(move |x| x.end(c.base) >= from)
                    .map(move |x| (c.base, x))
            })
    }

    /// Like [`Series::window`], but after each item skips the items that start less than
    /// `cell` ns after it (one per screen cell is enough to draw); `cell` 0 = every item.
    /// Cost is bounded by the number of cells, not by the items in the window.
    pub fn window_sampled(&self, from: u64, to: u64, cell: u64, mut f: impl FnMut(u64, &T)) {
        debug_assert!(self.is_settled(), "Series read before settle()");
        for c in self
            .chunks()
            .filter(|c| c.min_start <= to && c.max_end >= from)
        {
            let (mut i, hi) = c.candidates(from, to);
            while i < hi {
                let x = &c.items[i];
                let (s, e) = (x.start(c.base), x.end(c.base));
                if e >= from {
                    f(c.base, x);
                }
                if cell == 0 || e < from {
                    i += 1;
                } else {
                    let next = s.saturating_add(cell);
                    i += 1 + c.items[i + 1..hi].partition_point(|y| y.start(c.base) < next);
                }
            }
        }
    }

    /// Roughly how many items overlap the window (from the chunks' indexes; no scan).
    pub fn count_in(&self, from: u64, to: u64) -> usize {
        debug_assert!(self.is_settled(), "Series read before settle()");
        self.chunks()
            .filter(|c| c.min_start <= to && c.max_end >= from)
            .map(|c| {
                let (lo, hi) = c.candidates(from, to);
                hi.saturating_sub(lo)
            })
            .sum()
    }

    /// About `max` of the items overlapping the window (all of them, up to `max`): the one
    /// place the views' bounded sums choose their stride ([`Series::window_strided`]).
    pub fn sample(&self, from: u64, to: u64, max: usize, f: impl FnMut(u64, &T)) -> Sampled {
        let in_window = self.count_in(from, to);
        let stride = in_window.div_ceil(max.max(1)).max(1);
        let looked_at = self.window_strided(from, to, stride, f);
        Sampled {
            in_window,
            looked_at,
        }
    }

    /// About one in `stride` of the items overlapping the window (all of them at 1), for
    /// sums and shares over a long window at bounded cost; returns how many items it looked
    /// at (those it passed to `f`, and those in its runs that end before the window), so that
    /// `count_in / returned` scales a sum back to the window's.
    ///
    /// Each chunk's items are cut into strata of `stride` runs of [`sample_run`] consecutive
    /// items, at fixed places in the chunk (a window that moves keeps its inner strata's
    /// samples), and one run is taken from each, from a place drawn in the stratum (fixed
    /// too), wrapping round to the stratum's start; a stratum the window cuts gives a run in
    /// proportion. Runs, not single items:
    /// over a long window of a dense lane, single items `stride` apart were a cache and TLB
    /// miss each (kilobytes apart), 41 % of the Proxy view's frame over 10 s at 9 M events;
    /// a run of 512 bytes is a few lines the prefetcher brings together. Drawn, not every
    /// `stride`-th: items come in cycles (a collective's 32 kernel channels, a ProxyOp's
    /// steps), and a stride that is a multiple of one could only ever sample the same places
    /// in it (one channel of 32 at a stride of 32).
    pub fn window_strided(
        &self,
        from: u64,
        to: u64,
        stride: usize,
        mut f: impl FnMut(u64, &T),
    ) -> usize {
        debug_assert!(self.is_settled(), "Series read before settle()");
        let stride = stride.max(1);
        let run = sample_run::<T>();
        let span = run.saturating_mul(stride);
        let mut looked_at = 0;
        for c in self
            .chunks()
            .filter(|c| c.min_start <= to && c.max_end >= from)
        {
            let (lo, hi) = c.candidates(from, to);
            let hi = hi.max(lo);
            let mut take = |xs: &[T]| {
                looked_at += xs.len();
                for x in xs.iter().filter(|x| x.end(c.base) >= from) {
                    f(c.base, x);
                }
            };
            if stride == 1 {
                take(&c.items[lo..hi]);
                continue;
            }
            let mut stratum = lo / span;
            while stratum * span < hi {
                let (a, b) = ((stratum * span).max(lo), ((stratum + 1) * span).min(hi));
                let n = (b - a).div_ceil(stride).min(run);
                // Drawn over the whole stratum, the run wrapping round to its start: every
                // item as likely as any other (a run kept inside it would seldom take the
                // items near its ends, and items come in cycles).
                let hash = mix64(c.base ^ (stratum as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let at = a + (hash % (b - a) as u64) as usize;
                let first = n.min(b - at);
                take(&c.items[at..at + first]);
                take(&c.items[a..a + (n - first)]);
                stratum += 1;
            }
        }
        looked_at
    }

    /// Every item, oldest chunk first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        debug_assert!(self.is_settled(), "Series read before settle()");
        self.chunks()
            .flat_map(|c| c.items.iter().map(move |x| (c.base, x)))
    }

    /// The last `n` items of the newest chunks (newest last is not guaranteed across chunks).
    pub fn latest(&self, n: usize) -> impl Iterator<Item = (u64, &T)> + '_ {
        debug_assert!(self.is_settled(), "Series read before settle()");
        let mut left = n;
        let mut picked = Vec::new();
        for c in self.chunks().rev() {
            if left == 0 {
                break;
            }
            let take = left.min(c.items.len());
            picked.push((c, c.items.len() - take));
            left -= take;
        }
        picked
            .into_iter()
            .rev()
            .flat_map(|(c, from)| c.items[from..].iter().map(move |x| (c.base, x)))
    }

    /// Time range covered.
    pub fn span(&self) -> Option<(u64, u64)> {
        let lo = self.chunks().map(|c| c.min_start).min()?;
        let hi = self.chunks().map(|c| c.max_end).max()?;
        Some((lo, hi))
    }
}

/// A collective, point-to-point or copy-engine operation (Coll / P2p / CeColl records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub id: u64,
    pub parent: u64,
    pub start: u64,
    pub end: u64,
    pub enq_stop: u64,
    pub exec_start: u64,
    pub seq: u64,
    pub count: u64,
    pub n_warps: u64,
    /// func, datatype, algo, proto string ids (per process).
    pub strings: [u16; 4],
    /// Root (Coll) or peer (P2p).
    pub x: u32,
    pub n_channels: u8,
    pub kind: u8,
    pub flags: u16,
}

impl Timed for Op {
    fn start(&self, _: u64) -> u64 {
        self.start
    }
    fn end(&self, _: u64) -> u64 {
        self.end.max(self.start)
    }
}

/// One kernel channel of an op (KernelCh).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    pub id: u64,
    pub parent: u64,
    pub start: u64,
    pub end: u64,
    pub gpu_start: u64,
    pub gpu_stop: u64,
    pub cpu_start: u64,
    pub cpu_stop: u64,
    pub gpu_id: u32,
    pub channel: u8,
    pub flags: u16,
}

impl Timed for Kernel {
    fn start(&self, _: u64) -> u64 {
        self.start
    }
    fn end(&self, _: u64) -> u64 {
        self.end.max(self.start)
    }
}

/// One proxy operation (ProxyOp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyOp {
    pub id: u64,
    pub parent: u64,
    pub start: u64,
    pub end: u64,
    pub in_progress: u64,
    pub bytes: u64,
    pub pid: u64,
    pub chunk_size: u64,
    pub n_steps: u32,
    pub peer: u32,
    pub channel: u8,
    pub states: u8,
    pub flags: u16,
}

impl Timed for ProxyOp {
    fn start(&self, _: u64) -> u64 {
        self.start
    }
    fn end(&self, _: u64) -> u64 {
        self.end.max(self.start)
    }
}

/// Step flag bits (a compact subset of the record flags).
pub const S_SEND: u8 = 1;
pub const S_FOREIGN: u8 = 2;
pub const S_RESTARTED: u8 = 4;

/// One proxy step in 32 bytes: times as u32 offsets (phase times relative to the step start,
/// +1 so that 0 still means "state not seen").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Step {
    pub start: u32,
    pub dur: u32,
    pub a: u32,
    pub b: u32,
    pub c: u32,
    pub trans: u32,
    pub peer: u16,
    pub step: u16,
    pub retries: u16,
    pub channel: u8,
    pub flags: u8,
}

const _: () = assert!(std::mem::size_of::<Step>() == 32);

fn sat32(v: u64) -> u32 {
    v.min(u64::from(u32::MAX)) as u32
}

impl Step {
    /// Pack a ProxyStep record against `base`; None if it starts before `base` or too far after.
    pub fn pack(r: &EventRecord, base: u64) -> Option<Step> {
        let off = r.start_ns.checked_sub(base)?;
        if off > u64::from(u32::MAX) {
            return None;
        }
        let rel = |t: u64| {
            if t == 0 {
                0
            } else {
                sat32(t.saturating_sub(r.start_ns).saturating_add(1))
            }
        };
        let mut flags = 0;
        if r.has(ncclprof_shared::record::F_SEND) {
            flags |= S_SEND;
        }
        if r.has(ncclprof_shared::record::F_FOREIGN) {
            flags |= S_FOREIGN;
        }
        if r.has(ncclprof_shared::record::F_RESTARTED) {
            flags |= S_RESTARTED;
        }
        Some(Step {
            start: off as u32,
            dur: sat32(r.end_ns.saturating_sub(r.start_ns)),
            a: rel(r.p[1]),
            b: rel(r.p[2]),
            c: rel(r.p[3]),
            trans: sat32(r.p[4]),
            peer: r.x.min(u32::from(u16::MAX)) as u16,
            step: r.p[0].min(u64::from(u16::MAX)) as u16,
            retries: r.p[5].min(u64::from(u16::MAX)) as u16,
            channel: r.sub,
            flags,
        })
    }

    /// Rebuild an (id-less) record, for the phase arithmetic and the snapshot.
    pub fn unpack(&self, base: u64) -> EventRecord {
        let start = base + u64::from(self.start);
        let abs = |o: u32| {
            if o == 0 { 0 } else { start + u64::from(o) - 1 }
        };
        let mut flags = 0;
        if self.flags & S_SEND != 0 {
            flags |= ncclprof_shared::record::F_SEND;
        }
        if self.flags & S_FOREIGN != 0 {
            flags |= ncclprof_shared::record::F_FOREIGN;
        }
        if self.flags & S_RESTARTED != 0 {
            flags |= ncclprof_shared::record::F_RESTARTED;
        }
        EventRecord {
            start_ns: start,
            end_ns: start + u64::from(self.dur),
            kind: ncclprof_shared::kind::EventKind::ProxyStep as u8,
            sub: self.channel,
            flags,
            x: u32::from(self.peer),
            p: [
                u64::from(self.step),
                abs(self.a),
                abs(self.b),
                abs(self.c),
                u64::from(self.trans),
                u64::from(self.retries),
            ],
            ..Default::default()
        }
    }
}

impl Timed for Step {
    fn start(&self, base: u64) -> u64 {
        base + u64::from(self.start)
    }
    fn end(&self, base: u64) -> u64 {
        base + u64::from(self.start) + u64::from(self.dur)
    }
}

impl Timed for EventRecord {
    fn start(&self, _: u64) -> u64 {
        self.start_ns
    }
    fn end(&self, _: u64) -> u64 {
        self.end_ns.max(self.start_ns)
    }
}

/// Where a lane's records come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LaneKey {
    pub proc: usize,
    /// Index in the process's communicator table (`u32::MAX` = none).
    pub comm: u32,
    pub rank: i32,
}

/// All records of one rank of one communicator in one process.
#[derive(Debug, Clone)]
pub struct Lane {
    pub key: LaneKey,
    pub ops: Series<Op>,
    pub kernels: Series<Kernel>,
    pub proxy_ops: Series<ProxyOp>,
    pub steps: Series<Step>,
    pub other: Series<EventRecord>,
    /// Recent completed ops' times by func string id (for hang verdicts), newest last.
    pub recent: HashMap<u16, VecDeque<Recent>>,
    /// The highest seq of each function's collectives received (func string id → (seq,
    /// end)), kept through eviction: tells by seq, not by time, whether a rank has passed a
    /// hung collective ([`crate::model::query::HangSummary`]).
    pub last_seq: HashMap<u16, (u64, u64)>,
}

/// A completed op's times, for hang verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recent {
    /// From its execution start ([`crate::model::analysis::run_time`]).
    pub run: u64,
    /// From its start (enqueue) to its end.
    pub total: u64,
}

/// How many recent durations per func a lane keeps.
pub const RECENT: usize = 64;

impl Lane {
    /// Sort what this batch appended out of order, in every table (see [`Series::settle`]).
    pub fn settle(&mut self) {
        self.ops.settle();
        self.kernels.settle();
        self.proxy_ops.settle();
        self.steps.settle();
        self.other.settle();
    }

    fn new(key: LaneKey) -> Self {
        Lane {
            key,
            // Absolute-time tables take base 0 (an infinite slack): every item fits.
            ops: Series::new(1024, u64::MAX),
            kernels: Series::new(2048, u64::MAX),
            proxy_ops: Series::new(2048, u64::MAX),
            steps: Series::new(8192, 1 << 29),
            other: Series::new(1024, u64::MAX),
            recent: HashMap::new(),
            last_seq: HashMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.ops.len()
            + self.kernels.len()
            + self.proxy_ops.len()
            + self.steps.len()
            + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bytes(&self) -> usize {
        self.ops.bytes()
            + self.kernels.bytes()
            + self.proxy_ops.bytes()
            + self.steps.bytes()
            + self.other.bytes()
    }

    fn spare_bytes(&self) -> usize {
        self.ops.spare_bytes()
            + self.kernels.spare_bytes()
            + self.proxy_ops.spare_bytes()
            + self.steps.spare_bytes()
            + self.other.spare_bytes()
    }
}

/// Evict `s`'s oldest chunk, keeping its allocation as the spare only where that adds at most
/// `room` bytes to all spares together. Returns (items, bytes freed, change in spare bytes).
fn evict_within<T: Timed>(s: &mut Series<T>, room: usize) -> (usize, usize, isize) {
    let before = s.spare_bytes();
    let chunk = s.chunk_cap * std::mem::size_of::<T>();
    let (n, b) = s.evict_oldest(chunk <= room + before);
    (n, b, s.spare_bytes() as isize - before as isize)
}

/// All tables' spare allocations together (see `Series::spare`) hold at most this share of
/// the memory cap, outside it: 32 MiB at the default 1 GiB, the spares of about 57 lanes.
pub const SPARE_SHARE: usize = 32;

/// Connection state of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcState {
    /// Streaming.
    Live,
    /// Said Bye (finalized).
    Ended(String),
    /// The stream broke while the process was still supposed to run (or it died).
    Crashed,
    /// Loaded from a file.
    Offline,
}

/// A communicator as one process sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommSeen {
    pub index: u32,
    pub comm_hash: u64,
    pub name: String,
    pub nranks: i32,
    pub nnodes: i32,
    pub rank: i32,
    pub finalized: bool,
}

/// An op still running, from the latest in-flight summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenRow {
    pub comm: u32,
    pub rank: i32,
    pub kind: u8,
    pub id: u64,
    pub seq: u64,
    pub func: u16,
    pub start: u64,
    /// When it started to run (0 = not yet, or not known):
    /// [`ncclprof_shared::wire::OpenOp::exec_start_ns`].
    pub exec_start: u64,
    /// Proxy steps done so far per channel (index = channel id; empty when none reported):
    /// a hung collective's stuck channel is the one behind.
    pub steps_done: Vec<u32>,
    pub channels_done: u32,
    pub n_channels: u32,
    /// Its oldest proxy step still open: where a hung op waits.
    pub oldest_step: Option<ncclprof_shared::wire::OpenStep>,
}

/// The completed ops of one lane, to tell which ops of an in-flight summary have completed
/// since it was sent ([`Store::open_check`]).
pub struct OpenCheck<'a> {
    ops: Option<&'a Series<Op>>,
    /// The latest end among them. A completed op ends at or after its start, so an op that
    /// starts after this has not completed: no search. A hung job's deep queue is all such
    /// ops (32 768 of them for 64 ranks, each searched for every frame before).
    latest_end: u64,
}

impl OpenCheck<'_> {
    /// Whether `o` (an op in flight on this lane) has no record here yet (same id and start).
    pub fn is_open(&self, o: &OpenRow) -> bool {
        let Some(ops) = self.ops else {
            return true;
        };
        if o.start > self.latest_end {
            return true;
        }
        !ops.window(o.start, o.start)
            .any(|(_, op)| op.id == o.id && op.start == o.start)
    }
}

/// One plugin process.
#[derive(Debug, Clone)]
pub struct Proc {
    /// Source id (connection) this process came in on.
    pub src: u32,
    pub pid: u32,
    pub host: String,
    pub cmdline: String,
    pub api_version: u32,
    pub plugin_version: String,
    pub clock: String,
    /// Mask in force as last reported (Hello / MaskAck).
    pub mask: u32,
    pub active: bool,
    /// Last mask the viewer asked for (None = never asked).
    pub requested: Option<u32>,
    pub acked: bool,
    pub state: ProcState,
    pub comms: Vec<CommSeen>,
    /// String table (index = id; 0 = none).
    pub strings: Vec<String>,
    pub counters: Option<CountersSeen>,
    /// Completed-record rates by kind (events/s), from the last two counter readings.
    pub rates: Vec<f64>,
    pub open_ops: Vec<OpenRow>,
    pub open_total: u32,
    pub open_at: u64,
    /// Decode or protocol errors seen on this process's stream (latest first is not kept).
    pub errors: Vec<String>,
    /// Latest record end seen from this process.
    pub last_end: u64,
    /// After a reconnection, records ending at or before this are history we already hold.
    pub resume_after: u64,
}

/// The counters as the model keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CountersSeen {
    pub at_ns: u64,
    pub captured: Vec<u64>,
    pub completed: Vec<u64>,
    pub dropped: Vec<u64>,
    pub open_events: u64,
    pub disabled: bool,
}

impl CountersSeen {
    pub fn total_dropped(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

impl Proc {
    pub fn new(src: u32, pid: u32) -> Proc {
        Proc {
            src,
            pid,
            host: String::from("?"),
            cmdline: String::new(),
            api_version: 0,
            plugin_version: String::new(),
            clock: String::new(),
            mask: 0,
            active: false,
            requested: None,
            acked: true,
            state: ProcState::Live,
            comms: Vec::new(),
            strings: vec![String::new()],
            counters: None,
            rates: Vec::new(),
            open_ops: Vec::new(),
            open_total: 0,
            open_at: 0,
            errors: Vec::new(),
            last_end: 0,
            resume_after: 0,
        }
    }

    /// Text of a string id ("?" if unknown, "" for 0).
    pub fn string(&self, id: u16) -> &str {
        match self.strings.get(id as usize) {
            Some(s) => s,
            None => "?",
        }
    }

    pub fn comm(&self, index: u32) -> Option<&CommSeen> {
        self.comms.iter().find(|c| c.index == index)
    }

    pub fn dropped(&self) -> u64 {
        self.counters.as_ref().map_or(0, |c| c.total_dropped())
    }
}

/// One member rank of a communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub proc: usize,
    pub comm: u32,
    pub rank: i32,
}

/// A communicator across processes, grouped by hash.
#[derive(Debug, Clone)]
pub struct CommGroup {
    pub hash: u64,
    pub name: String,
    pub nranks: i32,
    pub members: Vec<Member>,
}

/// Everything the viewer holds.
#[derive(Debug, Clone)]
pub struct Store {
    pub procs: Vec<Proc>,
    pub proc_by_src: HashMap<u32, usize, FxBuild>,
    pub comms: Vec<CommGroup>,
    pub lanes: Vec<Lane>,
    pub lane_by_key: HashMap<LaneKey, usize, FxBuild>,
    /// Memory cap in bytes for retained records.
    pub max_memory: usize,
    pub bytes: usize,
    pub retained: usize,
    /// Records evicted to stay under the cap.
    pub evicted: u64,
    /// Records ingested in total.
    pub ingested: u64,
    /// Earliest and latest times seen (ns), for the time axis.
    pub t_min: u64,
    pub t_max: u64,
    /// Latest host time any process reported (counters, in-flight summaries): "now" for
    /// follow mode even when no event completes.
    pub t_now: u64,
    /// Errors not tied to a process (directory problems, unreadable files); newest last.
    pub errors: Vec<String>,
    /// Processes seen in the directory but busy (another viewer attached), by pid.
    pub busy: Vec<u32>,
}

impl Store {
    pub fn new(max_memory: usize) -> Store {
        Store {
            procs: Vec::new(),
            proc_by_src: HashMap::default(),
            comms: Vec::new(),
            lanes: Vec::new(),
            lane_by_key: HashMap::default(),
            max_memory,
            bytes: 0,
            retained: 0,
            evicted: 0,
            ingested: 0,
            t_min: u64::MAX,
            t_max: 0,
            t_now: 0,
            errors: Vec::new(),
            busy: Vec::new(),
        }
    }

    /// The process for a source, created on first sight.
    pub fn proc_for(&mut self, src: u32, pid: u32) -> usize {
        if let Some(&i) = self.proc_by_src.get(&src) {
            return i;
        }
        self.procs.push(Proc::new(src, pid));
        let i = self.procs.len() - 1;
        self.proc_by_src.insert(src, i);
        i
    }

    /// The lane for a key, created on first sight.
    pub fn lane_for(&mut self, key: LaneKey) -> usize {
        if let Some(&i) = self.lane_by_key.get(&key) {
            return i;
        }
        self.lanes.push(Lane::new(key));
        let i = self.lanes.len() - 1;
        self.lane_by_key.insert(key, i);
        i
    }

    pub fn lane(&self, key: LaneKey) -> Option<&Lane> {
        self.lane_by_key.get(&key).map(|&i| &self.lanes[i])
    }

    /// Whether an op of process `proc`'s latest in-flight summary has not completed since:
    /// the summary comes every 250 ms, and an op it lists may already be here as a record
    /// (same id and start). Such an op is not in flight any more, in a view or a snapshot.
    pub fn still_open(&self, proc: usize, o: &OpenRow) -> bool {
        self.open_check(self.open_lane_key(proc, o)).is_open(o)
    }

    /// The lane whose records an op of process `proc`'s in-flight summary would be among:
    /// its rank's, or, for an op without one (< 0), the process's rank in its communicator.
    pub fn open_lane_key(&self, proc: usize, o: &OpenRow) -> LaneKey {
        let mut rank = o.rank;
        if rank < 0
            && let Some(c) = self.procs.get(proc).and_then(|p| p.comm(o.comm))
        {
            rank = c.rank;
        }
        LaneKey {
            proc,
            comm: o.comm,
            rank,
        }
    }

    /// [`Store::still_open`] for the ops of one lane: the lane looked up once, then asked
    /// per op ([`OpenCheck::is_open`]).
    pub fn open_check(&self, key: LaneKey) -> OpenCheck<'_> {
        let ops = self.lane(key).map(|l| &l.ops);
        OpenCheck {
            ops,
            latest_end: ops.and_then(|s| s.span()).map_or(0, |(_, end)| end),
        }
    }

    /// Record that a communicator rank exists (from Meta).
    pub fn add_member(&mut self, proc: usize, c: &CommSeen) {
        let m = Member {
            proc,
            comm: c.index,
            rank: c.rank,
        };
        let g = match self.comms.iter_mut().position(|g| g.hash == c.comm_hash) {
            Some(i) => &mut self.comms[i],
            None => {
                self.comms.push(CommGroup {
                    hash: c.comm_hash,
                    name: c.name.clone(),
                    nranks: c.nranks,
                    members: Vec::new(),
                });
                let n = self.comms.len() - 1;
                &mut self.comms[n]
            }
        };
        g.nranks = g.nranks.max(c.nranks);
        if g.name.is_empty() {
            g.name = c.name.clone();
        }
        if !g.members.contains(&m) {
            g.members.push(m);
            let procs = &self.procs;
            g.members.sort_by(|a, b| {
                let ha = procs.get(a.proc).map(|p| p.host.as_str()).unwrap_or("");
                let hb = procs.get(b.proc).map(|p| p.host.as_str()).unwrap_or("");
                (a.rank, ha, a.proc).cmp(&(b.rank, hb, b.proc))
            });
        }
    }

    /// Account for a lane push and note the time range.
    pub(crate) fn note(&mut self, delta: isize, start: u64, end: u64) {
        self.bytes = (self.bytes as isize + delta).max(0) as usize;
        self.retained += 1;
        self.ingested += 1;
        if start != 0 {
            self.t_min = self.t_min.min(start);
        }
        self.t_max = self.t_max.max(end.max(start));
    }

    /// [`Store::note`] for `n` pushes at once: their summed byte change, the earliest nonzero
    /// start (`u64::MAX` if none) and the latest `end.max(start)`.
    pub(crate) fn note_many(&mut self, delta: isize, n: usize, t_min: u64, t_max: u64) {
        self.bytes = (self.bytes as isize + delta).max(0) as usize;
        self.retained += n;
        self.ingested += n as u64;
        self.t_min = self.t_min.min(t_min);
        self.t_max = self.t_max.max(t_max);
    }

    /// Evict the oldest chunks until under the memory cap.
    pub fn enforce_cap(&mut self) {
        // Spare bytes now, counted at the first eviction (each eviction below adjusts it).
        let mut spares = None;
        let budget = self.max_memory / SPARE_SHARE;
        while self.bytes > self.max_memory {
            // The lane and table with the oldest front chunk.
            let mut best: Option<(u64, usize, u8)> = None;
            for (i, l) in self.lanes.iter().enumerate() {
                let cands = [
                    (l.ops.oldest(), 0u8),
                    (l.kernels.oldest(), 1),
                    (l.proxy_ops.oldest(), 2),
                    (l.steps.oldest(), 3),
                    (l.other.oldest(), 4),
                ];
                for (t, which) in cands {
                    if let Some(t) = t
                        && best.is_none_or(|b| t < b.0)
                    {
                        best = Some((t, i, which));
                    }
                }
            }
            let Some((_, i, which)) = best else { break };
            let all = *spares.get_or_insert_with(|| self.lanes.iter().map(Lane::spare_bytes).sum());
            let room = budget.saturating_sub(all);
            let l = &mut self.lanes[i];
            let (n, b, spare_change) = match which {
                0 => evict_within(&mut l.ops, room),
                1 => evict_within(&mut l.kernels, room),
                2 => evict_within(&mut l.proxy_ops, room),
                3 => evict_within(&mut l.steps, room),
                _ => evict_within(&mut l.other, room),
            };
            spares = Some(all.saturating_add_signed(spare_change));
            if n == 0 && b == 0 {
                break;
            }
            self.evicted += n as u64;
            self.retained -= n;
            self.bytes = self.bytes.saturating_sub(b);
        }
    }

    /// Recompute the byte total from the lanes (tests and sanity).
    pub fn recount_bytes(&self) -> usize {
        self.lanes.iter().map(Lane::bytes).sum()
    }

    /// Total drops reported by all processes.
    pub fn dropped(&self) -> u64 {
        self.procs.iter().map(Proc::dropped).sum()
    }

    /// Drops by reason index, summed over processes.
    pub fn dropped_by_reason(&self) -> Vec<u64> {
        let mut out = vec![0u64; ncclprof_shared::wire::DropReason::COUNT];
        for p in &self.procs {
            if let Some(c) = &p.counters {
                for (i, d) in c.dropped.iter().enumerate() {
                    if let Some(o) = out.get_mut(i) {
                        *o += d;
                    }
                }
            }
        }
        out
    }

    /// Completed events per second, summed over live processes.
    pub fn rate(&self) -> f64 {
        self.procs
            .iter()
            .filter(|p| p.state == ProcState::Live)
            .map(|p| p.rates.iter().sum::<f64>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ncclprof_shared::kind::EventKind;
    use ncclprof_shared::record::F_SEND;

    fn step(start: u64, dur: u64) -> EventRecord {
        EventRecord {
            id: 1,
            kind: EventKind::ProxyStep as u8,
            start_ns: start,
            end_ns: start + dur,
            sub: 3,
            x: 5,
            flags: F_SEND,
            p: [7, start + 10, start + 20, start + 30, 4096, 2],
            ..Default::default()
        }
    }

    /// `open_check(..).is_open` says what the lane's records say, for ops that completed and
    /// ops that did not, before the lane's latest end (searched) and after it (not searched),
    /// for an op without a rank (the process's rank in the communicator) and for a lane with
    /// no records; `still_open` says the same.
    #[test]
    fn open_check_agrees_with_the_records() {
        let mut st = Store::new(64 << 20);
        let p = st.proc_for(1, 100);
        st.procs[p].comms.push(CommSeen {
            index: 0,
            comm_hash: 7,
            name: "w".into(),
            nranks: 2,
            nnodes: 1,
            rank: 1,
            finalized: false,
        });
        for (id, start, end) in [(1, 1_000, 5_000), (2, 2_000, 9_000), (3, 10_000, 12_000)] {
            let r = EventRecord {
                id,
                kind: EventKind::Coll as u8,
                start_ns: start,
                end_ns: end,
                comm: 0,
                rank: 1,
                ..Default::default()
            };
            crate::model::ingest::ingest_record(&mut st, p, &r);
        }
        let row = |id: u64, start: u64, rank: i32| OpenRow {
            comm: 0,
            rank,
            kind: EventKind::Coll as u8,
            id,
            seq: 0,
            func: 0,
            start,
            exec_start: 0,
            steps_done: Vec::new(),
            channels_done: 0,
            n_channels: 0,
            oldest_step: None,
        };
        let key = LaneKey {
            proc: p,
            comm: 0,
            rank: 1,
        };
        let check = st.open_check(key);
        for (o, open) in [
            (row(2, 2_000, 1), false),
            (row(2, 2_000, -1), false),
            (row(3, 10_000, 1), false),
            (row(4, 2_000, 1), true),
            (row(5, 11_000, 1), true),
            (row(6, 12_001, 1), true),
        ] {
            assert_eq!(st.open_lane_key(p, &o), key);
            assert_eq!(check.is_open(&o), open, "{o:?}");
            assert_eq!(st.still_open(p, &o), open, "{o:?}");
        }
        let elsewhere = row(1, 1_000, 0);
        assert_ne!(st.open_lane_key(p, &elsewhere), key);
        assert!(st.still_open(p, &elsewhere));
        assert!(
            st.open_check(st.open_lane_key(p, &elsewhere))
                .is_open(&elsewhere)
        );
    }

    #[test]
    fn step_packs_into_32_bytes_and_roundtrips() {
        let r = step(5_000_000_000, 1000);
        let s = Step::pack(&r, 4_000_000_000).unwrap();
        let back = s.unpack(4_000_000_000);
        assert_eq!(back.start_ns, r.start_ns);
        assert_eq!(back.end_ns, r.end_ns);
        assert_eq!(back.p, r.p);
        assert_eq!(back.sub, 3);
        assert_eq!(back.x, 5);
        assert_eq!(back.step_phases(), r.step_phases());
        assert!(Step::pack(&r, 6_000_000_000).is_none());
        assert!(Step::pack(&r, 0).is_none()); // too far after the base for u32
    }

    #[test]
    fn series_window_and_out_of_order() {
        let mut s: Series<Step> = Series::new(4, 1000);
        for t in [100_000u64, 300_000, 200_000, 400_000, 500_000, 50_000] {
            let r = step(t, 10_000);
            s.push(t, |b| Step::pack(&r, b));
        }
        assert_eq!(s.len(), 6);
        let got: Vec<u64> = s
            .window(195_000, 305_000)
            .map(|(b, x)| x.start(b))
            .collect();
        assert_eq!(got, vec![200_000, 300_000]);
        // A long item is found from a window after its start.
        let r = step(600_000, 1_000_000);
        s.push(600_000, |b| Step::pack(&r, b));
        let got: Vec<u64> = s
            .window(1_500_000, 1_550_000)
            .map(|(b, x)| x.start(b))
            .collect();
        assert_eq!(got, vec![600_000]);
        let (n, _) = s.evict_oldest(true);
        assert_eq!(n, 4);
        assert_eq!(s.len(), 3);
    }

    /// Late items land where a partition_point over the whole chunk puts them (after equal
    /// starts), whatever their lateness and however the pushes are batched between settles.
    #[test]
    fn late_items_insert_like_partition_point() {
        use proptest::prelude::*;
        proptest!(|(starts in proptest::collection::vec(0u64..5_000, 1..600), batch in 1usize..80)| {
            let mut s: Series<Step> = Series::new(8192, 1 << 29);
            let mut want: Vec<(u64, u64)> = Vec::new();
            for (i, &t) in starts.iter().enumerate() {
                let t = 1_000_000_000 + t * 100;
                let r = step(t, i as u64);
                s.push(t, |b| Step::pack(&r, b));
                let pos = want.partition_point(|x| x.0 <= t);
                want.insert(pos, (t, i as u64));
                if (i + 1) % batch == 0 || i + 1 == starts.len() {
                    s.settle();
                    prop_assert!(s.is_settled());
                    let got: Vec<(u64, u64)> = s
                        .iter()
                        .map(|(b, x)| (x.start(b), u64::from(x.dur)))
                        .collect();
                    prop_assert_eq!(&got, &want);
                }
            }
        });
    }

    /// A sampled window (`window_strided`): about one in `stride` of the window's items, each
    /// overlapping it; every place of a cycle sampled (a step's channel, 0..32 in turn, at
    /// strides that are multiples of 32 too, where every `stride`-th item saw one channel);
    /// the same samples each time; a count scaled by what it looked at near the window's.
    #[test]
    fn a_sampled_window_covers_every_channel_and_scales_back() {
        let mut s: Series<Step> = Series::new(1 << 14, 1 << 29);
        for i in 0..200_000u64 {
            let t = 1_000_000_000 + i * 10;
            let mut r = step(t, 5);
            r.sub = (i % 32) as u8;
            s.push(t, |b| Step::pack(&r, b));
        }
        s.settle();
        // Items 10 000 to 190 000, cutting chunks at both ends.
        let (from, to) = (1_000_100_000, 1_001_900_000);
        let n = s.count_in(from, to);
        for stride in [2, 7, 32, 64, 96, 1000] {
            let (mut per_channel, mut got) = ([0u32; 32], Vec::new());
            let looked_at = s.window_strided(from, to, stride, |b, x| {
                per_channel[usize::from(x.channel)] += 1;
                got.push(x.start(b));
            });
            assert!(
                got.iter().all(|&t| t + 5 >= from && t <= to),
                "stride {stride}"
            );
            let want = n / stride;
            assert!(
                looked_at.abs_diff(want) <= want / 50 + 2 * sample_run::<Step>(),
                "stride {stride}: looked at {looked_at} of {n}"
            );
            assert!(looked_at >= got.len());
            // Every channel sampled as often as any other (each is 1/32 of the window), within
            // 4 standard deviations of a run's draw: a run holds 16 channels, half of them.
            let per_item = looked_at as f64 / n as f64;
            let runs = looked_at as f64 / sample_run::<Step>() as f64;
            let tolerance = (4.0 / runs.sqrt()).max(0.05);
            for (ch, &c) in per_channel.iter().enumerate() {
                let share = f64::from(c) / (n as f64 / 32.0 * per_item);
                assert!(
                    (share - 1.0).abs() < tolerance,
                    "stride {stride}, channel {ch}: {share:.3} of its share, {per_channel:?}"
                );
            }
            assert!(
                per_channel.iter().all(|&c| c > 0),
                "stride {stride}: {per_channel:?}"
            );
            // Scaled back, the sample's count is the window's (every item here overlaps it).
            let scaled = got.len() as f64 * n as f64 / looked_at as f64;
            assert!(
                (scaled / n as f64 - 1.0).abs() < 0.01,
                "stride {stride}: {scaled}"
            );
            let mut again = Vec::new();
            s.window_strided(from, to, stride, |b, x| again.push(x.start(b)));
            assert_eq!(got, again, "stride {stride}");
        }
    }

    /// The window queries find exactly the items that overlap the window, and `count_in`
    /// counts what `window` may look at, whether the window cuts into chunks or holds them
    /// whole (where `Chunk::candidates` skips its searches), for random items, small chunks
    /// and windows inside, around and beyond the items.
    #[test]
    fn windows_find_what_overlaps_them() {
        use proptest::prelude::*;
        proptest!(|(items in proptest::collection::vec((0u64..50_000, 0u64..3_000), 1..400),
                    windows in proptest::collection::vec((0u64..60_000, 0u64..60_000), 1..20))| {
            let mut s: Series<Step> = Series::new(16, 1 << 29);
            for &(t, d) in &items {
                let t = 1_000_000_000 + t;
                let r = step(t, d);
                s.push(t, |b| Step::pack(&r, b));
                s.settle();
            }
            for &(a, b) in &windows {
                let (from, to) = (1_000_000_000 + a.min(b), 1_000_000_000 + a.max(b));
                let mut want: Vec<(u64, u64)> = s
                    .iter()
                    .map(|(b, x)| (x.start(b), x.end(b)))
                    .filter(|&(st, en)| st <= to && en >= from)
                    .collect();
                want.sort_unstable();
                let mut got: Vec<(u64, u64)> =
                    s.window(from, to).map(|(b, x)| (x.start(b), x.end(b))).collect();
                got.sort_unstable();
                prop_assert_eq!(&got, &want);
                let mut strided = Vec::new();
                s.window_strided(from, to, 1, |b, x| strided.push((x.start(b), x.end(b))));
                strided.sort_unstable();
                prop_assert_eq!(&strided, &want);
                let mut sampled = Vec::new();
                s.window_sampled(from, to, 0, |b, x| sampled.push((x.start(b), x.end(b))));
                sampled.sort_unstable();
                prop_assert_eq!(&sampled, &want);
                prop_assert!(s.count_in(from, to) >= want.len());
            }
        });
    }

    /// A chunk left unsorted when the next one starts is sorted first: every chunk stays
    /// sorted, with items late by more than a chunk in the chunk they were pushed to.
    #[test]
    fn a_full_unsorted_chunk_is_sorted_before_the_next_one() {
        let mut s: Series<Step> = Series::new(1024, 1 << 29);
        // Two interleaved producers: odd items 200 µs (≈ 200 items) behind the even ones, more
        // than an in-place insert takes.
        for i in 0..5000u64 {
            let t = 1_000_000_000 + i * 1_000 - (i % 2) * 200_000;
            let r = step(t, i);
            s.push(t, |b| Step::pack(&r, b));
            if i == 500 {
                assert!(!s.is_settled(), "the late items took the deferred path");
            }
        }
        s.settle();
        assert_eq!(s.len(), 5000);
        assert!(s.chunks().count() >= 5);
        for c in s.chunks() {
            assert!(c.unsorted_from.is_none());
            assert!(
                c.items
                    .windows(2)
                    .all(|w| w[0].start(c.base) <= w[1].start(c.base))
            );
        }
    }

    /// A copy (the live snapshot's) shares the sealed chunks and keeps what it saw: pushes
    /// into the original's open chunk and new chunks, and evictions, do not reach it.
    #[test]
    fn a_copy_shares_sealed_chunks_and_keeps_what_it_saw() {
        let mut s: Series<Step> = Series::new(1024, 1 << 29);
        let t = |i: u64| 1_000_000_000 + i * 1_000;
        for i in 0..2500u64 {
            let r = step(t(i), i);
            s.push(t(i), |b| Step::pack(&r, b));
        }
        s.settle();
        let copy = s.clone();
        assert!(
            Arc::ptr_eq(&s.sealed[0], &copy.sealed[0]),
            "sealed chunks are shared"
        );
        let seen: Vec<u64> = copy.iter().map(|(b, x)| x.start(b)).collect();
        assert_eq!(seen.len(), 2500);
        for i in 2500..4000u64 {
            let r = step(t(i), i);
            s.push(t(i), |b| Step::pack(&r, b));
        }
        s.settle();
        s.evict_oldest(true);
        assert_eq!(s.len(), 4000 - 1024);
        assert_eq!(copy.len(), 2500);
        let after: Vec<u64> = copy.iter().map(|(b, x)| x.start(b)).collect();
        assert_eq!(after, seen);
        assert_eq!(copy.span(), Some((t(0), t(2499) + 2499)));
        // The original goes on as if never copied.
        let all: Vec<u64> = s.iter().map(|(b, x)| x.start(b)).collect();
        assert_eq!(all, (1024..4000).map(t).collect::<Vec<_>>());
    }

    /// The byte accounting follows the chunk growth schedule: capacity doubling from 64 items
    /// for chunks that reallocate, 4 KiB pages (128 steps) for chunks allocated at full size.
    #[test]
    fn bytes_follow_the_growth_schedule() {
        for cap in [1024usize, 8192] {
            let mut s: Series<Step> = Series::new(cap, 1 << 29);
            let presized = cap * 32 >= PRESIZE_BYTES;
            for i in 0..(3 * cap + 100) as u64 {
                let r = step(1_000_000 + i * 10, 5);
                s.push(r.start_ns, |b| Step::pack(&r, b));
                let n = s.len();
                let mut want = 0;
                let mut left = n;
                while left > 0 {
                    let k = left.min(cap);
                    let mut c = if presized { cap.min(128) } else { cap.min(64) };
                    while c < k {
                        c = if presized { c + 128 } else { c * 2 }.min(cap);
                    }
                    want += c * 32;
                    left -= k;
                }
                assert_eq!(s.bytes(), want, "cap {cap} n {n}");
            }
            let before = s.bytes();
            let (n, b) = s.evict_oldest(true);
            assert_eq!((n, b), (cap, cap * 32));
            assert_eq!(s.bytes(), before - b);
        }
    }

    /// What a series accounts is what its chunks are accounted for.
    fn acct_bytes<T: Timed>(s: &Series<T>) -> usize {
        s.chunks().map(|c| c.acct).sum::<usize>() * std::mem::size_of::<T>()
    }

    fn push_steps(s: &mut Series<Step>, from: u64, to: u64) {
        for i in from..to {
            let r = step(1_000_000 + i * 10, 5);
            s.push(r.start_ns, |b| Step::pack(&r, b));
        }
    }

    /// An evicted chunk's allocation is the next chunk's, accounted at the pages it already
    /// had resident; the chunk after that is a fresh allocation again, accounted by page.
    #[test]
    fn the_next_chunk_reuses_an_evicted_allocation() {
        let cap = 8192;
        let mut s: Series<Step> = Series::new(cap, 1 << 29);
        assert!(s.presize);
        push_steps(&mut s, 0, 2 * cap as u64 + 1);
        let oldest = s.sealed[0].items.as_ptr();
        let before = s.bytes();
        assert_eq!(s.evict_oldest(true), (cap, cap * 32));
        assert_eq!(s.bytes(), before - cap * 32);
        assert_eq!(s.spare.capacity(), cap);
        assert!(s.spare.is_empty());
        assert_eq!(s.bytes(), acct_bytes(&s));
        // Fill the open chunk; the next push makes a chunk.
        push_steps(&mut s, 2 * cap as u64 + 1, 3 * cap as u64);
        let before = s.bytes();
        push_steps(&mut s, 3 * cap as u64, 3 * cap as u64 + 1);
        let open = s.open.as_ref().unwrap();
        assert_eq!(
            open.items.as_ptr(),
            oldest,
            "the evicted allocation is reused"
        );
        assert_eq!(open.items.len(), 1);
        assert_eq!(open.acct, cap);
        assert_eq!(
            s.bytes(),
            before + cap * 32,
            "its resident pages are accounted"
        );
        assert_eq!(s.spare.capacity(), 0);
        assert_eq!(s.bytes(), acct_bytes(&s));
        // It holds only what was pushed since.
        assert_eq!(s.len(), 2 * cap + 1);
        let starts: Vec<u64> = s.iter().map(|(b, x)| x.start(b)).collect();
        let want: Vec<u64> = (cap as u64..3 * cap as u64 + 1)
            .map(|i| 1_000_000 + i * 10)
            .collect();
        assert_eq!(starts, want);
        // No spare left: the chunk after is fresh, accounted by page.
        push_steps(&mut s, 3 * cap as u64 + 1, 4 * cap as u64 + 1);
        let open = s.open.as_ref().unwrap();
        assert_ne!(open.items.as_ptr(), oldest);
        assert_eq!(open.acct, 128);
        assert_eq!(s.bytes(), acct_bytes(&s));
    }

    /// A chunk a copy still holds is not reused, and the copy's records stay as it saw them;
    /// once the copy is gone, evicted chunks are reused again.
    #[test]
    fn a_chunk_a_copy_holds_is_not_reused() {
        let cap = 8192;
        let mut s: Series<Step> = Series::new(cap, 1 << 29);
        push_steps(&mut s, 0, 2 * cap as u64 + 1);
        let copy = s.clone();
        let seen: Vec<(u64, u32)> = copy.iter().map(|(b, x)| (x.start(b), x.dur)).collect();
        let oldest = s.sealed[0].items.as_ptr();
        s.evict_oldest(true);
        assert_eq!(s.spare.capacity(), 0, "the copy holds it");
        push_steps(&mut s, 2 * cap as u64 + 1, 3 * cap as u64 + 1);
        assert_ne!(s.open.as_ref().unwrap().items.as_ptr(), oldest);
        assert_eq!(s.bytes(), acct_bytes(&s));
        assert_eq!(copy.sealed[0].items.as_ptr(), oldest);
        let after: Vec<(u64, u32)> = copy.iter().map(|(b, x)| (x.start(b), x.dur)).collect();
        assert_eq!(after, seen);
        // The copy's own spare is empty: it never takes one.
        assert_eq!(copy.spare.capacity(), 0);
        drop(copy);
        let next = s.sealed[0].items.as_ptr();
        s.evict_oldest(true);
        assert_eq!(s.spare.capacity(), cap);
        push_steps(&mut s, 3 * cap as u64 + 1, 4 * cap as u64 + 1);
        assert_eq!(s.open.as_ref().unwrap().items.as_ptr(), next);
    }

    /// At the cap, with snapshot copies coming and going, the store stays under the cap, its
    /// total matches the lanes' and every table's matches its chunks'. Once no copy is left,
    /// every new chunk is made on an evicted one's allocation; a table emptied by eviction
    /// keeps no spare.
    #[test]
    fn accounting_holds_at_the_cap_with_reuse() {
        // The spares' budget (a 32nd of the cap) holds one step chunk.
        let cap = 8 << 20;
        let mut st = Store::new(cap);
        let keys = [0, 1].map(|rank| LaneKey {
            proc: 0,
            comm: 0,
            rank,
        });
        let lanes = keys.map(|k| st.lane_for(k));
        let mut copy = None;
        let n = 500_000u64;
        // New chunks of lane 0 made at the cap, fresh or on a reused allocation, once the
        // copies have been gone for a chunk.
        let (mut fresh, mut reused) = (0, 0);
        // After the copies are gone (n / 2), the store is at its cap (262 144 steps) and lane 1
        // is emptied, with the spare it held (the budget is one chunk): ≈ 330 000.
        let settled = 340_000;
        for i in 0..n {
            // Lane 1 stops at a tenth: its records become the oldest and are all evicted.
            let l = if i < n / 10 && i % 3 == 0 {
                lanes[1]
            } else {
                lanes[0]
            };
            let r = step(1_000_000 + i * 1000, 500);
            let d = st.lanes[l].steps.push(r.start_ns, |b| Step::pack(&r, b));
            if let Some(c) = &st.lanes[l].steps.open
                && l == lanes[0]
                && i >= settled
                && c.items.len() == 1
            {
                match c.acct {
                    128 => fresh += 1,
                    8192 => reused += 1,
                    a => panic!("a new chunk accounted for {a} items"),
                }
            }
            st.note(d, r.start_ns, r.end_ns);
            st.enforce_cap();
            if i % 10_000 == 0 {
                copy = if copy.is_some() || i >= n / 2 {
                    None
                } else {
                    Some(st.clone())
                };
            }
            assert!(st.bytes <= cap);
            if i % 1000 == 0 {
                assert_eq!(st.bytes, st.recount_bytes());
                for l in &st.lanes {
                    assert_eq!(l.steps.bytes(), acct_bytes(&l.steps));
                }
            }
        }
        assert_eq!(st.bytes, st.recount_bytes());
        assert_eq!(st.evicted as usize + st.retained, n as usize);
        let steps = &st.lanes[lanes[0]].steps;
        assert!(st.evicted > 0);
        assert_eq!(fresh, 0);
        assert!(reused >= (n - settled) / 8192, "{reused}");
        assert!(steps.iter().map(|(b, x)| x.start(b)).is_sorted());
        let stopped = &st.lanes[lanes[1]].steps;
        assert!(stopped.is_empty());
        assert_eq!(stopped.spare.capacity(), 0);
    }

    /// However many lanes are evicted from, their spares together stay within the budget.
    #[test]
    fn spares_stay_within_their_share_of_the_cap() {
        let cap = 16 << 20;
        let mut st = Store::new(cap);
        let lanes: Vec<usize> = (0..64)
            .map(|rank| {
                st.lane_for(LaneKey {
                    proc: 0,
                    comm: 0,
                    rank,
                })
            })
            .collect();
        let spares = |st: &Store| st.lanes.iter().map(Lane::spare_bytes).sum::<usize>();
        let mut most = 0;
        for i in 0..1_200_000u64 {
            let l = lanes[(i % 64) as usize];
            let r = step(1_000_000 + i * 100, 50);
            let d = st.lanes[l].steps.push(r.start_ns, |b| Step::pack(&r, b));
            st.note(d, r.start_ns, r.end_ns);
            st.enforce_cap();
            if i % 4096 == 0 {
                most = most.max(spares(&st));
                assert!(st.bytes <= cap);
            }
        }
        assert!(st.evicted > 0);
        assert!(most > 0, "some lane kept a spare");
        assert!(most <= cap / SPARE_SHARE, "{most} spare bytes");
    }

    #[test]
    fn fx_lane_map_finds_every_lane() {
        let mut st = Store::new(1 << 20);
        let keys: Vec<LaneKey> = (0..4)
            .flat_map(|proc| {
                (0..8u32)
                    .flat_map(move |comm| [-1, 0, 1, 63].map(|rank| LaneKey { proc, comm, rank }))
            })
            .collect();
        let idx: Vec<usize> = keys.iter().map(|&k| st.lane_for(k)).collect();
        assert_eq!(idx, (0..keys.len()).collect::<Vec<_>>());
        for (k, i) in keys.iter().zip(idx) {
            assert_eq!(st.lane_for(*k), i);
            assert_eq!(st.lane(*k).map(|l| l.key), Some(*k));
        }
    }

    #[test]
    fn cap_evicts_oldest_and_counts() {
        let mut st = Store::new(64 * 1024);
        let l = st.lane_for(LaneKey {
            proc: 0,
            comm: 0,
            rank: 0,
        });
        for i in 0..20_000u64 {
            let r = step(1_000_000 + i * 1000, 500);
            let d = st.lanes[l].steps.push(r.start_ns, |b| Step::pack(&r, b));
            st.note(d, r.start_ns, r.end_ns);
            st.enforce_cap();
        }
        assert!(st.bytes <= 64 * 1024, "{}", st.bytes);
        assert_eq!(st.bytes, st.recount_bytes());
        assert!(st.evicted > 0);
        assert_eq!(st.evicted as usize + st.retained, 20_000);
        // The newest survive.
        let last = st.lanes[l].steps.window(20_000_000, u64::MAX).count();
        assert!(last > 0);
    }
}
