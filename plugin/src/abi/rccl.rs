//! RCCL's extensions (spec §3.8): an extended v6 `proxyOp` arm (the union stays 88 bytes, so
//! the NVIDIA layout reads it correctly) and a 24-byte state-args union used only with state 31
//! when the (never set by us) mask bit 1<<15 is on.

use std::ffi::c_int;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOpExt {
    pub pid: i32,
    pub channel_id: u8,
    pub peer: c_int,
    pub n_steps: c_int,
    pub chunk_size: c_int,
    pub is_send: c_int,
    pub comm_hash: u64,
    pub op_count: i64,
    pub trace_func_idx: i32,
    pub trace_protocol: i32,
    pub trace_pattern: i32,
    pub trace_total_bytes: u32,
    pub proxy_nbytes: u32,
    pub raw_proxy_nsteps: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyDiagArgs {
    pub counter_kind: u8,
    pub reserved: u8,
    pub flags: u16,
    pub value: i64,
    pub value2: i64,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<ProxyOpExt>() == 64);
    assert!(offset_of!(ProxyOpExt, comm_hash) == 48 - 24);
    assert!(offset_of!(ProxyOpExt, op_count) == 56 - 24);
    assert!(offset_of!(ProxyOpExt, trace_func_idx) == 64 - 24);
    assert!(offset_of!(ProxyOpExt, trace_protocol) == 68 - 24);
    assert!(offset_of!(ProxyOpExt, trace_pattern) == 72 - 24);
    assert!(offset_of!(ProxyOpExt, trace_total_bytes) == 76 - 24);
    assert!(offset_of!(ProxyOpExt, proxy_nbytes) == 80 - 24);
    assert!(offset_of!(ProxyOpExt, raw_proxy_nsteps) == 84 - 24);
    assert!(size_of::<ProxyDiagArgs>() == 24);
    assert!(offset_of!(ProxyDiagArgs, flags) == 2);
    assert!(offset_of!(ProxyDiagArgs, value) == 8);
    assert!(offset_of!(ProxyDiagArgs, value2) == 16);
    // The extended arm fits the NVIDIA v6 union.
    assert!(size_of::<ProxyOpExt>() <= size_of::<super::v6::Arms>());
};
