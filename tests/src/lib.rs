//! Shared helpers of the end-to-end tests: locate the built plugin, run the fake NCCL host
//! in this process, attach a viewer and collect what the plugin streamed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ncclprof_shared::link::{self, ProcessEntry};
use ncclprof_shared::record::EventRecord;
use ncclprof_shared::wire::{self, Frame, ViewerMsg};

pub mod e2e;
pub mod faults;
pub mod loss;

/// A bench's setting from the environment: `None` where unset or not a `T`.
pub fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// `target/<profile>/` of this build.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("profile dir").to_path_buf()
}

/// Newest modification time of the sources an artifact is built from.
fn newest_source(package_dir: &Path) -> std::time::SystemTime {
    fn walk(dir: &Path, newest: &mut std::time::SystemTime) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, newest);
            } else if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
                *newest = (*newest).max(m);
            }
        }
    }
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    for d in [package_dir.join("src"), root.join("shared/src")] {
        walk(&d, &mut newest);
    }
    newest
}

/// Path of a built workspace artifact (plugin .so or binary). These are not dependencies of
/// the test crate, so `cargo test` alone does not rebuild them: if one is missing or older
/// than its sources, build the workspace once (`.ci/run` builds it before testing anyway).
pub fn artifact(name: &str, package: &str) -> PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    let p = target_dir().join(name);
    let dir_name = match package {
        "ncclprof-plugin" => "plugin",
        "ncclprof-noop-plugin" => "noop-plugin",
        "ncclprof-sim" => "sim",
        "ncclprof-tui" => "tui",
        other => other,
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let stale = std::fs::metadata(&p)
        .and_then(|m| m.modified())
        .map_or(true, |built| built < newest_source(&root.join(dir_name)));
    if stale {
        BUILD.call_once(|| {
            let release = target_dir().file_name().is_some_and(|n| n == "release");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = std::process::Command::new(cargo);
            cmd.args(["build", "--quiet", "--workspace"]);
            if release {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("run cargo build");
            assert!(status.success(), "cargo build --workspace failed");
        });
    }
    assert!(p.exists(), "{} missing after build", p.display());
    p
}

pub fn plugin_path() -> PathBuf {
    artifact("libnccl_profiler_ncclprof.so", "ncclprof-plugin")
}

/// The plugin a bench loads: the `.so` environment variable `var` names (another build's,
/// so that two builds' runs alternate without copying one over the other), else this
/// workspace's; said on stderr.
pub fn bench_plugin_path(var: &str) -> PathBuf {
    let so = std::env::var_os(var)
        .filter(|p| !p.is_empty())
        .map_or_else(plugin_path, PathBuf::from);
    eprintln!("plugin: {}", so.display());
    so
}

pub fn noop_path() -> PathBuf {
    artifact("libnccl_profiler_noop.so", "ncclprof-noop-plugin")
}

/// CPU seconds on `clock` (`libc::CLOCK_THREAD_CPUTIME_ID`: the calling thread's;
/// `libc::CLOCK_PROCESS_CPUTIME_ID`: the whole process's), for benches' per-stage costs.
pub fn cpu_seconds(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Time the hypervisor took this VM's vCPUs away, for benches to report beside their figures:
/// on a shared VM a vCPU can vanish for milliseconds at a time (no context switch inside the
/// guest, wall time but no thread CPU time), which is what ring-full bursts below saturation
/// turned out to be. Read from the `steal` column of `/proc/stat`'s `cpu` line.
pub struct StealMeter {
    start: Instant,
    ticks: Option<u64>,
}

impl StealMeter {
    /// Start measuring now.
    pub fn start() -> StealMeter {
        StealMeter {
            start: Instant::now(),
            ticks: steal_ticks(),
        }
    }

    /// Share of all vCPUs' time stolen since `start`, in percent (None where the kernel does
    /// not report it).
    pub fn percent(&self) -> Option<f64> {
        let (before, after) = (self.ticks?, steal_ticks()?);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let secs = self.start.elapsed().as_secs_f64();
        // USER_HZ is 100 on every Linux ABI we build for.
        Some((after - before) as f64 / 100.0 / (secs * cpus) * 100.0)
    }
}

/// The `steal` field (8th value) of the aggregate `cpu` line of `/proc/stat`, in USER_HZ ticks.
fn steal_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    line.strip_prefix("cpu ")?
        .split_whitespace()
        .nth(7)?
        .parse()
        .ok()
}

/// Wait until `pred` holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if pred() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    pred()
}

/// Everything one viewer connection received.
#[derive(Debug, Default, Clone)]
pub struct Received {
    pub frames: Vec<Frame>,
}

impl Received {
    pub fn records(&self) -> Vec<EventRecord> {
        self.frames
            .iter()
            .filter_map(|f| match f {
                Frame::Events(r) => Some(r.to_vec()),
                _ => None,
            })
            .flatten()
            .collect()
    }
    pub fn strings(&self) -> HashMap<u16, String> {
        self.frames
            .iter()
            .filter_map(|f| match f {
                Frame::Meta(m) => Some(m.strings.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }
    pub fn last_counters(&self) -> Option<wire::Counters> {
        self.frames.iter().rev().find_map(|f| match f {
            Frame::Counters(c) => Some(c.clone()),
            _ => None,
        })
    }
}

/// A viewer connection that collects frames on a thread.
pub struct Viewer {
    pub control: ipc_channel::ipc::IpcSender<ViewerMsg>,
    rx: std::sync::mpsc::Receiver<Frame>,
    pub got: Received,
}

impl Viewer {
    /// Connect to process `pid`'s entry in `dir` (waits up to 5 s for a server).
    pub fn attach(dir: &Path, pid: u32) -> Viewer {
        let path = ProcessEntry::path(dir, pid);
        let mut entry = None;
        assert!(
            wait_for(Duration::from_secs(5), || {
                entry = ProcessEntry::read(&path)
                    .ok()
                    .filter(|e| !e.server.is_empty());
                entry.is_some()
            }),
            "no rendezvous entry with a server at {}",
            path.display()
        );
        let conn = link::connect(&entry.expect("entry")).expect("connect");
        let (tx, rx) = std::sync::mpsc::channel();
        let mut data = conn.data;
        std::thread::spawn(move || {
            while let Some(bytes) = next_frame(&mut data) {
                match wire::decode(&bytes) {
                    Ok(f) => {
                        if tx.send(f).is_err() {
                            return;
                        }
                    }
                    Err(e) => panic!("plugin sent an undecodable frame: {e}"),
                }
            }
        });
        Viewer {
            control: conn.control,
            rx,
            got: Received::default(),
        }
    }

    /// Collect frames until `pred` holds on what was received (or the timeout).
    pub fn until(&mut self, timeout: Duration, mut pred: impl FnMut(&Received) -> bool) -> bool {
        let end = Instant::now() + timeout;
        loop {
            while let Ok(f) = self.rx.try_recv() {
                self.got.frames.push(f);
            }
            if pred(&self.got) {
                return true;
            }
            if Instant::now() > end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The next frame, `None` once the plugin closed the connection; a frame the ring could not
/// give is a bug the test reports.
fn next_frame(data: &mut ncclprof_shared::link::FrameReceiver) -> Option<Vec<u8>> {
    match data.recv() {
        Ok(bytes) => Some(bytes),
        Err(ncclprof_shared::link::RecvError::Closed(_)) => None,
        Err(e) => panic!("plugin sent a frame the viewer cannot follow: {e}"),
    }
}
