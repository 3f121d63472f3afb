//! The simulator's own `#[repr(C)]` declarations of the NCCL profiler ABI, v1–v6
//! (spec §2, §3, §5.2). Every size and offset from the spec's tables is checked at compile time.
#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_int, c_ulong, c_void};

pub mod net;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
pub mod v5;
pub mod v6;

/// `ncclResult_t` success.
pub const NCCL_SUCCESS: c_int = 0;

/// Event type bits (spec §2.2).
pub mod ev {
    pub const GROUP: u64 = 1 << 0;
    pub const COLL: u64 = 1 << 1;
    pub const P2P: u64 = 1 << 2;
    pub const PROXY_OP: u64 = 1 << 3;
    pub const PROXY_STEP: u64 = 1 << 4;
    pub const PROXY_CTRL: u64 = 1 << 5;
    pub const KERNEL_CH: u64 = 1 << 6;
    pub const NET_PLUGIN: u64 = 1 << 7;
    pub const GROUP_API: u64 = 1 << 8;
    pub const COLL_API: u64 = 1 << 9;
    pub const P2P_API: u64 = 1 << 10;
    pub const KERNEL_LAUNCH: u64 = 1 << 11;
    pub const CE_COLL: u64 = 1 << 12;
    pub const CE_SYNC: u64 = 1 << 13;
    pub const CE_BATCH: u64 = 1 << 14;
}

/// Event states (spec §2.3).
pub mod st {
    pub const PROXY_OP_SEND_POSTED: i32 = 0;
    pub const PROXY_OP_SEND_REM_FIFO_WAIT: i32 = 1;
    pub const PROXY_OP_SEND_TRANSMITTED: i32 = 2;
    pub const PROXY_OP_SEND_DONE: i32 = 3;
    pub const PROXY_OP_RECV_POSTED: i32 = 4;
    pub const PROXY_OP_RECV_RECEIVED: i32 = 5;
    pub const PROXY_OP_RECV_TRANSMITTED: i32 = 6;
    pub const PROXY_OP_RECV_DONE: i32 = 7;
    pub const STEP_SEND_GPU_WAIT: i32 = 8;
    pub const STEP_SEND_WAIT: i32 = 9;
    pub const STEP_RECV_WAIT: i32 = 10;
    pub const STEP_RECV_FLUSH_WAIT: i32 = 11;
    pub const STEP_RECV_GPU_WAIT: i32 = 12;
    pub const CTRL_IDLE: i32 = 13;
    pub const CTRL_ACTIVE: i32 = 14;
    pub const CTRL_SLEEP: i32 = 15;
    pub const CTRL_WAKEUP: i32 = 16;
    pub const CTRL_APPEND: i32 = 17;
    pub const CTRL_APPEND_END: i32 = 18;
    pub const PROXY_OP_IN_PROGRESS: i32 = 19;
    pub const STEP_SEND_PEER_WAIT: i32 = 20;
    pub const NET_PLUGIN_UPDATE: i32 = 21;
    pub const KERNEL_CH_STOP: i32 = 22;
    pub const GROUP_START_API_STOP: i32 = 23;
    pub const GROUP_END_API_START: i32 = 24;
}

/// `ncclDebugLogger_t`: a C-variadic logger.
pub type LogFn = unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...);

/// v1–v3 `init(void** context, int* eActivationMask)`.
pub type InitV1 = unsafe extern "C" fn(*mut *mut c_void, *mut c_int) -> c_int;
/// v4 `init(ctx, mask, commName, commHash, nNodes, nranks, rank, logfn)`.
pub type InitV4 = unsafe extern "C" fn(
    *mut *mut c_void,
    *mut c_int,
    *const c_char,
    u64,
    c_int,
    c_int,
    c_int,
    Option<LogFn>,
) -> c_int;
/// v5/v6 `init(ctx, commId, mask, commName, nNodes, nranks, rank, logfn)`.
pub type InitV5 = unsafe extern "C" fn(
    *mut *mut c_void,
    u64,
    *mut c_int,
    *const c_char,
    c_int,
    c_int,
    c_int,
    Option<LogFn>,
) -> c_int;
/// `startEvent(context, eHandle, eDescr)` (descriptor type depends on the version).
pub type StartFn = unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut c_void) -> c_int;
/// `stopEvent(eHandle)`.
pub type StopFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `recordEventState(eHandle, eState, eStateArgs)`.
pub type RecordFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> c_int;
/// `finalize(context)`.
pub type FinalizeFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The 48-byte function table every version exports (spec §3.0). `init` is kept untyped
/// here; [`crate::plugin`] casts it to the version's signature.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProfilerTable {
    pub name: *const c_char,
    pub init: *const c_void,
    pub startEvent: Option<StartFn>,
    pub stopEvent: Option<StopFn>,
    pub recordEventState: Option<RecordFn>,
    pub finalize: Option<FinalizeFn>,
}

/// Per-version function-table aliases (all share [`ProfilerTable`]'s layout).
pub type ncclProfiler_v1_t = ProfilerTable;
pub type ncclProfiler_v2_t = ProfilerTable;
pub type ncclProfiler_v3_t = ProfilerTable;
pub type ncclProfiler_v4_t = ProfilerTable;
pub type ncclProfiler_v5_t = ProfilerTable;
pub type ncclProfiler_v6_t = ProfilerTable;

/// Compile-time layout check: `lay!(Type, size S)` and `lay!(Type, field.path == OFF, ...)`.
#[macro_export]
macro_rules! lay {
    ($t:ty, size $s:expr) => {
        const _: () = assert!(::core::mem::size_of::<$t>() == $s);
        const _: () = assert!(::core::mem::align_of::<$t>() == 8);
    };
    ($t:ty, $($($f:ident).+ == $o:expr),+ $(,)?) => {
        $(const _: () = assert!(::core::mem::offset_of!($t, $($f).+) == $o);)+
    };
}

lay!(ProfilerTable, size 48);
lay!(
    ProfilerTable,
    name == 0,
    init == 8,
    startEvent == 16,
    stopEvent == 24,
    recordEventState == 32,
    finalize == 40
);
