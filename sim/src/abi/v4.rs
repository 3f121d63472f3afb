//! API v4 (NCCL 2.27), spec §3.4.
#![allow(non_camel_case_types, non_snake_case)]

use crate::lay;
use std::ffi::{c_char, c_int, c_void};

pub use super::v1::{ProxyOp, ProxyStep};
pub use super::v3::NetPlugin;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Coll {
    pub seqNumber: u64,
    pub func: *const c_char,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub nChannels: u8,
    pub nWarps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2p {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub nChannels: u8,
}

/// The `kernelCh` arm of v4–v6.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelCh {
    pub channelId: u8,
    pub pTimer: u64,
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

/// `ncclProfilerEventDescr_v4_t` (104 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v4_t {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: Union,
}

/// `ncclProfilerEventStateArgs_v4_t` (8 bytes; also v5 and v6).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ncclProfilerEventStateArgs_v4_t {
    pub proxyStep_transSize: usize,
    pub proxyCtrl_appendedProxyOps: c_int,
    pub netPlugin_data: *mut c_void,
    pub kernelCh_pTimer: u64,
}

lay!(ncclProfilerEventDescr_v4_t, size 104);
lay!(Union, size 80);
const _: () = assert!(core::mem::size_of::<Coll>() == 80);
const _: () = assert!(core::mem::size_of::<P2p>() == 40);
const _: () = assert!(core::mem::size_of::<KernelCh>() == 16);
lay!(
    ncclProfilerEventDescr_v4_t,
    type_ == 0,
    parentObj == 8,
    rank == 16,
    u == 24
);
lay!(
    ncclProfilerEventDescr_v4_t,
    u.coll.seqNumber == 24,
    u.coll.func == 32,
    u.coll.sendBuff == 40,
    u.coll.recvBuff == 48,
    u.coll.count == 56,
    u.coll.root == 64,
    u.coll.datatype == 72,
    u.coll.nChannels == 80,
    u.coll.nWarps == 81,
    u.coll.algo == 88,
    u.coll.proto == 96
);
lay!(
    ncclProfilerEventDescr_v4_t,
    u.p2p.func == 24,
    u.p2p.buff == 32,
    u.p2p.datatype == 40,
    u.p2p.count == 48,
    u.p2p.peer == 56,
    u.p2p.nChannels == 60
);
lay!(
    ncclProfilerEventDescr_v4_t,
    u.proxyOp.pid == 24,
    u.proxyOp.channelId == 28,
    u.proxyOp.peer == 32,
    u.proxyOp.nSteps == 36,
    u.proxyOp.chunkSize == 40,
    u.proxyOp.isSend == 44,
    u.proxyStep.step == 24,
    u.kernelCh.channelId == 24,
    u.kernelCh.pTimer == 32,
    u.netPlugin.id == 24,
    u.netPlugin.data == 32
);
lay!(ncclProfilerEventStateArgs_v4_t, size 8);
lay!(
    ncclProfilerEventStateArgs_v4_t,
    proxyStep_transSize == 0,
    proxyCtrl_appendedProxyOps == 0,
    netPlugin_data == 0,
    kernelCh_pTimer == 0
);
