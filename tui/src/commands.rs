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

/// The directories to watch: the one named (`--dir` or `NCCLPROF_DIR`), else every default
/// ([`link::default_dirs`]). The first is created if missing (private); a bad one is refused
/// with the reason.
fn resolve_dirs(dir: Option<PathBuf>, what: &str) -> anyhow::Result<Vec<PathBuf>> {
    let dirs = dir.map_or_else(link::default_dirs, |d| vec![d]);
    link::ensure_dir(&dirs[0]).with_context(|| format!("{what} {}", dirs[0].display()))?;
    Ok(dirs)
}

/// What the waiting screen says is watched.
fn watched(dirs: &[PathBuf]) -> String {
    let mut s = format!("directory {}", dirs[0].display());
    if dirs.len() > 1 {
        let others: Vec<String> = dirs[1..].iter().map(|d| d.display().to_string()).collect();
        s.push_str(&format!(" (and {} if present)", others.join(", ")));
    }
    s
}

fn live(g: &Global, a: LiveArgs) -> anyhow::Result<()> {
    let dirs = resolve_dirs(a.dir, "cannot use")?;
    let desc = watched(&dirs);
    view_dirs(g, dirs, desc)
}

fn view_dirs(g: &Global, dirs: Vec<PathBuf>, desc: String) -> anyhow::Result<()> {
    let src = source::live(dirs);
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
    let dirs = resolve_dirs(a.dir, "cannot record from")?;
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
    let src = source::live(dirs);
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
    let r = view_dirs(
        g,
        vec![dir.clone()],
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
    fn the_waiting_screen_names_every_watched_directory() {
        let one = [PathBuf::from("/x/rdv")];
        assert_eq!(watched(&one), "directory /x/rdv");
        let three = ["/run/user/7/ncclprof", "/tmp/ncclprof-7", "/y"].map(PathBuf::from);
        assert_eq!(
            watched(&three),
            "directory /run/user/7/ncclprof (and /tmp/ncclprof-7, /y if present)"
        );
    }
}
