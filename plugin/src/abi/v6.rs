//! API v6 (NCCL 2.29–2.30): the v5 header and arms plus three copy-engine arms (spec §3.6).
//! State args as v4. RCCL's extended proxy-op arm is in [`super::rccl`].

use std::ffi::{c_char, c_int, c_void};

use super::common::{NetPlugin, ProxyOp, ProxyStep};
pub use super::v4::{KernelCh, StateArgs};
use super::v5::{Coll, CollApi, GroupApi, KernelLaunch, P2p, P2pApi};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeColl {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub sync_strategy: *const c_char,
    pub intra_batch_sync: u8,
    pub batch_size: u32,
    pub num_batches: u32,
    pub ce_seq_num: u32,
    pub stream: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeSync {
    pub is_complete: u8,
    pub n_ranks: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeBatch {
    pub num_ops: c_int,
    pub total_bytes: usize,
    pub use_intra_sync: u8,
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
    pub ce_coll: CeColl,
    pub ce_sync: CeSync,
    pub ce_batch: CeBatch,
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
    assert!(size_of::<CeColl>() == 88);
    assert!(offset_of!(CeColl, func) == 32 - 24);
    assert!(offset_of!(CeColl, send_buff) == 40 - 24);
    assert!(offset_of!(CeColl, recv_buff) == 48 - 24);
    assert!(offset_of!(CeColl, count) == 56 - 24);
    assert!(offset_of!(CeColl, root) == 64 - 24);
    assert!(offset_of!(CeColl, datatype) == 72 - 24);
    assert!(offset_of!(CeColl, sync_strategy) == 80 - 24);
    assert!(offset_of!(CeColl, intra_batch_sync) == 88 - 24);
    assert!(offset_of!(CeColl, batch_size) == 92 - 24);
    assert!(offset_of!(CeColl, num_batches) == 96 - 24);
    assert!(offset_of!(CeColl, ce_seq_num) == 100 - 24);
    assert!(offset_of!(CeColl, stream) == 104 - 24);
    assert!(size_of::<CeSync>() == 8);
    assert!(offset_of!(CeSync, n_ranks) == 28 - 24);
    assert!(size_of::<CeBatch>() == 24);
    assert!(offset_of!(CeBatch, total_bytes) == 32 - 24);
    assert!(offset_of!(CeBatch, use_intra_sync) == 40 - 24);
};
