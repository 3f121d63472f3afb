//! Edge cases of the timeline rows (sampling, the selected op) and of the snapshot's in-flight
//! summary, from a review of c20e16f and 4dbdc89.

mod common;

use common::*;
use ncclprof_tui::app::App;
use ncclprof_tui::model::query::OpKey;
use ncclprof_tui::ui::views::ViewId;
use ratatui::style::Modifier;

/// Cells of rank 0's row drawn as an op ('█' or '─') with the selected (reversed) style.
fn selected_cells(app: &App, w: u16, h: u16) -> usize {
    let t = render(app, w, h);
    let buf = t.backend().buffer();
    let text = format!("{}", t.backend());
    let y = text
        .lines()
        .position(|l| l.contains(" r0 "))
        .unwrap_or_else(|| panic!("{text}")) as u16;
    (0..w)
        .filter(|&x| {
            let c = &buf[(x, y)];
            (c.symbol() == "█" || c.symbol() == "─") && c.modifier.contains(Modifier::REVERSED)
        })
        .count()
}

fn lane0(app: &App) -> usize {
    app.store
        .lanes
        .iter()
        .position(|l| l.key.proc == 0 && l.key.rank == 0 && l.key.comm == 0)
        .expect("lane")
}

/// Many ops (sampling on): the selected op, not in the sampled set, is still drawn on top.
#[test]
fn review_selected_op_drawn_when_sampled_out() {
    let mut st = base_store();
    let t = T0 + 1_000 * MS;
    for i in 0..2_000u64 {
        let s = t + i * 50 * US;
        let r = coll(60_000 + i, s, s + 10 * US, s + US, s + 2 * US);
        ncclprof_tui::model::ingest::ingest_record(&mut st, 0, &r);
    }
    let mut app = App::new(st, true, String::new());
    app.on_data();
    app.tl.follow = false;
    app.tl.span = 100 * MS;
    app.tl.end = t + 100 * MS;
    app.tl.row = 99;
    let lane = lane0(&app);
    // op 5: starts 250 µs in, within the first drawn op's cell (1.16 ms): sampled out.
    let key = OpKey {
        lane,
        id: 60_005,
        start: t + 5 * 50 * US,
    };
    assert!(app.store.op(key).is_some());
    app.tl.selected = Some(key);
    assert!(selected_cells(&app, 100, 12) >= 1, "selected op not drawn");
}

/// The selected op lies wholly before the window (the user panned away): nothing of it
/// should be drawn, but it is drawn as one running cell at the window's left edge.
/// (Pre-existing: the old code had the same `max(a + 1)`.)
#[test]
fn review_selected_op_before_the_window_is_not_drawn() {
    let mut st = base_store();
    let t = T0 + 1_000 * MS;
    let r = coll(70_000, t, t + 10 * MS, t + MS, t + 2 * MS);
    ncclprof_tui::model::ingest::ingest_record(&mut st, 0, &r);
    let mut app = App::new(st, true, String::new());
    app.on_data();
    app.tl.follow = false;
    app.tl.span = 100 * MS;
    app.tl.end = t + 500 * MS; // window [t + 400 ms, t + 500 ms]
    app.tl.row = 99;
    let lane = lane0(&app);
    app.tl.selected = Some(OpKey {
        lane,
        id: 70_000,
        start: t,
    });
    assert_eq!(selected_cells(&app, 100, 12), 0, "drawn outside its time");
}

/// Odd ops (exec before start, after end, enqueue stop past end, zero length, ops at the
/// window's edges), many windows and widths: no panic in the timeline or stats.
#[test]
fn review_odd_ops_and_windows_do_not_panic() {
    let mut st = base_store();
    let t = T0 + 1_000 * MS;
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let mut rnd = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m.max(1)
    };
    for i in 0..3_000u64 {
        let s = t + rnd(200 * MS);
        let len = [0, 1, rnd(10 * MS), rnd(200 * MS)][rnd(4) as usize];
        let exec = [
            0,
            s,
            s + len,
            s + len + 5,
            s.saturating_sub(7),
            s + rnd(len + 1),
        ][rnd(6) as usize];
        let enq = [0, s, s + len + 9, s + rnd(len + 1)][rnd(4) as usize];
        let r = coll(80_000 + i, s, s + len, enq, exec);
        ncclprof_tui::model::ingest::ingest_record(&mut st, 0, &r);
    }
    let mut app = App::new(st, true, String::new());
    app.on_data();
    app.tl.follow = false;
    let lane = lane0(&app);
    let keys: Vec<OpKey> = app.store.lanes[lane]
        .ops
        .iter()
        .step_by(97)
        .map(|(_, o)| OpKey {
            lane,
            id: o.id,
            start: o.start,
        })
        .collect();
    for (k, span) in [1u64, 7, 1_000, MS, 10 * MS, 300 * MS, 10_000 * MS]
        .into_iter()
        .enumerate()
    {
        for end in [t, t + 1, t + 50 * MS, t + 200 * MS, t + 400 * MS] {
            app.tl.span = span;
            app.tl.end = end;
            app.tl.selected = keys.get(k).copied();
            for v in [ViewId::Timeline, ViewId::Stats] {
                app.view = v;
                for w in [19u16, 20, 23, 80, 200] {
                    render(&app, w, 12);
                }
            }
        }
    }
    for o in app.store.lanes[lane].ops.iter().map(|(_, o)| *o) {
        let _ = ncclprof_tui::ui::views::stats::exec_time(&o);
    }
}

/// The plugin lists at most 512 open ops (the oldest) with the total. If every listed op
/// completed since but others (unlisted) are still open, the snapshot drops the summary
/// altogether: `total` (here 599 still open) is lost.
#[test]
fn review_snapshot_keeps_the_total_when_all_listed_ops_completed() {
    let f = Fixture {
        hung: Some(2),
        ..Fixture::default()
    };
    let mut st = store(&f);
    let pi = st.procs.iter().position(|p| p.pid == 102).unwrap();
    let lane = st.lanes.iter().find(|l| l.key.proc == pi).unwrap();
    let (_, done) = lane.ops.iter().last().unwrap();
    let mut stale = st.procs[pi].open_ops[0].clone();
    (stale.id, stale.start, stale.seq) = (done.id, done.start, done.seq);
    st.procs[pi].open_ops = vec![stale];
    st.procs[pi].open_total = 600;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    ncclprof_tui::model::snapshot::write(&st, &path).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let p = v["otherData"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 102)
        .unwrap();
    assert_eq!(p["in_flight"]["total"], 599, "{}", p["in_flight"]);
}
