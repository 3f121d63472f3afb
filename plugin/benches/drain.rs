//! Drain-side throughput: raw records per second that `completion` turns into completed
//! events, for the step-heavy mix a proxy thread produces (Coll → 8 ProxyOps → 8 steps each,
//! every step start + 3 states + stop, 8 KernelCh). Single thread, as in the plugin.
//!
//! Run: `cargo bench -p ncclprof-plugin --bench drain`

use std::time::Instant;

use nccl_profiler_ncclprof::completion::{Completion, Item};
use nccl_profiler_ncclprof::handle;
use nccl_profiler_ncclprof::ring::{OP_START, OP_STATE, OP_STOP, Raw};
use ncclprof_shared::kind::{EventKind, state};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("drain: bench");
        return;
    }
    let mut seq = 0u64;
    let ts = std::cell::Cell::new(1_000_000u64);
    let mut id = |k: EventKind| {
        seq += 1;
        handle::make(k, 0, seq)
    };
    // Build one collective's worth of records.
    let mut one_coll = |items: &mut Vec<Item>| {
        let mut push = |op: u8, kind: EventKind, id: u64, parent: u64, st: u8, w: [u64; 4]| {
            ts.set(ts.get() + 50);
            let ts = ts.get();
            items.push(Item {
                raw: Raw {
                    ts,
                    id,
                    parent,
                    op,
                    kind: kind as u8,
                    state: st,
                    flags: 0,
                    ctx: 0,
                    w,
                },
                ns: ts,
                rank: 0,
            });
        };
        let coll = id(EventKind::Coll);
        push(
            OP_START,
            EventKind::Coll,
            coll,
            0,
            0,
            [1, 1024, 0, 8u64 << 32],
        );
        push(OP_STOP, EventKind::Coll, coll, 0, 0, [0; 4]);
        for ch in 0..8u64 {
            let op = id(EventKind::ProxyOp);
            push(
                OP_START,
                EventKind::ProxyOp,
                op,
                coll,
                0,
                [0, ch | (1 << 8), 8, 0],
            );
            push(
                OP_STATE,
                EventKind::ProxyOp,
                op,
                0,
                state::PROXY_OP_IN_PROGRESS as u8,
                [0; 4],
            );
            for s in 0..8u64 {
                let st = id(EventKind::ProxyStep);
                push(OP_START, EventKind::ProxyStep, st, op, 0, [s, 0, 0, 0]);
                for x in [
                    state::PROXY_STEP_SEND_GPU_WAIT,
                    state::PROXY_STEP_SEND_PEER_WAIT,
                    state::PROXY_STEP_SEND_WAIT,
                ] {
                    push(OP_STATE, EventKind::ProxyStep, st, 1 << 16, x as u8, [0; 4]);
                }
                push(OP_STOP, EventKind::ProxyStep, st, 0, 0, [0; 4]);
            }
            let k = id(EventKind::KernelCh);
            push(OP_START, EventKind::KernelCh, k, coll, 0, [ch, 5_000, 0, 0]);
            push(
                OP_STATE,
                EventKind::KernelCh,
                k,
                9_000,
                state::KERNEL_CH_STOP as u8,
                [0; 4],
            );
            push(OP_STOP, EventKind::KernelCh, k, 0, 0, [0; 4]);
            push(OP_STOP, EventKind::ProxyOp, op, 0, 0, [0; 4]);
        }
    };
    let mut c = Completion::new(262_144, 1000, 0.0);
    let mut out = Vec::new();
    let mut best = 0.0f64;
    for round in 0..5 {
        let mut items = Vec::new();
        for _ in 0..2000 {
            one_coll(&mut items);
        }
        let t0 = Instant::now();
        for chunk in items.chunks(4096) {
            c.pass(chunk, true);
            c.end_pass(ts.get());
            c.take(&mut out);
            out.clear();
        }
        let rate = items.len() as f64 / t0.elapsed().as_secs_f64();
        best = best.max(rate);
        println!(
            "round {round}: {:.2} M raw records/s ({} records)",
            rate / 1e6,
            items.len()
        );
    }
    println!("drain: best {:.2} M raw records/s", best / 1e6);
}
