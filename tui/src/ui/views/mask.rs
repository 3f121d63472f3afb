//! Events / mask: the activation mask as named checkboxes (requested vs acknowledged), start /
//! stop, the target (all processes or one), and per-process counters: events/s by kind and
//! drops by reason.

use crate::model::store::DropReason;
use ncclprof_shared::kind::EventKind;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use crate::app::App;
use crate::model::store::ProcState;
use crate::model::units;
use crate::ui::put;
use crate::ui::theme::Theme;

fn state(p: &crate::model::store::Proc) -> String {
    match &p.state {
        ProcState::Live => "live".into(),
        ProcState::Ended(r) => format!("ended ({r})"),
        ProcState::Crashed => "CRASHED".into(),
        ProcState::Offline => "file".into(),
    }
}

pub fn render(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let s = &app.store;
    let sel = s.procs.get(app.mask.proc);
    let target = if app.mask.all {
        format!("all processes ({})", s.procs.len())
    } else {
        sel.map_or("none".into(), |p| format!("pid {} only", p.pid))
    };
    // Acknowledged mask: of the selected process (or the first).
    let ack = sel.or(s.procs.first());
    let ack_mask = ack.map(|p| p.mask);
    let pending_ack = s.procs.iter().filter(|p| !p.acked).count();
    put(
        buf,
        area.x,
        area.y,
        &format!(
            "requested 0x{:04x} · acknowledged {} · target {} [t]{}",
            app.mask.pending,
            ack_mask.map_or("-".into(), |m| format!("0x{m:04x}")),
            target,
            if pending_ack > 0 {
                format!(" · waiting for {pending_ack} ack(s)")
            } else {
                String::new()
            }
        ),
        th.title(),
        area.width,
    );
    let active = ack.is_some_and(|p| p.active);
    put(
        buf,
        area.x,
        area.y + 1,
        &format!(
            "profiling {} [p] · Space toggles a kind · a all · d default{}",
            if active { "STARTED" } else { "STOPPED" },
            if app.live {
                ""
            } else {
                " · (offline: read-only)"
            }
        ),
        if active { th.good() } else { th.warn() },
        area.width,
    );
    let list_w: u16 = 34;
    put(
        buf,
        area.x,
        area.y + 2,
        "    kind          req  ack",
        th.bold(),
        list_w,
    );
    for (i, k) in EventKind::ALL.iter().enumerate() {
        let y = area.y + 3 + i as u16;
        if y >= area.bottom() {
            break;
        }
        let req = app.mask.pending & k.bit() != 0;
        let acked = ack_mask.is_some_and(|m| m & k.bit() != 0);
        let t = format!(
            "{} {:<2} {:<13} [{}]  [{}]{}",
            if i == app.mask.cursor { '>' } else { ' ' },
            i,
            k.name(),
            if req { 'x' } else { ' ' },
            if acked { 'x' } else { ' ' },
            if req != acked { " *" } else { "" }
        );
        let st = if i == app.mask.cursor {
            th.selected()
        } else {
            Style::default()
        };
        put(buf, area.x, y, &t, st, list_w);
    }
    // Processes.
    let px = area.x + list_w + 1;
    if px + 20 >= area.right() {
        return;
    }
    let pw = area.right() - px;
    put(
        buf,
        px,
        area.y + 2,
        "pid      host       state     ev/s  drops",
        th.bold(),
        pw,
    );
    let mut y = area.y + 3;
    for (i, p) in s.procs.iter().enumerate() {
        if y >= area.y + 3 + 6 || y >= area.bottom() {
            break;
        }
        let t = format!(
            "{:<8} {:<10.10} {:<8.8} {:>6} {:>6}",
            p.pid,
            p.host,
            state(p),
            units::count(p.rates.iter().sum()),
            p.dropped()
        );
        let mut st = if p.dropped() > 0 || p.state == ProcState::Crashed {
            th.bad()
        } else {
            Style::default()
        };
        if i == app.mask.proc {
            st = st.patch(th.selected());
        }
        put(buf, px, y, &t, st, pw);
        y += 1;
    }
    if s.procs.len() > 6 {
        put(
            buf,
            px,
            y,
            &format!("… {} more (< > select)", s.procs.len() - 6),
            th.dim(),
            pw,
        );
        y += 1;
    }
    if !s.busy.is_empty() {
        let pids: Vec<String> = s.busy.iter().take(8).map(u32::to_string).collect();
        let t = format!("busy (another viewer attached): pid {}", pids.join(", "));
        put(buf, px, y, &t, th.warn(), pw);
        y += 1;
    }
    let Some(p) = sel else {
        put(buf, px, y + 1, "no processes yet", th.dim(), pw);
        return;
    };
    y += 1;
    if y < area.bottom() {
        put(
            buf,
            px,
            y,
            &format!(
                "pid {} · {} · api v{} · {}",
                p.pid, p.host, p.api_version, p.plugin_version
            ),
            th.bold(),
            pw,
        );
        y += 1;
    }
    let rates: Vec<String> = EventKind::ALL
        .iter()
        .filter_map(|k| {
            let r = p.rates.get(*k as usize).copied().unwrap_or(0.0);
            (r > 0.0).then(|| format!("{} {}/s", k.name(), units::count(r)))
        })
        .collect();
    if y < area.bottom() {
        let t = if rates.is_empty() {
            "events/s: -".to_string()
        } else {
            format!("events/s: {}", rates.join(", "))
        };
        put(buf, px, y, &t, Style::default(), pw);
        y += 1;
    }
    let drops = p
        .counters
        .as_ref()
        .map(|c| c.dropped.clone())
        .unwrap_or_default();
    let dtext: Vec<String> = DropReason::ALL
        .iter()
        .filter_map(|r| {
            let n = drops.get(*r as usize).copied().unwrap_or(0);
            (n > 0).then(|| format!("{} {n}", r.name()))
        })
        .collect();
    if y < area.bottom() {
        let (t, st) = if dtext.is_empty() {
            ("drops: none".to_string(), th.good())
        } else {
            (format!("drops: {}", dtext.join(", ")), th.bad())
        };
        put(buf, px, y, &t, st, pw);
        y += 1;
    }
    // What would have kept them: the plugin's knob for each reason that has one.
    for r in DropReason::ALL {
        let (n, Some(fix)) = (drops.get(r as usize).copied().unwrap_or(0), r.remedy()) else {
            continue;
        };
        if n == 0 || y >= area.bottom() {
            continue;
        }
        put(buf, px, y, &format!("  {}: {fix}", r.name()), th.warn(), pw);
        y += 1;
    }
    let total: Vec<u64> = s.dropped_by_reason();
    if y < area.bottom() && total.iter().any(|&d| d > 0) {
        let t: Vec<String> = DropReason::ALL
            .iter()
            .filter_map(|r| {
                let n = total.get(*r as usize).copied().unwrap_or(0);
                (n > 0).then(|| format!("{} {n}", r.name()))
            })
            .collect();
        put(
            buf,
            px,
            y,
            &format!("all processes: {}", t.join(", ")),
            th.bad(),
            pw,
        );
        y += 1;
    }
    for e in p.errors.iter().rev().take(2) {
        if y >= area.bottom() {
            break;
        }
        put(buf, px, y, e, th.bad(), pw);
        y += 1;
    }
}
