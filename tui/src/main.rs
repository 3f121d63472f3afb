//! `ncclprof-tui`: parse the command line and run the subcommand.

use clap::Parser;

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
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { ncclprof_tui::tune_allocator() };
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
