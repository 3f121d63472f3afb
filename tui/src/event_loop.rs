//! The UI loop: input, ingest with a per-turn budget, effects, and drawing when dirty and a
//! frame is due.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ipc_channel::ipc::IpcSender;
use ncclprof_shared::wire::ViewerMsg;
use ratatui::crossterm::event::{self, Event, KeyEvent, KeyEventKind, MouseEvent, MouseEventKind};

use crate::action::Action;
use crate::app::{App, Control, Effect};
use crate::keymap;
use crate::model::source::{self, Live};
use crate::model::{ingest, snapshot};

/// Most source messages ingested per turn, and the time budget for them.
pub const INGEST_MAX_MSGS: usize = 512;
pub const INGEST_BUDGET: Duration = Duration::from_millis(8);
/// Minimum time between frames.
pub const FRAME: Duration = Duration::from_millis(33);

/// Key → effects (pure: no terminal).
pub fn handle_key(app: &mut App, k: KeyEvent) -> Vec<Effect> {
    if k.kind == KeyEventKind::Release {
        return Vec::new();
    }
    if app.filter_edit.is_some() {
        app.filter_key(k.code);
        return Vec::new();
    }
    if app.help {
        // Only quitting and closing work under the overlay.
        return match keymap::lookup(keymap::Ctx::Global, &k) {
            Some(a @ (Action::Quit | Action::ToggleHelp | Action::Back)) => app.update(a),
            _ => Vec::new(),
        };
    }
    match keymap::lookup(app.ctx(), &k) {
        Some(a) => app.update(a),
        None => Vec::new(),
    }
}

/// Mouse: wheel zooms.
pub fn handle_mouse(app: &mut App, m: MouseEvent) -> Vec<Effect> {
    match m.kind {
        MouseEventKind::ScrollUp => app.update(Action::ZoomIn),
        MouseEventKind::ScrollDown => app.update(Action::ZoomOut),
        _ => Vec::new(),
    }
}

/// Performs effects against the real world.
#[derive(Default)]
pub struct Effects {
    pub controls: HashMap<u32, IpcSender<ViewerMsg>>,
    /// Write snapshots on a writer thread (from a copy of the store) instead of inline.
    pub threaded: bool,
    pending: Option<crossbeam_channel::Receiver<Result<std::path::PathBuf, String>>>,
}

impl Effects {
    /// Effects that write snapshots on a background thread (`threaded`) or inline.
    pub fn new(threaded: bool) -> Effects {
        Effects {
            threaded,
            ..Effects::default()
        }
    }

    pub fn run(&mut self, app: &mut App, effects: Vec<Effect>) {
        for e in effects {
            match e {
                Effect::Send { only, msg } => {
                    let errs = source::send_control(&self.controls, only, || match msg {
                        Control::SetMask(m) => ViewerMsg::SetMask(m),
                        Control::Start(m) => ViewerMsg::Start(m),
                        Control::Stop => ViewerMsg::Stop,
                    });
                    for e in errs {
                        ingest::push_error(&mut app.store, e);
                    }
                }
                Effect::Snapshot(path) => {
                    if !self.threaded {
                        let r = snapshot::write(&app.store, &path)
                            .map(|s| s.path)
                            .map_err(|e| format!("{e:#}"));
                        app.snapshot_done(r);
                        continue;
                    }
                    if self.pending.is_some() {
                        app.message = Some("a snapshot is already being written".into());
                        continue;
                    }
                    // The copy shares every full chunk with the store (`store::Series`) and
                    // copies only the newest chunk of each table; the viewer keeps ingesting
                    // meanwhile, and chunks it evicts are freed when the snapshot is written.
                    let st = app.store.clone();
                    let (tx, rx) = crossbeam_channel::bounded(1);
                    let spawned = std::thread::Builder::new()
                        .name("ncclprof-snapshot".into())
                        .spawn(move || {
                            let r = snapshot::write(&st, &path)
                                .map(|s| s.path)
                                .map_err(|e| format!("{e:#}"));
                            let _ = tx.send(r);
                        });
                    match spawned {
                        Ok(_) => {
                            self.pending = Some(rx);
                            app.message = Some("writing snapshot in the background…".into());
                        }
                        Err(e) => app.snapshot_done(Err(format!("cannot start the writer: {e}"))),
                    }
                }
            }
        }
    }

    /// Collect a finished background snapshot. Returns whether one finished.
    pub fn poll(&mut self, app: &mut App) -> bool {
        let Some(rx) = &self.pending else {
            return false;
        };
        let r = match rx.try_recv() {
            Ok(r) => r,
            Err(crossbeam_channel::TryRecvError::Empty) => return false,
            Err(crossbeam_channel::TryRecvError::Disconnected) => {
                Err("the snapshot writer stopped unexpectedly".into())
            }
        };
        self.pending = None;
        app.snapshot_done(r);
        true
    }

    /// Wait for a background snapshot (at exit, so that it is not cut short).
    pub fn finish(&mut self, app: &mut App) {
        if let Some(rx) = self.pending.take() {
            let r = rx
                .recv()
                .unwrap_or_else(|_| Err("the snapshot writer stopped unexpectedly".into()));
            app.snapshot_done(r);
        }
    }
}

/// Drain the live source within the budget. Returns whether anything arrived.
pub fn ingest_turn(app: &mut App, live: &Live, fx: &mut Effects) -> bool {
    let mut any = false;
    let t0 = Instant::now();
    for _ in 0..INGEST_MAX_MSGS {
        match live.rx.try_recv() {
            Ok(m) => {
                match m {
                    ingest::SourceMsg::Connected { src, pid, control } => {
                        fx.controls.insert(src, control);
                        app.store.proc_for(src, pid);
                    }
                    m => {
                        if let ingest::SourceMsg::Closed { src, .. } = &m {
                            fx.controls.remove(src);
                        }
                        ingest::apply(&mut app.store, m);
                    }
                }
                any = true;
            }
            Err(_) => break,
        }
        if t0.elapsed() > INGEST_BUDGET {
            break;
        }
    }
    if any {
        app.on_data();
    }
    any
}

/// Handle everything crossterm has buffered, not one event per 10 ms.
fn read_input(app: &mut App, fx: &mut Effects) -> std::io::Result<()> {
    loop {
        let effects = match event::read()? {
            Event::Key(k) => handle_key(app, k),
            Event::Mouse(m) => handle_mouse(app, m),
            _ => Vec::new(),
        };
        fx.run(app, effects);
        if app.quit || !event::poll(Duration::ZERO)? {
            return Ok(());
        }
    }
}

/// Run the interactive viewer until quit.
pub fn run(app: &mut App, live: Option<Live>) -> anyhow::Result<()> {
    let mut term = crate::term::Term::new()?;
    let mut fx = Effects::new(true);
    let mut dirty = true;
    let mut last_draw = Instant::now() - FRAME;
    let mut last_tick = Instant::now();
    while !app.quit {
        if crate::term::signalled() {
            break;
        }
        if let Some(l) = &live
            && ingest_turn(app, l, &mut fx)
        {
            dirty = true;
        }
        dirty |= fx.poll(app);
        if last_tick.elapsed() > Duration::from_millis(250) {
            last_tick = Instant::now();
            dirty |= live.is_some();
        }
        if dirty && last_draw.elapsed() >= FRAME {
            match term.terminal.draw(|f| crate::ui::render(f, app)) {
                Ok(_) => {}
                // The terminal went away between its hangup and our noticing it: leave like
                // `q`, as below (a closed terminal made it exit 1, one CI run in several).
                Err(e) if crate::term::hung_up(&e) => break,
                Err(e) => return Err(e.into()),
            }
            dirty = false;
            last_draw = Instant::now();
        }
        // With frames still queued (the turn stopped on its budget), only look for input:
        // waiting here would leave the backlog growing for nothing.
        let backlog = live.as_ref().is_some_and(|l| !l.rx.is_empty());
        let wait = if backlog {
            Duration::ZERO
        } else {
            Duration::from_millis(10)
        };
        match crate::term::wait_input(wait) {
            Ok(true) => match read_input(app, &mut fx) {
                Ok(()) => dirty = true,
                Err(e) if crate::term::hung_up(&e) => break,
                Err(e) => return Err(e.into()),
            },
            Ok(false) => {}
            // The terminal went away (window closed, ssh dropped): nobody can see or drive
            // the viewer any more, so leave like `q` would.
            Err(_) => break,
        }
    }
    if fx.pending.is_some() {
        app.message = Some("finishing the snapshot before exiting…".into());
        // Finished whether or not the terminal can still show this (it may have hung up).
        let _ = term.terminal.draw(|f| crate::ui::render(f, app));
        fx.finish(app);
        if let Some(Err(e)) = &app.last_snapshot {
            drop(term);
            eprintln!("ncclprof-tui: snapshot failed: {e}");
        }
    }
    Ok(())
}
