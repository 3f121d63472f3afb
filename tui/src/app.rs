//! App state and `update`: pure; actions in, effects out. No terminal here.

use std::path::PathBuf;

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::mask;

use crate::action::Action;
use crate::keymap::Ctx;
use crate::model::query::OpKey;
use crate::model::store::Store;
use crate::ui::views::ViewId;

/// Narrowest and widest timeline window.
pub const MIN_SPAN: u64 = 1_000;
pub const MAX_SPAN: u64 = 3_600_000_000_000;
/// Default live window.
pub const DEFAULT_SPAN: u64 = 200_000_000;

/// A control message to send (mirrors `ViewerMsg` without the connection details).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    SetMask(u32),
    Start(u32),
    Stop,
}

/// Side effects `update` asks the event loop to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Send to every connected process (`only` = None) or one source.
    Send {
        only: Option<u32>,
        msg: Control,
    },
    Snapshot(PathBuf),
}

/// Timeline window and selection (shared by the window-based views).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineState {
    /// Window end when not following.
    pub end: u64,
    pub span: u64,
    pub follow: bool,
    /// Selected row (rank lane) in the timeline; scroll offset elsewhere.
    pub row: usize,
    pub selected: Option<OpKey>,
}

/// The mask view's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskState {
    pub cursor: usize,
    /// The mask the user is building (sent on each toggle).
    pub pending: u32,
    /// Whether `pending` was initialised from a process yet.
    pub initialised: bool,
    /// Send to all processes (true) or only the selected one.
    pub all: bool,
    /// Selected process (index into `store.procs`).
    pub proc: usize,
}

/// The whole viewer state.
pub struct App {
    pub store: Store,
    pub view: ViewId,
    pub comm: usize,
    pub tl: TimelineState,
    pub mask: MaskState,
    /// Applied function-name filter (lowercase; empty = none).
    pub filter: String,
    /// Filter being typed.
    pub filter_edit: Option<String>,
    pub help: bool,
    pub quit: bool,
    pub no_color: bool,
    /// Whether control messages can reach processes (live / demo).
    pub live: bool,
    /// What the source is, for the empty screen: "directory /run/user/1000/ncclprof", then a
    /// line per other directory watched ("and /tmp/ncclprof-1000 if present").
    pub source_desc: String,
    /// Last snapshot: written path or error.
    pub last_snapshot: Option<Result<PathBuf, String>>,
    /// One-line transient message.
    pub message: Option<String>,
    /// Where snapshots go.
    pub snapshot_dir: PathBuf,
    /// Injected clock for snapshot names (tests); None = real time.
    pub fixed_snapshot_name: Option<String>,
}

impl App {
    pub fn new(store: Store, live: bool, source_desc: String) -> App {
        App {
            store,
            view: ViewId::Timeline,
            comm: 0,
            tl: TimelineState {
                end: 0,
                span: DEFAULT_SPAN,
                follow: live,
                row: 0,
                selected: None,
            },
            mask: MaskState {
                cursor: 0,
                pending: mask::DEFAULT,
                initialised: false,
                all: true,
                proc: 0,
            },
            filter: String::new(),
            filter_edit: None,
            help: false,
            quit: false,
            no_color: false,
            live,
            source_desc,
            last_snapshot: None,
            message: None,
            snapshot_dir: PathBuf::from("."),
            fixed_snapshot_name: None,
        }
    }

    /// Fit the window to everything retained (offline files).
    pub fn fit_all(&mut self) {
        if self.store.t_max > 0 && self.store.t_min != u64::MAX {
            let span = (self.store.t_max - self.store.t_min).max(MIN_SPAN);
            self.tl.span = (span + span / 50).clamp(MIN_SPAN, MAX_SPAN);
            self.tl.end = self.store.t_max + span / 100;
            self.tl.follow = false;
        }
    }

    /// The visible window `[from, to]`.
    pub fn window(&self) -> (u64, u64) {
        let to = if self.tl.follow {
            self.store.t_max.max(self.store.t_now)
        } else {
            self.tl.end
        };
        let to = to.max(self.tl.span);
        (to - self.tl.span, to)
    }

    /// The key context of the current screen.
    pub fn ctx(&self) -> Ctx {
        match self.view {
            ViewId::Mask => Ctx::Mask,
            _ => Ctx::Window,
        }
    }

    /// Whether a function name passes the filter.
    pub fn passes(&self, func: &str) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        // Views ask once per op drawn: no allocation for the ASCII names NCCL gives.
        if func.is_ascii() {
            let needle = self.filter.as_bytes();
            return func
                .as_bytes()
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle));
        }
        func.to_lowercase().contains(&self.filter)
    }

    /// Called after ingest: initialise state that depends on data.
    pub fn on_data(&mut self) {
        if !self.mask.initialised
            && let Some(p) = self.store.procs.first()
            && p.api_version > 0
        {
            self.mask.pending = if p.mask != 0 { p.mask } else { mask::DEFAULT };
            self.mask.initialised = true;
        }
        if self.comm >= self.store.comms.len() {
            self.comm = 0;
        }
    }

    fn target(&self) -> Option<u32> {
        if self.mask.all {
            None
        } else {
            self.store.procs.get(self.mask.proc).map(|p| p.src)
        }
    }

    fn send_mask(&mut self, msg: Control) -> Vec<Effect> {
        if !self.live {
            self.message = Some("offline: mask changes need a live process".into());
            return Vec::new();
        }
        let only = self.target();
        let req = match msg {
            Control::SetMask(m) | Control::Start(m) => m,
            Control::Stop => 0,
        };
        for p in &mut self.store.procs {
            if only.is_none_or(|o| o == p.src) {
                p.requested = Some(req);
                p.acked = false;
            }
        }
        vec![Effect::Send { only, msg }]
    }

    fn rows(&self) -> usize {
        self.store.lane_rows(self.comm).len()
    }

    /// Ops of the selected row in a window around `t`.
    fn row_ops(&self) -> Option<(usize, Vec<crate::model::store::Op>)> {
        let rows = self.store.lane_rows(self.comm);
        let lane = rows.get(self.tl.row)?.lane?;
        let ops = self.store.ops_in(lane, 0, u64::MAX);
        let ops = ops
            .into_iter()
            .filter(|o| self.passes(self.store.func_of(lane, o)))
            .collect();
        Some((lane, ops))
    }

    fn select(&mut self, lane: usize, o: &crate::model::store::Op) {
        self.tl.selected = Some(OpKey {
            lane,
            id: o.id,
            start: o.start,
        });
        // Bring it into view.
        let (from, to) = self.window();
        if o.start < from || o.start > to {
            self.tl.follow = false;
            self.tl.end = o.start + self.tl.span / 2;
        }
    }

    /// Apply one action.
    pub fn update(&mut self, a: Action) -> Vec<Effect> {
        self.message = None;
        match a {
            Action::Quit => self.quit = true,
            Action::ToggleHelp => self.help = !self.help,
            Action::Back => {
                if self.help {
                    self.help = false;
                } else if self.tl.selected.is_some() {
                    self.tl.selected = None;
                } else {
                    self.filter.clear();
                }
            }
            Action::NextView => self.view = self.view.next(),
            Action::PrevView => self.view = self.view.prev(),
            Action::View(v) => self.view = v,
            Action::NextComm | Action::PrevComm => {
                let n = self.store.comms.len();
                if n > 0 {
                    self.comm = if a == Action::NextComm {
                        (self.comm + 1) % n
                    } else {
                        (self.comm + n - 1) % n
                    };
                }
                self.tl.row = 0;
                self.tl.selected = None;
            }
            Action::Snapshot => {
                let name = self
                    .fixed_snapshot_name
                    .clone()
                    .unwrap_or_else(crate::model::snapshot::default_name);
                return vec![Effect::Snapshot(self.snapshot_dir.join(name))];
            }
            Action::StartFilter => self.filter_edit = Some(self.filter.clone()),
            Action::ToggleFollow => {
                if self.tl.follow {
                    self.tl.end = self.window().1;
                    self.tl.follow = false;
                } else {
                    self.tl.follow = true;
                }
            }
            Action::ZoomIn | Action::ZoomOut => {
                let (from, to) = self.window();
                let centre = from / 2 + to / 2;
                let span = if a == Action::ZoomIn {
                    self.tl.span / 2
                } else {
                    self.tl.span.saturating_mul(2)
                };
                self.tl.span = span.clamp(MIN_SPAN, MAX_SPAN);
                if !self.tl.follow {
                    self.tl.end = centre + self.tl.span / 2;
                }
            }
            Action::PanLeft | Action::PanRight => {
                let (_, to) = self.window();
                let step = (self.tl.span / 4).max(1);
                self.tl.follow = false;
                self.tl.end = if a == Action::PanLeft {
                    to.saturating_sub(step).max(self.tl.span)
                } else {
                    to + step
                };
            }
            Action::RowUp => self.tl.row = self.tl.row.saturating_sub(1),
            Action::RowDown => {
                let max = if self.view == ViewId::Timeline {
                    self.rows().saturating_sub(1)
                } else {
                    usize::MAX / 2
                };
                self.tl.row = (self.tl.row + 1).min(max);
            }
            Action::PrevOp | Action::NextOp | Action::PickOp => {
                let Some((lane, ops)) = self.row_ops() else {
                    return Vec::new();
                };
                if ops.is_empty() {
                    return Vec::new();
                }
                let (from, to) = self.window();
                let centre = from / 2 + to / 2;
                let cur = self
                    .tl
                    .selected
                    .filter(|s| s.lane == lane)
                    .and_then(|s| ops.iter().position(|o| o.id == s.id && o.start == s.start));
                let pick = match (a, cur) {
                    (Action::PrevOp, Some(i)) => i.saturating_sub(1),
                    (Action::NextOp, Some(i)) => (i + 1).min(ops.len() - 1),
                    (Action::PrevOp, None) => {
                        ops.iter().rposition(|o| o.start <= centre).unwrap_or(0)
                    }
                    (Action::NextOp, None) => ops
                        .iter()
                        .position(|o| o.start >= centre)
                        .unwrap_or(ops.len() - 1),
                    _ => {
                        // Op covering the centre, else the nearest start.
                        ops.iter()
                            .position(|o| o.start <= centre && o.end >= centre)
                            .unwrap_or_else(|| {
                                let mut best = 0;
                                for (i, o) in ops.iter().enumerate() {
                                    if o.start.abs_diff(centre) < ops[best].start.abs_diff(centre) {
                                        best = i;
                                    }
                                }
                                best
                            })
                    }
                };
                let o = ops[pick];
                self.select(lane, &o);
            }
            Action::MaskUp => self.mask.cursor = self.mask.cursor.saturating_sub(1),
            Action::MaskDown => self.mask.cursor = (self.mask.cursor + 1).min(EventKind::COUNT - 1),
            Action::MaskToggle => {
                let bit = EventKind::ALL[self.mask.cursor].bit();
                self.mask.pending ^= bit;
                return self.send_mask(Control::SetMask(self.mask.pending));
            }
            Action::MaskAll => {
                self.mask.pending = mask::ALL_V6;
                return self.send_mask(Control::SetMask(self.mask.pending));
            }
            Action::MaskDefault => {
                self.mask.pending = mask::DEFAULT;
                return self.send_mask(Control::SetMask(self.mask.pending));
            }
            Action::StartStop => {
                let active = match self.target() {
                    None => self.store.procs.iter().any(|p| p.active),
                    Some(src) => self.store.procs.iter().any(|p| p.src == src && p.active),
                };
                let msg = if active {
                    Control::Stop
                } else {
                    Control::Start(self.mask.pending)
                };
                return self.send_mask(msg);
            }
            Action::MaskTarget => self.mask.all = !self.mask.all,
            Action::PrevProc => self.mask.proc = self.mask.proc.saturating_sub(1),
            Action::NextProc => {
                self.mask.proc = (self.mask.proc + 1).min(self.store.procs.len().saturating_sub(1))
            }
        }
        Vec::new()
    }

    /// Keys while typing a filter: returns true if consumed.
    pub fn filter_key(&mut self, code: ratatui::crossterm::event::KeyCode) -> bool {
        use ratatui::crossterm::event::KeyCode;
        let Some(edit) = self.filter_edit.as_mut() else {
            return false;
        };
        match code {
            KeyCode::Enter => {
                self.filter = edit.trim().to_lowercase();
                self.filter_edit = None;
            }
            KeyCode::Esc => self.filter_edit = None,
            KeyCode::Backspace => {
                edit.pop();
            }
            KeyCode::Char(ch) => edit.push(ch),
            _ => {}
        }
        true
    }

    /// A snapshot finished.
    pub fn snapshot_done(&mut self, r: Result<PathBuf, String>) {
        self.message = Some(match &r {
            Ok(p) => format!("snapshot written to {}", p.display()),
            Err(e) => format!("snapshot FAILED (nothing lost, still viewing): {e}"),
        });
        self.last_snapshot = Some(r);
    }
}
