//! The FFI boundary's safety net: no panic ever unwinds into NCCL. A caught panic disables the
//! plugin for the rest of the process (every entry point becomes a cheap no-op) and is logged
//! once through NCCL's logger.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use crate::Plugin;
use crate::abi::{NCCL_SUCCESS, NcclResult};
use crate::context::SlotsAt;
use crate::ring::Ring;

/// Whether the entry points record: false once a panic was caught or in a forked child (all
/// entry points return at once); true otherwise, also before the first `init`, where they
/// find no plugin state.
static ON: AtomicBool = AtomicBool::new(true);
/// Where NCCL's most frequent calls may take their short paths (a ProxyStep's start, states
/// and stop: `capture::step_start_short`, `capture::step_state`, `capture::step_stop`), one
/// static so that a short path finds all of it at one address.
static SHORT: ShortPathsAt = ShortPathsAt {
    rings: AtomicPtr::new(std::ptr::null_mut()),
    count: AtomicUsize::new(0),
    contexts: AtomicUsize::new(0),
};

#[repr(C)]
struct ShortPathsAt {
    /// The installed plugin's capture rings (their first), where the short paths may run: on,
    /// initialised, and the raw clock a counter read. NULL otherwise. One load tells a short
    /// path all three, and it is the rings' address itself, not the plugin's: the short
    /// path's chain of dependent loads to its step's phases entry is one load shorter
    /// (BENCHMARKS.md §1, "A step's start without a call").
    rings: AtomicPtr<Ring>,
    /// How many rings `rings` has (stored before it).
    count: AtomicUsize,
    /// Where the installed plugin's context slots lie (`context::SlotsAt`, stored before
    /// `rings`): a step's start checks its context without the plugin's address.
    contexts: AtomicUsize,
}
static LOGGED: AtomicBool = AtomicBool::new(false);

#[inline(always)]
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Where the short paths may run, as [`short_paths`] hands it out.
#[derive(Clone, Copy)]
pub struct ShortPaths {
    /// The installed plugin's capture rings.
    pub rings: &'static [Ring],
}

impl ShortPaths {
    /// Where the installed plugin's context slots lie (stored before the rings, and seen
    /// through [`short_paths`]' acquire, which handed out `self`).
    #[inline(always)]
    pub fn contexts(self) -> SlotsAt {
        SlotsAt(SHORT.contexts.load(Ordering::Relaxed))
    }
}

/// The installed plugin's capture rings, where the short paths, which read the counter
/// inline and make no call, may run: on, initialised, and the raw clock a counter read
/// (`None` otherwise).
#[inline(always)]
pub fn short_paths() -> Option<ShortPaths> {
    let first = SHORT.rings.load(Ordering::Acquire);
    if first.is_null() {
        return None;
    }
    debug_assert!(
        crate::clock::counter_in_use(),
        "short paths without the counter"
    );
    let count = SHORT.count.load(Ordering::Relaxed);
    // SAFETY: a non-null value is the first of the installed plugin's `count` rings (stored
    // before it, and seen here through the acquire), which live in a leaked Box, never freed.
    let rings = unsafe { std::slice::from_raw_parts(first, count) };
    Some(ShortPaths { rings })
}

/// Turn the entry points on for the installed plugin `p` (`init`, once the clock source is
/// chosen: it is chosen once per process, so the short paths' counter stays the raw clock).
pub fn enable(p: &'static Plugin) {
    ON.store(true, Ordering::Relaxed);
    let rings = p.rings.rings();
    let first = if crate::clock::counter_in_use() {
        rings.as_ptr().cast_mut()
    } else {
        std::ptr::null_mut()
    };
    SHORT.count.store(rings.len(), Ordering::Relaxed);
    SHORT
        .contexts
        .store(p.contexts.slots_at().0, Ordering::Relaxed);
    SHORT.rings.store(first, Ordering::Release);
}

/// Turn the entry points off, without a log line (a forked child; a failed start).
pub fn turn_off() {
    SHORT.rings.store(std::ptr::null_mut(), Ordering::Relaxed);
    ON.store(false, Ordering::Relaxed);
}

static LAST_PANIC: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Replace the default panic hook (this cdylib has its own std, so only the plugin's panics
/// reach it): remember the message for the one log line instead of printing to the job's
/// stderr.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut m) = LAST_PANIC.try_lock() {
            *m = info.to_string();
        }
    }));
}

/// Disable the plugin and log `why` once.
#[cold]
pub fn disable(why: &str) {
    turn_off();
    if !LOGGED.swap(true, Ordering::Relaxed) {
        let detail = LAST_PANIC.try_lock().map(|m| m.clone()).unwrap_or_default();
        crate::nccl_log::warn(&format!(
            "profiler plugin disabled for this process: {why} ({detail}). The job continues unprofiled."
        ));
    }
}

/// Run an entry point's body, catching any panic. Always returns success to NCCL (NCCL
/// ignores the return values of everything but `init`, and `init` must never fail it).
#[inline(always)]
pub fn call(f: impl FnOnce()) -> NcclResult {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        disable("internal error (panic caught at the NCCL boundary)");
    }
    NCCL_SUCCESS
}
