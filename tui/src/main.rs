//! `ncclprof-tui`: parse the command line and run the subcommand.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = ncclprof_tui::cli::Cli::parse();
    match ncclprof_tui::commands::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ncclprof-tui: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
