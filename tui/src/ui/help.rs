//! The help overlay, generated from the keymap.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::{Block, Borders, Clear, Widget};

use super::put;
use super::theme::Theme;
use crate::keymap;

pub fn render(th: &Theme, area: Rect, buf: &mut Buffer) {
    let lines = keymap::help_lines();
    let w = area.width.min(100);
    let h = area.height.min(lines.len() as u16 + 2);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    Clear.render(r, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" keys (Esc or ? closes) ");
    let inner = block.inner(r);
    block.render(r, buf);
    // Two columns when the list does not fit.
    let rows = inner.height as usize;
    let cols = if lines.len() > rows && inner.width >= 60 {
        2
    } else {
        1
    };
    let cw = inner.width / cols;
    for (i, (head, text)) in lines.iter().enumerate() {
        let col = (i / rows.max(1)) as u16;
        if col >= cols {
            break;
        }
        let y = inner.y + (i % rows.max(1)) as u16;
        let x = inner.x + col * cw;
        match head {
            Some(h) => put(buf, x, y, &format!("— {h}"), th.title(), cw),
            None => put(buf, x, y, text, Default::default(), cw.saturating_sub(1)),
        };
    }
}
