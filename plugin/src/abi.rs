//! `#[repr(C)]` mirrors of NCCL's profiler ABI, one module per API version (spec §3).
//!
//! Only [`crate::descr`] reads these structs. Every size and offset the spec gives is asserted
//! at compile time next to the struct. `bool` fields are read as raw bytes (`u8`): adapter-built
//! descriptors are not zero-filled (spec §3.0).

use std::ffi::{c_char, c_int, c_ulong, c_void};

pub mod rccl;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
pub mod v5;
pub mod v6;

/// `ncclResult_t`.
pub type NcclResult = c_int;
pub const NCCL_SUCCESS: NcclResult = 0;
pub const NCCL_INTERNAL_ERROR: NcclResult = 3;

/// `ncclDebugLogger_t`: `void (*)(ncclDebugLogLevel, unsigned long flags, const char* file,
/// int line, const char* fmt, ...)`. Always called with the fixed format `"%s"`.
pub type NcclLogger =
    Option<unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...)>;
pub const NCCL_LOG_WARN: c_int = 2;
pub const NCCL_LOG_INFO: c_int = 3;
/// NCCL's `NCCL_PROFILE` subsystem flag.
pub const NCCL_PROFILE_FLAG: c_ulong = 0x4000;
/// NCCL's `NCCL_INIT` subsystem flag (in `NCCL_DEBUG_SUBSYS`'s default set).
pub const NCCL_INIT_FLAG: c_ulong = 0x1;

/// `init` of v1–v3.
pub type InitV1 = unsafe extern "C" fn(*mut *mut c_void, *mut c_int) -> NcclResult;
/// `init` of v4: ctx, mask, commName, commHash, nNodes, nranks, rank, logfn.
pub type InitV4 = unsafe extern "C" fn(
    *mut *mut c_void,
    *mut c_int,
    *const c_char,
    u64,
    c_int,
    c_int,
    c_int,
    NcclLogger,
) -> NcclResult;
/// `init` of v5/v6: ctx, **commId, mask**, commName, nNodes, nranks, rank, logfn.
pub type InitV5 = unsafe extern "C" fn(
    *mut *mut c_void,
    u64,
    *mut c_int,
    *const c_char,
    c_int,
    c_int,
    c_int,
    NcclLogger,
) -> NcclResult;
pub type StartEvent<D> = unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut D) -> NcclResult;
pub type StopEvent = unsafe extern "C" fn(*mut c_void) -> NcclResult;
pub type RecordEventState<A> = unsafe extern "C" fn(*mut c_void, c_int, *mut A) -> NcclResult;
pub type Finalize = unsafe extern "C" fn(*mut c_void) -> NcclResult;

/// The function table, identical in shape for every version (spec §3.0): 48 bytes.
#[repr(C)]
pub struct ProfilerTable<I, D, A> {
    pub name: *const c_char,
    pub init: I,
    pub start_event: StartEvent<D>,
    pub stop_event: StopEvent,
    pub record_event_state: RecordEventState<A>,
    pub finalize: Finalize,
}

/// The exported statics must be `Sync`; the table holds only a `'static` C string and
/// function pointers and is never written.
#[repr(transparent)]
pub struct SyncTable<T>(pub T);
// SAFETY: see the type's documentation: immutable, 'static contents.
unsafe impl<T> Sync for SyncTable<T> {}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    type T = ProfilerTable<InitV5, v5::Descr, v4::StateArgs>;
    assert!(size_of::<T>() == 48);
    assert!(align_of::<T>() == 8);
    assert!(offset_of!(T, name) == 0);
    assert!(offset_of!(T, init) == 8);
    assert!(offset_of!(T, start_event) == 16);
    assert!(offset_of!(T, stop_event) == 24);
    assert!(offset_of!(T, record_event_state) == 32);
    assert!(offset_of!(T, finalize) == 40);
};

/// Arms shared by several versions.
pub mod common {
    use std::ffi::{c_int, c_void};

    /// `proxyOp` arm (v1–v6, NVIDIA layout): 24 bytes.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct ProxyOp {
        pub pid: i32,
        pub channel_id: u8,
        pub peer: c_int,
        pub n_steps: c_int,
        pub chunk_size: c_int,
        pub is_send: c_int,
    }

    /// `proxyStep` arm (v1–v6).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct ProxyStep {
        pub step: c_int,
    }

    /// `netPlugin` arm (v3–v6).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct NetPlugin {
        pub id: i64,
        pub data: *mut c_void,
    }

    /// The `qp` union arm of the IB descriptor (8-aligned, so it starts at offset 8).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct NetIbQp {
        pub device: c_int,
        pub wr_id: u64,
        pub opcode: c_int,
        pub qp_num: c_int,
        pub length: usize,
    }

    /// `ncclProfilerNetIbDescr_v1_t` (spec §5.2): 40 bytes.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct NetIbDescr {
        pub type_: u8,
        pub qp: NetIbQp,
    }

    /// The `sock` union arm of the socket descriptor.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct NetSock {
        pub fd: c_int,
        pub op: c_int,
        pub length: usize,
    }

    /// `ncclProfilerNetSockDescr_v1_t` (spec §5.2): 24 bytes.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct NetSockDescr {
        pub type_: u8,
        pub sock: NetSock,
    }

    const _: () = {
        use std::mem::{offset_of, size_of};
        assert!(size_of::<ProxyOp>() == 24);
        assert!(offset_of!(ProxyOp, channel_id) == 4);
        assert!(offset_of!(ProxyOp, peer) == 8);
        assert!(offset_of!(ProxyOp, n_steps) == 12);
        assert!(offset_of!(ProxyOp, chunk_size) == 16);
        assert!(offset_of!(ProxyOp, is_send) == 20);
        assert!(size_of::<ProxyStep>() == 4);
        assert!(size_of::<NetPlugin>() == 16);
        assert!(offset_of!(NetPlugin, data) == 8);
        assert!(size_of::<NetIbDescr>() == 40);
        assert!(offset_of!(NetIbDescr, qp) == 8);
        assert!(offset_of!(NetIbDescr, qp) + offset_of!(NetIbQp, wr_id) == 16);
        assert!(offset_of!(NetIbDescr, qp) + offset_of!(NetIbQp, opcode) == 24);
        assert!(offset_of!(NetIbDescr, qp) + offset_of!(NetIbQp, qp_num) == 28);
        assert!(offset_of!(NetIbDescr, qp) + offset_of!(NetIbQp, length) == 32);
        assert!(size_of::<NetSockDescr>() == 24);
        assert!(offset_of!(NetSockDescr, sock) == 8);
        assert!(offset_of!(NetSockDescr, sock) + offset_of!(NetSock, op) == 12);
        assert!(offset_of!(NetSockDescr, sock) + offset_of!(NetSock, length) == 16);
    };
}
