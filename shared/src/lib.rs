//! `ncclprof-shared`: everything the plugin (inside the training job) and the viewer
//! (`ncclprof-tui`) agree on. Nothing here knows NCCL's C structs: the plugin translates
//! every ABI version into these version-neutral types at its boundary.
//!
//! - [`kind`]: event kinds and NCCL state numbers, with stable values.
//! - [`mask`]: activation-mask bits and their user-facing names.
//! - [`record`]: the fixed-layout [`record::EventRecord`] every completed event travels as.
//! - [`wire`]: frames on the plugin → viewer byte stream and the viewer → plugin control messages.
//! - [`frame_ring`]: the shared memory a connection's large frames cross instead of the socket.
//! - [`link`]: the per-user rendezvous directory, its permission checks and the entry files.
//! - [`clock`]: the host-wide monotonic clock every process stamps with.
//! - [`child`]: child processes that die with their parent (the viewer's `demo`, the fake NCCL).

pub mod child;
pub mod clock;
pub mod frame_ring;
pub mod kind;
pub mod link;
pub mod mask;
pub mod record;
pub mod trace;
pub mod wire;

/// Version of the plugin ↔ viewer protocol. Bump it with any change to a frame or record layout.
pub const PROTOCOL_VERSION: u32 = 6;
