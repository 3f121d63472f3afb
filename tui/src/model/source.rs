//! Sources: every mode yields the same [`SourceMsg`]s. Live: a watcher thread polls the
//! rendezvous directories and connects to each new live process, one blocking receiver thread per
//! process forwarding decoded frames into a bounded channel (a full channel blocks only that
//! receiver). Control messages go back on each process's own sender.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use ipc_channel::ipc::IpcSender;
use ncclprof_shared::link::{self, RecvError};
use ncclprof_shared::wire::ViewerMsg;

pub use super::ingest::SourceMsg;

/// Capacity of the frame channel to the UI loop: 128 frames, at most 24 MiB (frames are at
/// most 192 KiB, `wire::MAX_FRAME`), about 26 ms of full frames at 10 M events/s, twice the
/// slowest frame render at 10 M retained events. A UI loop behind (while its store first grows,
/// on the CI VM) is what fills it; then the receivers block and the plugins' senders drop and
/// count ("viewer slow"). It was 1 024 frames: up to 192 MiB of freshly allocated frames waiting
/// for the UI, first touched while the store was also growing, and 0.4 s of latency. At 10 M
/// events/s for 30 s (first fill included) the stream bench delivered a median 97.7 % with
/// 1 024 and 99.1 % with 128 (higher in 4 of 5 pairs), latency p99 376 ms and 76 ms
/// (BENCHMARKS.md §2, "The viewer's frame channel").
pub const CHANNEL_CAP: usize = 128;
/// How often the directories are polled.
pub const POLL: Duration = Duration::from_millis(500);

/// The running live source.
pub struct Live {
    pub rx: Receiver<SourceMsg>,
    stop: Arc<AtomicBool>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Start watching `dir`, the directory the user named or the viewer created (its absence is
/// an error), and `also_if_present` ([`link::default_dirs`]' other defaults, none when a
/// directory was named): each is watched while it exists, silently skipped while it does not
/// (a job may create it later); any other problem with one (owned by another user, loose
/// permissions) is reported once.
pub fn live(dir: PathBuf, also_if_present: Vec<PathBuf>) -> Live {
    let (tx, rx) = crossbeam_channel::bounded(CHANNEL_CAP);
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let _ = std::thread::Builder::new()
        .name("ncclprof-watch".into())
        .spawn(move || watch(dir, also_if_present, tx, s));
    Live { rx, stop }
}

/// Every entry in `dir` and `also`, with what could not be read (the same process may be
/// listed twice, from a directory reached by two paths).
fn list_all(
    dir: &Path,
    also: &[PathBuf],
    report: &mut impl FnMut(String),
) -> Vec<Result<link::ProcessEntry, link::LinkError>> {
    let mut all = Vec::new();
    match link::list_entries(dir) {
        Ok(list) => all.extend(list),
        Err(e) => report(e.to_string()),
    }
    for d in also {
        match link::list_entries(d) {
            Ok(list) => all.extend(list),
            Err(e) if e.is_not_found() => {}
            // Said as what it is: a default also watched, not the viewer's own directory.
            Err(e) => report(format!("also-watched default {e}")),
        }
    }
    all
}

fn watch(dir: PathBuf, also: Vec<PathBuf>, tx: Sender<SourceMsg>, stop: Arc<AtomicBool>) {
    // Processes we hold a stream from, and for each process ever connected its source id and
    // the generation we connected to: a process that dropped us (and is still running) publishes
    // a new server with a higher generation, and we reconnect on the same source id.
    let active: Arc<Mutex<HashSet<(u32, u64)>>> = Arc::default();
    let mut seen: HashMap<(u32, u64), (u32, u64)> = HashMap::new();
    let mut busy: HashSet<u32> = HashSet::new();
    let mut reported: HashMap<String, ()> = HashMap::new();
    let mut next_src = 1u32;
    let mut report = |tx: &Sender<SourceMsg>, msg: String| {
        if reported.insert(msg.clone(), ()).is_none() {
            let _ = tx.send(SourceMsg::Error(msg));
        }
    };
    while !stop.load(Ordering::Relaxed) {
        let list = list_all(&dir, &also, &mut |msg| report(&tx, msg));
        for item in list {
            let entry = match item {
                Ok(e) => e,
                Err(e) => {
                    report(&tx, e.to_string());
                    continue;
                }
            };
            // A process is known by its pid and start time, not by its directory: one listed
            // twice is connected once.
            let key = (entry.pid, entry.start_ticks);
            let is_active = active.lock().map(|a| a.contains(&key)).unwrap_or(true);
            if is_active || !entry.is_alive() {
                continue;
            }
            let previous = seen.get(&key).copied();
            if previous.is_some_and(|(_, generation)| entry.generation <= generation) {
                continue;
            }
            if entry.server.is_empty() {
                if busy.insert(entry.pid) {
                    let _ = tx.send(SourceMsg::Busy { pid: entry.pid });
                }
                continue;
            }
            match link::connect(&entry) {
                Ok(conn) => {
                    if let Ok(mut a) = active.lock() {
                        a.insert(key);
                    }
                    if busy.remove(&entry.pid) {
                        let _ = tx.send(SourceMsg::NotBusy { pid: entry.pid });
                    }
                    let src = match previous {
                        Some((src, _)) => src,
                        None => {
                            next_src += 1;
                            next_src - 1
                        }
                    };
                    seen.insert(key, (src, entry.generation));
                    let active2 = active.clone();
                    let pid = entry.pid;
                    let _ = tx.send(SourceMsg::Connected {
                        src,
                        pid,
                        control: conn.control,
                    });
                    let tx2 = tx.clone();
                    let mut data = conn.data;
                    let _ = std::thread::Builder::new()
                        .name(format!("ncclprof-rx-{pid}"))
                        .spawn(move || {
                            loop {
                                // An Events frame's records stay where they arrived (the
                                // frame ring, or the socket's buffer) until ingested.
                                match data.recv_frame() {
                                    Ok(frame) => {
                                        if tx2.send(SourceMsg::Frame { src, pid, frame }).is_err() {
                                            return;
                                        }
                                    }
                                    Err(RecvError::BadFrame(error)) => {
                                        let bad = SourceMsg::Bad { src, pid, error };
                                        if tx2.send(bad).is_err() {
                                            return;
                                        }
                                    }
                                    Err(RecvError::Closed(_)) => {
                                        let alive = entry.is_alive();
                                        if let Ok(mut a) = active2.lock() {
                                            a.remove(&key);
                                        }
                                        let _ = tx2.send(SourceMsg::Closed { src, pid, alive });
                                        return;
                                    }
                                }
                            }
                        });
                }
                Err(e) => report(&tx, e.to_string()),
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Send `msg` to every connected process, or only to `only` (a source id). Returns failures.
pub fn send_control(
    controls: &HashMap<u32, IpcSender<ViewerMsg>>,
    only: Option<u32>,
    msg: impl Fn() -> ViewerMsg,
) -> Vec<String> {
    let mut errs = Vec::new();
    for (&src, s) in controls {
        if only.is_some_and(|o| o != src) {
            continue;
        }
        if let Err(e) = s.send(msg()) {
            errs.push(format!("control to source {src}: {e}"));
        }
    }
    errs
}
