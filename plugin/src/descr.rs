//! The only reader of NCCL's descriptors: each API version's `startEvent` descriptor is
//! translated here into a version-neutral [`Raw`] record (kind, parent, payload words).
//! Only the union arm selected by `type` is read, strings are interned on the spot and nothing
//! read here is kept as a pointer.
//!
//! Payload words (`Raw::w`) per kind, decoded by `completion`:
//! - Coll: seq, count, strings(func, dtype, algo, proto), root | nChannels<<32 | nWarps<<40
//! - P2p: peer | nChannels<<32, count, strings(func, dtype)
//! - CollApi: count, strings(func, dtype), stream, root | graphCaptured<<32
//! - P2pApi: count, strings(func, dtype), stream, graphCaptured<<32
//! - GroupApi: depth | graphCaptured<<32
//! - KernelLaunch: -, -, stream
//! - ProxyOp: pid | rank<<32, channel | isSend<<8 | peer<<32, nSteps | chunkSize<<32
//! - ProxyStep: step | rank<<32
//! - KernelCh: channel, pTimer (0 for v3)
//! - NetPlugin: id, (IB: device | opcode<<16 | qpNum<<32 / sock: fd | op<<32), wr_id, length
//! - CeColl: seq, count, strings(func, dtype, syncStrategy), ceSeqNum | intraBatchSync<<32
//! - CeSync: nRanks | isComplete<<32;  CeBatch: numOps | useIntraSync<<32, totalBytes

use std::ffi::c_char;

use ncclprof_shared::kind::{EventKind, net};
use ncclprof_shared::record::pack_strings;

use crate::Plugin;
use crate::abi::common::{NetIbDescr, NetPlugin, NetSockDescr, ProxyOp};
use crate::abi::{v1, v2, v3, v4, v6};
use crate::ring::{RF_FOREIGN, RF_PARENT_NULL, Raw};

#[inline(always)]
fn lo_hi(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// Intern a descriptor string.
#[inline(always)]
fn s(p: &Plugin, ptr: *const c_char) -> u16 {
    // SAFETY: descriptor strings are NULL or NUL-terminated literals valid during the call.
    unsafe { p.strings.intern(ptr) }
}

/// Coll payload words, shared by every version (see the module doc).
#[inline(always)]
fn coll_words(
    seq: u64,
    count: usize,
    strings: [u16; 4],
    root: i32,
    n_channels: u8,
    n_warps: u8,
) -> [u64; 4] {
    [
        seq,
        count as u64,
        pack_strings(strings),
        lo_hi(
            root as u32,
            u32::from(n_channels) | (u32::from(n_warps) << 8),
        ),
    ]
}

fn base(parent: *mut std::ffi::c_void) -> Raw {
    Raw {
        parent: parent as u64,
        flags: if parent.is_null() { RF_PARENT_NULL } else { 0 },
        ..Raw::default()
    }
}

/// A v5/v6 ProxyStep descriptor's fields: [`read_v6`]'s ProxyStep arm, and on its own the
/// short path of the most frequent start (no decoding of the type).
#[inline(always)]
pub fn step_v6(d: &v6::Descr) -> Raw {
    let mut raw = base(d.parent_obj);
    // SAFETY: the caller checked that `type` selects the ProxyStep arm, which NCCL fills.
    raw.w[0] = lo_hi(unsafe { d.u.proxy_step.step } as u32, d.rank as u32);
    raw
}

#[inline(always)]
fn proxy_op(p: &Plugin, op: &ProxyOp, rank: i32, raw: &mut Raw) {
    if op.pid as u32 != p.pid {
        raw.flags |= RF_FOREIGN;
    }
    raw.w = [
        lo_hi(op.pid as u32, rank as u32),
        u64::from(op.channel_id)
            | (u64::from(op.is_send != 0) << 8)
            | (u64::from(op.peer as u32) << 32),
        lo_hi(op.n_steps as u32, op.chunk_size as u32),
        0,
    ];
}

#[inline(always)]
fn net_plugin(np: &NetPlugin, raw: &mut Raw) {
    raw.w[0] = np.id as u64;
    if np.data.is_null() {
        return;
    }
    match np.id & net::TYPE_MASK {
        net::TYPE_IB => {
            // SAFETY: for IB plugin ids `data` points to an ncclProfilerNetIbDescr_v1_t that
            // lives at least for this call (spec §5.2).
            let d = unsafe { &(*(np.data as *const NetIbDescr)).qp };
            raw.w[1] = u64::from(d.device as u16)
                | (u64::from(d.opcode as u16) << 16)
                | (u64::from(d.qp_num as u32) << 32);
            raw.w[2] = d.wr_id;
            raw.w[3] = d.length as u64;
        }
        net::TYPE_SOCK => {
            // SAFETY: for socket plugin ids `data` points to an ncclProfilerNetSockDescr_v1_t
            // valid during this call (spec §5.2).
            let d = unsafe { &(*(np.data as *const NetSockDescr)).sock };
            raw.w[1] = lo_hi(d.fd as u32, d.op as u32);
            raw.w[3] = d.length as u64;
        }
        _ => {}
    }
}

/// v5 and v6 (v5's layout is v6's without the CE arms; same size and offsets).
#[inline(always)]
pub fn read_v6(p: &Plugin, d: &v6::Descr) -> Option<(EventKind, Raw)> {
    let kind = EventKind::from_type_bit(d.type_)?;
    let mut raw = base(d.parent_obj);
    // SAFETY: (all arms below) NCCL fills the arm selected by `type`.
    unsafe {
        match kind {
            EventKind::Group => {}
            EventKind::GroupApi => {
                let a = &d.u.group_api;
                raw.w[0] = lo_hi(a.group_depth as u32, u32::from(a.graph_captured != 0));
            }
            EventKind::CollApi => {
                let a = &d.u.coll_api;
                raw.w = [
                    a.count as u64,
                    pack_strings([s(p, a.func), s(p, a.datatype), 0, 0]),
                    a.stream as u64,
                    lo_hi(a.root as u32, u32::from(a.graph_captured != 0)),
                ];
            }
            EventKind::P2pApi => {
                let a = &d.u.p2p_api;
                raw.w = [
                    a.count as u64,
                    pack_strings([s(p, a.func), s(p, a.datatype), 0, 0]),
                    a.stream as u64,
                    lo_hi(0, u32::from(a.graph_captured != 0)),
                ];
            }
            EventKind::KernelLaunch => raw.w[2] = d.u.kernel_launch.stream as u64,
            EventKind::Coll => {
                let c = &d.u.coll;
                raw.w = coll_words(
                    c.seq_number,
                    c.count,
                    [s(p, c.func), s(p, c.datatype), s(p, c.algo), s(p, c.proto)],
                    c.root,
                    c.n_channels,
                    c.n_warps,
                );
            }
            EventKind::P2p => {
                let c = &d.u.p2p;
                raw.w = [
                    lo_hi(c.peer as u32, u32::from(c.n_channels)),
                    c.count as u64,
                    pack_strings([s(p, c.func), s(p, c.datatype), 0, 0]),
                    0,
                ];
            }
            EventKind::ProxyOp => proxy_op(p, &d.u.proxy_op, d.rank, &mut raw),
            EventKind::ProxyStep => raw = step_v6(d),
            EventKind::ProxyCtrl => {}
            EventKind::KernelCh => {
                raw.w[0] = u64::from(d.u.kernel_ch.channel_id);
                raw.w[1] = d.u.kernel_ch.p_timer;
            }
            EventKind::NetPlugin => net_plugin(&d.u.net_plugin, &mut raw),
            EventKind::CeColl => {
                let c = &d.u.ce_coll;
                raw.w = [
                    c.seq_number,
                    c.count as u64,
                    pack_strings([s(p, c.func), s(p, c.datatype), s(p, c.sync_strategy), 0]),
                    lo_hi(c.ce_seq_num, u32::from(c.intra_batch_sync != 0)),
                ];
            }
            EventKind::CeSync => {
                let c = &d.u.ce_sync;
                raw.w[0] = lo_hi(c.n_ranks as u32, u32::from(c.is_complete != 0));
            }
            EventKind::CeBatch => {
                let c = &d.u.ce_batch;
                raw.w[0] = lo_hi(c.num_ops as u32, u32::from(c.use_intra_sync != 0));
                raw.w[1] = c.total_bytes as u64;
            }
        }
    }
    Some((kind, raw))
}

/// v4.
#[inline(always)]
pub fn read_v4(p: &Plugin, d: &v4::Descr) -> Option<(EventKind, Raw)> {
    let kind = EventKind::from_type_bit(u64::from(d.type_))?;
    let mut raw = base(d.parent_obj);
    // SAFETY: NCCL fills the arm selected by `type`.
    unsafe {
        match kind {
            EventKind::Group | EventKind::ProxyCtrl => {}
            EventKind::Coll => {
                let c = &d.u.coll;
                raw.w = coll_words(
                    c.seq_number,
                    c.count,
                    [s(p, c.func), s(p, c.datatype), s(p, c.algo), s(p, c.proto)],
                    c.root,
                    c.n_channels,
                    c.n_warps,
                );
            }
            EventKind::P2p => {
                let c = &d.u.p2p;
                raw.w = [
                    lo_hi(c.peer as u32, u32::from(c.n_channels)),
                    c.count as u64,
                    pack_strings([s(p, c.func), s(p, c.datatype), 0, 0]),
                    0,
                ];
            }
            EventKind::ProxyOp => proxy_op(p, &d.u.proxy_op, d.rank, &mut raw),
            EventKind::ProxyStep => raw.w[0] = lo_hi(d.u.proxy_step.step as u32, d.rank as u32),
            EventKind::KernelCh => {
                raw.w[0] = u64::from(d.u.kernel_ch.channel_id);
                raw.w[1] = d.u.kernel_ch.p_timer;
            }
            EventKind::NetPlugin => net_plugin(&d.u.net_plugin, &mut raw),
            // Not part of v4: a core never sends them; ignore rather than misread.
            _ => return None,
        }
    }
    Some((kind, raw))
}

/// v3 (also carries the communicator identity in Coll/P2p).
#[inline(always)]
pub fn read_v3(p: &Plugin, ci: Option<u32>, d: &v3::Descr) -> Option<(EventKind, Raw)> {
    let kind = EventKind::from_type_bit(u64::from(d.type_))?;
    let mut raw = base(d.parent_obj);
    // SAFETY: NCCL fills the arm selected by `type`.
    unsafe {
        match kind {
            EventKind::Group | EventKind::ProxyCtrl => {}
            EventKind::Coll => {
                let c = &d.u.coll;
                learn(p, ci, c.comm_hash, c.name, d.rank);
                raw.w = coll_words(
                    c.seq_number,
                    c.count,
                    [s(p, c.func), s(p, c.datatype), s(p, c.algo), s(p, c.proto)],
                    c.root,
                    c.n_max_channels,
                    c.n_warps,
                );
            }
            EventKind::P2p => p2p_v2(p, ci, &d.u.p2p, d.rank, &mut raw),
            EventKind::ProxyOp => proxy_op(p, &d.u.proxy_op, d.rank, &mut raw),
            EventKind::ProxyStep => raw.w[0] = lo_hi(d.u.proxy_step.step as u32, d.rank as u32),
            EventKind::KernelCh => raw.w[0] = u64::from(d.u.kernel_ch.channel_id),
            EventKind::NetPlugin => net_plugin(&d.u.net_plugin, &mut raw),
            _ => return None,
        }
    }
    Some((kind, raw))
}

/// v2.
#[inline(always)]
pub fn read_v2(p: &Plugin, ci: Option<u32>, d: &v2::Descr) -> Option<(EventKind, Raw)> {
    let kind = EventKind::from_type_bit(u64::from(d.type_))?;
    let mut raw = base(d.parent_obj);
    // SAFETY: NCCL fills the arm selected by `type`.
    unsafe {
        match kind {
            EventKind::Group | EventKind::ProxyCtrl => {}
            EventKind::Coll => {
                let c = &d.u.coll;
                learn(p, ci, c.comm_hash, c.name, d.rank);
                raw.w = coll_words(
                    c.seq_number,
                    c.count,
                    [s(p, c.func), s(p, c.datatype), s(p, c.algo), s(p, c.proto)],
                    c.root,
                    c.n_max_channels,
                    c.n_warps,
                );
            }
            EventKind::P2p => p2p_v2(p, ci, &d.u.p2p, d.rank, &mut raw),
            EventKind::ProxyOp => proxy_op(p, &d.u.proxy_op, d.rank, &mut raw),
            EventKind::ProxyStep => raw.w[0] = lo_hi(d.u.proxy_step.step as u32, d.rank as u32),
            _ => return None,
        }
    }
    Some((kind, raw))
}

/// v1: numeric codes are mapped to the same names newer versions send.
#[inline(always)]
pub fn read_v1(p: &Plugin, ci: Option<u32>, d: &v1::Descr) -> Option<(EventKind, Raw)> {
    let kind = EventKind::from_type_bit(u64::from(d.type_))?;
    let mut raw = base(d.parent_obj);
    let code = |table: &[&'static std::ffi::CStr], c: u8| s(p, v1::code_name(table, c).as_ptr());
    // SAFETY: NCCL fills the arm selected by `type`.
    unsafe {
        match kind {
            EventKind::Group | EventKind::ProxyCtrl => {}
            EventKind::Coll => {
                let c = &d.u.coll;
                learn(p, ci, c.comm_hash, c.name, d.rank);
                raw.w = coll_words(
                    c.seq_number,
                    c.count,
                    [
                        code(&v1::FUNC_NAMES, c.func),
                        code(&v1::DTYPE_NAMES, c.datatype),
                        code(&v1::ALGO_NAMES, c.algo),
                        code(&v1::PROTO_NAMES, c.proto),
                    ],
                    c.root,
                    c.n_max_channels,
                    c.n_warps,
                );
            }
            EventKind::P2p => {
                let c = &d.u.p2p;
                learn(p, ci, c.comm_hash, c.name, d.rank);
                raw.w = [
                    lo_hi(c.peer as u32, 0),
                    c.count as u64,
                    pack_strings([
                        code(&v1::FUNC_NAMES, c.func),
                        code(&v1::DTYPE_NAMES, c.datatype),
                        0,
                        0,
                    ]),
                    0,
                ];
            }
            EventKind::ProxyOp => proxy_op(p, &d.u.proxy_op, d.rank, &mut raw),
            EventKind::ProxyStep => raw.w[0] = lo_hi(d.u.proxy_step.step as u32, d.rank as u32),
            _ => return None,
        }
    }
    Some((kind, raw))
}

#[inline(always)]
fn p2p_v2(p: &Plugin, ci: Option<u32>, c: &v2::P2p, rank: i32, raw: &mut Raw) {
    learn(p, ci, c.comm_hash, c.name, rank);
    raw.w = [
        lo_hi(c.peer as u32, 0),
        c.count as u64,
        pack_strings([s(p, c.func), s(p, c.datatype), 0, 0]),
        0,
    ];
}

/// v1–v3 communicator identity from a Coll/P2p descriptor.
#[inline(always)]
fn learn(p: &Plugin, ci: Option<u32>, comm_hash: u64, name: *const c_char, rank: i32) {
    let Some(ci) = ci else { return };
    if let Some(slot) = p.contexts.get(ci)
        && slot.comm_hash.load(std::sync::atomic::Ordering::Relaxed) != comm_hash
    {
        p.contexts.learn_identity(ci, comm_hash, s(p, name), rank);
    }
}
