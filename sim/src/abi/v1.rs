//! API v1 (NCCL 2.23), spec §3.1.
#![allow(non_camel_case_types, non_snake_case)]

use crate::lay;
use std::ffi::{c_char, c_int, c_void};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Coll {
    pub name: *const c_char,
    pub commHash: u64,
    pub seqNumber: u64,
    pub func: u8,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: u8,
    pub op: u32,
    pub trafficBytes: usize,
    pub nMaxChannels: u8,
    pub nWarps: u8,
    pub algo: u8,
    pub proto: u8,
    pub isCollnet: c_int,
    pub isNvls: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2p {
    pub name: *const c_char,
    pub commHash: u64,
    pub func: u8,
    pub buff: *mut c_void,
    pub datatype: u8,
    pub count: usize,
    pub peer: c_int,
}

/// The `proxyOp` arm, shared by every version.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOp {
    pub pid: i32,
    pub channelId: u8,
    pub peer: c_int,
    pub nSteps: c_int,
    pub chunkSize: c_int,
    pub isSend: c_int,
}

/// The `proxyStep` arm, shared by every version.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyStep {
    pub step: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union Union {
    pub coll: Coll,
    pub p2p: P2p,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
}

/// `ncclProfilerEventDescr_v1_t` (120 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v1_t {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: Union,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ArgsProxyOp {
    pub transSize: usize,
    pub steps: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ArgsProxyCtrl {
    pub appendedProxyOps: c_int,
}

/// `ncclProfilerEventStateArgs_v1_t` (16 bytes; also v2 and v3).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ncclProfilerEventStateArgs_v1_t {
    pub proxyOp: ArgsProxyOp,
    pub proxyCtrl: ArgsProxyCtrl,
}

lay!(ncclProfilerEventDescr_v1_t, size 120);
lay!(Union, size 96);
lay!(
    ncclProfilerEventDescr_v1_t,
    type_ == 0,
    parentObj == 8,
    rank == 16,
    u == 24
);
lay!(
    ncclProfilerEventDescr_v1_t,
    u.coll.name == 24,
    u.coll.commHash == 32,
    u.coll.seqNumber == 40,
    u.coll.func == 48,
    u.coll.sendBuff == 56,
    u.coll.recvBuff == 64,
    u.coll.count == 72,
    u.coll.root == 80,
    u.coll.datatype == 84,
    u.coll.op == 88,
    u.coll.trafficBytes == 96,
    u.coll.nMaxChannels == 104,
    u.coll.nWarps == 105,
    u.coll.algo == 106,
    u.coll.proto == 107,
    u.coll.isCollnet == 108,
    u.coll.isNvls == 112
);
const _: () = assert!(core::mem::size_of::<Coll>() == 96);
const _: () = assert!(core::mem::size_of::<P2p>() == 56);
const _: () = assert!(core::mem::size_of::<ProxyOp>() == 24);
const _: () = assert!(core::mem::size_of::<ProxyStep>() == 4);
lay!(
    ncclProfilerEventDescr_v1_t,
    u.p2p.name == 24,
    u.p2p.commHash == 32,
    u.p2p.func == 40,
    u.p2p.buff == 48,
    u.p2p.datatype == 56,
    u.p2p.count == 64,
    u.p2p.peer == 72
);
lay!(
    ncclProfilerEventDescr_v1_t,
    u.proxyOp.pid == 24,
    u.proxyOp.channelId == 28,
    u.proxyOp.peer == 32,
    u.proxyOp.nSteps == 36,
    u.proxyOp.chunkSize == 40,
    u.proxyOp.isSend == 44,
    u.proxyStep.step == 24
);
lay!(ncclProfilerEventStateArgs_v1_t, size 16);
lay!(
    ncclProfilerEventStateArgs_v1_t,
    proxyOp.transSize == 0,
    proxyOp.steps == 8,
    proxyCtrl.appendedProxyOps == 0
);
