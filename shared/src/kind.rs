//! Version-neutral event kinds and NCCL's state numbers.
//!
//! `EventKind as u8` is the bit index of the kind's activation-mask bit (`1 << kind`), exactly as
//! NCCL numbers its `ncclProfile*` types (spec §2.2). State numbers are NCCL's ABI values (§2.3).

use serde::{Deserialize, Serialize};

/// Every event type a profiler plugin can receive (NCCL v1–v6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum EventKind {
    Group = 0,
    Coll = 1,
    P2p = 2,
    ProxyOp = 3,
    ProxyStep = 4,
    ProxyCtrl = 5,
    KernelCh = 6,
    NetPlugin = 7,
    GroupApi = 8,
    CollApi = 9,
    P2pApi = 10,
    KernelLaunch = 11,
    CeColl = 12,
    CeSync = 13,
    CeBatch = 14,
}

impl EventKind {
    /// All kinds, in bit order.
    pub const ALL: [EventKind; 15] = [
        EventKind::Group,
        EventKind::Coll,
        EventKind::P2p,
        EventKind::ProxyOp,
        EventKind::ProxyStep,
        EventKind::ProxyCtrl,
        EventKind::KernelCh,
        EventKind::NetPlugin,
        EventKind::GroupApi,
        EventKind::CollApi,
        EventKind::P2pApi,
        EventKind::KernelLaunch,
        EventKind::CeColl,
        EventKind::CeSync,
        EventKind::CeBatch,
    ];
    /// Number of kinds (the length of per-kind counter arrays).
    pub const COUNT: usize = 15;

    /// The kind with this bit index, if any.
    pub fn from_u8(v: u8) -> Option<EventKind> {
        Self::ALL.get(v as usize).copied()
    }

    /// The kind whose NCCL `type` value (a single mask bit) is `bit`.
    pub fn from_type_bit(bit: u64) -> Option<EventKind> {
        if bit.count_ones() != 1 {
            return None;
        }
        Self::from_u8(bit.trailing_zeros() as u8)
    }

    /// This kind's activation-mask bit.
    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }

    /// Short user-facing name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Group => "Group",
            EventKind::Coll => "Coll",
            EventKind::P2p => "P2p",
            EventKind::ProxyOp => "ProxyOp",
            EventKind::ProxyStep => "ProxyStep",
            EventKind::ProxyCtrl => "ProxyCtrl",
            EventKind::KernelCh => "KernelCh",
            EventKind::NetPlugin => "NetPlugin",
            EventKind::GroupApi => "GroupApi",
            EventKind::CollApi => "CollApi",
            EventKind::P2pApi => "P2pApi",
            EventKind::KernelLaunch => "KernelLaunch",
            EventKind::CeColl => "CeColl",
            EventKind::CeSync => "CeSync",
            EventKind::CeBatch => "CeBatch",
        }
    }
}

/// NCCL's `ncclProfilerEventState_t` values (spec §2.3).
pub mod state {
    pub const PROXY_OP_SEND_POSTED: u32 = 0;
    pub const PROXY_OP_SEND_REM_FIFO_WAIT: u32 = 1;
    pub const PROXY_OP_SEND_TRANSMITTED: u32 = 2;
    pub const PROXY_OP_SEND_DONE: u32 = 3;
    pub const PROXY_OP_RECV_POSTED: u32 = 4;
    pub const PROXY_OP_RECV_RECEIVED: u32 = 5;
    pub const PROXY_OP_RECV_TRANSMITTED: u32 = 6;
    pub const PROXY_OP_RECV_DONE: u32 = 7;
    pub const PROXY_STEP_SEND_GPU_WAIT: u32 = 8;
    pub const PROXY_STEP_SEND_WAIT: u32 = 9;
    pub const PROXY_STEP_RECV_WAIT: u32 = 10;
    pub const PROXY_STEP_RECV_FLUSH_WAIT: u32 = 11;
    pub const PROXY_STEP_RECV_GPU_WAIT: u32 = 12;
    pub const PROXY_CTRL_IDLE: u32 = 13;
    pub const PROXY_CTRL_ACTIVE: u32 = 14;
    pub const PROXY_CTRL_SLEEP: u32 = 15;
    pub const PROXY_CTRL_WAKEUP: u32 = 16;
    pub const PROXY_CTRL_APPEND: u32 = 17;
    pub const PROXY_CTRL_APPEND_END: u32 = 18;
    pub const PROXY_OP_IN_PROGRESS: u32 = 19;
    pub const PROXY_STEP_SEND_PEER_WAIT: u32 = 20;
    pub const NET_PLUGIN_UPDATE: u32 = 21;
    pub const KERNEL_CH_STOP: u32 = 22;
    pub const GROUP_START_API_STOP: u32 = 23;
    pub const GROUP_END_API_START: u32 = 24;
    pub const CE_COLL_START: u32 = 25;
    pub const CE_COLL_COMPLETE: u32 = 26;
    pub const CE_SYNC_START: u32 = 27;
    pub const CE_SYNC_COMPLETE: u32 = 28;
    pub const CE_BATCH_START: u32 = 29;
    pub const CE_BATCH_COMPLETE: u32 = 30;
    /// RCCL only (bit 1<<15 enabled): `ncclProfilerProxyDiagUpdate`.
    pub const RCCL_PROXY_DIAG_UPDATE: u32 = 31;

    /// A ProxyStep state's name and what a step in it waits for (None: not a step state).
    pub fn step_state(s: u32) -> Option<(&'static str, &'static str)> {
        Some(match s {
            PROXY_STEP_SEND_GPU_WAIT => ("SendGPUWait", "the GPU's data"),
            PROXY_STEP_SEND_PEER_WAIT => ("SendPeerWait", "the receiver"),
            PROXY_STEP_SEND_WAIT => ("SendWait", "the network"),
            PROXY_STEP_RECV_WAIT => ("RecvWait", "network data"),
            PROXY_STEP_RECV_FLUSH_WAIT => ("RecvFlushWait", "the flush"),
            PROXY_STEP_RECV_GPU_WAIT => ("RecvGPUWait", "the GPU"),
            _ => return None,
        })
    }
}

/// Where a proxy step spends its time, in the order the states occur (spec §4.6).
/// Index into [`crate::record::EventRecord`]'s step phase timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StepPhase {
    /// Send: SendGPUWait → SendPeerWait (buffer granted, GPU filling it). NCCL records
    /// SendGPUWait right after the step's start, and the plugin normally gives it the start's
    /// time (not where the state comes from another thread or after a newer step took the
    /// step's phases entry).
    SendGpuWait,
    /// Send: SendPeerWait → SendWait (data ready, receiver has no buffer/credit yet).
    SendPeerWait,
    /// Send: SendWait → stop (on the wire).
    SendNetWait,
    /// Receive: RecvWait → RecvFlushWait (posted, waiting for network).
    RecvNetWait,
    /// Receive: RecvFlushWait → RecvGPUWait (flush to GPU memory).
    RecvFlushWait,
    /// Receive: RecvGPUWait → stop (GPU consuming the data).
    RecvGpuWait,
}

impl StepPhase {
    pub fn name(self) -> &'static str {
        match self {
            StepPhase::SendGpuWait => "send GPU wait",
            StepPhase::SendPeerWait => "send peer wait",
            StepPhase::SendNetWait => "send network wait",
            StepPhase::RecvNetWait => "recv network wait",
            StepPhase::RecvFlushWait => "recv flush wait",
            StepPhase::RecvGpuWait => "recv GPU wait",
        }
    }
}

/// Network-plugin id layout (spec §5.1).
pub mod net {
    pub const TYPE_MASK: i64 = 0xFFFF_0000;
    pub const VER_MASK: i64 = 0x0000_FFFF;
    pub const TYPE_IB: i64 = 1 << 16;
    pub const TYPE_SOCK: i64 = 2 << 16;
}

/// nccl-tests bus-bandwidth factor for a collective over `n` ranks (spec landscape §1.10).
pub fn busbw_factor(func: &str, n: u32) -> f64 {
    let n = f64::from(n.max(1));
    match func {
        "AllReduce" => 2.0 * (n - 1.0) / n,
        "AllGather" | "ReduceScatter" | "AlltoAll" => (n - 1.0) / n,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_match_nccl_bits() {
        assert_eq!(EventKind::Group.bit(), 1);
        assert_eq!(EventKind::ProxyCtrl.bit(), 32);
        assert_eq!(EventKind::KernelCh.bit(), 64);
        assert_eq!(EventKind::GroupApi.bit(), 256);
        assert_eq!(EventKind::KernelLaunch.bit(), 2048);
        assert_eq!(EventKind::CeBatch.bit(), 16384);
        for k in EventKind::ALL {
            assert_eq!(EventKind::from_u8(k as u8), Some(k));
            assert_eq!(EventKind::from_type_bit(u64::from(k.bit())), Some(k));
        }
        assert_eq!(EventKind::from_type_bit(3), None);
        assert_eq!(EventKind::from_type_bit(1 << 15), None);
    }

    #[test]
    fn busbw_factors_match_nccl_tests() {
        assert!((busbw_factor("AllReduce", 8) - 1.75).abs() < 1e-12);
        assert!((busbw_factor("AllGather", 8) - 0.875).abs() < 1e-12);
        assert!((busbw_factor("ReduceScatter", 4) - 0.75).abs() < 1e-12);
        assert!((busbw_factor("AlltoAll", 2) - 0.5).abs() < 1e-12);
        assert_eq!(busbw_factor("Broadcast", 8), 1.0);
        assert_eq!(busbw_factor("Send", 8), 1.0);
    }
}
