//! Hang verdicts on a deep queue, the case a real job showed (BENCHMARKS.md §7): PyTorch
//! enqueues 200 all-reduces at once and the GPU runs them one after another, 7 ms each. Timed
//! from their starts they read 0.7 s on average, so a 10× median put the verdict at 7 s; and
//! an op at the back of a draining queue has been in flight 1.4 s without anything wrong.

mod common;

use common::*;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::wire::{Frame, InFlight, OpenOp, encode};
use ncclprof_tui::app::App;
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::query::OpenView;
use ncclprof_tui::model::store::Store;

const RUN: u64 = 7 * MS;

/// Rank 0's store with `done` all-reduces enqueued at `t` (1 µs apart) and run back to back
/// from `t` (op i ends at `t + (i + 1) × 7 ms`), then an in-flight summary at `at` listing
/// `open` more, enqueued with them.
fn deep_queue(t: u64, done: u64, open: u64, at: u64) -> Store {
    let mut st = base_store();
    for i in 0..done {
        let id = 100_000 + i;
        let r = coll(
            id,
            t + i * US,
            t + (i + 1) * RUN,
            t + i * US + US,
            t + i * RUN,
        );
        ingest::ingest_record(&mut st, 0, &r);
    }
    let ops = (done..done + open)
        .map(|i| OpenOp {
            comm: 0,
            rank: 0,
            kind: EventKind::Coll as u8,
            id: 100_000 + i,
            seq: 100_000 + i,
            func: ALLREDUCE,
            start_ns: t + i * US,
            steps_done: vec![0, 0],
            channels_done: 0,
            n_channels: 2,
        })
        .collect();
    let f = Frame::InFlight(InFlight {
        at_ns: at,
        ops,
        total: open as u32,
    });
    ingest::apply_bytes(&mut st, 1, 100, &encode(&f).expect("encode"));
    st
}

fn open_of_rank0(st: &Store) -> Vec<OpenView> {
    let rows = st.lane_rows(0);
    let row = rows.iter().find(|r| r.rank == 0).expect("rank 0 row");
    st.open_ops(0, row)
}

fn timeline_text(st: Store) -> String {
    let mut app = App::new(st, true, String::new());
    app.on_data();
    app.fit_all();
    format!("{}", render(&app, 160, 14).backend())
}

/// The op at the head of the queue stops for 1.2 s after 200 ran in 1.4 s: hung (its peers
/// run 7 ms, and the 1 s floor has passed). The two behind it wait for it: not hung.
#[test]
fn the_head_of_a_deep_queue_is_hung_after_ten_run_times() {
    let t = T0 + 1_000 * MS;
    let st = deep_queue(t, 200, 3, t + 200 * RUN + 1_200 * MS);
    let open = open_of_rank0(&st);
    assert_eq!(open.len(), 3, "{open:?}");
    let med = open[0].peer_median.expect("peers");
    assert!((RUN - 100 * US..=RUN).contains(&med), "median run {med}");
    assert_eq!(open[0].row.seq, 100_200);
    assert_eq!(open[0].head_ns, Some(1_200 * MS));
    assert!(open[0].age_ns > 2_590 * MS, "{}", open[0].age_ns);
    assert!(open[0].hung, "{:?}", open[0]);
    for o in &open[1..] {
        assert_eq!(o.head_ns, None, "{o:?}");
        assert!(!o.hung, "{o:?}");
    }
    let text = timeline_text(st);
    assert!(
        text.contains("HUNG: rank 0 AllReduce seq 100200 stuck 1.20s at the head of its queue"),
        "{text}"
    );
    assert!(text.contains("enqueued 2.60s ago"), "{text}");
    assert!(!text.contains("(+"), "only the head is hung: {text}");
}

/// Half the queue has run (1.4 s) and the next op has been at the head for 3 ms: nothing is
/// hung, though 200 ops have been in flight for over a second, ten times their run time.
#[test]
fn a_deep_queue_draining_at_its_pace_is_not_hung() {
    let t = T0 + 1_000 * MS;
    let st = deep_queue(t, 200, 200, t + 200 * RUN + 3 * MS);
    let open = open_of_rank0(&st);
    assert_eq!(open.len(), 200);
    assert_eq!(open[0].head_ns, Some(3 * MS));
    assert!(open.iter().all(|o| o.age_ns > 1_390 * MS));
    assert!(open.iter().all(|o| !o.hung), "{:?}", open[0]);
    assert!(!timeline_text(st).contains("HUNG"));
}

/// Nothing completed on the lane yet (a viewer attached mid-hang): the head counts from its
/// start, and without peers it is hung after 5 s.
#[test]
fn without_a_completed_op_the_head_counts_from_its_start() {
    let t = T0 + 1_000 * MS;
    let mut st = Store::new(1 << 30);
    for fr in frames(
        &Fixture {
            seqs: 0,
            ..Fixture::default()
        },
        0,
    ) {
        ingest::apply_bytes(&mut st, 1, 100, &encode(&fr).expect("encode"));
    }
    let f = Frame::InFlight(InFlight {
        at_ns: t + 5_100 * MS,
        ops: vec![OpenOp {
            comm: 0,
            rank: 0,
            kind: EventKind::Coll as u8,
            id: 7,
            seq: 7,
            func: ALLREDUCE,
            start_ns: t,
            steps_done: vec![],
            channels_done: 0,
            n_channels: 2,
        }],
        total: 1,
    });
    ingest::apply_bytes(&mut st, 1, 100, &encode(&f).expect("encode"));
    let open = open_of_rank0(&st);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].peer_median, None);
    assert_eq!(open[0].head_ns, Some(5_100 * MS));
    assert!(open[0].hung);
}
