//! API v2 (NCCL 2.24–2.25): strings instead of codes; `op`, `isCollnet`, `isNvls` removed
//! (spec §3.2). State args as v1.

use std::ffi::{c_char, c_int, c_void};

use super::common::{ProxyOp, ProxyStep};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Coll {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub traffic_bytes: usize,
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// `p2p` arm of v2 and v3.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2p {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
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

pub use super::v1::StateArgs;

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Descr>() == 128);
    assert!(align_of::<Descr>() == 8);
    assert!(offset_of!(Descr, parent_obj) == 8);
    assert!(offset_of!(Descr, rank) == 16);
    assert!(offset_of!(Descr, u) == 24);
    assert!(size_of::<Arms>() == 104);
    assert!(size_of::<Coll>() == 104);
    assert!(offset_of!(Coll, name) == 0);
    assert!(offset_of!(Coll, comm_hash) == 32 - 24);
    assert!(offset_of!(Coll, seq_number) == 40 - 24);
    assert!(offset_of!(Coll, func) == 48 - 24);
    assert!(offset_of!(Coll, send_buff) == 56 - 24);
    assert!(offset_of!(Coll, recv_buff) == 64 - 24);
    assert!(offset_of!(Coll, count) == 72 - 24);
    assert!(offset_of!(Coll, root) == 80 - 24);
    assert!(offset_of!(Coll, datatype) == 88 - 24);
    assert!(offset_of!(Coll, traffic_bytes) == 96 - 24);
    assert!(offset_of!(Coll, n_max_channels) == 104 - 24);
    assert!(offset_of!(Coll, n_warps) == 105 - 24);
    assert!(offset_of!(Coll, algo) == 112 - 24);
    assert!(offset_of!(Coll, proto) == 120 - 24);
    assert!(size_of::<P2p>() == 56);
    assert!(offset_of!(P2p, name) == 0);
    assert!(offset_of!(P2p, comm_hash) == 32 - 24);
    assert!(offset_of!(P2p, func) == 40 - 24);
    assert!(offset_of!(P2p, buff) == 48 - 24);
    assert!(offset_of!(P2p, datatype) == 56 - 24);
    assert!(offset_of!(P2p, count) == 64 - 24);
    assert!(offset_of!(P2p, peer) == 72 - 24);
};
