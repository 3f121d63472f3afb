//! Status bar (always visible) and the hint / filter / message line.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use super::put;
use super::theme::Theme;
use crate::app::App;
use crate::model::store::ProcState;
use crate::model::units;

/// The status text parts, with a flag for "this part is bad".
pub fn parts(app: &App) -> Vec<(String, bool)> {
    let s = &app.store;
    let mut v = Vec::new();
    let live = s.live_procs();
    let crashed = s
        .procs
        .iter()
        .filter(|p| p.state == ProcState::Crashed)
        .count();
    let mut procs = format!("procs {}", s.procs.len());
    if app.live {
        procs = format!("procs {live} live/{}", s.procs.len());
    }
    if crashed > 0 {
        procs.push_str(&format!(" ({crashed} crashed)"));
    }
    if !s.busy.is_empty() {
        procs.push_str(&format!(" {} busy", s.busy.len()));
    }
    v.push((procs, crashed > 0));
    let d = s.dropped();
    v.push((format!("drops {d}"), d > 0));
    v.push((
        if app.tl.follow {
            "FOLLOW".into()
        } else {
            "FROZEN".into()
        },
        false,
    ));
    if app.live {
        v.push((format!("{} ev/s", units::count(s.rate())), false));
    }
    v.push((
        format!(
            "{} ev {}/{}",
            units::count(s.retained as f64),
            units::bytes(s.bytes as u64),
            units::bytes(s.max_memory as u64)
        ),
        false,
    ));
    if s.evicted > 0 {
        v.push((format!("evicted {}", units::count(s.evicted as f64)), true));
    }
    v.push((format!("ranks {}", s.rank_count()), false));
    if !app.filter.is_empty() {
        v.push((format!("filter {:?}", app.filter), false));
    }
    match &app.last_snapshot {
        Some(Ok(p)) => v.push((format!("snapshot {}", p.display()), false)),
        Some(Err(e)) => v.push((format!("snapshot FAILED: {e}"), true)),
        None => {}
    }
    v
}

pub fn render(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let y = area.y;
    let mut x = area.x;
    let bar = th.selected();
    buf.set_style(Rect { height: 1, ..area }, bar);
    for (i, (text, bad)) in parts(app).iter().enumerate() {
        let sep = if i == 0 { " " } else { " · " };
        x = put(buf, x, y, sep, bar, area.right().saturating_sub(x));
        let st = if *bad { bar.patch(th.bad()) } else { bar };
        x = put(buf, x, y, text, st, area.right().saturating_sub(x));
    }
    if area.height < 2 {
        return;
    }
    let y = y + 1;
    if let Some(edit) = &app.filter_edit {
        let t = format!("/{edit}▏  (Enter apply · Esc cancel · filters by function name)");
        put(buf, area.x, y, &t, th.warn(), area.width);
    } else if let Some(m) = &app.message {
        put(buf, area.x, y, m, th.warn(), area.width);
    } else if let Some(e) = app.store.errors.last() {
        put(buf, area.x, y, &format!("! {e}"), th.bad(), area.width);
    } else {
        let hint = "? help · q quit · Tab/1-5 views · c comm · f follow · +/- zoom · ←/→ pan · s snapshot · / filter";
        put(buf, area.x, y, hint, th.dim(), area.width);
    }
    let _ = Style::default();
}
