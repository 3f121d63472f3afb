//! API v2 (NCCL 2.24–2.25), spec §3.2.
#![allow(non_camel_case_types, non_snake_case)]

use crate::lay;
use std::ffi::{c_char, c_int, c_void};

pub use super::v1::{ProxyOp, ProxyStep};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Coll {
    pub name: *const c_char,
    pub commHash: u64,
    pub seqNumber: u64,
    pub func: *const c_char,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub trafficBytes: usize,
    pub nMaxChannels: u8,
    pub nWarps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// The `p2p` arm of v2 and v3.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2p {
    pub name: *const c_char,
    pub commHash: u64,
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union Union {
    pub coll: Coll,
    pub p2p: P2p,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
}

/// `ncclProfilerEventDescr_v2_t` (128 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v2_t {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: Union,
}

/// `ncclProfilerEventStateArgs_v2_t`: identical to v1.
pub type ncclProfilerEventStateArgs_v2_t = super::v1::ncclProfilerEventStateArgs_v1_t;

lay!(ncclProfilerEventDescr_v2_t, size 128);
lay!(Union, size 104);
const _: () = assert!(core::mem::size_of::<Coll>() == 104);
const _: () = assert!(core::mem::size_of::<P2p>() == 56);
lay!(
    ncclProfilerEventDescr_v2_t,
    type_ == 0,
    parentObj == 8,
    rank == 16,
    u == 24
);
lay!(
    ncclProfilerEventDescr_v2_t,
    u.coll.name == 24,
    u.coll.commHash == 32,
    u.coll.seqNumber == 40,
    u.coll.func == 48,
    u.coll.sendBuff == 56,
    u.coll.recvBuff == 64,
    u.coll.count == 72,
    u.coll.root == 80,
    u.coll.datatype == 88,
    u.coll.trafficBytes == 96,
    u.coll.nMaxChannels == 104,
    u.coll.nWarps == 105,
    u.coll.algo == 112,
    u.coll.proto == 120
);
lay!(
    ncclProfilerEventDescr_v2_t,
    u.p2p.name == 24,
    u.p2p.commHash == 32,
    u.p2p.func == 40,
    u.p2p.buff == 48,
    u.p2p.datatype == 56,
    u.p2p.count == 64,
    u.p2p.peer == 72
);
lay!(
    ncclProfilerEventDescr_v2_t,
    u.proxyOp.pid == 24,
    u.proxyOp.channelId == 28,
    u.proxyOp.peer == 32,
    u.proxyOp.nSteps == 36,
    u.proxyOp.chunkSize == 40,
    u.proxyOp.isSend == 44,
    u.proxyStep.step == 24
);
lay!(ncclProfilerEventStateArgs_v2_t, size 16);
