//! (context, key) → [`Action`]. The table drives input handling, the help overlay and the
//! hint line, so they cannot drift apart.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::action::Action;
use crate::ui::views::ViewId;

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctx {
    /// Everywhere (unless a view binds the same key).
    Global,
    /// Timeline, channels, proxy and stats: the time window and rows.
    Window,
    /// The events/mask view.
    Mask,
}

impl Ctx {
    pub fn title(self) -> &'static str {
        match self {
            Ctx::Global => "everywhere",
            Ctx::Window => "timeline, channels, proxy, stats",
            Ctx::Mask => "events / mask view",
        }
    }
}

/// A key as bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct K {
    pub code: KeyCode,
    pub ctrl: bool,
}

const fn c(ch: char) -> K {
    K {
        code: KeyCode::Char(ch),
        ctrl: false,
    }
}
const fn k(code: KeyCode) -> K {
    K { code, ctrl: false }
}
const fn ctrl(ch: char) -> K {
    K {
        code: KeyCode::Char(ch),
        ctrl: true,
    }
}

/// One binding: keys, as shown in help, the action and what it does.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub ctx: Ctx,
    pub keys: &'static [K],
    pub label: &'static str,
    pub action: Action,
    pub help: &'static str,
}

const fn b(
    ctx: Ctx,
    keys: &'static [K],
    label: &'static str,
    action: Action,
    help: &'static str,
) -> Binding {
    Binding {
        ctx,
        keys,
        label,
        action,
        help,
    }
}

/// Every binding.
pub const BINDINGS: &[Binding] = &[
    b(
        Ctx::Global,
        &[c('q'), ctrl('c')],
        "q, Ctrl-C",
        Action::Quit,
        "quit",
    ),
    b(
        Ctx::Global,
        &[c('?'), k(KeyCode::F(1))],
        "?, F1",
        Action::ToggleHelp,
        "show/hide this help",
    ),
    b(
        Ctx::Global,
        &[k(KeyCode::Esc)],
        "Esc",
        Action::Back,
        "close overlay, clear selection, clear filter",
    ),
    b(
        Ctx::Global,
        &[k(KeyCode::Tab)],
        "Tab",
        Action::NextView,
        "next view",
    ),
    b(
        Ctx::Global,
        &[k(KeyCode::BackTab)],
        "Shift-Tab",
        Action::PrevView,
        "previous view",
    ),
    b(
        Ctx::Global,
        &[c('1')],
        "1",
        Action::View(ViewId::Timeline),
        "timeline view",
    ),
    b(
        Ctx::Global,
        &[c('2')],
        "2",
        Action::View(ViewId::Channels),
        "channels view",
    ),
    b(
        Ctx::Global,
        &[c('3')],
        "3",
        Action::View(ViewId::Proxy),
        "proxy view",
    ),
    b(
        Ctx::Global,
        &[c('4')],
        "4",
        Action::View(ViewId::Stats),
        "stats view",
    ),
    b(
        Ctx::Global,
        &[c('5')],
        "5",
        Action::View(ViewId::Mask),
        "events / mask view",
    ),
    b(
        Ctx::Global,
        &[c('c')],
        "c",
        Action::NextComm,
        "next communicator",
    ),
    b(
        Ctx::Global,
        &[c('C')],
        "C",
        Action::PrevComm,
        "previous communicator",
    ),
    b(
        Ctx::Global,
        &[c('s')],
        "s",
        Action::Snapshot,
        "write a snapshot (Chrome trace JSON)",
    ),
    b(
        Ctx::Global,
        &[c('/')],
        "/",
        Action::StartFilter,
        "filter by function name (Enter applies, Esc cancels)",
    ),
    b(
        Ctx::Global,
        &[c('f')],
        "f",
        Action::ToggleFollow,
        "follow live / freeze the window",
    ),
    b(
        Ctx::Window,
        &[c('+'), c('=')],
        "+, =, wheel up",
        Action::ZoomIn,
        "zoom in",
    ),
    b(
        Ctx::Window,
        &[c('-')],
        "-, wheel down",
        Action::ZoomOut,
        "zoom out",
    ),
    b(
        Ctx::Window,
        &[k(KeyCode::Left), c('h')],
        "Left, h",
        Action::PanLeft,
        "pan earlier",
    ),
    b(
        Ctx::Window,
        &[k(KeyCode::Right), c('l')],
        "Right, l",
        Action::PanRight,
        "pan later",
    ),
    b(
        Ctx::Window,
        &[k(KeyCode::Up), c('k')],
        "Up, k",
        Action::RowUp,
        "previous rank row / scroll up",
    ),
    b(
        Ctx::Window,
        &[k(KeyCode::Down), c('j')],
        "Down, j",
        Action::RowDown,
        "next rank row / scroll down",
    ),
    b(
        Ctx::Window,
        &[c('[')],
        "[",
        Action::PrevOp,
        "select the previous op on the row",
    ),
    b(
        Ctx::Window,
        &[c(']')],
        "]",
        Action::NextOp,
        "select the next op on the row",
    ),
    b(
        Ctx::Window,
        &[k(KeyCode::Enter)],
        "Enter",
        Action::PickOp,
        "select the op under the window centre",
    ),
    b(
        Ctx::Mask,
        &[k(KeyCode::Up), c('k')],
        "Up, k",
        Action::MaskUp,
        "previous event kind",
    ),
    b(
        Ctx::Mask,
        &[k(KeyCode::Down), c('j')],
        "Down, j",
        Action::MaskDown,
        "next event kind",
    ),
    b(
        Ctx::Mask,
        &[c(' '), k(KeyCode::Enter)],
        "Space, Enter",
        Action::MaskToggle,
        "toggle the kind (sent at once)",
    ),
    b(
        Ctx::Mask,
        &[c('a')],
        "a",
        Action::MaskAll,
        "enable every kind",
    ),
    b(
        Ctx::Mask,
        &[c('d')],
        "d",
        Action::MaskDefault,
        "default mask",
    ),
    b(
        Ctx::Mask,
        &[c('p')],
        "p",
        Action::StartStop,
        "start / stop profiling",
    ),
    b(
        Ctx::Mask,
        &[c('t')],
        "t",
        Action::MaskTarget,
        "send to all processes / the selected one",
    ),
    b(
        Ctx::Mask,
        &[c('<'), c(',')],
        "<, ,",
        Action::PrevProc,
        "select the previous process",
    ),
    b(
        Ctx::Mask,
        &[c('>'), c('.')],
        ">, .",
        Action::NextProc,
        "select the next process",
    ),
];

fn matches(kb: &K, ev: &KeyEvent) -> bool {
    let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
    if kb.ctrl != ctrl {
        return false;
    }
    match (kb.code, ev.code) {
        // Shifted characters arrive with SHIFT set; compare the character only.
        (KeyCode::Char(a), KeyCode::Char(b)) => a == b,
        (a, b) => a == b,
    }
}

/// The action for a key in a context: the context's own bindings win over global ones.
pub fn lookup(ctx: Ctx, ev: &KeyEvent) -> Option<Action> {
    let find = |want: Ctx| {
        BINDINGS
            .iter()
            .filter(|b| b.ctx == want)
            .find(|b| b.keys.iter().any(|kb| matches(kb, ev)))
            .map(|b| b.action)
    };
    if ctx != Ctx::Global
        && let Some(a) = find(ctx)
    {
        return Some(a);
    }
    find(Ctx::Global)
}

/// Lines of the help overlay, generated from the table.
pub fn help_lines() -> Vec<(Option<&'static str>, String)> {
    let mut out = Vec::new();
    for ctx in [Ctx::Global, Ctx::Window, Ctx::Mask] {
        out.push((Some(ctx.title()), String::new()));
        for b in BINDINGS.iter().filter(|b| b.ctx == ctx) {
            out.push((None, format!("{:<14} {}", b.label, b.help)));
        }
    }
    out
}
