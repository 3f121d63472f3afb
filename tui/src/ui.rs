//! Root layout: header (views, communicator), the active view, status bar, hint line and the
//! help overlay.

pub mod help;
pub mod status_bar;
pub mod theme;
pub mod views;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use crate::app::App;
use theme::Theme;
use views::ViewId;

/// Write `text` at (x, y) clipped to `w` cells.
pub fn put(buf: &mut Buffer, x: u16, y: u16, text: &str, style: Style, w: u16) -> u16 {
    let a = buf.area;
    if w == 0 || y < a.y || y >= a.bottom() || x < a.x || x >= a.right() {
        return x;
    }
    buf.set_stringn(x, y, text, w as usize, style).0
}

/// Draw the whole screen.
pub fn render(f: &mut Frame<'_>, app: &App) {
    let area = f.area();
    draw(app, area, f.buffer_mut());
}

/// Draw into a buffer (used by `render` and the tests).
pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let th = Theme::new(app.no_color);
    if area.height < 4 || area.width < 20 {
        put(
            buf,
            area.x,
            area.y,
            "terminal too small",
            th.bad(),
            area.width,
        );
        return;
    }
    header(app, &th, Rect { height: 1, ..area }, buf);
    let body = Rect {
        y: area.y + 1,
        height: area.height - 3,
        ..area
    };
    if app.store.comms.is_empty() && app.view != ViewId::Mask {
        waiting(app, &th, body, buf);
    } else {
        match app.view {
            ViewId::Timeline => views::timeline::render(app, &th, body, buf),
            ViewId::Channels => views::channels::render(app, &th, body, buf),
            ViewId::Proxy => views::proxy::render(app, &th, body, buf),
            ViewId::Stats => views::stats::render(app, &th, body, buf),
            ViewId::Mask => views::mask::render(app, &th, body, buf),
        }
    }
    status_bar::render(
        app,
        &th,
        Rect {
            y: area.y + area.height - 2,
            height: 2,
            ..area
        },
        buf,
    );
    if app.help {
        help::render(&th, area, buf);
    }
}

fn header(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    let mut x = put(buf, area.x, area.y, "ncclprof ", th.title(), area.width);
    for (i, v) in ViewId::ALL.iter().enumerate() {
        let title = if area.width < 110 {
            v.short()
        } else {
            v.title()
        };
        let label = format!("{} {}", i + 1, title);
        let style = if *v == app.view {
            th.selected()
        } else {
            th.dim()
        };
        let w = area.right().saturating_sub(x);
        x = put(buf, x, area.y, &label, style, w);
        x = put(
            buf,
            x,
            area.y,
            " ",
            Style::default(),
            area.right().saturating_sub(x),
        );
    }
    let name_of = |g: &crate::model::store::CommGroup| {
        if g.name.is_empty() {
            format!("{:x}", g.hash)
        } else {
            g.name.clone()
        }
    };
    if let Some(g) = app.store.comm_group(app.comm) {
        let text = format!(
            "│ comm {} ({}/{}) {} ranks",
            name_of(g),
            app.comm + 1,
            app.store.comms.len(),
            g.nranks
        );
        x = put(
            buf,
            x,
            area.y,
            &text,
            th.bold(),
            area.right().saturating_sub(x),
        );
    }
    // A hang in a communicator not on screen: every view of this one may look merely idle
    // (its ranks blocked behind the other), so the header says where to go.
    if app.store.comms.len() > 1 {
        let elsewhere: Vec<String> = app
            .store
            .hung_comms_but(app.comm)
            .into_iter()
            .map(|c| {
                format!(
                    "{} ({}/{})",
                    name_of(&app.store.comms[c]),
                    c + 1,
                    app.store.comms.len()
                )
            })
            .collect();
        if !elsewhere.is_empty() {
            let text = format!(" ⚠ HUNG in comm {} (press c)", elsewhere.join(", "));
            put(
                buf,
                x,
                area.y,
                &text,
                th.bad(),
                area.right().saturating_sub(x),
            );
        }
    }
}

fn waiting(app: &App, th: &Theme, area: Rect, buf: &mut Buffer) {
    // The source may take several lines (one per watched directory).
    let mut lines = vec!["Waiting for processes…".to_string(), String::new()];
    lines.extend(
        format!("Watching {}", app.source_desc)
            .lines()
            .map(str::to_string),
    );
    lines.extend([
        "Run a job with NCCL_PROFILER_PLUGIN=libnccl_profiler_ncclprof.so".to_string(),
        "(or try `ncclprof-tui demo`). Press ? for help, q to quit.".to_string(),
    ]);
    let top = area.y + area.height / 3;
    for (i, l) in lines.iter().enumerate() {
        let y = top + i as u16;
        if y >= area.bottom() {
            break;
        }
        let w = l.chars().count() as u16;
        let x = area.x + area.width.saturating_sub(w) / 2;
        let st = if i == 0 { th.title() } else { Style::default() };
        put(buf, x, y, l, st, area.width);
    }
    if let Some(e) = app.store.errors.last() {
        put(
            buf,
            area.x + 1,
            area.bottom().saturating_sub(1),
            e,
            th.bad(),
            area.width - 1,
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn views_do_not_use_wire_types() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![root.join("ui.rs")];
        for d in ["ui", "ui/views"] {
            for e in std::fs::read_dir(root.join(d)).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        let forbidden = ["shared::", "wire"].concat();
        for p in files {
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(
                !text.contains(&forbidden),
                "{} uses wire types",
                p.display()
            );
        }
    }
}
