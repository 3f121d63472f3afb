//! Key handling: every binding maps to its action, and each action changes the state as it
//! should. Pure: no terminal.

mod common;

use common::*;
use ncclprof_shared::kind::EventKind;
use ncclprof_tui::app::{Control, Effect};
use ncclprof_tui::event_loop::{handle_key, handle_mouse};
use ncclprof_tui::keymap::{BINDINGS, Ctx, K, lookup};
use ncclprof_tui::ui::views::ViewId;
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyEventState, KeyModifiers, MouseEvent, MouseEventKind,
};

fn ev(k: &K) -> KeyEvent {
    let mut m = KeyModifiers::NONE;
    if k.ctrl {
        m |= KeyModifiers::CONTROL;
    }
    if let KeyCode::Char(c) = k.code
        && c.is_ascii_uppercase()
    {
        m |= KeyModifiers::SHIFT;
    }
    KeyEvent {
        code: k.code,
        modifiers: m,
        kind: KeyEventKind::Press,
        state: KeyEventState::NONE,
    }
}

fn key(code: KeyCode) -> KeyEvent {
    ev(&K { code, ctrl: false })
}

fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

#[test]
fn every_binding_resolves_to_its_action() {
    for b in BINDINGS {
        for k in b.keys {
            let ctx = if b.ctx == Ctx::Global {
                Ctx::Window
            } else {
                b.ctx
            };
            let got = lookup(ctx, &ev(k));
            // A global key may be shadowed in a view context: check it in its own context then.
            let got = if got != Some(b.action) && b.ctx == Ctx::Global {
                lookup(Ctx::Global, &ev(k))
            } else {
                got
            };
            assert_eq!(got, Some(b.action), "{:?} in {:?}", k, b.ctx);
        }
    }
    // Each key is bound at most once per context.
    for ctx in [Ctx::Global, Ctx::Window, Ctx::Mask] {
        let mut seen = Vec::new();
        for b in BINDINGS.iter().filter(|b| b.ctx == ctx) {
            for k in b.keys {
                assert!(!seen.contains(k), "{k:?} bound twice in {ctx:?}");
                seen.push(*k);
            }
        }
    }
}

#[test]
fn quit_help_back() {
    let mut app = app(&Fixture::default());
    handle_key(&mut app, ch('?'));
    assert!(app.help);
    // Under the overlay other keys do nothing.
    handle_key(&mut app, ch('2'));
    assert_eq!(app.view, ViewId::Timeline);
    handle_key(&mut app, key(KeyCode::Esc));
    assert!(!app.help);
    handle_key(&mut app, key(KeyCode::F(1)));
    assert!(app.help);
    handle_key(&mut app, ch('?'));
    assert!(!app.help);
    handle_key(&mut app, ch('q'));
    assert!(app.quit);
    let mut app = common::app(&Fixture::default());
    handle_key(
        &mut app,
        ev(&K {
            code: KeyCode::Char('c'),
            ctrl: true,
        }),
    );
    assert!(app.quit);
}

#[test]
fn view_switching() {
    let mut app = app(&Fixture::default());
    for (c, v) in [
        ('2', ViewId::Channels),
        ('3', ViewId::Proxy),
        ('4', ViewId::Stats),
        ('5', ViewId::Mask),
        ('1', ViewId::Timeline),
    ] {
        handle_key(&mut app, ch(c));
        assert_eq!(app.view, v);
    }
    handle_key(&mut app, key(KeyCode::Tab));
    assert_eq!(app.view, ViewId::Channels);
    handle_key(&mut app, key(KeyCode::BackTab));
    handle_key(&mut app, key(KeyCode::BackTab));
    assert_eq!(app.view, ViewId::Mask);
}

#[test]
fn comm_cycling_resets_selection() {
    let mut app = app(&Fixture::default());
    app.tl.row = 2;
    handle_key(&mut app, key(KeyCode::Enter));
    assert!(app.tl.selected.is_some());
    handle_key(&mut app, ch('c'));
    assert_eq!(app.comm, 0); // one communicator: wraps
    assert_eq!(app.tl.row, 0);
    assert!(app.tl.selected.is_none());
    handle_key(&mut app, ch('C'));
    assert_eq!(app.comm, 0);
}

#[test]
fn zoom_pan_follow() {
    let mut app = app(&Fixture::default());
    let span = app.tl.span;
    handle_key(&mut app, ch('+'));
    assert_eq!(app.tl.span, span / 2);
    handle_key(&mut app, ch('='));
    assert_eq!(app.tl.span, span / 4);
    handle_key(&mut app, ch('-'));
    assert_eq!(app.tl.span, span / 2);
    handle_mouse(
        &mut app,
        MouseEvent {
            kind: MouseEventKind::ScrollDown,
            column: 0,
            row: 0,
            modifiers: KeyModifiers::NONE,
        },
    );
    assert_eq!(app.tl.span, span);
    handle_mouse(
        &mut app,
        MouseEvent {
            kind: MouseEventKind::ScrollUp,
            column: 0,
            row: 0,
            modifiers: KeyModifiers::NONE,
        },
    );
    assert_eq!(app.tl.span, span / 2);
    let (_, to) = app.window();
    handle_key(&mut app, key(KeyCode::Left));
    assert_eq!(app.window().1, to - app.tl.span / 4);
    handle_key(&mut app, ch('l'));
    assert_eq!(app.window().1, to);
    handle_key(&mut app, ch('h'));
    handle_key(&mut app, key(KeyCode::Right));
    assert_eq!(app.window().1, to);
    // Zoom limits: 1 µs .. 1 h.
    for _ in 0..60 {
        handle_key(&mut app, ch('+'));
    }
    assert_eq!(app.tl.span, 1_000);
    for _ in 0..80 {
        handle_key(&mut app, ch('-'));
    }
    assert_eq!(app.tl.span, 3_600_000_000_000);
    assert!(!app.tl.follow);
    handle_key(&mut app, ch('f'));
    assert!(app.tl.follow);
    assert_eq!(
        app.window().1,
        app.store.t_max.max(app.store.t_now).max(app.tl.span)
    );
    handle_key(&mut app, ch('f'));
    assert!(!app.tl.follow);
}

#[test]
fn rows_and_op_selection() {
    let f = Fixture::default();
    let mut app = app(&f);
    handle_key(&mut app, ch('j'));
    handle_key(&mut app, key(KeyCode::Down));
    assert_eq!(app.tl.row, 2);
    for _ in 0..10 {
        handle_key(&mut app, ch('j'));
    }
    assert_eq!(app.tl.row, 3); // clamped to the last rank
    handle_key(&mut app, ch('k'));
    handle_key(&mut app, key(KeyCode::Up));
    assert_eq!(app.tl.row, 1);
    // Window on seq 2; Enter picks the op under the centre.
    app.tl.span = 10 * MS;
    app.tl.end = T0 + 20 * MS + 7 * MS;
    app.tl.follow = false;
    handle_key(&mut app, key(KeyCode::Enter));
    let sel = app.tl.selected.unwrap();
    let op = app.store.op(sel).unwrap();
    assert_eq!(op.seq, 2);
    handle_key(&mut app, ch(']'));
    assert_eq!(app.store.op(app.tl.selected.unwrap()).unwrap().seq, 3);
    handle_key(&mut app, ch('['));
    handle_key(&mut app, ch('['));
    assert_eq!(app.store.op(app.tl.selected.unwrap()).unwrap().seq, 1);
    for _ in 0..10 {
        handle_key(&mut app, ch('['));
    }
    assert_eq!(app.store.op(app.tl.selected.unwrap()).unwrap().seq, 0);
    // Selecting an op outside the window brings it into view.
    let s = app.tl.selected.unwrap();
    let (from, to) = app.window();
    assert!(s.start >= from && s.start <= to);
    handle_key(&mut app, key(KeyCode::Esc));
    assert!(app.tl.selected.is_none());
}

#[test]
fn filter_input() {
    let mut app = app(&Fixture::default());
    handle_key(&mut app, ch('/'));
    assert!(app.filter_edit.is_some());
    for c in "AllGz".chars() {
        handle_key(&mut app, ch(c));
    }
    // While typing, 'q' is text, not quit.
    handle_key(&mut app, ch('q'));
    assert!(!app.quit);
    handle_key(&mut app, key(KeyCode::Backspace));
    handle_key(&mut app, key(KeyCode::Backspace));
    handle_key(&mut app, key(KeyCode::Enter));
    assert_eq!(app.filter, "allg");
    assert!(app.passes("AllGather") && !app.passes("AllReduce"));
    // Anywhere in the name, any case; not a name shorter than the filter; non-ASCII names too.
    assert!(app.passes("ncclALLGATHERv") && !app.passes("All") && !app.passes(""));
    app.filter = "ß".into();
    assert!(app.passes("Großes") && !app.passes("Gross"));
    app.filter = "allg".into();
    handle_key(&mut app, ch('/'));
    handle_key(&mut app, ch('x'));
    handle_key(&mut app, key(KeyCode::Esc));
    assert_eq!(app.filter, "allg"); // cancelled edit keeps the filter
    handle_key(&mut app, key(KeyCode::Esc));
    assert_eq!(app.filter, ""); // Esc with nothing selected clears it
}

#[test]
fn snapshot_key_asks_for_a_snapshot() {
    let mut app = app(&Fixture::default());
    app.fixed_snapshot_name = Some("snap.json".into());
    app.snapshot_dir = "/tmp/x".into();
    let fx = handle_key(&mut app, ch('s'));
    assert_eq!(fx, vec![Effect::Snapshot("/tmp/x/snap.json".into())]);
}

#[test]
fn mask_keys_send_and_track_acks() {
    let mut app = app(&Fixture::default());
    handle_key(&mut app, ch('5'));
    let start = app.mask.pending;
    assert_eq!(start, ncclprof_shared::mask::DEFAULT);
    handle_key(&mut app, ch('j'));
    handle_key(&mut app, key(KeyCode::Down));
    handle_key(&mut app, ch('k'));
    assert_eq!(app.mask.cursor, 1);
    handle_key(&mut app, key(KeyCode::Up));
    assert_eq!(app.mask.cursor, 0);
    // Group (bit 0) on: sent to all.
    let fx = handle_key(&mut app, ch(' '));
    assert_eq!(
        fx,
        vec![Effect::Send {
            only: None,
            msg: Control::SetMask(start | 1)
        }]
    );
    assert!(
        app.store
            .procs
            .iter()
            .all(|p| !p.acked && p.requested == Some(start | 1))
    );
    // Enter toggles too.
    let fx = handle_key(&mut app, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Send {
            only: None,
            msg: Control::SetMask(start)
        }]
    );
    // Target one process.
    handle_key(&mut app, ch('t'));
    assert!(!app.mask.all);
    handle_key(&mut app, ch('>'));
    handle_key(&mut app, ch('.'));
    handle_key(&mut app, ch(','));
    assert_eq!(app.mask.proc, 1);
    handle_key(&mut app, ch('<'));
    handle_key(&mut app, ch('>'));
    let src = app.store.procs[1].src;
    let fx = handle_key(&mut app, ch('a'));
    assert_eq!(
        fx,
        vec![Effect::Send {
            only: Some(src),
            msg: Control::SetMask(ncclprof_shared::mask::ALL_V6)
        }]
    );
    let fx = handle_key(&mut app, ch('d'));
    assert_eq!(
        fx,
        vec![Effect::Send {
            only: Some(src),
            msg: Control::SetMask(ncclprof_shared::mask::DEFAULT)
        }]
    );
    // Active → p stops; after the ack says stopped, p starts with the pending mask.
    let fx = handle_key(&mut app, ch('p'));
    assert_eq!(
        fx,
        vec![Effect::Send {
            only: Some(src),
            msg: Control::Stop
        }]
    );
    let ack = ncclprof_shared::wire::Frame::MaskAck(ncclprof_shared::wire::MaskAck {
        mask: 0,
        active: false,
        requested: 0,
    });
    ncclprof_tui::model::ingest::apply_frame(&mut app.store, src, 101, ack);
    assert!(app.store.procs[1].acked);
    let fx = handle_key(&mut app, ch('p'));
    assert_eq!(
        fx,
        vec![Effect::Send {
            only: Some(src),
            msg: Control::Start(ncclprof_shared::mask::DEFAULT)
        }]
    );
    assert_eq!(EventKind::ALL.len(), 15);
}

#[test]
fn offline_mask_changes_are_refused_with_a_message() {
    let mut app = app(&Fixture::default());
    app.live = false;
    handle_key(&mut app, ch('5'));
    let fx = handle_key(&mut app, ch(' '));
    assert!(fx.is_empty());
    assert!(app.message.as_deref().unwrap().contains("offline"));
}

#[test]
fn key_release_is_ignored() {
    let mut app = app(&Fixture::default());
    let mut e = ch('q');
    e.kind = KeyEventKind::Release;
    handle_key(&mut app, e);
    assert!(!app.quit);
}
