//! The five views: order, titles, number keys.

pub mod channels;
pub mod in_flight;
pub mod mask;
pub mod proxy;
pub mod stats;
pub mod timeline;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewId {
    Timeline,
    Channels,
    Proxy,
    Stats,
    Mask,
}

impl ViewId {
    pub const ALL: [ViewId; 5] = [
        ViewId::Timeline,
        ViewId::Channels,
        ViewId::Proxy,
        ViewId::Stats,
        ViewId::Mask,
    ];

    pub fn title(self) -> &'static str {
        match self {
            ViewId::Timeline => "Timeline",
            ViewId::Channels => "Channels",
            ViewId::Proxy => "Proxy",
            ViewId::Stats => "Stats",
            ViewId::Mask => "Events/mask",
        }
    }

    /// Short title for narrow terminals.
    pub fn short(self) -> &'static str {
        match self {
            ViewId::Timeline => "Time",
            ViewId::Channels => "Chan",
            ViewId::Proxy => "Proxy",
            ViewId::Stats => "Stats",
            ViewId::Mask => "Mask",
        }
    }

    fn index(self) -> usize {
        ViewId::ALL.iter().position(|&v| v == self).unwrap_or(0)
    }

    pub fn next(self) -> ViewId {
        ViewId::ALL[(self.index() + 1) % ViewId::ALL.len()]
    }

    pub fn prev(self) -> ViewId {
        ViewId::ALL[(self.index() + ViewId::ALL.len() - 1) % ViewId::ALL.len()]
    }
}
