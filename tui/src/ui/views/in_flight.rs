//! How far the hung ops got, for the Channels and Proxy views: during a hang nothing ends, so
//! a window of finished kernels and steps is empty just when the user comes to ask which
//! channel is stuck. The plugins' in-flight summaries still say, per op, its oldest proxy
//! step still open (channel, step, since when: where it waits), how many kernel channels have
//! ended and how many proxy steps each channel has done; a channel behind the others is
//! where the collective stopped.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use ncclprof_shared::kind::EventKind;

use crate::app::App;
use crate::model::store::ProcState;
use crate::model::units;
use crate::ui::put;
use crate::ui::theme::Theme;
use crate::ui::views::timeline::seq_or_peer;

/// One line per rank of the communicator on screen that has a hung op (its oldest one), and
/// one per rank the timeline's banner names as not having started the hung collective; each
/// with whether it is where to look (a channel behind the others, a rank absent).
fn hung_lines(app: &App) -> Vec<(String, bool)> {
    let s = &app.store;
    let rows = s.lane_rows(app.comm);
    let open = s.open_ops_of_rows(app.comm, &rows);
    let mut out = Vec::new();
    let Some(summary) = s.hang_summary_of(&rows, &open) else {
        return out;
    };
    let now = summary.op.row.start + summary.op.age_ns;
    for (r, ops) in rows.iter().zip(&open) {
        if let Some(n) = summary.not_started.iter().find(|n| n.rank == r.rank) {
            let last = match n.last {
                Some((seq, end)) if end > 0 => format!(
                    " (its last, seq {seq}, ended {} ago)",
                    units::dur(now.saturating_sub(end))
                ),
                Some((seq, _)) => format!(" (its last: seq {seq})"),
                None => String::new(),
            };
            let what = format!("{} seq {}", summary.op.func, summary.op.row.seq);
            out.push((format!("r{:<3} has not started {what}{last}", r.rank), true));
            continue;
        }
        let Some(o) = ops.iter().find(|o| o.hung) else {
            continue;
        };
        let what = format!("{} {}", o.func, seq_or_peer(o.row.kind, o.row.seq));
        let time = match o.running_ns {
            Some(t) => format!("running {}", units::dur(t)),
            None => format!("queued {}", units::dur(o.age_ns)),
        };
        let steps = &o.row.steps_done;
        let (list, behind) = if steps.is_empty()
            || o.row.kind == EventKind::Coll as u8 && steps.len() >= o.row.n_channels as usize
        {
            progress(steps)
        } else {
            // A send/recv's channels are not 0..n (NCCL spreads them by peer): which of
            // those listed it runs on is not known here, so no channel is said to be behind.
            // (Nor in a snapshot written before steps were kept per channel: one sum.)
            let n: u64 = steps.iter().map(|&x| u64::from(x)).sum();
            (format!("steps done: {n}"), None)
        };
        // Where it waits: its oldest step still open, in what state, for how long.
        let waits = o.row.oldest_step.map_or(String::new(), |st| {
            let open = (o.row.start + o.age_ns).saturating_sub(st.start_ns);
            let state = ncclprof_shared::kind::state::step_state(u32::from(st.state))
                .map_or(String::new(), |(name, what)| {
                    format!(" in {name}, waiting for {what}")
                });
            format!(
                " · oldest open step: ch {} step {}{state} ({})",
                st.channel,
                st.step,
                units::dur(open)
            )
        });
        // The verdicts first, the per-channel list last: it may run past the screen's edge.
        let behind_text = behind
            .as_deref()
            .map_or(String::new(), |b| format!(" · {b}"));
        out.push((
            format!(
                "r{:<3} {what} · {time}{waits} · kernels ended {}/{}{behind_text} · {list}",
                r.rank, o.row.channels_done, o.row.n_channels
            ),
            behind.is_some(),
        ));
    }
    out
}

/// "steps done per channel: 4 4 1 4", and which channels are behind the others, if any.
fn progress(steps: &[u32]) -> (String, Option<String>) {
    if steps.is_empty() {
        return ("no proxy steps reported".into(), None);
    }
    let per: Vec<String> = steps.iter().map(u32::to_string).collect();
    let list = format!("steps done per channel: {}", per.join(" "));
    let (min, max) = (
        steps.iter().copied().min().unwrap_or(0),
        steps.iter().copied().max().unwrap_or(0),
    );
    if min == max {
        return (list, None);
    }
    let behind: Vec<String> = steps
        .iter()
        .enumerate()
        .filter(|&(_, &n)| n == min)
        .map(|(c, _)| c.to_string())
        .collect();
    let which = if behind.len() > 4 {
        format!("{} channels", behind.len())
    } else {
        format!("ch {}", behind.join(", "))
    };
    let steps_word = if min == 1 { "step" } else { "steps" };
    (
        list,
        Some(format!(
            "behind: {which} ({min} {steps_word}, others up to {max})"
        )),
    )
}

/// Draw a view of what ended in the window (`window`: app, theme, its rows, whether the block
/// lists hung ops, buffer) with the hung ops' progress at the bottom: during a hang, what the
/// window holds is not it. The view is drawn into a buffer of its own rows, so a view
/// squeezed into a few rows is cut there, not drawn over the block or the status bar.
pub fn render_above(
    app: &App,
    th: &Theme,
    area: Rect,
    buf: &mut Buffer,
    window: fn(&App, &Theme, Rect, bool, &mut Buffer),
) {
    let hung = hung_lines(app);
    let (top, below) = split(&hung, area);
    let mut view = Buffer::empty(top);
    window(app, th, top, !hung.is_empty(), &mut view);
    buf.merge(&view);
    render(&hung, th, below, buf);
}

/// `area` split into the view's part and the block's at its bottom (no rows without hung
/// ops; at most half of it).
fn split(lines: &[(String, bool)], area: Rect) -> (Rect, Rect) {
    let h = if lines.is_empty() {
        0
    } else {
        (lines.len().min(usize::from(area.height)) as u16)
            .saturating_add(2)
            .min(area.height / 2)
    };
    let top = Rect {
        height: area.height - h,
        ..area
    };
    let bottom = Rect {
        y: area.y + top.height,
        height: h,
        ..area
    };
    (top, bottom)
}

/// Draw the block in `area` (a rule's worth of space above its heading, then one line per
/// rank while they fit, then how many did not).
fn render(lines: &[(String, bool)], th: &Theme, area: Rect, buf: &mut Buffer) {
    if lines.is_empty() || area.height < 2 {
        return;
    }
    let mut y = area.y + 1;
    put(
        buf,
        area.x,
        y,
        "hung, still in flight (the plugins' latest summaries):",
        th.bad(),
        area.width,
    );
    y += 1;
    let room = usize::from(area.bottom().saturating_sub(y));
    let shown = if lines.len() > room {
        room.saturating_sub(1)
    } else {
        lines.len()
    };
    for (text, behind) in &lines[..shown] {
        let st = if *behind { th.warn() } else { Style::default() };
        put(buf, area.x, y, text, st, area.width);
        y += 1;
    }
    if shown < lines.len() && y < area.bottom() {
        put(
            buf,
            area.x,
            y,
            &format!("… {} more ranks", lines.len() - shown),
            th.dim(),
            area.width,
        );
    }
}

/// Why a view of `kind` events is empty, for its one line: off in a live process's mask (the
/// fix is view 5), or the hang below, or simply none in the window (`none`; or in a file).
pub fn empty_reason(app: &App, kind: EventKind, none: &str, hung: bool) -> String {
    let s = &app.store;
    let what = kind.name();
    let off = s.lane_rows(app.comm).iter().any(|r| {
        let p = &s.procs[r.key.proc];
        p.state == ProcState::Live && p.mask & kind.bit() == 0
    });
    if off {
        format!("no {what} events here: {what} is off in the mask (view 5 turns it on)")
    } else if hung {
        format!(
            "no {what} event ended in the window: the job is hung (below: how far each rank got)"
        )
    } else {
        none.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::progress;

    #[test]
    fn progress_names_the_channels_behind() {
        assert_eq!(
            progress(&[4, 4, 1, 4]),
            (
                "steps done per channel: 4 4 1 4".into(),
                Some("behind: ch 2 (1 step, others up to 4)".into())
            )
        );
        assert_eq!(
            progress(&[3, 3]),
            ("steps done per channel: 3 3".into(), None)
        );
        assert_eq!(progress(&[]), ("no proxy steps reported".into(), None));
        let (_, b) = progress(&[0, 0, 0, 0, 0, 2]);
        assert_eq!(
            b.as_deref(),
            Some("behind: 5 channels (0 steps, others up to 2)")
        );
    }
}
