//! init / finalize / fork / exampleProfilerStart/Stop: everything that is not the hot path.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::abi::NcclLogger;
use crate::{
    Plugin, config, context, control, guard, intern, link, nccl_log, ring, stream, summary,
};

/// What v4+ `init` says about the communicator.
pub struct CommIdentity {
    pub comm_name: *const c_char,
    pub comm_hash: u64,
    pub nnodes: c_int,
    pub nranks: c_int,
    pub rank: c_int,
    pub logfn: NcclLogger,
}

static CREATE: Mutex<()> = Mutex::new(());
/// Set in a forked child: the next `init` builds fresh state for the child process.
static FORKED: AtomicBool = AtomicBool::new(false);

extern "C" fn after_fork_in_child() {
    // The child has copies of the rings and none of our threads: capture nothing until the
    // child (if ever) initialises a communicator of its own.
    guard::turn_off();
    FORKED.store(true, Ordering::Relaxed);
    // The old pool's rings keep their owners' thread pointers, which the child's new threads
    // may be given (their blocks are in the child's cache): safe only because the old pool is
    // never used again (`init` builds a new one), which must stay so.
    ring::forget_my_ring();
}

fn cmdline() -> String {
    let raw = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let s: String = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    s.chars().take(512).collect()
}

/// Create the process state and its threads (first `init`, or first `init` after a fork).
fn create() -> Option<&'static Plugin> {
    let _g = CREATE.lock().unwrap_or_else(|e| e.into_inner());
    let forked = FORKED.swap(false, Ordering::Relaxed);
    if let Some(p) = crate::plugin()
        && !forked
    {
        return Some(p);
    }
    let cfg = config::Config::from_env();
    if let Some(e) = &cfg.mask_error {
        nccl_log::warn(e);
    }
    // Rings are reserved address space (MAP_NORESERVE), but a host with strict overcommit
    // counts it all: rather than profiling nothing, fall back to smaller rings (more drops
    // at very high rates, each one counted) and say so.
    let mut ring_events = cfg.ring_events;
    let mut ring_max = cfg.ring_max_events.max(ring_events);
    let rings = loop {
        match ring::RingPool::growing(cfg.max_threads, ring_events, ring_max) {
            Some(r) => break r,
            // Less room to grow first, then smaller rings.
            None if ring_max > ring_events => ring_max = (ring_max / 2).max(ring_events),
            None if ring_events > 4096 => {
                ring_events /= 2;
                ring_max = ring_events;
            }
            None => {
                nccl_log::warn("could not allocate capture rings; profiling disabled");
                return None;
            }
        }
    };
    let asked_max = cfg.ring_max_events.max(cfg.ring_events);
    if ring_events != cfg.ring_events || ring_max < asked_max {
        nccl_log::warn(&format!(
            "capture rings reduced: {ring_events} slots per thread, growing to at most \
             {ring_max} (asked {}, growing to {asked_max})",
            cfg.ring_events
        ));
    }
    let cal = crate::clock::Calibration::start(cfg.force_monotonic);
    let pid = std::process::id();
    let p = crate::install(Box::new(Plugin {
        control: control::Control::new(cfg.mask),
        rings,
        strings: intern::Interner::new(),
        contexts: context::Contexts::new(),
        pid,
        host: ncclprof_shared::link::hostname(),
        cmdline: cmdline(),
        api_version: AtomicU32::new(0),
        live_comms: AtomicU32::new(0),
        unknown_types: AtomicU64::new(0),
        viewer_slow: AtomicU64::new(0),
        frames_sent: AtomicU64::new(0),
        bytes_sent: AtomicU64::new(0),
        shutdown: AtomicBool::new(false),
        published: Mutex::default(),
        entry_stale: AtomicBool::new(false),
        dump_prefix: Mutex::new(cfg.dump_file.clone()),
        to_drain: Mutex::new(None),
        config: cfg,
    }));
    if !forked {
        guard::install_panic_hook();
        // SAFETY: registering a plain extern "C" handler; no other preconditions.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    }
    guard::enable(p);
    match stream::spawn(p, cal) {
        Ok(tx) => {
            if !p.config.no_listen {
                let dir = p.config.dir.clone();
                match ncclprof_shared::link::ensure_dir(&dir) {
                    Ok(()) => {
                        let tx2 = tx.clone();
                        let spawned = std::thread::Builder::new()
                            .name("ncclprof-link".into())
                            .spawn(move || {
                                let _ =
                                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                        link::run(p, dir, tx2)
                                    }));
                            });
                        if let Err(e) = spawned {
                            nccl_log::warn(&format!("cannot start the viewer link thread: {e}"));
                        }
                    }
                    Err(e) => nccl_log::warn(&format!("no viewer can attach: {e}")),
                }
            }
            *p.to_drain.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        }
        Err(e) => {
            nccl_log::warn(&format!(
                "cannot start the drain thread ({e}); profiling disabled"
            ));
            guard::turn_off();
            return None;
        }
    }
    Some(p)
}

/// `init` of every version. Never fails NCCL: on any problem `*ctx` stays NULL.
pub(crate) fn init(
    ctx_out: *mut *mut c_void,
    mask: *mut c_int,
    api: u32,
    id: Option<CommIdentity>,
) {
    if ctx_out.is_null() {
        return;
    }
    // SAFETY: NCCL passes the address of its context slot.
    unsafe { *ctx_out = std::ptr::null_mut() };
    if let Some(id) = &id {
        nccl_log::set(id.logfn);
    }
    let first = crate::plugin().is_none();
    let Some(p) = create() else { return };
    if p.config.disable {
        return;
    }
    // A late viewer is replayed the history (`NCCLPROF_HISTORY_MS`), whose records name
    // their communicator by slot and generation, described only while the slot is not
    // reused: reuse waits for the history to age past the finalize (10 s with a dump file
    // asked for, whose history is not aged, as before).
    let min_age_ns = if p.config.dump_file.is_some() {
        crate::context::REUSE_AFTER_NS
    } else {
        p.config
            .history_ms
            .saturating_add(1000)
            .saturating_mul(1_000_000)
    };
    let Some(i) = p
        .contexts
        .claim(ncclprof_shared::clock::monotonic_ns(), min_age_ns)
    else {
        nccl_log::warn(
            "all 1024 communicator slots of this process are taken (a finalized \
             communicator's is reused once its records are read and out of the history, \
             NCCLPROF_HISTORY_MS + 1 s after its finalize at the soonest): this one is not \
             profiled",
        );
        return;
    };
    let Some(slot) = p.contexts.get(i) else {
        return;
    };
    slot.api.store(api, Ordering::Relaxed);
    if let Some(id) = &id {
        let name = if id.comm_name.is_null() {
            0
        } else {
            // SAFETY: commName is NULL or a NUL-terminated string of the user's config.
            p.strings.add(unsafe { intern::read_c_str(id.comm_name) })
        };
        slot.comm_hash.store(id.comm_hash, Ordering::Relaxed);
        slot.name_id.store(name, Ordering::Relaxed);
        slot.nnodes.store(id.nnodes, Ordering::Relaxed);
        slot.nranks.store(id.nranks, Ordering::Relaxed);
        slot.rank.store(id.rank, Ordering::Relaxed);
    }
    slot.version.fetch_add(1, Ordering::Release);
    p.api_version.store(api, Ordering::Relaxed);
    p.live_comms.fetch_add(1, Ordering::AcqRel);
    p.control.attach(mask, api);
    // The rendezvous entry lists the communicators: without it written again, this
    // communicator would be missing from it (every one after the first, and the first too
    // when the link thread published before it). The drain writes it, within a pass: not
    // here, where a job creating many communicators at once (every rank of a split) would
    // write it once per communicator, in turn under its lock, each time listing them all.
    p.entry_stale.store(true, Ordering::Release);
    // SAFETY: as above.
    unsafe { *ctx_out = p.contexts.ptr(i) };
    if first {
        nccl_log::info(&format!(
            "profiling with mask {} (API v{api}); view live with `ncclprof-tui` (rendezvous {})",
            p.control.in_force(),
            p.config.dir.display()
        ));
    }
}

/// Why a flush got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushFailed {
    /// There is no drain thread (never started, or stopped).
    NoDrain,
    /// The drain did not answer within the timeout (far behind).
    TimedOut,
}

/// Ask the drain thread to process everything captured so far; wait at most `timeout`.
/// Returns the history the drain thread holds (for the dump file) and its counters.
pub fn flush(
    p: &Plugin,
    last: bool,
    timeout: Duration,
) -> Result<
    (
        Vec<ncclprof_shared::record::EventRecord>,
        ncclprof_shared::wire::Counters,
    ),
    FlushFailed,
> {
    let tx = p
        .to_drain
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or(FlushFailed::NoDrain)?;
    let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
    tx.send(stream::DrainMsg::Flush(reply_tx, last))
        .map_err(|_| FlushFailed::NoDrain)?;
    reply_rx.recv_timeout(timeout).map_err(|e| match e {
        crossbeam_channel::RecvTimeoutError::Timeout => FlushFailed::TimedOut,
        crossbeam_channel::RecvTimeoutError::Disconnected => FlushFailed::NoDrain,
    })
}

/// How long the last `finalize` waits for the drain thread to read and complete everything.
const FLUSH_WAIT: Duration = Duration::from_millis(200);
/// ... when a dump file was asked for (`NCCL_PROFILE_DUMP_FILE`).
const FLUSH_WAIT_FOR_DUMP: Duration = Duration::from_secs(5);

/// `finalize`: mark the communicator finalized; after the last one, flush (bounded wait)
/// and write the dump file if asked. Background threads stay (the library stays mapped and
/// a later communicator reuses them).
pub fn finalize(ctx: *mut c_void) {
    let Some(p) = crate::plugin() else { return };
    let Some(i) = p.contexts.index_of(ctx) else {
        return;
    };
    let Some(slot) = p.contexts.get(i) else {
        return;
    };
    if slot.finalized.load(Ordering::Acquire) {
        return; // double finalize: keeps the first one's time
    }
    slot.finalized_at
        .store(ncclprof_shared::clock::monotonic_ns(), Ordering::Relaxed);
    if slot.finalized.swap(true, Ordering::AcqRel) {
        return; // double finalize
    }
    slot.version.fetch_add(1, Ordering::Release);
    let left = p
        .live_comms
        .fetch_sub(1, Ordering::AcqRel)
        .saturating_sub(1);
    if left == 0 {
        let prefix = p
            .dump_prefix
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // With a dump file asked for, the dump is the profile: wait for a drain that is
        // behind (a full backlog of every ring takes it well under a second), as NCCL's
        // example plugin blocks finalize to write its file. Otherwise a short bounded wait.
        let wait = if prefix.is_some() {
            FLUSH_WAIT_FOR_DUMP
        } else {
            FLUSH_WAIT
        };
        let history = flush(p, true, wait);
        let limits = summary::Limits {
            ring_slots: p.rings.initial_slots(),
            ring_slots_asked: p.config.ring_events,
            ring_max_slots: p.rings.max_slots(),
            ring_max_asked: p.config.ring_max_events.max(p.config.ring_events),
            ring_largest: p.rings.largest_slots(),
            rings: p.rings.rings().len(),
            rings_asked: p.config.max_threads,
            max_open: p.config.max_open,
        };
        let (outcome, dropped) = match &history {
            Ok((_, c)) => (
                summary::Flush::Answered {
                    completed: c.completed.iter().sum(),
                },
                c.dropped.clone(),
            ),
            // No answer: what NCCL's threads counted themselves, and what was still unread.
            Err(why) => {
                let unread = p.rings.unread();
                let outcome = match why {
                    FlushFailed::TimedOut => summary::Flush::TimedOut {
                        waited: wait,
                        unread,
                    },
                    FlushFailed::NoDrain => summary::Flush::NoDrain { unread },
                };
                (outcome, stream::drops_outside_completion(p).to_vec())
            }
        };
        let (text, lost) = summary::loss_summary(outcome, &dropped, &limits, !guard::enabled());
        if lost {
            nccl_log::warn(&text);
        } else {
            nccl_log::info(&text);
        }
        if let Some(prefix) = prefix {
            let path = format!("{prefix}.{}.json", p.pid);
            match history {
                Ok((records, counters)) => {
                    match crate::dump::write(p, &records, &counters, std::path::Path::new(&path)) {
                        Ok(()) => {
                            nccl_log::info(&format!("wrote {} events to {path}", records.len()))
                        }
                        Err(e) => nccl_log::warn(&format!("could not write dump file {path}: {e}")),
                    }
                }
                Err(FlushFailed::TimedOut) => nccl_log::warn(&format!(
                    "did not write dump file {path}: the drain thread did not finish within {} s",
                    wait.as_secs_f64()
                )),
                Err(FlushFailed::NoDrain) => nccl_log::warn(&format!(
                    "did not write dump file {path}: the drain thread is not running"
                )),
            }
        }
    }
}

/// `exampleProfilerStart(mask, name)`.
pub(crate) fn profiler_start(mask: u32, name: *const c_char) {
    let Some(p) = crate::plugin() else { return };
    if !name.is_null() {
        // SAFETY: the application passes a NUL-terminated string (or NULL).
        let s = String::from_utf8_lossy(unsafe { intern::read_c_str(name) }).into_owned();
        *p.dump_prefix.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
    }
    p.control.start(mask);
    // The drain thread may be in its long masked-off wait; records follow at once now.
    let to_drain = p.to_drain.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(tx) = to_drain {
        let _ = tx.send(stream::DrainMsg::Wake);
    }
}

/// `exampleProfilerStop()`.
pub fn profiler_stop() {
    if let Some(p) = crate::plugin() {
        p.control.stop();
    }
}
