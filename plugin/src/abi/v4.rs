//! API v4 (NCCL 2.27): communicator identity moves to `init`; `kernelCh.pTimer`; 8-byte
//! state args (spec §3.4).

use std::ffi::{c_char, c_int, c_void};

use super::common::{NetPlugin, ProxyOp, ProxyStep};

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
}

/// `kernelCh` of v4–v6.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelCh {
    pub channel_id: u8,
    pub p_timer: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union Arms {
    pub coll: Coll,
    pub p2p: P2p,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub kernel_ch: KernelCh,
    pub net_plugin: NetPlugin,
}

#[repr(C)]
pub struct Descr {
    pub type_: u8,
    pub parent_obj: *mut c_void,
    pub rank: c_int,
    pub u: Arms,
}

/// `ncclProfilerEventStateArgs_v4_t` (also v5, v6): every arm at offset 0, 8 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub union StateArgs {
    /// ProxyStep `transSize` (states 8–12, 20).
    pub trans_size: usize,
    /// ProxyCtrl `appendedProxyOps` (13–18).
    pub appended_proxy_ops: c_int,
    /// NetPlugin update `data` (21).
    pub data: *mut c_void,
    /// KernelCh stop `pTimer` (22).
    pub p_timer: u64,
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Descr>() == 104);
    assert!(align_of::<Descr>() == 8);
    assert!(offset_of!(Descr, parent_obj) == 8);
    assert!(offset_of!(Descr, rank) == 16);
    assert!(offset_of!(Descr, u) == 24);
    assert!(size_of::<Arms>() == 80);
    assert!(size_of::<Coll>() == 80);
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
    assert!(size_of::<P2p>() == 40);
    assert!(offset_of!(P2p, func) == 0);
    assert!(offset_of!(P2p, buff) == 32 - 24);
    assert!(offset_of!(P2p, datatype) == 40 - 24);
    assert!(offset_of!(P2p, count) == 48 - 24);
    assert!(offset_of!(P2p, peer) == 56 - 24);
    assert!(offset_of!(P2p, n_channels) == 60 - 24);
    assert!(size_of::<KernelCh>() == 16);
    assert!(offset_of!(KernelCh, p_timer) == 32 - 24);
    assert!(size_of::<StateArgs>() == 8);
    assert!(align_of::<StateArgs>() == 8);
};
