//! API v3 (NCCL 2.26): `trafficBytes` removed; KernelCh and NetPlugin arms (spec §3.3).
//! State args as v1.

use std::ffi::{c_char, c_int, c_void};

use super::common::{NetPlugin, ProxyOp, ProxyStep};
pub use super::v2::P2p;

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
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// v3 `kernelCh`: channel only, no timer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelCh {
    pub channel_id: u8,
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

pub use super::v1::StateArgs;

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Descr>() == 120);
    assert!(align_of::<Descr>() == 8);
    assert!(offset_of!(Descr, u) == 24);
    assert!(size_of::<Arms>() == 96);
    assert!(size_of::<Coll>() == 96);
    assert!(offset_of!(Coll, name) == 0);
    assert!(offset_of!(Coll, comm_hash) == 32 - 24);
    assert!(offset_of!(Coll, seq_number) == 40 - 24);
    assert!(offset_of!(Coll, func) == 48 - 24);
    assert!(offset_of!(Coll, send_buff) == 56 - 24);
    assert!(offset_of!(Coll, recv_buff) == 64 - 24);
    assert!(offset_of!(Coll, count) == 72 - 24);
    assert!(offset_of!(Coll, root) == 80 - 24);
    assert!(offset_of!(Coll, datatype) == 88 - 24);
    assert!(offset_of!(Coll, n_max_channels) == 96 - 24);
    assert!(offset_of!(Coll, n_warps) == 97 - 24);
    assert!(offset_of!(Coll, algo) == 104 - 24);
    assert!(offset_of!(Coll, proto) == 112 - 24);
    assert!(size_of::<KernelCh>() == 1);
};
