//! Colours and glyphs. With NO_COLOR every style keeps only its modifiers, and meaning is
//! carried by glyphs and labels as well.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    pub fn new(no_color: bool) -> Theme {
        Theme { color: !no_color }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub fn func(&self, func: &str) -> Style {
        self.fg(match func {
            "AllReduce" => Color::Cyan,
            "AllGather" => Color::Green,
            "ReduceScatter" => Color::Magenta,
            "Broadcast" => Color::Blue,
            "Reduce" => Color::LightBlue,
            "AlltoAll" => Color::LightMagenta,
            "Send" => Color::Yellow,
            "Recv" => Color::LightYellow,
            _ => Color::White,
        })
    }

    pub fn title(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    pub fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }
    pub fn bad(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    pub fn warn(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    pub fn good(&self) -> Style {
        self.fg(Color::Green)
    }
    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    pub fn bold(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    pub fn phase(&self, i: usize) -> Style {
        self.fg([Color::Yellow, Color::Magenta, Color::Cyan][i % 3])
    }
    pub fn heat(&self, level: usize) -> Style {
        self.fg([
            Color::DarkGray,
            Color::Blue,
            Color::Cyan,
            Color::Yellow,
            Color::Red,
        ][level.min(4)])
    }
}

/// Glyphs for the three proxy phases of a stacked bar.
pub const PHASE_GLYPHS: [char; 3] = ['▓', '▒', '█'];
/// Heat levels, coolest first.
pub const HEAT: [char; 5] = ['·', '░', '▒', '▓', '█'];
