//! `ncclprof-tui`: the terminal viewer for the ncclprof NCCL profiler plugin.
//!
//! Sources (live rendezvous directories, the demo simulator, files) yield the same frames; the
//! [`model`] ingests them into a compact time-indexed store; the views render window queries.

#![deny(unsafe_code)]

pub mod action;
pub mod app;
pub mod cli;
pub mod commands;
pub mod event_loop;
pub mod keymap;
pub mod model;
pub mod term;
pub mod ui;

/// Keep large allocations in the heap instead of one mmap/munmap each, and keep freed heap
/// memory instead of handing it back to the kernel: ipc-channel allocates a ~208 KiB buffer
/// for every frame it receives, and with glibc's defaults each one was faulted in page by page
/// (~24 000 page faults/s per stream at 2 M events/s); a frame of a hung 64-rank job builds
/// and drops a few MB of verdicts, which the default 128 KiB trim threshold gave back and
/// faulted in again every frame. The viewer's own process only (the plugin never changes its
/// host's allocator): its `main` calls this, and so does every bench that runs viewer code,
/// so that they measure it as it runs.
///
/// # Safety
/// Call before any other thread of the process exists: glibc's `mallopt` is not safe to call
/// while other threads allocate.
#[allow(unsafe_code)]
pub unsafe fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: the caller guarantees no other thread exists; only tuning parameters change.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 8 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}
