//! Command line: `live` (default) | `demo` | `open` | `record`, with global flags.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::model::units;

const AFTER_HELP: &str = "\
ENVIRONMENT:
  NCCLPROF_DIR         rendezvous directory of plugin processes; same as --dir. Unset, plugins use
                       $XDG_RUNTIME_DIR/ncclprof (if that exists), else /tmp/ncclprof-<uid>; the
                       viewer watches its own of these and also /run/user/<uid>/ncclprof and
                       /tmp/ncclprof-<uid>, so a job without XDG_RUNTIME_DIR and a viewer with it
                       (or the reverse) still meet.
  NCCLPROF_MAX_MEMORY  default for --max-memory.
  NCCLPROF_FRAME_RING_MIB
                       shared memory offered to each plugin process for its frames of 4 KiB
                       or more (the Events frames, read there in place), in MiB: default 16,
                       0 for none (every frame crosses the socket), at least 0.4 and at most 64;
                       256 MiB over all processes, later ones getting smaller rings or none.
  NO_COLOR             any non-empty value disables colour (same as --no-color).
  NCCLPROF_PLUGIN      demo: path of libnccl_profiler_ncclprof.so.
  NCCLPROF_SIM         demo: path of the ncclprof-sim binary.
  A variable set to nothing (NCCLPROF_DIR=) counts as unset, as the plugin reads it.

KEYS: press ? inside the viewer for every binding (q quits, Tab / 1-5 switch views).";

#[derive(Debug, Parser)]
#[command(
    name = "ncclprof-tui",
    version,
    about = "Terminal viewer for the ncclprof NCCL profiler plugin.",
    long_about = "Terminal viewer for the ncclprof NCCL profiler plugin: attaches to every running \
process that loaded the plugin (live), runs a simulated job (demo), opens snapshots and NCCL \
example-profiler dumps (open), or records headlessly to a snapshot (record). Without a \
subcommand it runs `live`.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    #[command(flatten)]
    pub global: Global,
}

/// Flags every subcommand takes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Memory cap for retained events (e.g. 1GiB, 512MiB); the oldest are evicted beyond it,
    /// and the eviction count is shown in the status bar.
    #[arg(long, global = true, env = "NCCLPROF_MAX_MEMORY", hide_env_values = true, default_value = "1GiB", value_parser = units::parse_bytes)]
    pub max_memory: u64,
    /// Disable colours (also when the NO_COLOR environment variable is set and non-empty).
    #[arg(long, global = true)]
    pub no_color: bool,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Attach to every plugin process in the rendezvous directories (the default).
    Live(LiveArgs),
    /// Run the fake NCCL host `ncclprof-sim` with the ncclprof plugin and view it live.
    Demo(DemoArgs),
    /// Open ncclprof snapshots and/or NCCL example-profiler-plugin dumps (one file per rank).
    Open(OpenArgs),
    /// Record headlessly (no terminal) for a while and write a snapshot.
    Record(RecordArgs),
}

#[derive(Debug, Clone, Args)]
pub struct LiveArgs {
    /// Rendezvous directory (must be yours, mode 0700; created so if missing). Without it,
    /// every default directory is watched (NCCLPROF_DIR in `ncclprof-tui --help`).
    #[arg(long, env = "NCCLPROF_DIR", hide_env_values = true)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Total simulated ranks (GPUs).
    #[arg(long, default_value_t = 8)]
    pub ranks: usize,
    /// Simulated processes (ranks are split evenly).
    #[arg(long, default_value_t = 8)]
    pub procs: usize,
    /// RANK:DELAY: that rank arrives DELAY late to every collective.
    #[arg(long, default_value = "3:2ms")]
    pub straggler: String,
    /// Time scale of the simulation (1.0 = real time).
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// Workload: allreduce, allgather, reducescatter, broadcast, sendrecv, alltoall, or mixed.
    #[arg(long, default_value = "mixed")]
    pub workload: String,
    /// Seconds to run; 0 = until the viewer quits.
    #[arg(long, default_value_t = 0.0)]
    pub duration: f64,
    /// The plugin library (default: libnccl_profiler_ncclprof.so next to this binary or in ../).
    #[arg(long, env = "NCCLPROF_PLUGIN", hide_env_values = true)]
    pub plugin: Option<PathBuf>,
    /// The simulator binary (default: ncclprof-sim next to this binary, then on PATH).
    #[arg(long, env = "NCCLPROF_SIM", hide_env_values = true)]
    pub sim: Option<PathBuf>,
    /// Extra arguments passed to ncclprof-sim as they are (after `--`).
    #[arg(last = true)]
    pub sim_args: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct OpenArgs {
    /// Files: ncclprof snapshots (.json objects) or example-plugin dumps (.json arrays).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// How long to record (e.g. 10s, 500ms, 2m).
    #[arg(long, default_value = "10s", value_parser = units::parse_duration)]
    pub duration: std::time::Duration,
    /// Snapshot file to write (Chrome trace JSON).
    #[arg(long, short)]
    pub output: PathBuf,
    /// Rendezvous directory (must be yours, mode 0700; created so if missing). Without it,
    /// every default directory is watched (NCCLPROF_DIR in `ncclprof-tui --help`).
    #[arg(long, env = "NCCLPROF_DIR", hide_env_values = true)]
    pub dir: Option<PathBuf>,
}

/// Whether colour is off (flag or NO_COLOR).
pub fn no_color(g: &Global) -> bool {
    g.no_color || std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_subcommands() {
        let c = Cli::try_parse_from(["ncclprof-tui"]).unwrap();
        assert!(c.cmd.is_none());
        if std::env::var_os("NCCLPROF_MAX_MEMORY").is_none() {
            assert_eq!(c.global.max_memory, 1 << 30);
        }
        let c = Cli::try_parse_from([
            "ncclprof-tui",
            "record",
            "--duration",
            "2s",
            "--output",
            "x.json",
            "--max-memory",
            "64MiB",
        ])
        .unwrap();
        match c.cmd {
            Some(Cmd::Record(r)) => {
                assert_eq!(r.duration.as_secs(), 2);
                assert_eq!(r.output, PathBuf::from("x.json"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(c.global.max_memory, 64 << 20);
        assert!(Cli::try_parse_from(["ncclprof-tui", "open"]).is_err());
        let c =
            Cli::try_parse_from(["ncclprof-tui", "demo", "--ranks", "4", "--", "--pxn"]).unwrap();
        match c.cmd {
            Some(Cmd::Demo(d)) => {
                assert_eq!(d.ranks, 4);
                assert_eq!(d.sim_args, vec!["--pxn"]);
            }
            other => panic!("{other:?}"),
        }
    }
}
