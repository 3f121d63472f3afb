//! Proxy: per rank / channel / peer stacked bars of ProxyStep phases in the visible window,
//! with percentages and absolute times; the dominant phase names the bottleneck.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use crate::app::App;
use crate::model::analysis;
use crate::model::units;
use crate::ui::put;
use crate::ui::theme::{PHASE_GLYPHS, Theme};
use crate::ui::views::in_flight;
use ncclprof_shared::kind::EventKind;

pub fn render(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    in_flight::render_above(app, th, area, buf, render_window);
}

/// What ended in the window (or in the selected op); `hung`: the block below lists hung ops.
fn render_window(app: &App, th: &Theme, area: Rect, hung: bool, buf: &mut Buffer) {
    let s = &app.store;
    // The selected op's time span (on every rank), else the visible window.
    let selected = app.tl.selected.and_then(|k| s.op(k).map(|o| (k, o)));
    let (from, to) = match &selected {
        Some((_, o)) => (o.start, o.end.max(o.start)),
        None => app.window(),
    };
    let mut lines = Vec::new();
    let mut total = [0u64; 6];
    let mut names = [""; 6];
    for r in s.lane_rows(app.comm) {
        let Some(l) = r.lane else { continue };
        for ((ch, peer, send), (ph, n)) in s.step_breakdown(l, from, to) {
            let off = if send { 0 } else { 3 };
            for (i, (p, d)) in ph.iter().enumerate() {
                total[off + i] += d;
                names[off + i] = p.name();
            }
            lines.push((r.rank, ch, peer, send, ph, n));
        }
    }
    put(
        buf,
        area.x,
        area.y,
        &format!(
            // Steps overlap (up to 8 in flight per connection), so a sum can exceed the window.
            "proxy step phases in the window ({}); times are sums over steps",
            units::dur(to - from)
        ),
        th.title(),
        area.width,
    );
    if lines.is_empty() {
        // (Only network connections have proxy steps.)
        let why = in_flight::empty_reason(
            app,
            EventKind::ProxyStep,
            "no ProxyStep events here (network transport only)",
            hung,
        );
        put(buf, area.x, area.y + 2, &why, th.dim(), area.width);
        return;
    }
    let phases: Vec<(ncclprof_shared::kind::StepPhase, u64)> = {
        use ncclprof_shared::kind::StepPhase::*;
        let all = [
            SendGpuWait,
            SendPeerWait,
            SendNetWait,
            RecvNetWait,
            RecvFlushWait,
            RecvGpuWait,
        ];
        all.iter().zip(total).map(|(p, t)| (*p, t)).collect()
    };
    if let Some((p, cat)) = analysis::bottleneck(&phases) {
        let sum: u64 = total.iter().sum::<u64>().max(1);
        let share = phases.iter().find(|x| x.0 == p).map_or(0, |x| x.1) * 100 / sum;
        let mut text = format!("bottleneck: {cat} ({} is {share}% of step time)", p.name());
        // The connection whose steps take longest, to find among hundreds of rows; of those
        // with at least a tenth as many steps as the busiest, so one slow step among a few
        // does not outrank hundreds.
        let busiest = lines.iter().map(|l| l.5).max().unwrap_or(0);
        if let Some((rank, ch, peer, send, ph, n)) = lines
            .iter()
            .filter(|l| l.5 > 0 && l.5 * 10 >= busiest)
            .max_by_key(|l| l.4.iter().map(|p| p.1).sum::<u64>() / l.5)
        {
            let dir = if *send { "→" } else { "←" };
            let mean = ph.iter().map(|p| p.1).sum::<u64>() / *n;
            let what = analysis::bottleneck(ph).map_or("-", |b| b.1);
            text.push_str(&format!(
                " · slowest steps: r{rank} ch{ch} {dir}{peer}, {} each of {n} ({what})",
                units::dur(mean)
            ));
        }
        put(buf, area.x, area.y + 1, &text, th.warn(), area.width);
    }
    put(
        buf,
        area.x,
        area.y + 2,
        &format!(
            "legend: {} GPU wait  {} peer wait / flush  {} network   (send: gpu·peer·net, recv: net·flush·gpu)",
            PHASE_GLYPHS[0], PHASE_GLYPHS[1], PHASE_GLYPHS[2]
        ),
        th.dim(),
        area.width,
    );
    let bar_w: u16 = if area.width >= 120 { 40 } else { 20 };
    let first = app.tl.row.min(lines.len().saturating_sub(1));
    for (y, (rank, ch, peer, send, ph, n)) in (area.y + 3..).zip(lines.iter().skip(first)) {
        if y >= area.bottom() {
            break;
        }
        let dir = if *send { "→" } else { "←" };
        let label = format!("r{rank:<3} ch{ch:<2} {dir}{peer:<3} ");
        let mut x = put(buf, area.x, y, &label, Style::default(), area.width);
        let sum: u64 = ph.iter().map(|p| p.1).sum::<u64>().max(1);
        // Map to the glyph of what the phase waits on.
        for (p, d) in ph {
            let cat = analysis::phase_category(*p);
            let gi = match cat {
                "GPU" => 0,
                "peer" => 1,
                _ => 2,
            };
            let gi = if *p == ncclprof_shared::kind::StepPhase::RecvFlushWait {
                1
            } else {
                gi
            };
            let w = (*d as u128 * u128::from(bar_w) / u128::from(sum)) as usize;
            x = put(
                buf,
                x,
                y,
                &PHASE_GLYPHS[gi].to_string().repeat(w),
                th.phase(gi),
                area.right().saturating_sub(x),
            );
        }
        let pad = (area.x + label.chars().count() as u16 + bar_w + 1).max(x + 1);
        let pct: Vec<String> = ph
            .iter()
            .map(|p| format!("{:>2}%", p.1 * 100 / sum))
            .collect();
        let abs: Vec<String> = ph.iter().map(|p| units::dur(p.1)).collect();
        let dom = analysis::bottleneck(ph).map_or("-", |b| b.1);
        let t = format!(
            "{} · {} · {} steps · {}",
            pct.join(" "),
            abs.join(" "),
            n,
            dom
        );
        put(
            buf,
            pad,
            y,
            &t,
            Style::default(),
            area.right().saturating_sub(pad),
        );
    }
    let _ = names;
}
