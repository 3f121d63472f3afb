//! What each subcommand does.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ncclprof_shared::link;

use crate::app::App;
use crate::cli::{Cli, Cmd, DemoArgs, Global, LiveArgs, OpenArgs, RecordArgs, no_color};
use crate::model::store::Store;
use crate::model::{ingest, open, snapshot, source};

/// Run the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let g = cli.global.clone();
    match cli.cmd {
        None => live(&g, LiveArgs { dir: None }),
        Some(Cmd::Live(a)) => live(&g, a),
        Some(Cmd::Demo(a)) => demo(&g, a),
        Some(Cmd::Open(a)) => open_files(&g, a),
        Some(Cmd::Record(a)) => record(&g, a).map(|line| println!("{line}")),
    }
}

fn store(g: &Global) -> Store {
    Store::new(g.max_memory.min(usize::MAX as u64) as usize)
}

/// Where a viewer looks: the directory named (`--dir` or `NCCLPROF_DIR`), else its own default
/// and the other defaults ([`link::default_dirs`]).
struct Watched {
    dir: PathBuf,
    also_if_present: Vec<PathBuf>,
}

impl Watched {
    /// Create `dir` if missing (private); a bad one is refused with the reason. The others are
    /// only looked at, never created.
    fn resolve(named: Option<PathBuf>, what: &str) -> anyhow::Result<Watched> {
        let mut dirs = named.map_or_else(link::default_dirs, |d| vec![d]);
        let dir = dirs.remove(0);
        link::ensure_dir(&dir).with_context(|| format!("{what} {}", dir.display()))?;
        Ok(Watched {
            dir,
            also_if_present: dirs,
        })
    }

    /// What the waiting screen says, one directory per line (a line of three paths does not
    /// fit 80 columns).
    fn describe(&self) -> String {
        let mut s = format!("directory {}", self.dir.display());
        for d in &self.also_if_present {
            s.push_str(&format!("\nand {} if present", d.display()));
        }
        s
    }

    fn source(self) -> source::Live {
        source::live(self.dir, self.also_if_present)
    }
}

fn live(g: &Global, a: LiveArgs) -> anyhow::Result<()> {
    let w = Watched::resolve(a.dir, "cannot use")?;
    let desc = w.describe();
    view(g, w.source(), desc)
}

fn view(g: &Global, src: source::Live, desc: String) -> anyhow::Result<()> {
    let mut app = App::new(store(g), true, desc);
    app.no_color = no_color(g);
    crate::event_loop::run(&mut app, Some(src))
}

fn open_files(g: &Global, a: OpenArgs) -> anyhow::Result<()> {
    let mut st = store(g);
    let notes = open::load(&mut st, &a.files)?;
    let desc = notes.join("; ");
    let mut app = App::new(st, false, desc);
    app.no_color = no_color(g);
    app.fit_all();
    app.on_data();
    crate::event_loop::run(&mut app, None)
}

/// Record for the duration, write the snapshot, return the one-line summary.
pub fn record(g: &Global, a: RecordArgs) -> anyhow::Result<String> {
    // Created if missing, as `live` does: `record` started before the job (a batch script, a
    // second terminal) must wait for it, not fail (seen on a real-NCCL run).
    let watched = Watched::resolve(a.dir, "cannot record from")?;
    // Fail before recording, not after, if the output cannot be written there.
    let out_dir = match a.output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !out_dir.is_dir() {
        bail!(
            "cannot write {}: {} is not a directory",
            a.output.display(),
            out_dir.display()
        );
    }
    crate::term::install_signal_flag();
    let src = watched.source();
    let mut st = store(g);
    let mut controls: Vec<ipc_channel::ipc::IpcSender<ncclprof_shared::wire::ViewerMsg>> =
        Vec::new();
    let began = Instant::now();
    let end = began + a.duration;
    loop {
        let now = Instant::now();
        if now >= end || crate::term::signalled() {
            break;
        }
        match src
            .rx
            .recv_timeout((end - now).min(Duration::from_millis(100)))
        {
            // Keep control senders alive: a plugin takes a closed control channel as the
            // viewer leaving.
            Ok(ingest::SourceMsg::Connected { src, pid, control }) => {
                st.proc_for(src, pid);
                controls.push(control);
            }
            Ok(m) => ingest::apply(&mut st, m),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
    }
    // What was recorded: Ctrl-C or SIGTERM ends it early.
    let recorded_for = began.elapsed();
    // Drain what already arrived.
    while let Ok(m) = src.rx.try_recv() {
        ingest::apply(&mut st, m);
    }
    drop(src);
    drop(controls);
    let s = snapshot::write(&st, &a.output)
        .with_context(|| format!("recording not saved to {}", a.output.display()))?;
    let mut line = format!(
        "recorded {} processes, {} events, {} drops, {} evicted in {:.1}s → {}",
        s.processes,
        s.events,
        s.dropped,
        st.evicted,
        recorded_for.as_secs_f64(),
        s.path.display()
    );
    if !st.busy.is_empty() {
        // One viewer per process at a time: say who was missed, or "0 processes" reads as
        // "no job" (seen on a real-NCCL run with a second `record` started beside a first).
        let pids: Vec<String> = st.busy.iter().map(u32::to_string).collect();
        line.push_str(&format!(
            "; not recorded: {} process{} attached to another viewer (pid {})",
            st.busy.len(),
            if st.busy.len() == 1 { "" } else { "es" },
            pids.join(", ")
        ));
    }
    if let Some(e) = st.errors.last() {
        line.push_str(&format!(" (last error: {e})"));
    }
    Ok(line)
}

/// Candidates for a file that ships next to this binary.
fn near_exe(name: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(exe) = std::env::current_exe()
        && let Some(d) = exe.parent()
    {
        v.push(d.join(name));
        if let Some(up) = d.parent() {
            v.push(up.join(name));
        }
    }
    v
}

fn find_sim(a: &DemoArgs) -> Option<PathBuf> {
    if let Some(p) = &a.sim {
        return Some(p.clone());
    }
    if let Some(p) = near_exe("ncclprof-sim")
        .into_iter()
        .next()
        .filter(|p| p.is_file())
    {
        return Some(p);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("ncclprof-sim"))
            .find(|p| p.is_file())
    })
}

fn find_plugin(a: &DemoArgs) -> Option<PathBuf> {
    if let Some(p) = &a.plugin {
        return Some(p.clone());
    }
    near_exe("libnccl_profiler_ncclprof.so")
        .into_iter()
        .find(|p| p.is_file())
}

/// Kills the simulator when dropped.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // SIGTERM to the whole process group (the sim re-spawns itself per process) so every
        // process finalizes; then make sure.
        let pid = self.0.id();
        let group = |sig: &str| {
            let _ = Command::new("kill")
                .args([sig, "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        };
        group("-TERM");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(1500) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        group("-KILL");
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn demo(g: &Global, a: DemoArgs) -> anyhow::Result<()> {
    let how = "build them with `cargo build --workspace` (or pass --sim / --plugin, env NCCLPROF_SIM / NCCLPROF_PLUGIN)";
    let Some(sim) = find_sim(&a) else {
        bail!(
            "ncclprof-sim not found next to {} nor on PATH: {how}",
            exe_name()
        );
    };
    let Some(plugin) = find_plugin(&a) else {
        bail!(
            "libnccl_profiler_ncclprof.so not found next to {} or in its parent directory: {how}",
            exe_name()
        );
    };
    if !sim.is_file() {
        bail!("{} does not exist: {how}", sim.display());
    }
    if !plugin.is_file() {
        bail!("{} does not exist: {how}", plugin.display());
    }
    let tmp = tempfile::Builder::new()
        .prefix("ncclprof-demo-")
        .tempdir()
        .context("cannot create a private temporary directory")?;
    let dir = tmp.path().join("rdv");
    link::ensure_dir(&dir)?;
    let log = std::fs::File::create(tmp.path().join("sim.log"))?;
    let mut cmd = Command::new(&sim);
    // Stopped by `ChildGuard` on the way out, and by the kernel if this process dies without
    // one (SIGKILL, an abort): the simulator forwards the SIGTERM to its processes.
    ncclprof_shared::child::die_with_parent(&mut cmd, libc::SIGTERM);
    cmd.arg("--plugin")
        .arg(&plugin)
        .args(["--ranks", &a.ranks.to_string()])
        .args(["--procs", &a.procs.to_string()])
        .args(["--straggler", &a.straggler])
        .args(["--rate", &a.rate.to_string()])
        .args(["--duration", &a.duration.to_string()])
        .args(["--workload", &a.workload]);
    if sim_supports(&sim, "--quiet") {
        cmd.arg("--quiet");
    }
    cmd.args(&a.sim_args)
        .env("NCCLPROF_DIR", &dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0);
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", sim.display()))?;
    let mut guard = ChildGuard(child);
    std::thread::sleep(Duration::from_millis(300));
    if let Ok(Some(status)) = guard.0.try_wait() {
        let err = std::fs::read_to_string(tmp.path().join("sim.log")).unwrap_or_default();
        bail!(
            "{} exited at once ({status}):\n{}",
            sim.display(),
            err.lines().take(20).collect::<Vec<_>>().join("\n")
        );
    }
    let r = view(
        g,
        source::live(dir.clone(), Vec::new()),
        format!(
            "demo: {} ranks in {} processes ({})",
            a.ranks,
            a.procs,
            dir.display()
        ),
    );
    drop(guard);
    r
}

/// Whether `sim --help` mentions `flag` (older simulators lack some flags).
fn sim_supports(sim: &Path, flag: &str) -> bool {
    Command::new(sim)
        .arg("--help")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(flag))
        .unwrap_or(false)
}

fn exe_name() -> String {
    std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "this binary".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_directory_is_the_only_one_watched_and_is_created_private() {
        let t = tempfile::tempdir().unwrap();
        let named = t.path().join("a/rdv");
        let w = Watched::resolve(Some(named.clone()), "cannot use").unwrap();
        assert_eq!(w.dir, named);
        assert!(w.also_if_present.is_empty());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&named).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn the_waiting_screen_names_every_watched_directory_one_per_line() {
        let one = Watched {
            dir: PathBuf::from("/x/rdv"),
            also_if_present: vec![],
        };
        assert_eq!(one.describe(), "directory /x/rdv");
        let three = Watched {
            dir: PathBuf::from("/run/user/7/ncclprof"),
            also_if_present: vec![PathBuf::from("/tmp/ncclprof-7"), PathBuf::from("/y")],
        };
        assert_eq!(
            three.describe(),
            "directory /run/user/7/ncclprof\nand /tmp/ncclprof-7 if present\nand /y if present"
        );
    }
}
