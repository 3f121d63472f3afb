//! A do-nothing profiler plugin exporting `ncclProfiler_v1` … `ncclProfiler_v6`.
//!
//! It is the baseline of ncclprof's overhead benchmark: the simulator drives it with exactly
//! the same call sequence as the real plugin, so the difference is what ncclprof costs.
//! `startEvent` returns a constant non-NULL handle so that NCCL (and the simulator) keep
//! issuing child events, as they would for a real plugin.
#![allow(non_upper_case_globals, non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

type InitV1 = unsafe extern "C" fn(*mut *mut c_void, *mut c_int) -> c_int;
type InitV4 = unsafe extern "C" fn(
    *mut *mut c_void,
    *mut c_int,
    *const c_char,
    u64,
    c_int,
    c_int,
    c_int,
    *mut c_void,
) -> c_int;
type InitV5 = unsafe extern "C" fn(
    *mut *mut c_void,
    u64,
    *mut c_int,
    *const c_char,
    c_int,
    c_int,
    c_int,
    *mut c_void,
) -> c_int;
type Start = unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut c_void) -> c_int;
type Stop = unsafe extern "C" fn(*mut c_void) -> c_int;
type Record = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> c_int;
type Finalize = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The function table, generic over the `init` signature (all versions share the shape).
#[repr(C)]
pub struct Table<I> {
    name: *const c_char,
    init: I,
    start_event: Start,
    stop_event: Stop,
    record_event_state: Record,
    finalize: Finalize,
}
// SAFETY: the table holds a 'static C string and function pointers; it is never written.
unsafe impl<I> Sync for Table<I> {}

static CONTEXT: u8 = 0;

unsafe extern "C" fn init_v1(ctx: *mut *mut c_void, _mask: *mut c_int) -> c_int {
    if !ctx.is_null() {
        // SAFETY: NCCL passes a valid context slot.
        unsafe { *ctx = (&raw const CONTEXT).cast_mut().cast() };
    }
    0
}
unsafe extern "C" fn init_v4(
    ctx: *mut *mut c_void,
    mask: *mut c_int,
    _: *const c_char,
    _: u64,
    _: c_int,
    _: c_int,
    _: c_int,
    _: *mut c_void,
) -> c_int {
    // SAFETY: same contract as init_v1.
    unsafe { init_v1(ctx, mask) }
}
unsafe extern "C" fn init_v5(
    ctx: *mut *mut c_void,
    _: u64,
    mask: *mut c_int,
    _: *const c_char,
    _: c_int,
    _: c_int,
    _: c_int,
    _: *mut c_void,
) -> c_int {
    // SAFETY: same contract as init_v1.
    unsafe { init_v1(ctx, mask) }
}
unsafe extern "C" fn start(_: *mut c_void, h: *mut *mut c_void, _: *mut c_void) -> c_int {
    if !h.is_null() {
        // SAFETY: NCCL passes a valid handle slot.
        unsafe { *h = std::ptr::dangling_mut::<c_void>() };
    }
    0
}
unsafe extern "C" fn stop(_: *mut c_void) -> c_int {
    0
}
unsafe extern "C" fn record(_: *mut c_void, _: c_int, _: *mut c_void) -> c_int {
    0
}
unsafe extern "C" fn finalize(_: *mut c_void) -> c_int {
    0
}

macro_rules! table {
    ($sym:ident, $init_ty:ty, $init:ident) => {
        #[unsafe(no_mangle)]
        pub static $sym: Table<$init_ty> = Table {
            name: c"ncclprof-noop".as_ptr(),
            init: $init,
            start_event: start,
            stop_event: stop,
            record_event_state: record,
            finalize,
        };
    };
}
table!(ncclProfiler_v1, InitV1, init_v1);
table!(ncclProfiler_v2, InitV1, init_v1);
table!(ncclProfiler_v3, InitV1, init_v1);
table!(ncclProfiler_v4, InitV4, init_v4);
table!(ncclProfiler_v5, InitV5, init_v5);
table!(ncclProfiler_v6, InitV5, init_v5);
