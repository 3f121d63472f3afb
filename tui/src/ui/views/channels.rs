//! Channels: per-channel KernelCh GPU durations for the selected op, or aggregated over the
//! visible window: bars per channel, a rank × channel heatmap, min/mean/max and imbalance.

use std::collections::BTreeMap;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use crate::app::App;
use crate::model::analysis;
use crate::model::units;
use crate::ui::put;
use crate::ui::theme::{HEAT, Theme};
use crate::ui::views::in_flight;
use ncclprof_shared::kind::EventKind;

/// (rank, channel) → (sum of durations, count).
/// (rank, channel) → (sum of durations, count).
pub type PerChannel = BTreeMap<(i32, u8), (u64, u64)>;

pub fn gather(app: &App) -> (String, PerChannel) {
    let s = &app.store;
    let mut m: BTreeMap<(i32, u8), (u64, u64)> = BTreeMap::new();
    let mut add = |rank: i32, ch: u8, d: u64| {
        let e = m.entry((rank, ch)).or_insert((0, 0));
        e.0 += d;
        e.1 += 1;
    };
    if let Some(k) = app.tl.selected
        && let Some(o) = s.op(k)
    {
        let rank = s.lanes[k.lane].key.rank;
        for kc in s.kernels_of(k.lane, &o) {
            add(rank, kc.channel, kc.end.saturating_sub(kc.start));
        }
        let d = s.detail(k.lane, &o);
        return (
            format!(
                "selected op: {} seq {} on rank {} (Esc for the window)",
                d.func, d.seq, rank
            ),
            m,
        );
    }
    let (from, to) = app.window();
    for r in s.lane_rows(app.comm) {
        let Some(l) = r.lane else { continue };
        let wanted: Option<std::collections::HashSet<u64>> = if app.filter.is_empty() {
            None
        } else {
            Some(
                s.ops_in(l, from, to)
                    .iter()
                    .filter(|o| app.passes(s.func_of(l, o)))
                    .map(|o| o.id)
                    .collect(),
            )
        };
        // Summed by channel here, then once per channel into the map: a lookup in it for
        // each of up to 2 048 kernels per rank was nearly half of the view's frame.
        let mut per_channel = [(0u64, 0u64); 256];
        for kc in s.kernels_strided(l, from, to, 2048) {
            if wanted.as_ref().is_some_and(|w| !w.contains(&kc.parent)) {
                continue;
            }
            let e = &mut per_channel[usize::from(kc.channel)];
            e.0 += kc.end.saturating_sub(kc.start);
            e.1 += 1;
        }
        for (ch, &(sum, n)) in per_channel.iter().enumerate() {
            if n > 0 {
                let e = m.entry((r.rank, ch as u8)).or_insert((0, 0));
                e.0 += sum;
                e.1 += n;
            }
        }
    }
    (
        format!(
            "all kernels in the window ({}), mean per channel",
            units::dur(to - from)
        ),
        m,
    )
}

pub fn render(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    in_flight::render_above(app, th, area, buf, render_window);
}

/// What ended in the window (or in the selected op); `hung`: the block below lists hung ops.
fn render_window(app: &App, th: &Theme, area: Rect, hung: bool, buf: &mut Buffer) {
    let (title, m) = gather(app);
    put(buf, area.x, area.y, &title, th.title(), area.width);
    if m.is_empty() {
        let why =
            in_flight::empty_reason(app, EventKind::KernelCh, "no KernelCh events here", hung);
        put(buf, area.x, area.y + 2, &why, th.dim(), area.width);
        return;
    }
    // Per channel: mean over ranks of the mean duration.
    let mut per_ch: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
    for (&(_, ch), &(sum, n)) in &m {
        per_ch.entry(ch).or_default().push(sum / n.max(1));
    }
    let ch_means: Vec<(u8, u64)> = per_ch
        .iter()
        .map(|(&c, v)| (c, v.iter().sum::<u64>() / v.len() as u64))
        .collect();
    let vals: Vec<u64> = ch_means.iter().map(|x| x.1).collect();
    if let Some(sp) = analysis::spread(&vals) {
        let t = format!(
            "{} channels · min {} · mean {} · max {} · imbalance {:.2}× (max/mean)",
            vals.len(),
            units::dur(sp.min),
            units::dur(sp.mean as u64),
            units::dur(sp.max),
            sp.imbalance
        );
        let st = if sp.imbalance > 1.5 {
            th.warn()
        } else {
            Style::default()
        };
        put(buf, area.x, area.y + 1, &t, st, area.width);
    }
    let maxv = vals.iter().copied().max().unwrap_or(1).max(1);
    let body_h = area.height.saturating_sub(3);
    let bars_h = (body_h / 2).max(1).min(ch_means.len() as u16);
    let bar_w = area.width.saturating_sub(20);
    let mut y = area.y + 3;
    for (c, v) in ch_means.iter().take(bars_h as usize) {
        let n = ((*v as u128 * u128::from(bar_w)) / u128::from(maxv)) as usize;
        put(buf, area.x, y, &format!("ch {c:>2} "), Style::default(), 6);
        put(
            buf,
            area.x + 6,
            y,
            &"█".repeat(n.max(1)),
            th.heat(4 * *v as usize / maxv as usize),
            bar_w,
        );
        put(buf, area.x + 7 + n as u16, y, &units::dur(*v), th.dim(), 12);
        y += 1;
    }
    if ch_means.len() > bars_h as usize {
        put(
            buf,
            area.x,
            y,
            &format!("… {} more channels", ch_means.len() - bars_h as usize),
            th.dim(),
            area.width,
        );
        y += 1;
    }
    // Heatmap: rank rows × channel columns.
    y += 1;
    if y >= area.bottom() {
        return;
    }
    let chans: Vec<u8> = per_ch.keys().copied().collect();
    let ranks: Vec<i32> = {
        let mut r: Vec<i32> = m.keys().map(|k| k.0).collect();
        r.dedup();
        r
    };
    let cellmax = m
        .values()
        .map(|(s, n)| s / n.max(&1))
        .max()
        .unwrap_or(1)
        .max(1);
    put(
        buf,
        area.x,
        y,
        &format!(
            "rank × channel (· low → █ high, max {})",
            units::dur(cellmax)
        ),
        th.dim(),
        area.width,
    );
    y += 1;
    for r in ranks {
        if y >= area.bottom() {
            break;
        }
        put(buf, area.x, y, &format!("r{r:<4}"), Style::default(), 6);
        for (i, c) in chans.iter().enumerate() {
            let x = area.x + 6 + i as u16;
            if x >= area.right() {
                break;
            }
            if let Some(&(sum, n)) = m.get(&(r, *c)) {
                let v = sum / n.max(1);
                let lvl = ((v as u128 * 4) / u128::from(cellmax)) as usize;
                buf.set_string(x, y, HEAT[lvl.min(4)].to_string(), th.heat(lvl));
            } else {
                buf.set_string(x, y, " ", Style::default());
            }
        }
        y += 1;
    }
}
