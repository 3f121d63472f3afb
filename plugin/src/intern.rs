//! String interning on NCCL's threads without allocation.
//!
//! Descriptor strings (func, datatype, algo, proto, comm names) may not outlive the call, but
//! they are nearly always NCCL's static literals, so a small open-addressing table keyed by the
//! pointer value turns each into a 16-bit id with one or two loads. A miss copies the string
//! (at most `MAX_STRING` bytes) into a preallocated arena: the rare slow path, still without
//! allocation. The drain thread publishes new strings to viewers.

use std::ffi::c_char;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};

use ncclprof_shared::wire::MAX_STRING;

const SLOTS: usize = 4096;
/// Most distinct strings (ids 1..MAX_IDS).
pub const MAX_IDS: usize = 4000;
const ARENA: usize = 512 * 1024;
const RESERVED: usize = 1;

pub struct Interner {
    keys: Box<[AtomicUsize]>,
    ids: Box<[AtomicU16]>,
    /// First ≤ 8 bytes of the string each key was interned with: a pointer reused for other
    /// text (a non-literal buffer) is noticed and re-copied.
    prefixes: Box<[AtomicU64]>,
    /// Per id: offset << 16 | len, 0 until published.
    entries: Box<[AtomicU64]>,
    next_id: AtomicUsize,
    arena_used: AtomicUsize,
    arena: Box<[std::cell::UnsafeCell<u8>]>,
    /// Interning failures (table or arena full).
    pub full: AtomicU64,
}

// SAFETY: arena bytes are written only in a region reserved by an atomic bump and published
// with a release store of the entry; readers only read published regions.
unsafe impl Sync for Interner {}

#[inline(always)]
fn hash(p: usize) -> usize {
    (p.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & (SLOTS - 1)
}

impl Default for Interner {
    fn default() -> Self {
        Self::new()
    }
}

impl Interner {
    pub fn new() -> Interner {
        Interner {
            keys: (0..SLOTS).map(|_| AtomicUsize::new(0)).collect(),
            ids: (0..SLOTS).map(|_| AtomicU16::new(0)).collect(),
            prefixes: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            entries: (0..MAX_IDS).map(|_| AtomicU64::new(0)).collect(),
            next_id: AtomicUsize::new(1),
            arena_used: AtomicUsize::new(0),
            arena: (0..ARENA).map(|_| std::cell::UnsafeCell::new(0)).collect(),
            full: AtomicU64::new(0),
        }
    }

    /// The id of the NUL-terminated string at `p` (0 for NULL or when full).
    ///
    /// # Safety
    /// `p` must be NULL or point to a NUL-terminated string readable for the call's duration
    /// (at most `MAX_STRING` bytes are read).
    #[inline(always)]
    pub unsafe fn intern(&self, p: *const c_char) -> u16 {
        if p.is_null() {
            return 0;
        }
        let key = p as usize;
        // SAFETY: forwarded contract (reads at most up to the NUL, ≤ 8 bytes).
        let prefix = unsafe { prefix_of(p) };
        let mut h = hash(key);
        for _ in 0..8 {
            let k = self.keys[h].load(Ordering::Acquire);
            if k == key {
                if self.prefixes[h].load(Ordering::Relaxed) == prefix {
                    return self.ids[h].load(Ordering::Relaxed);
                }
                // Same pointer, other text: copy again and repoint this slot.
                // SAFETY: forwarded contract.
                let id = self.add(unsafe { read_c_str(p) });
                self.ids[h].store(id, Ordering::Relaxed);
                self.prefixes[h].store(prefix, Ordering::Relaxed);
                return id;
            }
            if k == 0 {
                break;
            }
            h = (h + 1) & (SLOTS - 1);
        }
        // SAFETY: forwarded contract.
        unsafe { self.insert(key, prefix) }
    }

    #[cold]
    unsafe fn insert(&self, key: usize, prefix: u64) -> u16 {
        // SAFETY: caller guarantees a readable NUL-terminated string.
        let bytes = unsafe { read_c_str(key as *const c_char) };
        let id = self.add(bytes);
        if id == 0 {
            return 0;
        }
        let mut h = hash(key);
        for _ in 0..8 {
            if self.keys[h]
                .compare_exchange(0, RESERVED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.ids[h].store(id, Ordering::Relaxed);
                self.prefixes[h].store(prefix, Ordering::Relaxed);
                self.keys[h].store(key, Ordering::Release);
                return id;
            }
            h = (h + 1) & (SLOTS - 1);
        }
        // Table neighbourhood full: the id still works, later lookups will copy again.
        id
    }

    /// Intern owned bytes (not keyed by pointer): used for comm names and v1 code names.
    pub fn add(&self, bytes: &[u8]) -> u16 {
        let bytes = &bytes[..bytes.len().min(MAX_STRING)];
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id >= MAX_IDS {
            self.full.fetch_add(1, Ordering::Relaxed);
            return 0;
        }
        let off = self.arena_used.fetch_add(bytes.len(), Ordering::Relaxed);
        if off + bytes.len() > ARENA {
            self.full.fetch_add(1, Ordering::Relaxed);
            self.entries[id].store(u64::MAX, Ordering::Release); // published as "?"
            return 0;
        }
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: [off, off+len) was reserved exclusively by the fetch_add above.
            unsafe { *self.arena[off + i].get() = *b };
        }
        self.entries[id].store(((off as u64) << 16) | bytes.len() as u64, Ordering::Release);
        id as u16
    }

    /// Drain side: the strings with ids in `from..`, stopping at the first not yet published.
    /// Returns the strings and the next id to ask for.
    pub fn published_from(&self, from: u16) -> (Vec<(u16, String)>, u16) {
        let mut out = Vec::new();
        let end = self.next_id.load(Ordering::Relaxed).min(MAX_IDS);
        let mut id = usize::from(from.max(1));
        while id < end {
            let e = self.entries[id].load(Ordering::Acquire);
            if e == 0 {
                break;
            }
            let text = if e == u64::MAX {
                "?".to_string()
            } else {
                let off = (e >> 16) as usize;
                let len = (e & 0xFFFF) as usize;
                // SAFETY: the region was fully written before the release store of `e`.
                let bytes: Vec<u8> = (off..off + len)
                    .map(|i| unsafe { *self.arena[i].get() })
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            };
            out.push((id as u16, text));
            id += 1;
        }
        (out, id as u16)
    }
}

/// The first ≤ 8 bytes of a C string (stopping at its NUL), zero-padded, as one word.
///
/// # Safety
/// `p` must point to a readable NUL-terminated string.
#[inline(always)]
unsafe fn prefix_of(p: *const c_char) -> u64 {
    let mut v = 0u64;
    for i in 0..8 {
        #[allow(clippy::unnecessary_cast)] // c_char is i8 on x86_64, u8 on aarch64
        // SAFETY: bytes up to and including the NUL are readable.
        let b = unsafe { *p.add(i) } as u8;
        if b == 0 {
            break;
        }
        v |= u64::from(b) << (8 * i);
    }
    v
}

/// Copy up to `MAX_STRING` bytes of a C string.
///
/// # Safety
/// `p` must point to a readable NUL-terminated string (or at least `MAX_STRING` readable bytes).
pub unsafe fn read_c_str<'a>(p: *const c_char) -> &'a [u8] {
    let mut n = 0;
    // SAFETY: the caller guarantees readability up to the NUL (bounded by MAX_STRING).
    while n < MAX_STRING && unsafe { *p.add(n) } != 0 {
        n += 1;
    }
    // SAFETY: the n bytes just scanned are readable.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_pointer_same_id_and_published() {
        let t = Interner::new();
        let a = c"AllReduce";
        let b = c"ncclFloat32";
        // SAFETY: static C strings.
        let (ia, ib, ia2) = unsafe {
            (
                t.intern(a.as_ptr()),
                t.intern(b.as_ptr()),
                t.intern(a.as_ptr()),
            )
        };
        assert_eq!(ia, ia2);
        assert_ne!(ia, ib);
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { t.intern(std::ptr::null()) }, 0);
        let (s, next) = t.published_from(1);
        assert_eq!(
            s,
            vec![(ia, "AllReduce".into()), (ib, "ncclFloat32".into())]
        );
        assert_eq!(next, 3);
        let (s, _) = t.published_from(next);
        assert!(s.is_empty());
    }

    #[test]
    fn a_reused_buffer_with_new_text_gets_a_new_id() {
        let t = Interner::new();
        let mut buf = *b"BufferOne\0";
        // SAFETY: buf is NUL-terminated and lives across both calls.
        let a = unsafe { t.intern(buf.as_ptr().cast()) };
        buf[6..9].copy_from_slice(b"Two");
        // SAFETY: as above.
        let b = unsafe { t.intern(buf.as_ptr().cast()) };
        assert_ne!(a, b);
        let (s, _) = t.published_from(1);
        assert_eq!(s, vec![(a, "BufferOne".into()), (b, "BufferTwo".into())]);
    }

    #[test]
    fn long_strings_truncated_and_table_full_counted() {
        let t = Interner::new();
        let long = vec![b'x'; 1000];
        let id = t.add(&long);
        let (s, _) = t.published_from(id);
        assert_eq!(s[0].1.len(), MAX_STRING);
        for _ in 0..MAX_IDS {
            t.add(b"y");
        }
        assert!(t.full.load(Ordering::Relaxed) > 0);
    }
}
