//! The FFI boundary's safety net: no panic ever unwinds into NCCL. A caught panic disables the
//! plugin for the rest of the process (every entry point becomes a cheap no-op) and is logged
//! once through NCCL's logger.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::abi::{NCCL_SUCCESS, NcclResult};

/// False once a panic was caught (or in a forked child): all entry points return at once.
pub static ENABLED: AtomicBool = AtomicBool::new(true);
static LOGGED: AtomicBool = AtomicBool::new(false);

#[inline(always)]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
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
    ENABLED.store(false, Ordering::Relaxed);
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
