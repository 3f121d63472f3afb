//! The fixed-layout record every completed event travels as (96 bytes, `#[repr(C)]`, Pod).
//!
//! One layout for every kind keeps the codec a memcpy and the store simple. The common header
//! says what, when and where; `p[0..6]` and the small fields `sub`/`x` carry the kind's payload,
//! documented per kind below. All times are host `CLOCK_MONOTONIC` nanoseconds (shared by every
//! process on the host); 0 means "did not happen / unknown".
//!
//! | kind | `sub` | `x` | `p[0]` | `p[1]` | `p[2]` | `p[3]` | `p[4]` | `p[5]` |
//! |---|---|---|---|---|---|---|---|---|
//! | Coll | nChannels | root | seq | count | strings(func,dtype,algo,proto) | enqueue stop | nWarps | exec start |
//! | P2p | nChannels | peer | — | count | strings(func,dtype) | enqueue stop | — | exec start |
//! | CollApi / P2pApi | — | root | — | count | strings(func,dtype) | stop | stream | — |
//! | GroupApi | — | depth | t(state 23) | t(state 24) | — | stop | — | — |
//! | KernelLaunch | — | — | — | — | — | — | stream | — |
//! | ProxyOp | channel | peer | pid | nSteps | chunkSize | bytes (sum of steps) | t(InProgress) | legacy states seen (bits 0–7) |
//! | ProxyStep | channel | peer | step | t(phase a) | t(phase b) | t(phase c) | transSize | peer-wait retries |
//! | ProxyCtrl | last state | appendedProxyOps | first state | — | — | — | — | — |
//! | KernelCh | channel | — | raw GPU start | raw GPU stop | CPU t(start callback) | CPU t(stop callback) | GPU id | — |
//! | NetPlugin | device / sock op | qpNum / fd | plugin id | wr_id | opcode | length | updates | t(last update) |
//! | CeColl | — | ceSeqNum | seq | count | strings(func,dtype,syncStrategy) | stop | stream | — |
//! | CeSync | — | nRanks | — | — | — | stop | — | — |
//! | CeBatch | — | numOps | — | totalBytes | — | stop | — | — |
//!
//! ProxyStep phases: send a = SendGPUWait(8), b = SendPeerWait(20, first), c = SendWait(9);
//! receive a = RecvWait(10), b = RecvFlushWait(11), c = RecvGPUWait(12). A send step's a is
//! normally its start time: NCCL records SendGPUWait in the same block as the start, well under
//! a microsecond later, and the plugin does not read the clock again for it (the plugin's
//! `step_phases::Phases::needs_time`).
//! `strings(..)` packs up to four 16-bit string ids (see [`pack_strings`]); id 0 = none.

use bytemuck::{Pod, Zeroable};

use crate::kind::{EventKind, StepPhase};

/// Record flag: `end_ns` is a true completion time (from children or a stop), not a guess.
pub const F_END_KNOWN: u16 = 1 << 0;
/// Record flag: completion could not be observed (no ProxyOp/KernelCh children, or the op was
/// abandoned); `end_ns` is the enqueue stop time.
pub const F_END_UNKNOWN: u16 = 1 << 1;
/// ProxyOp / ProxyStep / NetPlugin: executed here for another process (PXN, foreign pid).
pub const F_FOREIGN: u16 = 1 << 2;
/// ProxyOp / ProxyStep / NetPlugin / KernelCh: send direction (ProxyOp `isSend`).
pub const F_SEND: u16 = 1 << 3;
/// KernelCh: `start_ns`/`end_ns` are GPU timestamps converted to the host clock.
pub const F_GPU_CONVERTED: u16 = 1 << 4;
/// GroupApi / CollApi / P2pApi: the call's stream was being captured into a CUDA graph.
pub const F_GRAPH_CAPTURED: u16 = 1 << 5;
/// The parent id was not (or no longer) known to the plugin: stale CUDA-graph parent or lost.
pub const F_PARENT_UNKNOWN: u16 = 1 << 6;
/// ProxyStep: receive step restarted (start called again without a stop before it).
pub const F_RESTARTED: u16 = 1 << 7;
/// ProxyOp: never progressed (non-network transport); never stopped.
pub const F_NOT_NETWORK: u16 = 1 << 8;
/// Still in flight when the record was produced (in-flight summaries, finalize flush).
pub const F_IN_FLIGHT: u16 = 1 << 9;
/// CeSync `isComplete` / CeBatch `useIntraSync`.
pub const F_CE_FLAG: u16 = 1 << 10;

/// A completed event. 96 bytes, alignment 8, no padding: safe to send as bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct EventRecord {
    /// Plugin-unique id within the process (the handle NCCL saw). Never 0.
    pub id: u64,
    /// Parent event id in the same process (0 = none). For foreign (PXN) ProxyOps, the
    /// originating process's handle value, to be matched with that process's ids.
    pub parent: u64,
    /// Start (host ns). Coll/P2p: the start callback (launch); see `p[5]` for execution start.
    pub start_ns: u64,
    /// True completion (host ns), or the stop time; see the flags.
    pub end_ns: u64,
    /// Index into the process's communicator table (see `wire::CommInfo`); `u32::MAX` unknown.
    pub comm: u32,
    /// Rank in that communicator (-1 unknown).
    pub rank: i32,
    /// [`EventKind`] as u8.
    pub kind: u8,
    /// Kind-specific small field (channel id, state).
    pub sub: u8,
    /// `F_*` flags.
    pub flags: u16,
    /// Kind-specific 32-bit field.
    pub x: u32,
    /// Kind-specific payload.
    pub p: [u64; 6],
}

const _: () = {
    assert!(std::mem::size_of::<EventRecord>() == 96);
    assert!(std::mem::align_of::<EventRecord>() == 8);
    assert!(std::mem::offset_of!(EventRecord, comm) == 32);
    assert!(std::mem::offset_of!(EventRecord, kind) == 40);
    assert!(std::mem::offset_of!(EventRecord, x) == 44);
    assert!(std::mem::offset_of!(EventRecord, p) == 48);
};

/// Size of one record on the wire.
pub const RECORD_SIZE: usize = std::mem::size_of::<EventRecord>();

/// Pack up to four 16-bit string ids into one payload word.
pub fn pack_strings(ids: [u16; 4]) -> u64 {
    u64::from(ids[0])
        | (u64::from(ids[1]) << 16)
        | (u64::from(ids[2]) << 32)
        | (u64::from(ids[3]) << 48)
}

/// Inverse of [`pack_strings`].
pub fn unpack_strings(w: u64) -> [u16; 4] {
    [
        w as u16,
        (w >> 16) as u16,
        (w >> 32) as u16,
        (w >> 48) as u16,
    ]
}

impl EventRecord {
    pub fn kind(&self) -> Option<EventKind> {
        EventKind::from_u8(self.kind)
    }
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
    /// Duration in ns (0 if the end is unknown or before the start).
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
    /// String ids of Coll/P2p/CollApi/P2pApi/CeColl: [func, datatype, algo|syncStrategy, proto].
    pub fn strings(&self) -> [u16; 4] {
        unpack_strings(self.p[2])
    }
    /// Coll/P2p: when execution began (first child start; converted GPU time if KernelCh).
    pub fn exec_start_ns(&self) -> u64 {
        self.p[5]
    }
    /// Coll/P2p/API events: the enqueue-side stop (NCCL's `stopEvent`).
    pub fn enqueue_stop_ns(&self) -> u64 {
        self.p[3]
    }

    /// ProxyStep: the time spent in each phase, in ns (send or receive phases by `F_SEND`).
    /// Phases whose boundaries were not recorded contribute nothing.
    pub fn step_phases(&self) -> [(StepPhase, u64); 3] {
        let (a, b, c) = (self.p[1], self.p[2], self.p[3]);
        let end = self.end_ns;
        // Each phase runs from its state's time to the next recorded boundary.
        let next = |from: u64, cands: &[u64]| -> u64 {
            if from == 0 {
                return 0;
            }
            let to = cands.iter().copied().find(|&t| t != 0).unwrap_or(0);
            to.saturating_sub(from)
        };
        if self.has(F_SEND) {
            // start→a is granting (nil where a is the start's time); a→b GPU wait, b→c peer
            // wait, c→end network.
            let gpu = next(a, &[b, c, end]);
            let peer = next(b, &[c, end]);
            let net = next(c, &[end]);
            [
                (StepPhase::SendGpuWait, gpu),
                (StepPhase::SendPeerWait, peer),
                (StepPhase::SendNetWait, net),
            ]
        } else {
            let net = next(a, &[b, c, end]);
            let flush = next(b, &[c, end]);
            let gpu = next(c, &[end]);
            [
                (StepPhase::RecvNetWait, net),
                (StepPhase::RecvFlushWait, flush),
                (StepPhase::RecvGpuWait, gpu),
            ]
        }
    }

    /// One record's bytes, as framed. (A fixed size: copying them is a few vector moves, where
    /// a slice of [`EventRecord::as_bytes`] went through a `memcpy` call.)
    #[inline]
    pub fn bytes(&self) -> &[u8; RECORD_SIZE] {
        bytemuck::cast_ref(self)
    }

    /// View a record slice as bytes (for framing).
    pub fn as_bytes(records: &[EventRecord]) -> &[u8] {
        bytemuck::cast_slice(records)
    }

    /// Decode records from bytes whose length must be a multiple of [`RECORD_SIZE`].
    /// Copies (the input need not be aligned).
    pub fn from_bytes(bytes: &[u8]) -> Option<Vec<EventRecord>> {
        if !bytes.len().is_multiple_of(RECORD_SIZE) {
            return None;
        }
        Some(bytemuck::pod_collect_to_vec(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_roundtrip() {
        let w = pack_strings([1, 2, 65535, 0]);
        assert_eq!(unpack_strings(w), [1, 2, 65535, 0]);
    }

    #[test]
    fn bytes_roundtrip_unaligned() {
        let r = EventRecord {
            id: 7,
            kind: EventKind::Coll as u8,
            p: [1, 2, 3, 4, 5, 6],
            ..Default::default()
        };
        let mut buf = vec![0u8; 1];
        buf.extend_from_slice(EventRecord::as_bytes(&[r, r]));
        let back = EventRecord::from_bytes(&buf[1..]).unwrap();
        assert_eq!(back, vec![r, r]);
        assert!(EventRecord::from_bytes(&buf[..50]).is_none());
    }

    #[test]
    fn step_phases_send_and_recv() {
        let mut r = EventRecord {
            kind: EventKind::ProxyStep as u8,
            start_ns: 100,
            end_ns: 1000,
            flags: F_SEND,
            ..Default::default()
        };
        r.p[1] = 110; // SendGPUWait
        r.p[2] = 400; // SendPeerWait
        r.p[3] = 600; // SendWait
        let ph = r.step_phases();
        assert_eq!(ph[0], (StepPhase::SendGpuWait, 290));
        assert_eq!(ph[1], (StepPhase::SendPeerWait, 200));
        assert_eq!(ph[2], (StepPhase::SendNetWait, 400));
        // Receive without a flush state: network wait runs to the GPU-wait state.
        r.flags = 0;
        r.p = [0, 110, 0, 700, 0, 0];
        let ph = r.step_phases();
        assert_eq!(ph[0], (StepPhase::RecvNetWait, 590));
        assert_eq!(ph[1], (StepPhase::RecvFlushWait, 0));
        assert_eq!(ph[2], (StepPhase::RecvGpuWait, 300));
    }
}
