//! Network-plugin event ids and descriptors (spec §5).
#![allow(non_camel_case_types, non_snake_case)]

use crate::lay;

pub const NET_TYPE_IB: i64 = 1 << 16;
pub const NET_TYPE_SOCK: i64 = 2 << 16;
pub const NET_IB_VER: i64 = 1;
pub const NET_SOCK_VER: i64 = 1;
/// `netPlugin.id` of the built-in IB transport.
pub const NET_ID_IB: i64 = NET_TYPE_IB | NET_IB_VER;
/// `netPlugin.id` of the built-in socket transport.
pub const NET_ID_SOCK: i64 = NET_TYPE_SOCK | NET_SOCK_VER;

/// `qp` arm of the IB descriptor.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct NetIbQp {
    pub device: i32,
    pub wr_id: u64,
    pub opcode: i32,
    pub qpNum: i32,
    pub length: usize,
}

/// `ncclProfilerNetIbDescr_v1_t` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ncclProfilerNetIbDescr_v1_t {
    pub type_: u8,
    pub qp: NetIbQp,
}
lay!(ncclProfilerNetIbDescr_v1_t, size 40);
lay!(
    ncclProfilerNetIbDescr_v1_t,
    type_ == 0,
    qp.device == 8,
    qp.wr_id == 16,
    qp.opcode == 24,
    qp.qpNum == 28,
    qp.length == 32
);

/// `sock` arm of the socket descriptor.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct NetSock {
    pub fd: i32,
    pub op: i32,
    pub length: usize,
}

/// `ncclProfilerNetSockDescr_v1_t` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ncclProfilerNetSockDescr_v1_t {
    pub type_: u8,
    pub sock: NetSock,
}
lay!(ncclProfilerNetSockDescr_v1_t, size 24);
lay!(
    ncclProfilerNetSockDescr_v1_t,
    type_ == 0,
    sock.fd == 8,
    sock.op == 12,
    sock.length == 16
);
