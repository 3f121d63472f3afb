//! Hang verdicts where an op's time in flight is mostly waiting, the cases a real job shows
//! (BENCHMARKS.md §7): PyTorch enqueues ahead, so 200 all-reduces queued at once ran one
//! after another, 7 ms each, and read 0.7 s on average from their starts (a 10× median put
//! the verdict at 7 s); and in a training step each collective waits behind the compute
//! kernels before it on the stream. An op that started to run is timed from then against
//! its peers' run times; one that has not is timed from its start against their times from
//! start to end, and only the oldest of a lane (the others wait behind it).

mod common;

use common::*;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::wire::{Frame, InFlight, OpenOp, encode};
use ncclprof_tui::app::App;
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::query::OpenView;
use ncclprof_tui::model::store::Store;

const RUN: u64 = 7 * MS;

fn open_op(seq: u64, start: u64, exec: u64) -> OpenOp {
    OpenOp {
        comm: 0,
        rank: 0,
        kind: EventKind::Coll as u8,
        id: 100_000 + seq,
        seq: 100_000 + seq,
        func: ALLREDUCE,
        start_ns: start,
        exec_start_ns: exec,
        steps_done: vec![0, 0],
        channels_done: 0,
        n_channels: 2,
        oldest_step: None,
    }
}

fn summary(st: &mut Store, at_ns: u64, ops: Vec<OpenOp>) {
    let total = ops.len() as u32;
    let f = Frame::InFlight(InFlight { at_ns, ops, total });
    ingest::apply_bytes(st, 1, 100, &encode(&f).expect("encode"));
}

/// Rank 0's store with all-reduces `done` enqueued at `t` (1 µs apart) and run back to back
/// from `t` (op i runs from `t + i × 7 ms` to `t + (i + 1) × 7 ms`).
fn deep_queue(t: u64, done: std::ops::Range<u64>) -> Store {
    let mut st = base_store();
    for i in done {
        let r = coll(
            100_000 + i,
            t + i * US,
            t + (i + 1) * RUN,
            t + i * US + US,
            t + i * RUN,
        );
        ingest::ingest_record(&mut st, 0, &r);
    }
    st
}

fn open_of_rank0(st: &Store) -> Vec<OpenView<'_>> {
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

/// The op at the head of the queue, running since the one before it ended, stops for 1.2 s
/// after 200 ran in 1.4 s: hung (its peers run 7 ms, and the 1 s floor has passed). The two
/// behind it have not started: not hung, though enqueued 2.6 s ago.
#[test]
fn the_running_head_of_a_deep_queue_is_hung_after_ten_run_times() {
    let t = T0 + 1_000 * MS;
    let mut st = deep_queue(t, 0..200);
    let ops = vec![
        open_op(200, t + 200 * US, t + 200 * RUN),
        open_op(201, t + 201 * US, 0),
        open_op(202, t + 202 * US, 0),
    ];
    summary(&mut st, t + 200 * RUN + 1_200 * MS, ops);
    let open = open_of_rank0(&st);
    assert_eq!(open.len(), 3, "{open:?}");
    let med = open[0].peer_median.expect("peers");
    assert!((RUN - 100 * US..=RUN).contains(&med), "median run {med}");
    assert_eq!(open[0].row.seq, 100_200);
    assert_eq!(open[0].running_ns, Some(1_200 * MS));
    assert!(open[0].age_ns > 2_590 * MS, "{}", open[0].age_ns);
    assert!(open[0].hung, "{:?}", open[0]);
    for o in &open[1..] {
        assert_eq!(o.running_ns, None, "{o:?}");
        assert!(!o.hung, "{o:?}");
    }
    let text = timeline_text(st.clone());
    assert!(
        text.contains("HUNG: rank 0 AllReduce seq 100200 running 1.20s (peers' median run"),
        "{text}"
    );
    assert!(text.contains("enqueued 2.60s ago"), "{text}");
    assert!(!text.contains("(+"), "only the running op is hung: {text}");
    // Following live, the last second: its bar and tag show on rank 0's row, over the bars
    // of the two queued behind it.
    let mut app = App::new(st, true, String::new());
    app.on_data();
    app.tl.follow = true;
    app.tl.span = 1_000 * MS;
    let text = format!("{}", render(&app, 160, 14).backend());
    let row = text
        .lines()
        .find(|l| l.contains(" r0 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("▓ HUNG "), "{row}");
    assert!(
        !row.contains('▒'),
        "queued ops hidden behind the running one: {row}"
    );
}

/// Half the queue has run (1.4 s) and the next op has run 3 ms: nothing is hung, though 200
/// ops have been in flight for over a second, 200 times their run time.
#[test]
fn a_deep_queue_draining_at_its_pace_is_not_hung() {
    let t = T0 + 1_000 * MS;
    let mut st = deep_queue(t, 0..200);
    let ops = (200..400)
        .map(|i| open_op(i, t + i * US, if i == 200 { t + 200 * RUN } else { 0 }))
        .collect();
    summary(&mut st, t + 200 * RUN + 3 * MS, ops);
    let open = open_of_rank0(&st);
    assert_eq!(open.len(), 200);
    assert_eq!(open[0].running_ns, Some(3 * MS));
    assert!(open.iter().all(|o| o.age_ns > 1_390 * MS));
    assert!(open.iter().all(|o| !o.hung), "{:?}", open[0]);
    assert!(!timeline_text(st).contains("HUNG"));
}

/// The viewer lost the records of 150 ops before the head (dropped, or not yet received):
/// the head's own execution start still says it has run 3 ms. (From a review: timed from
/// the last completion the viewer had, it read 1.05 s and was called hung.)
#[test]
fn missing_completions_before_the_head_do_not_make_it_hung() {
    let t = T0 + 1_000 * MS;
    let mut st = deep_queue(t, 0..50);
    let ops = (200..203)
        .map(|i| open_op(i, t + i * US, if i == 200 { t + 200 * RUN } else { 0 }))
        .collect();
    summary(&mut st, t + 200 * RUN + 3 * MS, ops);
    let open = open_of_rank0(&st);
    assert!(open.iter().all(|o| !o.hung), "{:?}", open[0]);
}

/// Each all-reduce waits 1.5 s behind the compute before it on the stream, then runs 5 ms.
/// The next one, 1.2 s in and not started, waits like its peers did: not hung. Still not
/// started 16 s in, ten times its peers' 1.5 s: hung, and the banner says it never started.
/// (From a review: timed against run times alone, it was called hung at 1.2 s.)
#[test]
fn an_op_waiting_behind_compute_like_its_peers_is_not_hung() {
    let t = T0 + 1_000 * MS;
    let mut st = base_store();
    for i in 0..10 {
        let (s, exec) = (t + i * 2_000 * MS, t + i * 2_000 * MS + 1_500 * MS);
        ingest::ingest_record(&mut st, 0, &coll(200 + i, s, exec + 5 * MS, s + US, exec));
    }
    let start = t + 20_000 * MS;
    summary(&mut st, start + 1_200 * MS, vec![open_op(10, start, 0)]);
    let open = open_of_rank0(&st);
    assert_eq!(open[0].running_ns, None);
    assert!(!open[0].hung, "{:?}", open[0]);
    summary(&mut st, start + 16_000 * MS, vec![open_op(10, start, 0)]);
    let open = open_of_rank0(&st);
    assert!(open[0].hung, "{:?}", open[0]);
    assert!(
        open[0]
            .peer_median
            .is_some_and(|m| m > 1_500 * MS && m < 1_600 * MS),
        "{:?}",
        open[0]
    );
    let text = timeline_text(st);
    assert!(
        text.contains("HUNG: rank 0 AllReduce seq 100010 in flight 16.00s, not started"),
        "{text}"
    );
}

/// Nothing completed yet (a viewer attached mid-hang): without peers, an op is hung 5 s in,
/// from its execution start if it has one, else from its start.
#[test]
fn without_a_completed_op_the_verdict_waits_five_seconds() {
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
    for (exec, at, hung) in [
        (0, 4_900, false),
        (0, 5_100, true),
        (t + 500 * MS, 5_100, false),
        (t + 500 * MS, 5_600, true),
    ] {
        summary(&mut st, t + at * MS, vec![open_op(7, t, exec)]);
        let open = open_of_rank0(&st);
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].peer_median, None);
        assert_eq!(open[0].hung, hung, "exec {exec} at {at} ms: {:?}", open[0]);
    }
}
