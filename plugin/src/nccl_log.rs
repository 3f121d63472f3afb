//! Logging through NCCL's logger (v4+). Always with the fixed format `"%s"` so our text is
//! never interpreted as a format. v1–v3 have no logger: warnings go to stderr, once.

use std::ffi::{CString, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::{NCCL_INIT_FLAG, NCCL_LOG_INFO, NCCL_LOG_WARN, NCCL_PROFILE_FLAG, NcclLogger};

static LOGGER: AtomicUsize = AtomicUsize::new(0);

/// Remember the logger NCCL passed to `init` (v4+).
pub fn set(logger: NcclLogger) {
    if let Some(f) = logger {
        LOGGER.store(f as usize, Ordering::Release);
    }
}

fn emit(level: c_int, msg: &str) {
    let text = CString::new(format!("NCCLPROF {msg}").replace('\0', " ")).unwrap_or_default();
    let f = LOGGER.load(Ordering::Acquire);
    if f == 0 {
        if level == NCCL_LOG_WARN {
            eprintln!("{}", text.to_string_lossy());
        }
        return;
    }
    // SAFETY: the value was stored from a valid `NcclLogger` function pointer of the core,
    // which stays loaded while it calls us; "%s" consumes exactly one `char*` argument.
    unsafe {
        let f: unsafe extern "C" fn(
            c_int,
            std::ffi::c_ulong,
            *const std::ffi::c_char,
            c_int,
            *const std::ffi::c_char,
            ...
        ) = std::mem::transmute(f);
        f(
            level,
            // INIT too: our lines are the load line, the finalize summary and warnings, which
            // belong with NCCL's own plugin-load lines. NCCL filters every level, WARN
            // included, by `NCCL_DEBUG_SUBSYS` (default INIT,BOOTSTRAP,ENV): under PROFILE
            // alone they were hidden unless it was named (seen with NCCL 2.28).
            NCCL_INIT_FLAG | NCCL_PROFILE_FLAG,
            c"ncclprof".as_ptr(),
            0,
            c"%s".as_ptr(),
            text.as_ptr(),
        );
    }
}

pub fn warn(msg: &str) {
    emit(NCCL_LOG_WARN, msg);
}

pub fn info(msg: &str) {
    emit(NCCL_LOG_INFO, msg);
}
