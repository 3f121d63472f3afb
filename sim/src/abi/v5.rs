//! API v5 (NCCL 2.28), spec §3.5.
#![allow(non_camel_case_types, non_snake_case)]

use crate::lay;
use std::ffi::{c_char, c_int, c_void};

pub use super::v1::{ProxyOp, ProxyStep};
pub use super::v3::NetPlugin;
pub use super::v4::KernelCh;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GroupApi {
    pub graphCaptured: bool,
    pub groupDepth: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollApi {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub root: c_int,
    pub stream: *mut c_void,
    pub graphCaptured: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pApi {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub stream: *mut c_void,
    pub graphCaptured: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelLaunch {
    pub stream: *mut c_void,
}

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
    pub parentGroup: *mut c_void,
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
    pub parentGroup: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union Union {
    pub groupApi: GroupApi,
    pub collApi: CollApi,
    pub p2pApi: P2pApi,
    pub kernelLaunch: KernelLaunch,
    pub coll: Coll,
    pub p2p: P2p,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
    pub kernelCh: KernelCh,
    pub netPlugin: NetPlugin,
}

/// `ncclProfilerEventDescr_v5_t` (112 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v5_t {
    pub type_: u64,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: Union,
}

/// `ncclProfilerEventStateArgs_v5_t`: same as v4.
pub type ncclProfilerEventStateArgs_v5_t = super::v4::ncclProfilerEventStateArgs_v4_t;

lay!(ncclProfilerEventDescr_v5_t, size 112);
lay!(Union, size 88);
const _: () = assert!(core::mem::size_of::<GroupApi>() == 8);
const _: () = assert!(core::mem::size_of::<CollApi>() == 48);
const _: () = assert!(core::mem::size_of::<P2pApi>() == 40);
const _: () = assert!(core::mem::size_of::<KernelLaunch>() == 8);
const _: () = assert!(core::mem::size_of::<Coll>() == 88);
const _: () = assert!(core::mem::size_of::<P2p>() == 48);
lay!(
    ncclProfilerEventDescr_v5_t,
    type_ == 0,
    parentObj == 8,
    rank == 16,
    u == 24
);
lay!(
    ncclProfilerEventDescr_v5_t,
    u.groupApi.graphCaptured == 24,
    u.groupApi.groupDepth == 28,
    u.collApi.func == 24,
    u.collApi.count == 32,
    u.collApi.datatype == 40,
    u.collApi.root == 48,
    u.collApi.stream == 56,
    u.collApi.graphCaptured == 64,
    u.p2pApi.func == 24,
    u.p2pApi.count == 32,
    u.p2pApi.datatype == 40,
    u.p2pApi.stream == 48,
    u.p2pApi.graphCaptured == 56,
    u.kernelLaunch.stream == 24
);
lay!(
    ncclProfilerEventDescr_v5_t,
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
    u.coll.proto == 96,
    u.coll.parentGroup == 104
);
lay!(
    ncclProfilerEventDescr_v5_t,
    u.p2p.func == 24,
    u.p2p.buff == 32,
    u.p2p.datatype == 40,
    u.p2p.count == 48,
    u.p2p.peer == 56,
    u.p2p.nChannels == 60,
    u.p2p.parentGroup == 64
);
lay!(
    ncclProfilerEventDescr_v5_t,
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
lay!(ncclProfilerEventStateArgs_v5_t, size 8);
