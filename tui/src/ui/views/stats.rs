//! Stats: per function × size bucket of the selected communicator over the visible window:
//! count, p50/p99/max duration, algbw and busbw (nccl-tests definitions), algos/protos seen.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use crate::app::App;
use crate::model::analysis::{self, OpSample};
use crate::model::units;
use crate::ui::put;
use crate::ui::theme::Theme;

/// Most ops per rank read per frame; beyond it the table is computed from an even sample
/// (counts scaled back) and says so.
pub const MAX_OPS_PER_LANE: usize = 2048;

pub fn rows(app: &App) -> Vec<analysis::StatRow> {
    rows_sampled(app).0
}

/// The rows and whether they come from a sample.
pub fn rows_sampled(app: &App) -> (Vec<analysis::StatRow>, bool) {
    let s = &app.store;
    let (from, to) = app.window();
    let rows = s.lane_rows(app.comm);
    // Strings are borrowed from the store: no allocation per op; each sample goes into its
    // group as it is read, not into a slice of every sample first.
    let mut groups = analysis::StatGroups::default();
    let mut nranks = 1;
    let mut sampled = false;
    for r in &rows {
        let Some(l) = r.lane else { continue };
        let n = s.nranks_of(r.key);
        nranks = nranks.max(n);
        let p = s.proc_of_lane(l);
        let (ops, stands_for) = s.ops_strided(l, from, to, MAX_OPS_PER_LANE);
        sampled |= stands_for > 1.0;
        for o in ops {
            if o.start < from
                || o.end > to
                || o.end <= o.start
                || o.flags & ncclprof_shared::record::F_END_UNKNOWN != 0
            {
                continue;
            }
            let func = p.string(o.strings[0]);
            if !app.passes(func) {
                continue;
            }
            groups.add_sample(
                &OpSample {
                    func,
                    bytes: analysis::op_bytes(func, p.string(o.strings[1]), o.count, n),
                    dur_ns: exec_time(&o),
                    algo: p.string(o.strings[2]),
                    proto: p.string(o.strings[3]),
                },
                stands_for,
            );
        }
    }
    (groups.rows(nranks), sampled)
}

/// An op's time as nccl-tests would time it ([`analysis::run_time`]).
pub fn exec_time(o: &crate::model::store::Op) -> u64 {
    analysis::run_time(o.start, o.end, o.exec_start)
}

fn size(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{}G", b >> 30)
    } else if b >= 1 << 20 {
        format!("{}M", b >> 20)
    } else if b >= 1 << 10 {
        format!("{}K", b >> 10)
    } else {
        format!("{b}")
    }
}

pub fn render(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let (from, to) = app.window();
    put(
        buf,
        area.x,
        area.y,
        &format!(
            "completed ops in the window ({}) · time from execution start · bandwidth from mean time · GB = 1e9 B",
            units::dur(to - from)
        ),
        th.title(),
        area.width,
    );
    let head = format!(
        "{:<14} {:>9} {:>6} {:>9} {:>9} {:>9} {:>8} {:>8}  {}",
        "func", "size", "count", "p50", "p99", "max", "algbw", "busbw", "algo/proto"
    );
    put(buf, area.x, area.y + 1, &head, th.bold(), area.width);
    let (rs, sampled) = rows_sampled(app);
    if sampled {
        put(
            buf,
            area.x + area.width.saturating_sub(24),
            area.y,
            " (sampled: zoom in) ",
            th.warn(),
            24,
        );
    }
    if rs.is_empty() {
        put(
            buf,
            area.x,
            area.y + 3,
            "no completed ops in the window (zoom out with -)",
            th.dim(),
            area.width,
        );
        return;
    }
    let first = app.tl.row.min(rs.len().saturating_sub(1));
    for (i, r) in rs.iter().skip(first).enumerate() {
        let y = area.y + 2 + i as u16;
        if y >= area.bottom() {
            break;
        }
        let t = format!(
            "{:<14} {:>9} {:>6} {:>9} {:>9} {:>9} {:>8.2} {:>8.2}  {}/{}",
            r.func,
            format!("{}-{}", size(r.bucket.0), size(r.bucket.1)),
            r.count,
            units::dur(r.p50),
            units::dur(r.p99),
            units::dur(r.max),
            r.algbw,
            r.busbw,
            if r.algos.is_empty() {
                "-".to_string()
            } else {
                r.algos.join(",")
            },
            if r.protos.is_empty() {
                "-".to_string()
            } else {
                r.protos.join(",")
            }
        );
        put(buf, area.x, y, &t, th.func(&r.func), area.width);
    }
    let _ = Style::default();
}
