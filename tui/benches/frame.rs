//! Frame time with 10 M retained events (plain timing; run `cargo bench -p ncclprof-tui`).
//! Rendering cost must depend on the visible window, not on what is retained.

use std::time::Instant;

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, F_SEND, pack_strings};
use ncclprof_shared::wire::{CommInfo, Frame, Meta};
use ncclprof_tui::app::App;
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::store::Store;
use ncclprof_tui::ui::views::ViewId;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const RANKS: i32 = 64;
const TOTAL: usize = 10_000_000;

fn main() {
    let t = Instant::now();
    let mut st = Store::new(4 << 30);
    for r in 0..RANKS {
        let src = r as u32 + 1;
        ingest::apply_frame(
            &mut st,
            src,
            1000 + src,
            Frame::Meta(Meta {
                comms: vec![CommInfo {
                    index: 0,
                    comm_hash: 7,
                    name: "world".into(),
                    nranks: RANKS,
                    nnodes: 8,
                    rank: r,
                    api_version: 6,
                    finalized: false,
                }],
                strings: vec![(1, "AllReduce".into()), (2, "ncclFloat32".into())],
            }),
        );
    }
    let per_rank = TOTAL / RANKS as usize;
    // Per op: 1 Coll, 8 KernelCh, 8 ProxyOp, 8 × 8 steps = 89 records every 1 ms.
    let ops = per_rank / 89;
    for r in 0..RANKS {
        let p = st.proc_for(r as u32 + 1, 0);
        let mut id = 0u64;
        for i in 0..ops as u64 {
            let t0 = 1_000_000_000 + i * 1_000_000;
            let coll = id + 1;
            id += 1;
            for ch in 0..8u8 {
                id += 1;
                let k = EventRecord {
                    id,
                    parent: coll,
                    start_ns: t0 + 10_000,
                    end_ns: t0 + 500_000,
                    comm: 0,
                    rank: r,
                    kind: EventKind::KernelCh as u8,
                    sub: ch,
                    ..Default::default()
                };
                ingest::ingest_record(&mut st, p, &k);
                id += 1;
                let po = id;
                for s in 0..8u64 {
                    id += 1;
                    let s0 = t0 + 20_000 + s * 50_000;
                    let step = EventRecord {
                        id,
                        parent: po,
                        start_ns: s0,
                        end_ns: s0 + 50_000,
                        comm: 0,
                        rank: r,
                        kind: EventKind::ProxyStep as u8,
                        sub: ch,
                        flags: F_SEND,
                        x: ((r + 1) % RANKS) as u32,
                        p: [s, s0 + 1_000, s0 + 10_000, s0 + 30_000, 65536, 0],
                    };
                    ingest::ingest_record(&mut st, p, &step);
                }
                let op = EventRecord {
                    id: po,
                    parent: coll,
                    start_ns: t0 + 20_000,
                    end_ns: t0 + 420_000,
                    comm: 0,
                    rank: r,
                    kind: EventKind::ProxyOp as u8,
                    sub: ch,
                    flags: F_SEND,
                    ..Default::default()
                };
                ingest::ingest_record(&mut st, p, &op);
            }
            let c = EventRecord {
                id: coll,
                start_ns: t0,
                end_ns: t0 + 600_000,
                comm: 0,
                rank: r,
                kind: EventKind::Coll as u8,
                sub: 8,
                p: [
                    i,
                    1 << 20,
                    pack_strings([1, 2, 0, 0]),
                    t0 + 5_000,
                    8,
                    t0 + 10_000,
                ],
                ..Default::default()
            };
            ingest::ingest_record(&mut st, p, &c);
        }
    }
    let ingest_s = t.elapsed().as_secs_f64();
    let steps: usize = st.lanes.iter().map(|l| l.steps.len()).sum();
    let step_bytes: usize = st.lanes.iter().map(|l| l.steps.bytes()).sum();
    println!(
        "retained {} events ({} steps) in {:.1}s ({:.2} M/s); {:.1} MiB total, {:.1} bytes per step",
        st.retained,
        steps,
        ingest_s,
        st.retained as f64 / ingest_s / 1e6,
        st.bytes as f64 / (1 << 20) as f64,
        step_bytes as f64 / steps as f64
    );
    let mut app = App::new(st, true, String::new());
    let mut term = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    for (view, span) in [
        (ViewId::Timeline, 200_000_000u64),
        (ViewId::Timeline, 10_000_000_000),
        (ViewId::Channels, 200_000_000),
        (ViewId::Channels, 10_000_000_000),
        (ViewId::Proxy, 200_000_000),
        (ViewId::Proxy, 10_000_000_000),
        (ViewId::Stats, 200_000_000),
        (ViewId::Stats, 10_000_000_000),
        (ViewId::Mask, 200_000_000),
    ] {
        app.view = view;
        app.tl.span = span;
        app.tl.follow = true;
        let n = 20;
        let t = Instant::now();
        for _ in 0..n {
            term.draw(|f| ncclprof_tui::ui::render(f, &app))
                .expect("draw");
        }
        let ms = t.elapsed().as_secs_f64() * 1e3 / f64::from(n);
        println!(
            "{:<12} window {:>8}: {:.2} ms/frame",
            view.title(),
            ncclprof_tui::model::units::dur(span),
            ms
        );
    }
}
