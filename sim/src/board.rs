//! The arrival board: which call each rank of each communicator has launched, shared by all
//! processes of a job (an mmap'd file) so that a collective's data flow really waits for its
//! last participant (stragglers delay everyone even when the host is overloaded).

use anyhow::{Context, Result};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// `comms × ranks` arrival counters followed by `ranks` dead flags.
pub struct Board {
    ptr: *const AtomicU64,
    comms: usize,
    ranks: usize,
    map_len: usize,
    owned: Option<Vec<AtomicU64>>,
}

// SAFETY: the board only holds atomics (in our own Vec or a shared mapping alive as long as it).
unsafe impl Send for Board {}
// SAFETY: as above; every access is atomic.
unsafe impl Sync for Board {}

impl Board {
    fn words(comms: usize, ranks: usize) -> usize {
        comms * ranks + ranks
    }

    /// A board private to this process.
    pub fn in_process(comms: usize, ranks: usize) -> Board {
        let v: Vec<AtomicU64> = (0..Self::words(comms, ranks))
            .map(|_| AtomicU64::new(0))
            .collect();
        Board {
            ptr: v.as_ptr(),
            comms,
            ranks,
            map_len: 0,
            owned: Some(v),
        }
    }

    /// Creates the zeroed file backing a shared board.
    pub fn create_file(path: &Path, comms: usize, ranks: usize) -> Result<()> {
        let f =
            std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
        f.set_len((Self::words(comms, ranks) * 8) as u64)?;
        Ok(())
    }

    /// Maps a board file shared with the other processes of the job.
    pub fn open(path: &Path, comms: usize, ranks: usize) -> Result<Board> {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("open {}", path.display()))?;
        let len = Self::words(comms, ranks) * 8;
        // SAFETY: mapping a file we opened read-write, of the length we set; MAP_SHARED so all
        // processes see the same atomics.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            anyhow::bail!(
                "mmap {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
        }
        Ok(Board {
            ptr: p.cast(),
            comms,
            ranks,
            map_len: len,
            owned: None,
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < Self::words(self.comms, self.ranks));
        // SAFETY: index checked; the memory lives as long as self.
        unsafe { &*self.ptr.add(i) }
    }

    /// Rank `rank` has launched call `k` on communicator `comm`.
    pub fn arrive(&self, comm: usize, rank: usize, k: u64) {
        self.word(comm * self.ranks + rank)
            .fetch_max(k + 1, Ordering::Release);
    }

    /// Number of calls rank `rank` has launched on `comm`.
    pub fn arrived(&self, comm: usize, rank: usize) -> u64 {
        self.word(comm * self.ranks + rank).load(Ordering::Acquire)
    }

    /// Marks a rank's process dead (it will never arrive again).
    pub fn mark_dead(&self, rank: usize) {
        self.word(self.comms * self.ranks + rank)
            .store(1, Ordering::Release);
    }

    pub fn dead(&self, rank: usize) -> bool {
        self.word(self.comms * self.ranks + rank)
            .load(Ordering::Acquire)
            != 0
    }

    /// Whether every rank in `ranks` launched call `k` on `comm` (or is dead).
    pub fn all_arrived(&self, comm: usize, ranks: &[u32], k: u64) -> bool {
        ranks
            .iter()
            .all(|&r| self.arrived(comm, r as usize) > k || self.dead(r as usize))
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        if self.owned.is_none() && self.map_len > 0 {
            // SAFETY: unmapping exactly what open() mapped.
            unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.map_len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals() {
        let b = Board::in_process(2, 3);
        assert!(!b.all_arrived(1, &[0, 1, 2], 0));
        b.arrive(1, 0, 0);
        b.arrive(1, 1, 0);
        assert!(!b.all_arrived(1, &[0, 1, 2], 0));
        b.mark_dead(2);
        assert!(b.all_arrived(1, &[0, 1, 2], 0));
        assert!(!b.all_arrived(0, &[0, 1], 0));
    }

    #[test]
    fn shared_file() {
        let p = std::env::temp_dir().join(format!("board-test-{}", std::process::id()));
        Board::create_file(&p, 1, 2).unwrap();
        let a = Board::open(&p, 1, 2).unwrap();
        let b = Board::open(&p, 1, 2).unwrap();
        a.arrive(0, 1, 4);
        assert_eq!(b.arrived(0, 1), 5);
        drop(a);
        drop(b);
        let _ = std::fs::remove_file(&p);
    }
}
