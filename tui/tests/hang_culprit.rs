//! A collective waits for every rank of its communicator: when some ranks hang in one, the
//! banner names the ranks that have not started it (the ones to look at), from every rank of
//! the communicator, not only the rows on screen.

mod common;

use common::*;
use ncclprof_shared::wire::encode;
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::store::Store;

/// The fixture's 6 AllReduces/AllGathers done on every rank, then AllReduce 6 in flight
/// (running 5 s) on `ranks`.
fn in_flight_on(ranks: &[i32]) -> Store {
    let f = Fixture::default();
    let mut st = store(&f);
    for &r in ranks {
        let bytes = encode(&hung_frame(&f, r)).expect("encode");
        ingest::apply_bytes(&mut st, r as u32 + 1, 100 + r as u32, &bytes);
    }
    st
}

fn banner(st: Store, height: u16) -> String {
    let mut app = ncclprof_tui::app::App::new(st, true, String::new());
    app.on_data();
    app.fit_all();
    let text = format!("{}", render(&app, 200, height).backend());
    text.lines()
        .find(|l| l.contains("HUNG:"))
        .unwrap_or_else(|| panic!("no hang banner:\n{text}"))
        .to_string()
}

#[test]
fn the_rank_that_has_not_started_the_collective_is_named() {
    let st = in_flight_on(&[0, 2, 3]);
    let rows = st.lane_rows(0);
    let h = st.hang_summary(0, &rows).expect("a hang");
    assert_eq!((h.ranks_in, h.ranks), (3, 4));
    assert_eq!(h.not_started.len(), 1, "{h:?}");
    let (rank, last) = h.not_started[0];
    assert_eq!(rank, 1);
    // Its last AllReduce is seq 4 (5 is an AllGather in the fixture: seq % 3 == 2).
    let f = Fixture::default();
    assert_eq!(last, Some((4, op_end(&f, 4))));
    let b = banner(st, 14);
    assert!(
        b.contains(
            "HUNG: AllReduce seq 6 waits for rank 1: not started there (its last seq 4 ended"
        ),
        "{b}"
    );
    assert!(
        b.contains("in flight on 3 of 4 ranks, running 5.00s"),
        "{b}"
    );
}

/// Every rank in it: no rank to name; the oldest hung op as before, with the count of the
/// others.
#[test]
fn when_every_rank_is_in_it_the_oldest_hung_op_is_named() {
    let st = in_flight_on(&[0, 1, 2, 3]);
    let h = st.hang_summary(0, &st.lane_rows(0)).expect("a hang");
    assert!(h.not_started.is_empty(), "{h:?}");
    assert_eq!((h.ranks_in, h.more), (4, 3));
    let b = banner(st, 14);
    assert!(
        b.contains("HUNG: rank 0 AllReduce seq 6 running 5.00s"),
        "{b}"
    );
    assert!(b.contains("(+3 more)"), "{b}");
}

/// A terminal too short to show rank 3's row still says it hangs (the banner used to be
/// built from the rows drawn).
#[test]
fn a_hung_rank_off_screen_is_in_the_banner() {
    let st = in_flight_on(&[3]);
    // 7 lines: tabs, axis, banner, two rank rows, status.
    let b = banner(st, 7);
    assert!(
        b.contains("HUNG: AllReduce seq 6 waits for ranks 0, 1, 2: not started there; in flight on 1 of 4 ranks"),
        "{b}"
    );
}
