//! Every user intent, as produced by the keymap and consumed by `App::update`.

use crate::ui::views::ViewId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    ToggleHelp,
    /// Close the overlay, else clear the selection, else clear the filter.
    Back,
    NextView,
    PrevView,
    View(ViewId),
    NextComm,
    PrevComm,
    Snapshot,
    StartFilter,
    ToggleFollow,
    ZoomIn,
    ZoomOut,
    PanLeft,
    PanRight,
    RowUp,
    RowDown,
    PrevOp,
    NextOp,
    PickOp,
    MaskUp,
    MaskDown,
    MaskToggle,
    MaskAll,
    MaskDefault,
    StartStop,
    MaskTarget,
    PrevProc,
    NextProc,
}
