//! API v3 (NCCL 2.26), spec §3.3.
#![allow(non_camel_case_types, non_snake_case)]

use crate::lay;
use std::ffi::{c_char, c_int, c_void};

pub use super::v1::{ProxyOp, ProxyStep};
pub use super::v2::P2p;

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
    pub nMaxChannels: u8,
    pub nWarps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelCh {
    pub channelId: u8,
}

/// The `netPlugin` arm (v3 and later).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetPlugin {
    pub id: i64,
    pub data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union Union {
    pub coll: Coll,
    pub p2p: P2p,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
    pub kernelCh: KernelCh,
    pub netPlugin: NetPlugin,
}

/// `ncclProfilerEventDescr_v3_t` (120 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v3_t {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: Union,
}

/// `ncclProfilerEventStateArgs_v3_t`: identical to v1.
pub type ncclProfilerEventStateArgs_v3_t = super::v1::ncclProfilerEventStateArgs_v1_t;

lay!(ncclProfilerEventDescr_v3_t, size 120);
lay!(Union, size 96);
const _: () = assert!(core::mem::size_of::<Coll>() == 96);
const _: () = assert!(core::mem::size_of::<NetPlugin>() == 16);
lay!(
    ncclProfilerEventDescr_v3_t,
    type_ == 0,
    parentObj == 8,
    rank == 16,
    u == 24
);
lay!(
    ncclProfilerEventDescr_v3_t,
    u.coll.name == 24,
    u.coll.commHash == 32,
    u.coll.seqNumber == 40,
    u.coll.func == 48,
    u.coll.sendBuff == 56,
    u.coll.recvBuff == 64,
    u.coll.count == 72,
    u.coll.root == 80,
    u.coll.datatype == 88,
    u.coll.nMaxChannels == 96,
    u.coll.nWarps == 97,
    u.coll.algo == 104,
    u.coll.proto == 112
);
lay!(
    ncclProfilerEventDescr_v3_t,
    u.p2p.name == 24,
    u.p2p.commHash == 32,
    u.p2p.func == 40,
    u.p2p.buff == 48,
    u.p2p.datatype == 56,
    u.p2p.count == 64,
    u.p2p.peer == 72
);
lay!(
    ncclProfilerEventDescr_v3_t,
    u.proxyOp.pid == 24,
    u.proxyOp.channelId == 28,
    u.proxyOp.peer == 32,
    u.proxyOp.nSteps == 36,
    u.proxyOp.chunkSize == 40,
    u.proxyOp.isSend == 44,
    u.proxyStep.step == 24,
    u.kernelCh.channelId == 24,
    u.netPlugin.id == 24,
    u.netPlugin.data == 32
);
lay!(ncclProfilerEventStateArgs_v3_t, size 16);
