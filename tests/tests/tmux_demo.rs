//! The real binary in a real terminal: `ncclprof-tui demo` under tmux (send-keys /
//! capture-pane). Switches every view, toggles a mask bit and waits for the plugin's
//! acknowledgement, takes a snapshot and validates its JSON, quits cleanly. And the ways a
//! viewer ends without `q`: its terminal closed, or the viewer killed; the simulator it started
//! must not outlive it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    /// A tmux server of its own (`socket`) running `sh -c cmd` in a 120×36 session `t`.
    fn start(socket: String, cmd: &str) -> Tmux {
        let t = Tmux { socket };
        t.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "36",
            "sh",
            "-c",
            cmd,
        ]);
        t
    }
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }
    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", "t"];
        a.extend_from_slice(keys);
        self.run(&a);
    }
    fn wait_for(&self, what: &str, timeout: Duration) -> String {
        let t0 = Instant::now();
        let end = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if s.contains(what) {
                eprintln!("{what:?} after {:?}", t0.elapsed());
                return s;
            }
            assert!(
                Instant::now() < end,
                "timed out waiting for {what:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

fn have_tmux() -> bool {
    let ok = Command::new("tmux").arg("-V").output().is_ok();
    if !ok {
        eprintln!("tmux not installed: skipping the real-terminal test (.ci/run installs it)");
    }
    ok
}

/// The shell words that run a small, slow demo of the built binaries (2 ranks, 2 processes).
fn demo_cmd() -> String {
    let tui = ncclprof_tests::artifact("ncclprof-tui", "ncclprof-tui");
    let sim = ncclprof_tests::artifact("ncclprof-sim", "ncclprof-sim");
    let plugin = ncclprof_tests::plugin_path();
    format!(
        "'{}' demo --ranks 2 --procs 2 --rate 0.05 --plugin '{}' --sim '{}'",
        tui.display(),
        plugin.display(),
        sim.display()
    )
}

#[test]
fn demo_in_tmux_views_mask_ack_snapshot_quit() {
    if !have_tmux() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let cmd = format!(
        "cd '{}' && {}; echo exit=$?; sleep 30",
        work.path().display(),
        demo_cmd()
    );
    let t = Tmux::start(format!("ncclprof-test-{}", std::process::id()), &cmd);
    t.wait_for("procs 2 live", Duration::from_secs(30));

    // Every view, by number key.
    for (key, marker) in [
        ("2", "channels"),
        ("3", "bottleneck"),
        ("4", "algbw"),
        ("5", "acknowledged"),
        ("1", "span"),
    ] {
        t.keys(&[key]);
        t.wait_for(marker, Duration::from_secs(10));
    }
    // Tab cycles views too.
    t.keys(&["Tab"]);
    t.wait_for("channels", Duration::from_secs(10));

    // Mask: toggle the first kind (Group, off by default) and wait for the plugin's ack.
    t.keys(&["5"]);
    let s = t.wait_for("acknowledged 0x175e", Duration::from_secs(10));
    assert!(s.contains("requested 0x175e"), "{s}");
    t.keys(&["Space"]);
    t.wait_for("acknowledged 0x175f", Duration::from_secs(10));

    // Snapshot.
    t.keys(&["s"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let snap = loop {
        let found = std::fs::read_dir(work.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "json") && is_complete_snapshot(p));
        if let Some(p) = found {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot written; screen:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&snap).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().expect("traceEvents");
    assert!(
        events.iter().any(|e| e["ph"] == "X"),
        "snapshot has no spans"
    );
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == "process_name")
    );

    t.keys(&["q"]);
    t.wait_for("exit=0", Duration::from_secs(15));
}

fn is_complete_snapshot(p: &Path) -> bool {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .is_some()
}

/// One process, from its `/proc/<pid>/stat`.
#[derive(Debug, Clone)]
struct Process {
    pid: u32,
    ppid: u32,
    /// Start time in clock ticks: tells the process from a later one with its pid.
    start: u64,
    comm: String,
}

impl Process {
    fn running(&self) -> bool {
        running(self.pid, self.start)
    }
}

/// `root` and every process below it, from /proc.
fn process_tree(root: u32) -> Vec<Process> {
    let mut all = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let comm = stat[stat.find('(').unwrap() + 1..stat.rfind(')').unwrap()].to_string();
        let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        // Fields after the command: state, ppid (4th field), …, starttime (22nd).
        all.push(Process {
            pid,
            ppid: f[1].parse().unwrap(),
            start: f[19].parse().unwrap(),
            comm,
        });
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(all.iter().filter(|p| p.ppid == parent).map(|p| p.pid));
        i += 1;
    }
    all.retain(|p| tree.contains(&p.pid));
    all
}

fn running(pid: u32, start: u64) -> bool {
    ncclprof_shared::link::process_start_ticks(pid) == Some(start)
}

/// Kills, when dropped, every process of a tree still running: a failed assertion must not
/// leave simulators running for good (`--duration 0`) on the CI machine.
struct Reaper(Vec<Process>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for p in &self.0 {
            if p.running() {
                // SAFETY: kill on a pid checked to be the process this test started.
                unsafe { libc::kill(p.pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// A demo whose viewer or simulator ends without `q`: the viewer's terminal closed (the SSH
/// connection lost, the window shut), with stderr on that terminal; the viewer SIGKILLed; the
/// simulator's parent SIGKILLed. Every simulator process must end too, and a viewer whose
/// terminal closed must exit cleanly. Before, a closed terminal made the viewer's teardown
/// panic writing to the dead terminal and abort (exit 134): the demo's `ChildGuard` never ran
/// and the 9 simulator processes of an 8-rank demo ran on for good.
#[test]
fn the_demos_simulator_ends_with_its_viewer() {
    if !have_tmux() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    for (i, how) in ["terminal closed", "viewer SIGKILLed", "simulator SIGKILLed"]
        .into_iter()
        .enumerate()
    {
        let status = work.path().join(format!("status-{i}"));
        // No `exec`, no redirection: stderr is the terminal, as for a user. The shell ignores
        // the hangup (the viewer sets its own handler) to write the viewer's exit status.
        let cmd = format!(
            "trap '' HUP; {}; echo $? > '{}'",
            demo_cmd(),
            status.display()
        );
        let t = Tmux::start(
            format!("ncclprof-test-end-{}-{i}", std::process::id()),
            &cmd,
        );
        t.wait_for("procs 2 live", Duration::from_secs(30));
        let pane: u32 = t
            .run(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
            .trim()
            .parse()
            .unwrap();
        let tree = Reaper(process_tree(pane));
        let sims: Vec<&Process> = tree.0.iter().filter(|p| p.comm == "ncclprof-sim").collect();
        assert_eq!(
            sims.len(),
            3,
            "the simulator and its 2 processes: {:?}",
            tree.0
        );
        let viewer = tree.0.iter().find(|p| p.comm == "ncclprof-tui").unwrap();
        let kill = |p: &Process| {
            assert!(p.running());
            // SAFETY: kill on a pid this test started (through tmux), checked running.
            unsafe { libc::kill(p.pid as i32, libc::SIGKILL) };
        };
        match how {
            "terminal closed" => drop(t),
            "viewer SIGKILLed" => kill(viewer),
            // The simulator's parent: the one whose parent is the viewer.
            _ => kill(sims.iter().find(|p| p.ppid == viewer.pid).unwrap()),
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Some(p) = sims.iter().find(|p| p.running()) {
            assert!(
                Instant::now() < deadline,
                "{how}: {p:?} still running 10 s later"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        if how == "terminal closed" {
            let deadline = Instant::now() + Duration::from_secs(10);
            let code = loop {
                if let Ok(s) = std::fs::read_to_string(&status)
                    && s.ends_with('\n')
                {
                    break s.trim().to_string();
                }
                assert!(Instant::now() < deadline, "{how}: the viewer never exited");
                std::thread::sleep(Duration::from_millis(100));
            };
            assert_eq!(
                code, "0",
                "{how}: the viewer's exit status (134: it aborted)"
            );
        }
    }
}
