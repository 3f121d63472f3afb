//! API v5 (NCCL 2.28): 8-byte `type`; GroupApi/CollApi/P2pApi/KernelLaunch arms;
//! `parentGroup` in coll/p2p (spec §3.5). State args as v4.

use std::ffi::{c_char, c_int, c_void};

use super::common::{NetPlugin, ProxyOp, ProxyStep};
pub use super::v4::{KernelCh, StateArgs};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GroupApi {
    pub graph_captured: u8,
    pub group_depth: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollApi {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub root: c_int,
    pub stream: *mut c_void,
    pub graph_captured: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pApi {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub stream: *mut c_void,
    pub graph_captured: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelLaunch {
    pub stream: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Coll {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
    pub parent_group: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2p {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub n_channels: u8,
    pub parent_group: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union Arms {
    pub group_api: GroupApi,
    pub coll_api: CollApi,
    pub p2p_api: P2pApi,
    pub kernel_launch: KernelLaunch,
    pub coll: Coll,
    pub p2p: P2p,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub kernel_ch: KernelCh,
    pub net_plugin: NetPlugin,
}

#[repr(C)]
pub struct Descr {
    pub type_: u64,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: Arms,
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Descr>() == 112);
    assert!(align_of::<Descr>() == 8);
    assert!(offset_of!(Descr, parent_obj) == 8);
    assert!(offset_of!(Descr, rank) == 16);
    assert!(offset_of!(Descr, u) == 24);
    assert!(size_of::<Arms>() == 88);
    assert!(size_of::<GroupApi>() == 8);
    assert!(offset_of!(GroupApi, group_depth) == 28 - 24);
    assert!(size_of::<CollApi>() == 48);
    assert!(offset_of!(CollApi, count) == 32 - 24);
    assert!(offset_of!(CollApi, datatype) == 40 - 24);
    assert!(offset_of!(CollApi, root) == 48 - 24);
    assert!(offset_of!(CollApi, stream) == 56 - 24);
    assert!(offset_of!(CollApi, graph_captured) == 64 - 24);
    assert!(size_of::<P2pApi>() == 40);
    assert!(offset_of!(P2pApi, count) == 32 - 24);
    assert!(offset_of!(P2pApi, datatype) == 40 - 24);
    assert!(offset_of!(P2pApi, stream) == 48 - 24);
    assert!(offset_of!(P2pApi, graph_captured) == 56 - 24);
    assert!(size_of::<KernelLaunch>() == 8);
    assert!(size_of::<Coll>() == 88);
    assert!(offset_of!(Coll, seq_number) == 0);
    assert!(offset_of!(Coll, func) == 32 - 24);
    assert!(offset_of!(Coll, send_buff) == 40 - 24);
    assert!(offset_of!(Coll, recv_buff) == 48 - 24);
    assert!(offset_of!(Coll, count) == 56 - 24);
    assert!(offset_of!(Coll, root) == 64 - 24);
    assert!(offset_of!(Coll, datatype) == 72 - 24);
    assert!(offset_of!(Coll, n_channels) == 80 - 24);
    assert!(offset_of!(Coll, n_warps) == 81 - 24);
    assert!(offset_of!(Coll, algo) == 88 - 24);
    assert!(offset_of!(Coll, proto) == 96 - 24);
    assert!(offset_of!(Coll, parent_group) == 104 - 24);
    assert!(size_of::<P2p>() == 48);
    assert!(offset_of!(P2p, func) == 0);
    assert!(offset_of!(P2p, buff) == 32 - 24);
    assert!(offset_of!(P2p, datatype) == 40 - 24);
    assert!(offset_of!(P2p, count) == 48 - 24);
    assert!(offset_of!(P2p, peer) == 56 - 24);
    assert!(offset_of!(P2p, n_channels) == 60 - 24);
    assert!(offset_of!(P2p, parent_group) == 64 - 24);
};
