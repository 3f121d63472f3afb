//! Fault a new store chunk's pages in on a helper thread, ahead of the ingest that fills it.
//!
//! Until the store reaches its memory cap, every chunk it makes is fresh memory, and the kernel
//! zeroes each page at its first touch. The ingest thread used to pay that as it filled the
//! chunk: on the 2-vCPU VM the benchmarks run on, `clear_page_erms` was 14.7 % of all samples
//! while the store filled (about 1.9 s of CPU for 1 GiB, first touches of a guest's memory
//! being slow), and that ingest thread is the one a fast job waits on before it drops records
//! as `viewer slow`. Here the chunk's address range goes to a helper thread that faults it in
//! with `MADV_POPULATE_WRITE` while the ingest thread is still filling the start of it; on a
//! GPU host with idle cores the zeroing then costs the ingest nothing.
//!
//! Nothing here reads or writes the memory: `MADV_POPULATE_WRITE` maps pages as a write would
//! and leaves their contents as they are, so a page the ingest thread reaches first is
//! unaffected, and a range freed (and even reused) before the helper gets to it is harmless;
//! one no longer mapped fails with `ENOMEM`, which is ignored. Kernels before 5.14 lack the
//! advice: there (`start` returns false) chunks fault in as they fill, as before. The queue is
//! bounded and never waited on: a request that finds it full is skipped.
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::sync::mpsc::{SyncSender, sync_channel};

/// Requests the helper may be behind by: at 256 KiB a chunk, 64 MiB of chunks.
const QUEUE: usize = 256;

/// The store's helper, once started (`start`).
static HELPER: OnceLock<Option<Prefaulter>> = OnceLock::new();

/// Start the store's helper (once per process; the viewer's commands do, the store's own tests
/// do not, so their memory accounting stays page by page). False where the kernel cannot
/// populate pages ahead or the thread could not be started: chunks then fault in as filled.
pub fn start() -> bool {
    HELPER.get_or_init(Prefaulter::new).is_some()
}

/// Ask the store's helper, if started, to fault in the whole pages of `v`'s spare capacity.
/// True if it will: the caller then accounts the allocation as resident.
pub fn ahead<T>(v: &Vec<T>) -> bool {
    HELPER
        .get()
        .and_then(Option::as_ref)
        .is_some_and(|p| p.ahead(v))
}

/// A helper thread and the bounded queue of address ranges it faults in.
pub struct Prefaulter {
    tx: SyncSender<(usize, usize)>,
}

impl Prefaulter {
    pub fn new() -> Option<Prefaulter> {
        if !populate_supported() {
            return None;
        }
        let (tx, rx) = sync_channel::<(usize, usize)>(QUEUE);
        std::thread::Builder::new()
            .name("ncclprof-prefault".into())
            .spawn(move || {
                for (addr, len) in rx {
                    populate(addr, len);
                }
            })
            .ok()?;
        Some(Prefaulter { tx })
    }

    /// Queue the whole pages of `v`'s spare capacity; false if there are none or the queue is
    /// full (never waits).
    pub fn ahead<T>(&self, v: &Vec<T>) -> bool {
        let page = page_size();
        let base = v.as_ptr() as usize;
        let from = base + v.len() * std::mem::size_of::<T>();
        let to = base + v.capacity() * std::mem::size_of::<T>();
        let (lo, hi) = (from.next_multiple_of(page), to / page * page);
        hi > lo && self.tx.try_send((lo, hi - lo)).is_ok()
    }
}

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    })
}

fn populate(addr: usize, len: usize) -> bool {
    // SAFETY: POPULATE_WRITE only maps pages, keeping their contents; an address no longer
    // mapped fails with ENOMEM (see the module comment).
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) == 0 }
}

/// Whether this kernel knows `MADV_POPULATE_WRITE` (Linux ≥ 5.14), tried on a page of our own.
fn populate_supported() -> bool {
    let page = page_size();
    // SAFETY: a fresh private anonymous mapping, unmapped below.
    let m = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if m == libc::MAP_FAILED {
        return false;
    }
    let ok = populate(m as usize, page);
    // SAFETY: the mapping made above, of this size.
    unsafe { libc::munmap(m, page) };
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `[addr, addr + len)` the kernel reports resident (`mincore`).
    fn resident(addr: usize, len: usize) -> usize {
        let page = page_size();
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: a page-aligned range of our own mapping; one byte per page out.
        let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        vec.iter().filter(|&&b| b & 1 != 0).count()
    }

    #[test]
    fn a_vectors_spare_capacity_is_faulted_in_by_the_helper_and_its_items_are_kept() {
        let Some(p) = Prefaulter::new() else {
            eprintln!("this kernel lacks MADV_POPULATE_WRITE: nothing to test");
            return;
        };
        let page = page_size();
        // 64 MiB: above glibc's largest mmap threshold, so the vector is a mapping of its own
        // and its pages start untouched.
        let n = (64 << 20) / 8;
        let mut v: Vec<u64> = Vec::with_capacity(n);
        v.extend(0..100u64);
        let base = v.as_ptr() as usize;
        let (lo, hi) = (base.next_multiple_of(page), (base + n * 8) / page * page);
        let pages = (hi - lo) / page;
        let before = resident(lo, hi - lo);
        assert!(
            before < pages / 2,
            "{before} of {pages} pages resident before"
        );
        assert!(p.ahead(&v));
        assert!(
            (0..5000).any(|_| {
                std::thread::sleep(std::time::Duration::from_millis(1));
                resident(lo, hi - lo) == pages
            }),
            "the helper did not fault the range in"
        );
        // What was written before stays; writing on works as ever.
        assert!(v.iter().copied().eq(0..100u64));
        v.extend(100..n as u64);
        assert!(v.iter().copied().eq(0..n as u64));
    }

    #[test]
    fn a_vector_without_a_whole_spare_page_asks_for_nothing() {
        let Some(p) = Prefaulter::new() else {
            return;
        };
        let v: Vec<u8> = Vec::with_capacity(16);
        assert!(!p.ahead(&v));
        let full: Vec<u8> = vec![1; 3 * page_size()];
        assert!(!p.ahead(&full), "no spare capacity");
    }

    #[test]
    fn the_stores_helper_is_off_until_started() {
        // No test in this crate starts it: the store's accounting there stays page by page.
        assert!(!ahead(&Vec::<u64>::with_capacity(1 << 20)));
    }
}
