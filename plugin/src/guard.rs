//! The FFI boundary's safety net: no panic ever unwinds into NCCL. A caught panic disables the
//! plugin for the rest of the process (every entry point becomes a cheap no-op) and is logged
//! once through NCCL's logger.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::abi::{NCCL_SUCCESS, NcclResult};

/// Whether the entry points record: [`OFF`] once a panic was caught or in a forked child
/// (all entry points return at once); [`ON`] (also before the first `init`, where they find
/// no plugin state); or [`ON_SHORT`], on with the raw clock a counter read, where NCCL's most
/// frequent calls take their short paths (a ProxyStep's states and stop:
/// `capture::step_state`, `capture::step_stop`). One byte for both, so that a short path
/// tests one.
static STATE: AtomicU8 = AtomicU8::new(ON);
const OFF: u8 = 0;
const ON: u8 = 1;
const ON_SHORT: u8 = 2;
static LOGGED: AtomicBool = AtomicBool::new(false);

#[inline(always)]
pub fn enabled() -> bool {
    STATE.load(Ordering::Relaxed) != OFF
}

/// Enabled, and the raw clock is the counter (`clock::counter_in_use`): the short paths,
/// which read the counter inline and make no call, may run.
#[inline(always)]
pub fn short_paths() -> bool {
    STATE.load(Ordering::Relaxed) == ON_SHORT
}

/// Turn the entry points on (`init`, once the clock source is chosen: it is chosen once per
/// process, so the short paths' counter stays the raw clock).
pub fn enable() {
    let s = if crate::clock::counter_in_use() {
        ON_SHORT
    } else {
        ON
    };
    STATE.store(s, Ordering::Relaxed);
}

/// Turn the entry points off, without a log line (a forked child; a failed start).
pub fn turn_off() {
    STATE.store(OFF, Ordering::Relaxed);
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
