//! Deterministic fixtures built through the real ingest from constructed frames.
#![allow(dead_code)]

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, F_END_KNOWN, F_SEND, pack_strings};
use ncclprof_shared::wire::{
    CommInfo, Counters, Frame, InFlight, Meta, OpenOp, PluginHello, encode,
};
use ncclprof_tui::app::App;
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::store::Store;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

pub const T0: u64 = 10_000_000_000;
pub const MS: u64 = 1_000_000;
pub const US: u64 = 1_000;
pub const HASH: u64 = 0xabc;

/// String ids of the fixture's tables.
pub const ALLREDUCE: u16 = 1;
pub const FLOAT32: u16 = 2;
pub const RING: u16 = 3;
pub const SIMPLE: u16 = 4;
pub const ALLGATHER: u16 = 5;
pub const INT8: u16 = 6;
pub const LL: u16 = 7;

pub struct Fixture {
    pub ranks: i32,
    pub seqs: u64,
    /// Rank that arrives late, and by how much.
    pub straggler: Option<(i32, u64)>,
    /// Rank whose process reports a hung op after the last seq.
    pub hung: Option<i32>,
    /// Drops (RingFull) reported by rank 1's process.
    pub drops: u64,
    pub steps: bool,
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture {
            ranks: 4,
            seqs: 6,
            straggler: Some((3, 2 * MS)),
            hung: None,
            drops: 0,
            steps: true,
        }
    }
}

pub fn host_of(rank: i32) -> String {
    format!("node-{}", (b'a' + (rank / 2) as u8) as char)
}

/// Start of rank `r`'s op `seq`.
pub fn op_start(f: &Fixture, r: i32, seq: u64) -> u64 {
    let late = f.straggler.filter(|s| s.0 == r).map_or(0, |s| s.1);
    T0 + seq * 10 * MS + late + r as u64 * 10 * US
}

pub fn op_end(f: &Fixture, seq: u64) -> u64 {
    let late = f.straggler.map_or(0, |s| s.1);
    T0 + seq * 10 * MS + late + 3 * MS
}

/// Frames of one rank's process (one rank per process, pid 100 + rank).
pub fn frames(f: &Fixture, r: i32) -> Vec<Frame> {
    let pid = 100 + r as u32;
    let mut out = vec![
        Frame::Hello(PluginHello {
            protocol: ncclprof_shared::PROTOCOL_VERSION,
            pid,
            host: host_of(r),
            uid: 1000,
            cmdline: "python train.py".into(),
            api_version: 6,
            plugin_version: "0.1.0".into(),
            mask: ncclprof_shared::mask::DEFAULT,
            active: true,
            clock: "tsc".into(),
        }),
        Frame::Meta(Meta {
            comms: vec![CommInfo {
                index: 0,
                comm_hash: HASH,
                name: "world".into(),
                nranks: f.ranks,
                nnodes: (f.ranks + 1) / 2,
                rank: r,
                api_version: 6,
                finalized: false,
            }],
            strings: vec![
                (ALLREDUCE, "AllReduce".into()),
                (FLOAT32, "ncclFloat32".into()),
                (RING, "RING".into()),
                (SIMPLE, "SIMPLE".into()),
                (ALLGATHER, "AllGather".into()),
                (INT8, "ncclInt8".into()),
                (LL, "LL".into()),
            ],
        }),
    ];
    let mut recs = Vec::new();
    let mut id = 1u64;
    let mut next = || {
        id += 1;
        id
    };
    for seq in 0..f.seqs {
        let start = op_start(f, r, seq);
        let end = op_end(f, seq);
        let gather = seq % 3 == 2;
        let op_id = next();
        let nch = 4u8;
        let exec = start + 50 * US;
        let strings = if gather {
            pack_strings([ALLGATHER, INT8, RING, LL])
        } else {
            pack_strings([ALLREDUCE, FLOAT32, RING, SIMPLE])
        };
        let count = 1 << 18;
        for ch in 0..nch {
            let kid = next();
            let ks = exec + u64::from(ch) * 10 * US;
            let ke = end - u64::from(3 - ch) * 100 * US;
            recs.push(EventRecord {
                id: kid,
                parent: op_id,
                start_ns: ks,
                end_ns: ke,
                comm: 0,
                rank: r,
                kind: EventKind::KernelCh as u8,
                sub: ch,
                flags: F_END_KNOWN,
                x: 0,
                p: [1000, 2000, ks, ke, 0, 0],
            });
            if f.steps && !gather {
                let pid_op = next();
                let peer = ((r + 1) % f.ranks) as u32;
                for st in 0..2u64 {
                    let s0 = exec + st * 400 * US;
                    recs.push(EventRecord {
                        id: next(),
                        parent: pid_op,
                        start_ns: s0,
                        end_ns: s0 + 400 * US,
                        comm: 0,
                        rank: r,
                        kind: EventKind::ProxyStep as u8,
                        sub: ch,
                        flags: F_SEND | F_END_KNOWN,
                        x: peer,
                        // GPU wait 40µs, peer wait (longer on channel 0) then network.
                        p: [
                            st,
                            s0 + 10 * US,
                            s0 + 50 * US,
                            s0 + if ch == 0 { 350 } else { 150 } * US,
                            1 << 17,
                            0,
                        ],
                    });
                }
                recs.push(EventRecord {
                    id: pid_op,
                    parent: op_id,
                    start_ns: exec,
                    end_ns: exec + 800 * US,
                    comm: 0,
                    rank: r,
                    kind: EventKind::ProxyOp as u8,
                    sub: ch,
                    flags: F_SEND | F_END_KNOWN,
                    x: peer,
                    p: [u64::from(pid), 2, 1 << 17, 1 << 18, exec + 5 * US, 0],
                });
            }
        }
        recs.push(EventRecord {
            id: op_id,
            parent: 0,
            start_ns: start,
            end_ns: end,
            comm: 0,
            rank: r,
            kind: EventKind::Coll as u8,
            sub: nch,
            flags: F_END_KNOWN,
            x: 0,
            p: [seq, count, strings, start + 20 * US, 8, exec],
        });
    }
    out.push(Frame::Events(recs.into()));
    let mut dropped = vec![0; ncclprof_shared::wire::DropReason::COUNT];
    if r == 1 {
        dropped[0] = f.drops;
    }
    out.push(Frame::Counters(Counters {
        at_ns: T0,
        captured: vec![0; EventKind::COUNT],
        completed: vec![0; EventKind::COUNT],
        dropped: dropped.clone(),
        ..Default::default()
    }));
    let mut completed = vec![0; EventKind::COUNT];
    completed[EventKind::Coll as usize] = 100;
    completed[EventKind::ProxyStep as usize] = 2000;
    out.push(Frame::Counters(Counters {
        at_ns: T0 + 1_000 * MS,
        captured: completed.clone(),
        completed,
        dropped,
        ..Default::default()
    }));
    if f.hung == Some(r) {
        out.push(hung_frame(f, r));
    }
    out
}

/// Rank `r`'s process reporting its AllReduce `f.seqs` (the one after the last the fixture
/// ran) in flight, running for 5 s.
pub fn hung_frame(f: &Fixture, r: i32) -> Frame {
    let start = op_start(f, r, f.seqs);
    Frame::InFlight(InFlight {
        at_ns: start + 5_000 * MS,
        ops: vec![OpenOp {
            comm: 0,
            rank: r,
            kind: EventKind::Coll as u8,
            id: 9999,
            seq: f.seqs,
            func: ALLREDUCE,
            start_ns: start,
            exec_start_ns: start + 50 * US,
            steps_done: vec![1, 0, 0, 0],
            channels_done: 1,
            n_channels: 4,
            // Channel 1's first step, open since 1 s into the op, waiting for data.
            oldest_step: Some(ncclprof_shared::wire::OpenStep {
                channel: 1,
                step: 0,
                start_ns: start + 1_000 * MS,
                state: ncclprof_shared::kind::state::PROXY_STEP_RECV_WAIT as u8,
            }),
        }],
        total: 1,
    })
}

/// A store filled through the real ingest (frames are encoded and decoded on the way).
pub fn store(f: &Fixture) -> Store {
    let mut st = Store::new(1 << 30);
    for r in 0..f.ranks {
        for fr in frames(f, r) {
            let bytes = encode(&fr).expect("encode");
            ingest::apply_bytes(&mut st, r as u32 + 1, 100 + r as u32, &bytes);
        }
    }
    st
}

/// An app over the fixture, window fitted to the data.
pub fn app(f: &Fixture) -> App {
    let mut a = App::new(store(f), true, "directory /tmp/ncclprof-test".into());
    a.on_data();
    a.fit_all();
    a
}

pub fn render(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    t.draw(|fr| ncclprof_tui::ui::render(fr, app))
        .expect("draw");
    t
}

/// A completed AllReduce of rank 0 (communicator 0), seq = id, 16 KiB: enqueue stop `enq`,
/// execution start `exec`.
pub fn coll(
    id: u64,
    start: u64,
    end: u64,
    enq: u64,
    exec: u64,
) -> ncclprof_shared::record::EventRecord {
    ncclprof_shared::record::EventRecord {
        id,
        start_ns: start,
        end_ns: end,
        comm: 0,
        rank: 0,
        kind: EventKind::Coll as u8,
        sub: 2,
        flags: F_END_KNOWN,
        p: [
            id,
            1 << 12,
            pack_strings([ALLREDUCE, FLOAT32, RING, SIMPLE]),
            enq,
            8,
            exec,
        ],
        ..Default::default()
    }
}

/// A store holding the default fixture's rank 0 (pid 100).
pub fn base_store() -> ncclprof_tui::model::store::Store {
    let mut st = ncclprof_tui::model::store::Store::new(1 << 30);
    for fr in frames(&Fixture::default(), 0) {
        let bytes = ncclprof_shared::wire::encode(&fr).expect("encode");
        ncclprof_tui::model::ingest::apply_bytes(&mut st, 1, 100, &bytes);
    }
    st
}
