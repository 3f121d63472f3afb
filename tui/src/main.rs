//! `ncclprof-tui`: parse the command line and run the subcommand.

use clap::Parser;

/// Keep large allocations in the heap instead of one mmap/munmap each: ipc-channel allocates
/// a ~208 KiB buffer for every frame it receives, and with glibc's defaults each one was
/// faulted in page by page (~24 000 page faults/s per stream at 2 M events/s). This is the
/// viewer's own process; the plugin never changes its host's allocator.
fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt before any other thread exists; only tuning parameters change.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 8 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}

/// An environment variable set to nothing means unset, as the plugin reads it: clap would
/// take an empty `NCCLPROF_DIR` for `--dir ""` and refuse it ("a value is required").
fn unset_empty_env() {
    for var in [
        "NCCLPROF_DIR",
        "NCCLPROF_MAX_MEMORY",
        "NCCLPROF_PLUGIN",
        "NCCLPROF_SIM",
    ] {
        if std::env::var_os(var).is_some_and(|v| v.is_empty()) {
            // SAFETY: at the start of main, before any other thread exists.
            unsafe { std::env::remove_var(var) };
        }
    }
}

fn main() -> std::process::ExitCode {
    tune_allocator();
    unset_empty_env();
    let cli = ncclprof_tui::cli::Cli::parse();
    match ncclprof_tui::commands::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ncclprof-tui: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
