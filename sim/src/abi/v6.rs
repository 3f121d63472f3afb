//! API v6 (NCCL 2.29–2.30 / HEAD), spec §3.6.
#![allow(non_camel_case_types, non_snake_case)]

use crate::lay;
use std::ffi::{c_char, c_int, c_void};

pub use super::v1::{ProxyOp, ProxyStep};
pub use super::v3::NetPlugin;
pub use super::v4::KernelCh;
pub use super::v5::{Coll, CollApi, GroupApi, KernelLaunch, P2p, P2pApi};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeColl {
    pub seqNumber: u64,
    pub func: *const c_char,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub syncStrategy: *const c_char,
    pub intraBatchSync: bool,
    pub batchSize: u32,
    pub numBatches: u32,
    pub ceSeqNum: u32,
    pub stream: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollSync {
    pub isComplete: bool,
    pub nRanks: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollBatch {
    pub numOps: c_int,
    pub totalBytes: usize,
    pub useIntraSync: bool,
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
    pub ceColl: CeColl,
    pub ceCollSync: CeCollSync,
    pub ceCollBatch: CeCollBatch,
}

/// `ncclProfilerEventDescr_v6_t` (112 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v6_t {
    pub type_: u64,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: Union,
}

/// `ncclProfilerEventStateArgs_v6_t`: typedef of the v5 args.
pub type ncclProfilerEventStateArgs_v6_t = super::v4::ncclProfilerEventStateArgs_v4_t;

lay!(ncclProfilerEventDescr_v6_t, size 112);
lay!(Union, size 88);
const _: () = assert!(core::mem::size_of::<CeColl>() == 88);
const _: () = assert!(core::mem::size_of::<CeCollSync>() == 8);
const _: () = assert!(core::mem::size_of::<CeCollBatch>() == 24);
lay!(
    ncclProfilerEventDescr_v6_t,
    type_ == 0,
    parentObj == 8,
    rank == 16,
    u == 24
);
lay!(
    ncclProfilerEventDescr_v6_t,
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
    ncclProfilerEventDescr_v6_t,
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
    ncclProfilerEventDescr_v6_t,
    u.p2p.func == 24,
    u.p2p.buff == 32,
    u.p2p.datatype == 40,
    u.p2p.count == 48,
    u.p2p.peer == 56,
    u.p2p.nChannels == 60,
    u.p2p.parentGroup == 64
);
lay!(
    ncclProfilerEventDescr_v6_t,
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
lay!(
    ncclProfilerEventDescr_v6_t,
    u.ceColl.seqNumber == 24,
    u.ceColl.func == 32,
    u.ceColl.sendBuff == 40,
    u.ceColl.recvBuff == 48,
    u.ceColl.count == 56,
    u.ceColl.root == 64,
    u.ceColl.datatype == 72,
    u.ceColl.syncStrategy == 80,
    u.ceColl.intraBatchSync == 88,
    u.ceColl.batchSize == 92,
    u.ceColl.numBatches == 96,
    u.ceColl.ceSeqNum == 100,
    u.ceColl.stream == 104,
    u.ceCollSync.isComplete == 24,
    u.ceCollSync.nRanks == 28,
    u.ceCollBatch.numOps == 24,
    u.ceCollBatch.totalBytes == 32,
    u.ceCollBatch.useIntraSync == 40
);
lay!(ncclProfilerEventStateArgs_v6_t, size 8);
