//! API v1 (NCCL 2.23): numeric func/datatype/algo/proto codes, 16-byte state args (spec §3.1).

use std::ffi::{c_char, c_int, c_void};

use super::common::{ProxyOp, ProxyStep};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Coll {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub seq_number: u64,
    pub func: u8,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: u8,
    pub op: u32,
    pub traffic_bytes: usize,
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: u8,
    pub proto: u8,
    pub is_collnet: c_int,
    pub is_nvls: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2p {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub func: u8,
    pub buff: *mut c_void,
    pub datatype: u8,
    pub count: usize,
    pub peer: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union Arms {
    pub coll: Coll,
    pub p2p: P2p,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
}

#[repr(C)]
pub struct Descr {
    pub type_: u8,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: Arms,
}

/// `ncclProfilerEventStateArgs_v1_t` (also v2, v3): 16 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOpArgs {
    pub trans_size: usize,
    pub steps: c_int,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyCtrlArgs {
    pub appended_proxy_ops: c_int,
}
#[repr(C)]
pub union StateArgs {
    pub proxy_op: ProxyOpArgs,
    pub proxy_ctrl: ProxyCtrlArgs,
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Descr>() == 120);
    assert!(align_of::<Descr>() == 8);
    assert!(offset_of!(Descr, parent_obj) == 8);
    assert!(offset_of!(Descr, rank) == 16);
    assert!(offset_of!(Descr, u) == 24);
    assert!(size_of::<Arms>() == 96);
    // coll arm, spec offsets minus the union's 24.
    assert!(size_of::<Coll>() == 96);
    assert!(offset_of!(Coll, name) == 0);
    assert!(offset_of!(Coll, comm_hash) == 32 - 24);
    assert!(offset_of!(Coll, seq_number) == 40 - 24);
    assert!(offset_of!(Coll, func) == 48 - 24);
    assert!(offset_of!(Coll, send_buff) == 56 - 24);
    assert!(offset_of!(Coll, recv_buff) == 64 - 24);
    assert!(offset_of!(Coll, count) == 72 - 24);
    assert!(offset_of!(Coll, root) == 80 - 24);
    assert!(offset_of!(Coll, datatype) == 84 - 24);
    assert!(offset_of!(Coll, op) == 88 - 24);
    assert!(offset_of!(Coll, traffic_bytes) == 96 - 24);
    assert!(offset_of!(Coll, n_max_channels) == 104 - 24);
    assert!(offset_of!(Coll, n_warps) == 105 - 24);
    assert!(offset_of!(Coll, algo) == 106 - 24);
    assert!(offset_of!(Coll, proto) == 107 - 24);
    assert!(offset_of!(Coll, is_collnet) == 108 - 24);
    assert!(offset_of!(Coll, is_nvls) == 112 - 24);
    assert!(size_of::<P2p>() == 56);
    assert!(offset_of!(P2p, name) == 0);
    assert!(offset_of!(P2p, comm_hash) == 32 - 24);
    assert!(offset_of!(P2p, func) == 40 - 24);
    assert!(offset_of!(P2p, buff) == 48 - 24);
    assert!(offset_of!(P2p, datatype) == 56 - 24);
    assert!(offset_of!(P2p, count) == 64 - 24);
    assert!(offset_of!(P2p, peer) == 72 - 24);
    assert!(size_of::<StateArgs>() == 16);
    assert!(align_of::<StateArgs>() == 8);
    assert!(offset_of!(ProxyOpArgs, steps) == 8);
};

/// `ncclFunc_t` codes (spec §2.4).
pub const FUNC_NAMES: [&std::ffi::CStr; 15] = [
    c"Broadcast",
    c"Reduce",
    c"AllGather",
    c"ReduceScatter",
    c"AllReduce",
    c"SendRecv",
    c"Send",
    c"Recv",
    c"AlltoAll",
    c"Scatter",
    c"Gather",
    c"AllGatherV",
    c"PutSignal",
    c"Signal",
    c"WaitSignal",
];
/// `ncclDataType_t` codes.
pub const DTYPE_NAMES: [&std::ffi::CStr; 12] = [
    c"ncclInt8",
    c"ncclUint8",
    c"ncclInt32",
    c"ncclUint32",
    c"ncclInt64",
    c"ncclUint64",
    c"ncclFloat16",
    c"ncclFloat32",
    c"ncclFloat64",
    c"ncclBfloat16",
    c"ncclFloat8e4m3",
    c"ncclFloat8e5m2",
];
pub const ALGO_NAMES: [&std::ffi::CStr; 7] = [
    c"TREE",
    c"RING",
    c"COLLNET_DIRECT",
    c"COLLNET_CHAIN",
    c"NVLS",
    c"NVLS_TREE",
    c"PAT",
];
pub const PROTO_NAMES: [&std::ffi::CStr; 3] = [c"LL", c"LL128", c"SIMPLE"];

/// The static name for a v1 numeric code (`Unknown` when out of range).
pub fn code_name(table: &[&'static std::ffi::CStr], code: u8) -> &'static std::ffi::CStr {
    table.get(code as usize).copied().unwrap_or(c"Unknown")
}
