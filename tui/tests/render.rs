//! Render tests: every view and the edge screens, on TestBackend, snapshotted with insta.

mod common;

use common::*;
use ncclprof_tui::action::Action;
use ncclprof_tui::app::App;
use ncclprof_tui::model::store::{ProcState, Store};
use ncclprof_tui::ui::views::ViewId;

fn snap(name: &str, app: &App, w: u16, h: u16) {
    let t = render(app, w, h);
    insta::assert_snapshot!(name, t.backend());
}

/// A viewer with nothing yet, watching what `watched` says.
fn waiting(watched: &str) -> App {
    App::new(Store::new(1 << 30), true, watched.into())
}

#[test]
fn empty_waiting_for_processes() {
    snap(
        "empty_80x24",
        &waiting("directory /tmp/ncclprof-test"),
        80,
        24,
    );
}

/// Without --dir: the viewer's own default and the others, one per line, within 80 columns
/// for a 6-digit uid.
#[test]
fn empty_waiting_names_every_watched_directory() {
    let app = waiting("directory /run/user/123456/ncclprof\nand /tmp/ncclprof-123456 if present");
    snap("empty_defaults_80x24", &app, 80, 24);
}

#[test]
fn timeline_fitted_80x24() {
    let app = app(&Fixture::default());
    snap("timeline_80x24", &app, 80, 24);
}

#[test]
fn timeline_zoomed_with_selected_op_160x48() {
    let mut app = app(&Fixture::default());
    // Zoom on seq 1.
    app.tl.span = 8 * MS;
    app.tl.end = T0 + 10 * MS + 6 * MS;
    app.tl.row = 3;
    app.update(Action::PickOp);
    assert!(app.tl.selected.is_some());
    snap("timeline_selected_160x48", &app, 160, 48);
}

#[test]
fn timeline_hung_op_flagged() {
    let f = Fixture {
        hung: Some(2),
        ..Fixture::default()
    };
    let mut app = app(&f);
    app.tl.span = 8_000 * MS;
    app.tl.end = app.store.t_now + 500 * MS;
    let t = render(&app, 100, 20);
    let text = format!("{}", t.backend());
    assert!(text.contains("HUNG"), "{text}");
    insta::assert_snapshot!("timeline_hung", t.backend());
}

/// 20 all-reduces enqueued at once and run one after the other, 10 ms each (PyTorch enqueues
/// ahead; a real 3-rank job looked like this): the timeline shows the rank running through
/// the whole 200 ms, and the stats time each by its run, not its wait. Drawn by start, one
/// per cell, all but the first vanished; timed from their start, they read 100 ms each.
#[test]
fn queued_ops_show_where_they_ran_and_are_timed_by_their_run() {
    let mut st = base_store();
    let t = T0 + 1_000 * MS;
    for i in 0..20u64 {
        let r = coll(
            50_000 + i,
            t,
            t + (i + 1) * 10 * MS,
            t + 1_000,
            t + i * 10 * MS + 1,
        );
        ncclprof_tui::model::ingest::ingest_record(&mut st, 0, &r);
    }
    let mut app = App::new(st, true, String::new());
    app.on_data();
    app.tl.span = 400 * MS;
    app.tl.end = t + 300 * MS;
    let text = format!("{}", render(&app, 100, 12).backend());
    let row = text
        .lines()
        .find(|l| l.contains(" r0 "))
        .unwrap_or_else(|| panic!("{text}"));
    // The 200 ms of runs are half of the 400 ms window: about 43 of the 86 cells.
    let running = row.matches('█').count();
    assert!(running >= 40, "{running} cells running:\n{text}");
    let (rows, _) = ncclprof_tui::ui::views::stats::rows_sampled(&app);
    let r = rows.iter().find(|r| r.count == 20).expect("the 20 ops");
    assert!(r.p50 > 9 * MS && r.p50 <= 10 * MS, "p50 {} ms", r.p50 / MS);
}

#[test]
fn timeline_many_ranks_80x24() {
    let f = Fixture {
        ranks: 32,
        seqs: 3,
        steps: false,
        ..Fixture::default()
    };
    let mut app = app(&f);
    app.tl.row = 25;
    snap("timeline_32_ranks_80x24", &app, 80, 24);
}

#[test]
fn channels_window_and_selected_op() {
    let mut app = app(&Fixture::default());
    app.view = ViewId::Channels;
    snap("channels_window", &app, 100, 30);
    app.tl.row = 0;
    app.update(Action::PickOp);
    snap("channels_selected", &app, 100, 30);
}

#[test]
fn proxy_breakdown_names_bottleneck() {
    let mut app = app(&Fixture::default());
    app.view = ViewId::Proxy;
    let t = render(&app, 120, 30);
    let text = format!("{}", t.backend());
    assert!(text.contains("bottleneck: network"), "{text}");
    insta::assert_snapshot!("proxy", t.backend());
}

#[test]
fn stats_table() {
    let mut app = app(&Fixture::default());
    app.view = ViewId::Stats;
    snap("stats", &app, 120, 20);
}

#[test]
fn mask_pending_vs_acknowledged_with_drops() {
    let f = Fixture {
        drops: 17,
        ..Fixture::default()
    };
    let mut app = app(&f);
    app.view = ViewId::Mask;
    app.mask.proc = 1;
    app.mask.cursor = 5;
    let fx = app.update(Action::MaskToggle); // ProxyCtrl on, not acknowledged yet
    assert_eq!(fx.len(), 1);
    snap("mask_drops", &app, 120, 24);
}

#[test]
fn help_overlay() {
    let mut app = app(&Fixture::default());
    app.update(Action::ToggleHelp);
    snap("help_100x40", &app, 100, 40);
    snap("help_80x24", &app, 80, 24);
}

#[test]
fn crashed_process_and_snapshot_failure() {
    let mut app = app(&Fixture::default());
    app.store.procs[2].state = ProcState::Crashed;
    app.snapshot_done(Err(
        "cannot create a file in /nope: Permission denied".into()
    ));
    snap("crashed_snapshot_failed", &app, 120, 16);
    app.snapshot_done(Ok("ncclprof-20260101-000000.json".into()));
    let t = render(&app, 200, 16);
    assert!(format!("{}", t.backend()).contains("snapshot ncclprof-20260101-000000.json"));
}

#[test]
fn filter_hides_other_functions() {
    let mut app = app(&Fixture::default());
    app.update(Action::StartFilter);
    for c in "allgather".chars() {
        app.filter_key(ratatui::crossterm::event::KeyCode::Char(c));
    }
    app.filter_key(ratatui::crossterm::event::KeyCode::Enter);
    assert_eq!(app.filter, "allgather");
    app.view = ViewId::Stats;
    let t = render(&app, 120, 12);
    let text = format!("{}", t.backend());
    assert!(
        text.contains("AllGather") && !text.contains("AllReduce "),
        "{text}"
    );
}

/// The straggler banner counts the collectives the `/` filter shows, as the timeline draws
/// them: rank 3 is late to all six ops of the fixture, two of them AllGathers.
#[test]
fn the_straggler_banner_counts_only_filtered_functions() {
    let mut app = app(&Fixture::default());
    let text = format!("{}", render(&app, 120, 12).backend());
    assert!(text.contains("rank 3 was last at 6 of 6 late"), "{text}");
    app.update(Action::StartFilter);
    for c in "ALLGATHER".chars() {
        app.filter_key(ratatui::crossterm::event::KeyCode::Char(c));
    }
    app.filter_key(ratatui::crossterm::event::KeyCode::Enter);
    let text = format!("{}", render(&app, 120, 12).backend());
    assert!(text.contains("rank 3 was last at 2 of 2 late"), "{text}");
}

#[test]
fn malformed_frame_is_shown() {
    let mut app = app(&Fixture::default());
    // A header of this protocol version (u16 little-endian after the magic), kind 99.
    let mut bytes = b"NCPF\x00\x00\x63\x00\x00\x00\x00\x00\x00\x00\x00\x00".to_vec();
    bytes[4] = ncclprof_shared::PROTOCOL_VERSION as u8;
    ncclprof_tui::model::ingest::apply_bytes(&mut app.store, 1, 100, &bytes);
    let t = render(&app, 100, 12);
    let text = format!("{}", t.backend());
    assert!(text.contains("unknown frame kind 99"), "{text}");
}

#[test]
fn no_color_keeps_meaning_without_colours() {
    let f = Fixture {
        hung: Some(2),
        drops: 5,
        ..Fixture::default()
    };
    let mut app = app(&f);
    app.no_color = true;
    app.tl.span = 8_000 * MS;
    app.tl.end = app.store.t_now + 500 * MS;
    let t = render(&app, 100, 20);
    let buf = t.backend().buffer();
    for c in buf.content() {
        assert_eq!(
            c.fg,
            ratatui::style::Color::Reset,
            "colour used with NO_COLOR"
        );
    }
    let text = format!("{}", t.backend());
    assert!(text.contains("HUNG") && text.contains("drops 5"));
    // With colour, the hung op is red.
    app.no_color = false;
    let t = render(&app, 100, 20);
    let red = t
        .backend()
        .buffer()
        .content()
        .iter()
        .any(|c| c.symbol() == "▓" && c.fg == ratatui::style::Color::Red);
    assert!(red);
}

#[test]
fn cli_help_texts() {
    use clap::CommandFactory;
    let mut cmd = ncclprof_tui::cli::Cli::command().term_width(100);
    insta::assert_snapshot!("help_main", cmd.render_long_help().to_string());
    for sub in ["live", "demo", "open", "record"] {
        let mut cmd = ncclprof_tui::cli::Cli::command().term_width(100);
        let s = cmd.find_subcommand_mut(sub).unwrap();
        let text = s.render_long_help().to_string();
        insta::assert_snapshot!(format!("help_{sub}"), text);
    }
}

#[test]
fn keymap_binding_list() {
    let lines: Vec<String> = ncclprof_tui::keymap::help_lines()
        .into_iter()
        .map(|(h, t)| h.map_or(t, |h| format!("[{h}]")))
        .collect();
    insta::assert_snapshot!("bindings", lines.join("\n"));
}

#[test]
fn eviction_is_counted_and_shown() {
    let f = Fixture {
        seqs: 40,
        ..Fixture::default()
    };
    let mut st = Store::new(64 * 1024);
    for r in 0..f.ranks {
        for fr in frames(&f, r) {
            ncclprof_tui::model::ingest::apply_frame(&mut st, r as u32 + 1, 100 + r as u32, fr);
        }
    }
    assert!(st.evicted > 0);
    assert!(st.bytes <= 64 * 1024);
    assert_eq!(st.bytes, st.recount_bytes());
    let mut app = App::new(st, true, String::new());
    app.fit_all();
    let t = render(&app, 160, 12);
    let text = format!("{}", t.backend());
    assert!(text.contains("evicted"), "{text}");
}

#[test]
fn every_view_renders_at_every_size_without_panicking() {
    let f = Fixture {
        hung: Some(1),
        drops: 2,
        ..Fixture::default()
    };
    let mut app = app(&f);
    app.tl.row = 1;
    app.update(Action::PickOp);
    for help in [false, true] {
        app.help = help;
        for v in ViewId::ALL {
            app.view = v;
            for w in [1u16, 5, 19, 20, 21, 30, 45, 60, 80, 133] {
                for h in [1u16, 2, 3, 4, 5, 7, 10, 24] {
                    render(&app, w, h);
                }
            }
        }
    }
}

#[test]
fn chrome_trace_of_a_tiny_fixture() {
    let f = Fixture {
        ranks: 2,
        seqs: 1,
        straggler: None,
        ..Fixture::default()
    };
    let st = store(&f);
    let mut out = Vec::new();
    ncclprof_tui::model::snapshot::write_to(&st, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let mut v = v;
    v["otherData"]["viewer_version"] = "[version]".into();
    insta::assert_snapshot!(
        "chrome_trace_tiny",
        serde_json::to_string_pretty(&v).unwrap()
    );
}

#[test]
fn busy_processes_are_shown() {
    let mut app = app(&Fixture::default());
    ncclprof_tui::model::ingest::apply(
        &mut app.store,
        ncclprof_tui::model::ingest::SourceMsg::Busy { pid: 4242 },
    );
    app.view = ViewId::Mask;
    let t = render(&app, 120, 24);
    let text = format!("{}", t.backend());
    assert!(
        text.contains("1 busy") && text.contains("pid 4242"),
        "{text}"
    );
}
