//! A collective waits for every rank of its communicator: when some ranks hang in one, the
//! banner says which ranks have not started it, judged over every rank of the communicator
//! (not only the rows on screen), and only on evidence (`HangSummary`): a rank whose process
//! is gone, whose in-flight summary is missing or cut, or whose state is otherwise not known
//! is never said to have not started it.

mod common;

use common::*;
use ncclprof_shared::wire::{Frame, InFlight, encode};
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::store::{ProcState, Store};

fn apply(st: &mut Store, r: i32, fr: &Frame) {
    let bytes = encode(fr).expect("encode");
    ingest::apply_bytes(st, r as u32 + 1, 100 + r as u32, &bytes);
}

/// Rank `r`'s summary with nothing in flight, as late as the hung ones' (5 s in).
fn idle(f: &Fixture, r: i32) -> Frame {
    Frame::InFlight(InFlight {
        at_ns: op_start(f, r, f.seqs) + 5_000 * MS,
        ops: Vec::new(),
        total: 0,
    })
}

/// The fixture's 6 collectives done on every rank (rank 3 late to each), then AllReduce 6 in
/// flight, running 5 s, on `ranks`; `idle` ranks report nothing in flight; the others
/// report nothing at all.
fn store_with(in_flight: &[i32], idle_ranks: &[i32]) -> Store {
    let f = Fixture::default();
    let mut st = store(&f);
    for &r in in_flight {
        apply(&mut st, r, &hung_frame(&f, r));
    }
    for &r in idle_ranks {
        apply(&mut st, r, &idle(&f, r));
    }
    st
}

fn banner(st: Store, height: u16) -> String {
    let mut app = ncclprof_tui::app::App::new(st, true, String::new());
    app.on_data();
    app.fit_all();
    let text = format!("{}", render(&app, 220, height).backend());
    text.lines()
        .find(|l| l.contains("HUNG:"))
        .unwrap_or_else(|| panic!("no hang banner:\n{text}"))
        .to_string()
}

fn summary(st: &Store) -> ncclprof_tui::model::query::HangSummary<'_> {
    st.hang_summary(0, &st.lane_rows(0)).expect("a hang")
}

#[test]
fn the_rank_that_has_not_started_the_collective_is_named() {
    let st = store_with(&[0, 2, 3], &[1]);
    let h = summary(&st);
    assert_eq!((h.ranks_in, h.ranks, h.unknown), (3, 4, 0));
    assert_eq!(h.not_started.len(), 1, "{h:?}");
    let n = &h.not_started[0];
    assert_eq!(n.rank, 1);
    // Its last AllReduce is seq 4 (5 is an AllGather in the fixture: seq % 3 == 2).
    assert_eq!(n.last, Some((4, op_end(&Fixture::default(), 4))));
    let b = banner(st, 14);
    assert!(
        b.contains(
            "HUNG: AllReduce seq 6 running 5.00s on 3 of 4 ranks; not started on rank 1 (its last seq 4 ended"
        ),
        "{b}"
    );
}

/// Every rank in it: no rank to name; the oldest hung op as before, with the count of the
/// others.
#[test]
fn when_every_rank_is_in_it_the_oldest_hung_op_is_named() {
    let st = store_with(&[0, 1, 2, 3], &[]);
    let h = summary(&st);
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
    let st = store_with(&[3], &[0, 1, 2]);
    // 7 lines: tabs, axis, banner, two rank rows, status.
    let b = banner(st, 7);
    assert!(
        b.contains(
            "HUNG: AllReduce seq 6 running 5.00s on 1 of 4 ranks; not started on ranks 0, 1, 2"
        ),
        "{b}"
    );
}

/// A rank with no in-flight summary since the hung op started (just attached, or its
/// process silent) is not known, and not named.
#[test]
fn a_rank_without_a_recent_summary_is_not_named() {
    let st = store_with(&[0, 2, 3], &[]);
    let h = summary(&st);
    assert!(h.not_started.is_empty(), "{h:?}");
    assert_eq!(h.unknown, 1);
    let b = banner(st, 14);
    assert!(!b.contains("not started on"), "{b}");
    assert!(
        b.contains("HUNG: rank 0 AllReduce seq 6 running 5.00s"),
        "{b}"
    );
}

/// A summary cut at the plugin's limit may have left the op out: not named.
#[test]
fn a_rank_whose_summary_was_cut_is_not_named() {
    let f = Fixture::default();
    let mut st = store_with(&[0, 2, 3], &[]);
    let cut = Frame::InFlight(InFlight {
        at_ns: op_start(&f, 1, f.seqs) + 5_000 * MS,
        ops: Vec::new(),
        total: 600,
    });
    apply(&mut st, 1, &cut);
    let h = summary(&st);
    assert!(h.not_started.is_empty(), "{h:?}");
    assert_eq!(h.unknown, 1);
}

/// The watchdog killed rank 1 while it was in the collective: its process is gone and its
/// in-flight list with it. Said as what it is, not as "not started".
#[test]
fn a_rank_whose_process_crashed_is_not_said_to_have_not_started() {
    let mut st = store_with(&[0, 1, 2, 3], &[]);
    let p = st
        .procs
        .iter()
        .position(|p| p.pid == 101)
        .expect("rank 1's process");
    st.procs[p].state = ProcState::Crashed;
    st.procs[p].open_ops.clear();
    let h = summary(&st);
    assert!(h.not_started.is_empty(), "{h:?}");
    assert_eq!(h.gone, vec![(1, "crashed".to_string())]);
    let b = banner(st, 14);
    assert!(!b.contains("not started on"), "{b}");
    assert!(b.contains("rank 1's process crashed"), "{b}");
}

/// Passed is told by seq, not by time: rank 1's AllReduce 6 ends (by its clock, or with its
/// end unknown) before the hung op's start, and it has passed it all the same; a rank in a
/// later AllReduce has passed it too.
#[test]
fn a_rank_that_ran_it_is_not_named_whatever_its_times() {
    let f = Fixture::default();
    let mut st = store_with(&[0, 2, 3], &[1]);
    let p = st
        .procs
        .iter()
        .position(|p| p.pid == 101)
        .expect("rank 1's process");
    let mut done = coll(f.seqs, T0, T0 + MS, T0 + US, T0 + 2 * US);
    done.rank = 1;
    ingest::ingest_record(&mut st, p, &done);
    assert!(summary(&st).not_started.is_empty(), "{:?}", summary(&st));

    let mut st = store_with(&[0, 2, 3], &[]);
    let mut later = hung_frame(&f, 1);
    if let Frame::InFlight(i) = &mut later {
        i.ops[0].seq = f.seqs + 1;
    }
    apply(&mut st, 1, &later);
    let h = summary(&st);
    assert!(h.not_started.is_empty() && h.unknown == 0, "{h:?}");
}

/// A rank whose process captures no collectives (profiling stopped, Coll masked off) or has
/// lost records has no evidence to give: not named.
#[test]
fn a_rank_not_capturing_collectives_or_losing_records_is_not_named() {
    let mut st = store_with(&[0, 2, 3], &[1]);
    let ack = Frame::MaskAck(ncclprof_shared::wire::MaskAck {
        mask: 0,
        active: false,
        requested: 0,
    });
    apply(&mut st, 1, &ack);
    let h = summary(&st);
    assert!(h.not_started.is_empty(), "{h:?}");
    assert_eq!(h.unknown, 1);

    let f = Fixture {
        drops: 10,
        ..Fixture::default()
    };
    let mut st = store(&f);
    for r in [0, 2, 3] {
        apply(&mut st, r, &hung_frame(&f, r));
    }
    apply(&mut st, 1, &idle(&f, 1)); // the fixture's drops are rank 1's
    let h = summary(&st);
    assert!(h.not_started.is_empty(), "{h:?}");
    assert_eq!(h.unknown, 1);
}

/// A named rank busy in a Send says its peer, not the peer packed in the op's seq field.
#[test]
fn a_named_rank_busy_in_a_send_shows_its_peer() {
    let f = Fixture::default();
    let mut st = store_with(&[0, 2, 3], &[]);
    let mut send = hung_frame(&f, 1);
    if let Frame::InFlight(i) = &mut send {
        let o = &mut i.ops[0];
        o.kind = ncclprof_shared::kind::EventKind::P2p as u8;
        o.seq = 2 | (4 << 32); // peer 2, 4 channels
        o.exec_start_ns = 0;
        o.start_ns += 10 * MS; // newer than the hung AllReduce
    }
    apply(&mut st, 1, &send);
    let h = summary(&st);
    assert_eq!(h.not_started.len(), 1, "{h:?}");
    let b = banner(st, 14);
    assert!(
        b.contains("not started on rank 1 (in AllReduce peer 2)"),
        "{b}"
    );
}

/// The screen of `view` over `st`, its window `span` ending `after` past the hung ops'
/// summaries (after the data: nothing ends in it).
fn view_text(st: Store, view: ncclprof_tui::ui::views::ViewId, after: Option<u64>) -> String {
    view_text_w(st, view, after, 200)
}

/// [`view_text`] `width` columns wide.
fn view_text_w(
    st: Store,
    view: ncclprof_tui::ui::views::ViewId,
    after: Option<u64>,
    width: u16,
) -> String {
    let mut app = ncclprof_tui::app::App::new(st, true, String::new());
    app.on_data();
    app.fit_all();
    if let Some(after) = after {
        app.tl.span = 200 * MS;
        app.tl.end = app.store.t_now + after;
    }
    app.view = view;
    format!("{}", render(&app, width, 30).backend())
}

/// During a hang nothing ends, so the Channels and Proxy views, which show what ended in the
/// window, are empty just when the user comes to ask which channel is stuck: under both, how
/// far each hung rank got (its oldest open step, kernels ended, proxy steps done per
/// channel, the channels behind) and which rank has not started, from the in-flight summaries; and the empty view
/// says the job is hung, not that the events may be off in the mask.
#[test]
fn channels_and_proxy_views_show_how_far_the_hung_ranks_got() {
    use ncclprof_tui::ui::views::ViewId;
    for view in [ViewId::Channels, ViewId::Proxy] {
        for after in [None, Some(10 * MS)] {
            let text = view_text(store_with(&[0, 2, 3], &[1]), view, after);
            let has = |s: &str| text.lines().any(|l| l.contains(s));
            assert!(has("hung, still in flight"), "{view:?}:\n{text}");
            for r in [0, 2, 3] {
                assert!(
                    has(&format!(
                        "r{r}   AllReduce seq 6 · running 5.00s · oldest open step: ch 1 step 0 \
                         in RecvWait, waiting for network data (4.00s) · kernels ended 1/4 · \
                         behind: ch 1, 2, 3 (0 steps, others up to 1) · "
                    )),
                    "{view:?} rank {r}:\n{text}"
                );
            }
            assert!(
                has("r1   has not started AllReduce seq 6 (its last, seq 4, ended"),
                "{view:?}:\n{text}"
            );
            // (The per-channel list comes last: at 200 columns it is cut, the verdicts not.)
            let wide = view_text_w(store_with(&[0, 2, 3], &[1]), view, after, 260);
            assert!(
                wide.contains("(0 steps, others up to 1) · steps done per channel: 1 0 0 0"),
                "{view:?}:\n{wide}"
            );
            // Nothing in a window after the data: the hang is why.
            assert_eq!(
                has("event ended in the window: the job is hung"),
                after.is_some(),
                "{view:?}:\n{text}"
            );
            assert!(!text.contains("off in the mask"), "{text}");
        }
    }
    // No hang: no block, and an empty window is just empty.
    let text = view_text(store_with(&[], &[]), ViewId::Channels, Some(10 * MS));
    assert!(!text.contains("hung"), "{text}");
    assert!(text.contains("no KernelCh events here"), "{text}");
}

/// An empty Channels view blames the mask only when a live process has KernelCh off.
#[test]
fn an_empty_channels_view_names_the_mask_only_when_kernel_ch_is_off() {
    use ncclprof_shared::kind::EventKind;
    let mut st = store_with(&[], &[]);
    let mask = ncclprof_shared::mask::DEFAULT & !EventKind::KernelCh.bit();
    let ack = Frame::MaskAck(ncclprof_shared::wire::MaskAck {
        mask,
        active: true,
        requested: mask,
    });
    apply(&mut st, 2, &ack);
    let text = view_text(st, ncclprof_tui::ui::views::ViewId::Channels, Some(10 * MS));
    assert!(
        text.contains("no KernelCh events here: KernelCh is off in the mask (view 5 turns it on)"),
        "{text}"
    );
}

/// A hung send/recv: its line names its peer and its steps done in all (its channels are
/// not 0..n: NCCL spreads them by peer, so none is said to be behind); a collective whose
/// steps came as one sum (a snapshot written before they were kept per channel) likewise.
#[test]
fn hung_p2p_and_summed_steps_are_told_in_all() {
    use ncclprof_tui::ui::views::ViewId;
    let f = Fixture::default();
    let mut st = store_with(&[], &[]);
    for r in 0..4 {
        let mut fr = hung_frame(&f, r);
        if let Frame::InFlight(i) = &mut fr {
            let o = &mut i.ops[0];
            if r < 3 {
                o.kind = ncclprof_shared::kind::EventKind::P2p as u8;
                o.seq = 5; // its peer
                o.steps_done = vec![0, 0, 2, 1];
                o.n_channels = 2;
            } else {
                o.steps_done = vec![48];
            }
        }
        apply(&mut st, r, &fr);
    }
    let text = view_text(st, ViewId::Channels, Some(10 * MS));
    for r in 0..3 {
        assert!(
            text.contains(&format!(
                "r{r}   AllReduce peer 5 · running 5.00s · oldest open step: ch 1 step 0 in RecvWait, waiting for network data (4.00s) · kernels ended 1/2 · steps done: 3"
            )),
            "rank {r}:\n{text}"
        );
    }
    assert!(
        text.contains("r3   AllReduce seq 6 · running 5.00s · oldest open step: ch 1 step 0 in RecvWait, waiting for network data (4.00s) · kernels ended 1/4 · steps done: 48"),
        "{text}"
    );
    assert!(!text.contains("behind"), "{text}");
}

/// The block in terminals of every height: no panic, and what it draws stays inside it (the
/// view above is drawn first, into its own rows).
#[test]
fn the_hung_block_fits_any_height() {
    use ncclprof_tui::ui::views::ViewId;
    for view in [ViewId::Channels, ViewId::Proxy] {
        for h in 1..16 {
            let mut app =
                ncclprof_tui::app::App::new(store_with(&[0, 2, 3], &[1]), true, String::new());
            app.on_data();
            app.fit_all();
            app.view = view;
            let text = format!("{}", render(&app, 120, h).backend());
            // Rows for the block once there are 4 for the view's body: its heading whole.
            if h >= 7 {
                assert!(
                    text.contains("hung, still in flight (the plugins' latest summaries):"),
                    "{view:?} {h}:\n{text}"
                );
            }
            assert!(
                !text
                    .lines()
                    .any(|l| l.contains("procs 4 live/4 · drops 0") && l.contains('█')),
                "{view:?} {h}:\n{text}"
            );
        }
    }
}

/// A hung collective with no proxy step reported (intra-node transports, or ProxyStep off)
/// says so, rather than "0 steps done".
#[test]
fn a_hung_collective_without_steps_says_none_were_reported() {
    let f = Fixture::default();
    let mut st = store_with(&[0, 1, 2], &[]);
    let mut fr = hung_frame(&f, 3);
    if let Frame::InFlight(i) = &mut fr {
        i.ops[0].steps_done.clear();
    }
    apply(&mut st, 3, &fr);
    let text = view_text(st, ncclprof_tui::ui::views::ViewId::Proxy, Some(10 * MS));
    assert!(
        text.contains(
            "r3   AllReduce seq 6 · running 5.00s · oldest open step: ch 1 step 0 in RecvWait, waiting for network data (4.00s) · kernels ended 1/4 · no proxy steps reported"
        ),
        "{text}"
    );
}

/// A job has several communicators (data, tensor, pipeline parallel): when the one on screen
/// is not the one hung, its ranks merely look idle, so the header points to the hung one.
#[test]
fn the_header_points_to_a_hang_in_another_communicator() {
    use ncclprof_shared::wire::{CommInfo, Meta};
    let f = Fixture::default();
    let mut st = store_with(&[0, 1, 2, 3], &[]);
    for r in 0..f.ranks {
        let comm = |index: u32, comm_hash: u64, name: &str| CommInfo {
            index,
            comm_hash,
            name: name.into(),
            nranks: f.ranks,
            nnodes: 1,
            rank: r,
            api_version: 6,
            finalized: false,
        };
        let meta = Frame::Meta(Meta {
            comms: vec![comm(0, HASH, "world"), comm(1, HASH + 1, "tp")],
            strings: Vec::new(),
        });
        apply(&mut st, r, &meta);
    }
    assert_eq!(st.comms.len(), 2);
    assert_eq!(st.hung_comms(), vec![0]);
    let header = |st: &Store, comm: usize| {
        let mut app = ncclprof_tui::app::App::new(st.clone(), true, String::new());
        app.on_data();
        app.comm = comm;
        let text = format!("{}", render(&app, 160, 10).backend());
        text.lines().next().unwrap().to_string()
    };
    let on_tp = header(&st, 1);
    assert!(on_tp.contains("comm tp (2/2)"), "{on_tp}");
    assert!(
        on_tp.contains("⚠ HUNG in comm world (1/2) (press c)"),
        "{on_tp}"
    );
    let on_world = header(&st, 0);
    assert!(!on_world.contains("HUNG in comm"), "{on_world}");
    // Nothing hung: nothing said.
    let idle = store_with(&[], &[]);
    assert!(idle.hung_comms().is_empty());
}

/// The window fitted to the completed ops (as an opened snapshot is): rank 2's hung op was
/// enqueued while its last completed one ran, so the tag at the window's edge lies over that
/// op's bar, and must read whole (the completed ops were drawn after it, '███UNG').
#[test]
fn a_hung_tag_over_completed_ops_reads_whole() {
    let f = Fixture::default();
    let mut st = store(&f);
    let mut fr = hung_frame(&f, 2);
    if let Frame::InFlight(i) = &mut fr {
        // Enqueued 1 ms into its last completed op (seq 5), which ends 2 ms later.
        i.ops[0].start_ns = op_start(&f, 2, f.seqs - 1) + MS;
        i.ops[0].exec_start_ns = 0;
    }
    apply(&mut st, 2, &fr);
    let mut app = ncclprof_tui::app::App::new(st, true, String::new());
    app.on_data();
    app.fit_all();
    let text = format!("{}", render(&app, 100, 12).backend());
    let r2 = text
        .lines()
        .find(|l| l.contains(" r2 "))
        .unwrap_or_else(|| panic!("no row r2:\n{text}"));
    assert!(r2.contains(" HUNG "), "{text}");
}
