//! Timeline: one row per rank of the selected communicator (grouped by host), ops as spans
//! coloured by function: thin `─` while enqueuing (start → enqueue stop), thick `█` while
//! executing (exec start → end), `▒` in flight (growing live), `▓ HUNG` for a hung op, `!`
//! where the rank arrived last at a collective (straggler). A details pane shows the
//! selected op.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use crate::app::App;
use crate::model::query::LaneRow;
use crate::model::store::Op;
use crate::model::units;
use crate::ui::put;
use crate::ui::theme::Theme;

const LABEL: u16 = 14;

fn col(t: u64, from: u64, span: u64, w: u16) -> u16 {
    if t <= from {
        return 0;
    }
    let c = ((t - from) as u128 * u128::from(w) / u128::from(span.max(1))) as u64;
    c.min(u64::from(w)) as u16
}

pub fn render(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let s = &app.store;
    let rows = s.lane_rows(app.comm);
    let (from, to) = app.window();
    let span = to - from;
    let detail_h: u16 = if app.tl.selected.is_some() { 4 } else { 0 };
    if area.height < 3 + detail_h || area.width <= LABEL + 4 {
        return;
    }
    let tw = area.width - LABEL;
    let x0 = area.x + LABEL;
    // Axis: window size and relative time labels.
    let base = if s.t_min == u64::MAX { 0 } else { s.t_min };
    put(
        buf,
        area.x,
        area.y,
        &format!("span {}", units::dur(span)),
        th.dim(),
        LABEL,
    );
    let ticks = (tw / 20).max(1);
    for i in 0..ticks {
        let cx = x0 + i * (tw / ticks);
        let t = from + span / u64::from(ticks) * u64::from(i);
        let label = if t >= base {
            format!("|+{}", units::dur(t - base))
        } else {
            format!("|-{}", units::dur(base - t))
        };
        put(
            buf,
            cx,
            area.y,
            &label,
            th.dim(),
            area.right().saturating_sub(cx),
        );
    }
    // Hung banner line.
    let rows_area_top = area.y + 2;
    let rows_h = area.height - 2 - detail_h;
    let first = app
        .tl
        .row
        .saturating_sub(rows_h.saturating_sub(1) as usize)
        .min(rows.len().saturating_sub(1));
    // One op per cell is enough to draw (unless filtering, which needs every op).
    let cell = if app.filter.is_empty() {
        span / u64::from(tw.max(1))
    } else {
        0
    };
    // Of the functions the filter shows: the banner counts the collectives on screen.
    // In-flight ops with their hang verdicts, of every row: the banner judges them all.
    let open_all = s.open_ops_of_rows(app.comm, &rows);
    let strag = s.stragglers_sampled(&rows, from, to, cell, |f| app.passes(f));
    let mut prev_host: Option<&str> = if first > 0 {
        rows.get(first - 1).map(|r| r.host.as_str())
    } else {
        None
    };
    for (i, r) in rows.iter().enumerate().skip(first).take(rows_h as usize) {
        let y = rows_area_top + (i - first) as u16;
        let host = if prev_host != Some(r.host.as_str()) {
            r.host.as_str()
        } else {
            ""
        };
        prev_host = Some(r.host.as_str());
        let label = format!("{:<8.8} r{:<3}", host, r.rank);
        let lst = if i == app.tl.row {
            th.selected()
        } else {
            Style::default()
        };
        put(buf, area.x, y, &label, lst, LABEL - 1);
        // The process's fate, where it is not streaming: ✗ crashed, ∎ ended.
        let mark = match s.procs[r.key.proc].state {
            crate::model::store::ProcState::Crashed => Some(("✗", th.bad())),
            crate::model::store::ProcState::Ended(_) => Some(("∎", th.dim())),
            _ => None,
        };
        if let Some((m, st)) = mark {
            put(buf, area.x + LABEL - 1, y, m, st, 1);
        }
        // In-flight ops first, so completed ops draw over them (`open_ops` leaves out those
        // completed since the summary), then the hung ones over the rest, with their tags.
        let open: Vec<_> = open_all[i]
            .iter()
            .filter(|o| app.passes(o.func))
            .map(|o| {
                let a = col(o.row.start, from, span, tw);
                let b = col(o.row.start + o.age_ns, from, span, tw)
                    .max(a + 1)
                    .min(tw);
                (a, b, o)
            })
            .collect();
        for hung in [false, true] {
            // Oldest first, so a later op shows where bars overlap; all end now, so each
            // op's visible part ends where a later one's begins. Painted newest first,
            // each cell once: a deep queue lists 512 ops, each a bar to now.
            let mut lo = tw;
            for (a, b, o) in open.iter().rev().filter(|(.., o)| o.hung == hung) {
                let (g, st) = if hung {
                    ('▓', th.bad())
                } else {
                    ('▒', th.func(o.func))
                };
                for c in *a..(*b).min(lo) {
                    if let Some(cell) = buf.cell_mut((x0 + c, y)) {
                        cell.set_char(g).set_style(st);
                    }
                }
                lo = lo.min(*a);
            }
        }
        row(app, th, r, &strag, (from, span, cell), (x0, y, tw), buf);
        // The tags last: a hung op that starts past the window's end is tagged at its edge,
        // where the completed ops drawn after it covered the tag's first letters.
        for (a, b, _) in open.iter().filter(|(.., o)| o.hung) {
            let tag = " HUNG ";
            let tx = (x0 + b).saturating_sub(tag.len() as u16).max(x0 + a);
            put(
                buf,
                tx,
                y,
                tag,
                th.bad().patch(th.selected()),
                area.right() - tx,
            );
        }
    }
    // Over every rank, not only the rows on screen.
    if let Some(h) = s.hang_summary_of(&rows, &open_all) {
        put(
            buf,
            area.x,
            area.y + 1,
            &format!("⚠ {}", hang_banner(&h)),
            th.bad(),
            area.width,
        );
    } else if let Some(st) = crate::model::analysis::straggler_summary(&strag) {
        put(
            buf,
            area.x,
            area.y + 1,
            &format!(
                "! straggler: rank {} was last at {} of {} late collectives, by {} (median)",
                st.rank,
                st.times,
                st.of,
                units::dur(st.median_lag_ns)
            ),
            th.warn(),
            area.width,
        );
    }
    if rows.is_empty() {
        put(
            buf,
            area.x,
            rows_area_top,
            "no ranks in this communicator yet",
            th.dim(),
            area.width,
        );
    }
    if detail_h > 0 {
        details(
            app,
            th,
            Rect {
                y: area.bottom() - detail_h,
                height: detail_h,
                ..area
            },
            &strag,
            buf,
        );
    }
}

fn row(
    app: &App,
    th: &Theme,
    r: &LaneRow,
    strag: &crate::model::analysis::Stragglers<'_>,
    (from, span, cell): (u64, u64, u64),
    (x0, y, tw): (u16, u16, u16),
    buf: &mut Buffer,
) {
    let Some(lane) = r.lane else { return };
    let s = &app.store;
    // Every op while they are few, one per cell by start beyond that. A burst of ops enqueued
    // together starts in one cell and runs over many: sampled by start, all but the first
    // vanished from the row.
    let many = s.lanes[lane].ops.count_in(from, from + span) > 8 * usize::from(tw.max(1));
    let selected = app.tl.selected.filter(|k| k.lane == lane);
    // Each cell once: running if any op ran there, else waiting if any op waited there, in
    // the colour of the last op that did (the selected op's on top). Ops queued together
    // overlap, and drawn one after the other each one's wait covered the runs before it; and
    // a cell is written once, not once per op over it.
    let mut cells: Vec<Option<(bool, Style)>> = vec![None; usize::from(tw)];
    let mut mark = |o: &Op, on_top: bool| {
        let func = s.func_of(lane, o);
        if !app.passes(func) {
            return;
        }
        let a = col(o.start, from, span, tw);
        let e = col(o.end, from, span, tw).max(a + 1).min(tw);
        let exec = if o.exec_start != 0 {
            o.exec_start
        } else if o.enq_stop != 0 {
            o.enq_stop
        } else {
            o.start
        };
        let m = col(exec.clamp(o.start, o.end.max(o.start)), from, span, tw).clamp(a, e);
        let st = if on_top {
            th.func(func).patch(th.selected())
        } else {
            th.func(func)
        };
        for cell in &mut cells[usize::from(a)..usize::from(m)] {
            if on_top || !matches!(cell, Some((true, _))) {
                *cell = Some((false, st));
            }
        }
        for cell in &mut cells[usize::from(m)..usize::from(e)] {
            *cell = Some((true, st));
        }
    };
    s.lanes[lane]
        .ops
        .window_sampled(from, from + span, if many { cell } else { 0 }, |_, o| {
            mark(o, false)
        });
    // (Not when it lies wholly outside the window: it was drawn as a cell at an edge.)
    let sel_op = selected
        .and_then(|k| s.op(k))
        .filter(|o| o.end.max(o.start) >= from && o.start <= from + span);
    if let Some(o) = &sel_op {
        mark(o, true);
    }
    for (c, cell) in cells.iter().enumerate() {
        if let Some((running, st)) = cell {
            let g = if *running { "█" } else { "─" };
            buf.set_string(x0 + c as u16, y, g, *st);
        }
    }
    // Straggler marks last, on top of any op's run (only collectives that have one).
    if !strag.is_empty() {
        s.lanes[lane]
            .ops
            .window_sampled(from, from + span, if many { cell } else { 0 }, |_, o| {
                let func = s.func_of(lane, o);
                if o.kind == ncclprof_shared::kind::EventKind::Coll as u8
                    && strag.get(&(func, o.seq)).is_some_and(|x| x.rank == r.rank)
                    && app.passes(func)
                {
                    let a = col(o.start, from, span, tw);
                    if a < tw {
                        buf.set_string(x0 + a, y, "!", th.warn());
                    }
                }
            });
    }
}

fn details(
    app: &App,
    th: &Theme,
    area: Rect,
    strag: &crate::model::analysis::Stragglers<'_>,
    buf: &mut Buffer,
) {
    let s = &app.store;
    let Some(k) = app.tl.selected else { return };
    put(
        buf,
        area.x,
        area.y,
        &"─".repeat(area.width as usize),
        th.dim(),
        area.width,
    );
    let Some(o) = s.op(k) else {
        put(
            buf,
            area.x,
            area.y + 1,
            "selected op was evicted",
            th.warn(),
            area.width,
        );
        return;
    };
    let d = s.detail(k.lane, &o);
    let seq = if d.kind == "P2p" {
        "-".to_string()
    } else {
        d.seq.to_string()
    };
    let l1 = format!(
        "{} {} seq {} · rank {} · count {} {} · {}/{} · {} ch{}",
        d.kind,
        d.func,
        seq,
        d.rank,
        d.count,
        d.dtype,
        if d.algo.is_empty() { "-" } else { &d.algo },
        if d.proto.is_empty() { "-" } else { &d.proto },
        d.n_channels,
        if d.kind == "P2p" {
            format!(" · peer {}", d.peer_or_root)
        } else {
            String::new()
        }
    );
    let l2 = format!(
        "bytes {} · duration {} (enqueue {}) · algbw {:.2} GB/s · busbw {:.2} GB/s",
        units::bytes(d.bytes),
        units::dur(d.dur_ns),
        units::dur(d.enqueue_ns),
        d.algbw,
        d.busbw
    );
    put(
        buf,
        area.x,
        area.y + 1,
        &l1,
        th.func(&d.func).patch(th.bold()),
        area.width,
    );
    put(buf, area.x, area.y + 2, &l2, Style::default(), area.width);
    if let Some(st) = strag
        .get(&(d.func.as_str(), d.seq))
        .filter(|_| d.kind == "Coll")
    {
        let t = format!(
            "straggler at {} seq {}: rank {} arrived last, {} after the others' median start",
            d.func,
            d.seq,
            st.rank,
            units::dur(st.lag_ns)
        );
        put(buf, area.x, area.y + 3, &t, th.warn(), area.width);
    }
}

/// The hang banner's text. Where the hung op's collective is in flight on some ranks and has
/// not been started on others, it says so, rank by rank, with what evidence it has; it does
/// not accuse (a rank may lag for reasons of its own, or run an extra call).
pub fn hang_banner(h: &crate::model::query::HangSummary) -> String {
    let o = &h.op;
    let mut gone: Vec<String> = h
        .gone
        .iter()
        .take(3)
        .map(|(rank, state)| format!("rank {rank}'s process {state}"))
        .collect();
    if h.gone.len() > 3 {
        gone.push(format!("{} more ranks' processes gone", h.gone.len() - 3));
    }
    if h.not_started.is_empty() {
        return one_op_banner(h, &gone);
    }
    let time = match o.running_ns {
        Some(run) => format!("running {}", units::dur(run)),
        None => format!("queued {}", units::dur(o.age_ns)),
    };
    let now = o.row.start + o.age_ns;
    let mut named: Vec<String> = h
        .not_started
        .iter()
        .take(6)
        .map(|n| {
            let mut s = n.rank.to_string();
            if let Some((f, kind, q)) = &n.busy_in {
                s.push_str(&format!(" (in {f} {})", seq_or_peer(*kind, *q)));
            } else if let (Some((q, end)), 1) = (n.last, h.not_started.len()) {
                s.push_str(&format!(" (its last seq {q}"));
                if end > 0 {
                    s.push_str(&format!(
                        " ended {} ago",
                        units::dur(now.saturating_sub(end))
                    ));
                }
                s.push(')');
            }
            s
        })
        .collect();
    if h.not_started.len() > 6 {
        named.push(format!("+{} more", h.not_started.len() - 6));
    }
    let which = if h.not_started.len() == 1 {
        "rank"
    } else {
        "ranks"
    };
    let mut notes = vec![format!("not started on {which} {}", named.join(", "))];
    notes.extend(gone);
    if h.unknown > 0 {
        notes.push(format!("{} not known", h.unknown));
    }
    let seen = if h.declared > h.ranks {
        format!(" seen ({} in the communicator)", h.declared)
    } else {
        String::new()
    };
    let more = if h.more > 0 {
        format!(" (+{} more hung ops)", h.more)
    } else {
        String::new()
    };
    format!(
        "HUNG: {} seq {} {time} on {} of {} ranks{seen}; {}{more}",
        o.func,
        o.row.seq,
        h.ranks_in,
        h.ranks,
        notes.join("; "),
    )
}

/// The banner for the oldest hung op alone, with `notes` on gone processes.
fn one_op_banner(h: &crate::model::query::HangSummary, notes: &[String]) -> String {
    let o = &h.op;
    let median = o.peer_median.map_or("n/a".into(), units::dur);
    let notes: String = notes.iter().map(|n| format!("; {n}")).collect();
    let more = if h.more > 0 {
        format!(" (+{} more)", h.more)
    } else {
        String::new()
    };
    let what = format!(
        "HUNG: rank {} {} {}",
        h.rank,
        o.func,
        seq_or_peer(o.row.kind, o.row.seq)
    );
    match o.running_ns {
        Some(run) => format!(
            "{what} running {} (peers' median run {median}; enqueued {} ago){more}{notes}",
            units::dur(run),
            units::dur(o.age_ns),
        ),
        None => format!(
            "{what} in flight {}, not started (peers' median {median}){more}{notes}",
            units::dur(o.age_ns),
        ),
    }
}

/// An op's number as the banner says it: "seq N" for a collective, "peer N" for a send/recv,
/// whose in-flight `seq` field holds its peer (`OpenOp::seq`), not a sequence number.
pub(crate) fn seq_or_peer(kind: u8, seq: u64) -> String {
    if kind == ncclprof_shared::kind::EventKind::P2p as u8 {
        format!("peer {}", seq as u32)
    } else {
        format!("seq {seq}")
    }
}
