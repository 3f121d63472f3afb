//! The plugin ↔ viewer protocol.
//!
//! **Plugin → viewer**: a byte stream of frames on an `ipc_channel::ipc::IpcBytesSender` that the
//! viewer hands over in [`ViewerMsg::Hello`]. Each frame is a 16-byte header (magic `NCPF`,
//! protocol version, frame kind, body length, 4 reserved zero bytes) and a body: fixed-layout
//! [`EventRecord`]s for [`FrameKind::Events`], postcard for everything else. The header is 16
//! bytes, not 12, so that records in a received buffer are 8-byte aligned and the viewer can
//! read them where they lie ([`decode_owned`], [`Records`]). Frames are at most [`MAX_FRAME`] bytes
//! so that an ipc-channel send never takes the fragmented path (which can hang when the peer
//! dies mid-send).
//!
//! Large frames (the Events frames, most of the stream's bytes) do not cross the socket
//! itself when the viewer offered a frame ring in its Hello: the plugin copies each into
//! that shared memory and sends only an [`IN_RING`] frame saying where it lies, in the
//! frame's place in the stream, so the order of frames is the socket's ([`crate::frame_ring`]).
//!
//! **Viewer → plugin**: typed [`ViewerMsg`]s on the channel the plugin's one-shot server accepted.

use ipc_channel::ipc::IpcBytesSender;
use serde::{Deserialize, Serialize};

use crate::PROTOCOL_VERSION;
use crate::kind::EventKind;
use crate::record::{EventRecord, RECORD_SIZE};

/// Frame magic, "NCPF".
pub const MAGIC: [u8; 4] = *b"NCPF";
/// Header size in bytes (a multiple of [`EventRecord`]'s alignment: see [`Records`]).
pub const HEADER_SIZE: usize = 16;
/// Largest frame (header included). ipc-channel fragments messages above ~208 KB.
pub const MAX_FRAME: usize = 192 * 1024;
/// Most records one Events frame holds.
pub const MAX_RECORDS_PER_FRAME: usize = (MAX_FRAME - HEADER_SIZE) / RECORD_SIZE;
/// Longest string the plugin interns (bytes); longer strings are truncated.
pub const MAX_STRING: usize = 256;

/// What a frame's body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum FrameKind {
    /// [`PluginHello`]: first frame after a viewer connects.
    Hello = 1,
    /// [`Meta`]: new communicators and strings.
    Meta = 2,
    /// Raw [`EventRecord`]s.
    Events = 3,
    /// [`Counters`].
    Counters = 4,
    /// [`InFlight`] summary.
    InFlight = 5,
    /// [`MaskAck`].
    MaskAck = 6,
    /// [`Bye`]: the plugin is finalizing or refusing the viewer.
    Bye = 7,
}

impl FrameKind {
    fn from_u16(v: u16) -> Option<FrameKind> {
        Some(match v {
            1 => FrameKind::Hello,
            2 => FrameKind::Meta,
            3 => FrameKind::Events,
            4 => FrameKind::Counters,
            5 => FrameKind::InFlight,
            6 => FrameKind::MaskAck,
            7 => FrameKind::Bye,
            _ => return None,
        })
    }
}

/// First frame: who this plugin process is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginHello {
    pub protocol: u32,
    pub pid: u32,
    pub host: String,
    pub uid: u32,
    /// Process command line (argv joined by spaces, truncated).
    pub cmdline: String,
    /// NCCL profiler API version the core selected (1–6).
    pub api_version: u32,
    /// ncclprof plugin version string.
    pub plugin_version: String,
    /// Activation mask in force.
    pub mask: u32,
    /// Whether profiling is started (mask applied) or stopped (mask 0).
    pub active: bool,
    /// How host timestamps are taken ("tsc" or "clock_gettime").
    pub clock: String,
}

/// One communicator as seen by this process (one rank of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommInfo {
    /// Index used by records' `comm` field.
    pub index: u32,
    pub comm_hash: u64,
    pub name: String,
    pub nranks: i32,
    pub nnodes: i32,
    pub rank: i32,
    /// API version this communicator was initialised through.
    pub api_version: u32,
    /// Whether the communicator is finalized.
    pub finalized: bool,
}

/// New (or changed) communicators and newly interned strings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Meta {
    pub comms: Vec<CommInfo>,
    /// (id, text); ids are dense from 1.
    pub strings: Vec<(u16, String)>,
}

/// Why an event was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum DropReason {
    /// The calling thread's capture ring was full (drain thread behind).
    RingFull = 0,
    /// More NCCL threads than capture rings.
    NoRing = 1,
    /// The completion table of open events was full.
    TableFull = 2,
    /// The viewer was slower than the stream: a frame was dropped before sending.
    ViewerSlow = 3,
    /// The string table was full (strings shown as "?").
    StringsFull = 4,
    /// Stop/state for a handle the plugin never issued (garbage or another process's).
    UnknownHandle = 5,
    /// An open event evicted or abandoned without completion (e.g. never-stopped steps).
    Abandoned = 6,
    /// A descriptor with an event type this build does not know (a newer API's).
    UnknownType = 7,
}

impl DropReason {
    pub const COUNT: usize = 8;
    pub const ALL: [DropReason; 8] = [
        DropReason::RingFull,
        DropReason::NoRing,
        DropReason::TableFull,
        DropReason::ViewerSlow,
        DropReason::StringsFull,
        DropReason::UnknownHandle,
        DropReason::Abandoned,
        DropReason::UnknownType,
    ];
    /// The reasons only the plugin's drain thread counts, as it completes events (the others
    /// are counted where the record is lost: on NCCL's thread or by the sender). Unknown
    /// handle and abandoned mostly when it gives an event up, 10-60 completion timeouts after
    /// its last sign of life: they come late, and a summary written while the drain was
    /// behind has none of them.
    pub const DRAIN_ONLY: [DropReason; 3] = [
        DropReason::TableFull,
        DropReason::UnknownHandle,
        DropReason::Abandoned,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::RingFull => "ring full",
            DropReason::NoRing => "no ring",
            DropReason::TableFull => "table full",
            DropReason::ViewerSlow => "viewer slow",
            DropReason::StringsFull => "strings full",
            DropReason::UnknownHandle => "unknown handle",
            DropReason::Abandoned => "abandoned",
            DropReason::UnknownType => "unknown event type",
        }
    }

    /// What to change in the job's environment so that drops for this reason stop, where a
    /// knob exists (the plugin's variables, `plugin/src/config.rs`).
    pub fn remedy(self) -> Option<&'static str> {
        match self {
            // The drain thread was off the CPU longer than a ring lasts at the thread's rate.
            // Rings grow where they fill, up to this variable (the default quoted); the
            // finalize summary, which knows whether rings got there, names
            // NCCLPROF_RING_EVENTS instead where drops came while they were still growing.
            DropReason::RingFull => Some("set NCCLPROF_RING_MAX_EVENTS above 262144 in the job"),
            DropReason::NoRing => Some("set NCCLPROF_MAX_THREADS above 128 in the job"),
            DropReason::TableFull => Some("set NCCLPROF_MAX_OPEN above 262144 in the job"),
            DropReason::ViewerSlow => Some("narrow the mask, or raise NCCLPROF_HISTORY_EVENTS"),
            DropReason::StringsFull
            | DropReason::UnknownHandle
            | DropReason::Abandoned
            | DropReason::UnknownType => None,
        }
    }
}

/// Per-process counters since the plugin started (monotonic; the viewer computes rates).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Host time the counters were read.
    pub at_ns: u64,
    /// Events started (captured), by [`EventKind`] index.
    pub captured: Vec<u64>,
    /// Completed records produced, by [`EventKind`] index.
    pub completed: Vec<u64>,
    /// Drops by [`DropReason`] index.
    pub dropped: Vec<u64>,
    pub frames_sent: u64,
    pub bytes_sent: u64,
    /// Events currently open in the completion table.
    pub open_events: u64,
    /// Capture rings in use.
    pub rings_in_use: u32,
    /// A panic was caught and the plugin disabled itself.
    pub disabled: bool,
}

impl Counters {
    pub fn total_dropped(&self) -> u64 {
        self.dropped.iter().sum()
    }
    pub fn dropped_for(&self, r: DropReason) -> u64 {
        self.dropped.get(r as usize).copied().unwrap_or(0)
    }
    pub fn captured_for(&self, k: EventKind) -> u64 {
        self.captured.get(k as usize).copied().unwrap_or(0)
    }
}

/// One open (not yet complete) collective or p2p.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenOp {
    pub comm: u32,
    pub rank: i32,
    pub kind: u8,
    pub id: u64,
    /// The collective's sequence number; a send/recv (P2p) has none, and carries its peer.
    pub seq: u64,
    /// String id of the function.
    pub func: u16,
    pub start_ns: u64,
    /// When it started to run, host ns (0 = not yet, or not known): its first kernel
    /// channel's start callback. Ops queued behind others on the GPU's stream have not; nor
    /// has any op whose kernel channels are not profiled (not known).
    pub exec_start_ns: u64,
    /// Proxy steps completed so far, per channel (index = channel id; at least `n_channels`
    /// long, longer where a send/recv's channels lie beyond it).
    pub steps_done: Vec<u32>,
    /// Kernel channels finished so far.
    pub channels_done: u32,
    pub n_channels: u32,
    /// Its oldest proxy step still open, if any: where a hung op waits.
    pub oldest_step: Option<OpenStep>,
}

/// A proxy step started and not yet stopped (its ProxyOp's channel, the step's index in the
/// op, its start, host ns), and the last state it recorded (a `PROXY_STEP_*` value of
/// [`crate::kind::state`]; 0: none known): what it waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenStep {
    pub channel: u8,
    pub step: u32,
    pub start_ns: u64,
    pub state: u8,
}

/// Periodic summary of what is in flight (so a hung collective is visible as hung).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InFlight {
    pub at_ns: u64,
    pub ops: Vec<OpenOp>,
    /// Total open ops (the list may be truncated to fit a frame).
    pub total: u32,
}

/// The mask now in force, after a viewer's request (or any change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaskAck {
    pub mask: u32,
    pub active: bool,
    /// Mask requested by the viewer (before clamping to the API version's bits).
    pub requested: u32,
}

/// The plugin is going away or refuses the viewer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bye {
    pub reason: String,
}

/// The shared memory a viewer offers as its frame ring ([`crate::frame_ring`]); empty for
/// none. Shown by its size: a Hello printed for debugging would otherwise print every byte.
#[derive(Serialize, Deserialize)]
#[serde(transparent)]
pub struct RingOffer(pub ipc_channel::ipc::IpcSharedMemory);

impl RingOffer {
    /// No ring: every frame on the socket.
    pub fn none() -> RingOffer {
        RingOffer(ipc_channel::ipc::IpcSharedMemory::from_bytes(&[]))
    }
}

impl std::fmt::Debug for RingOffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RingOffer({} bytes)", self.0.len())
    }
}

/// Viewer → plugin messages.
#[derive(Debug, Serialize, Deserialize)]
pub enum ViewerMsg {
    /// First message on a new connection: the viewer's identity and where to stream frames.
    Hello {
        protocol: u32,
        viewer_pid: u32,
        uid: u32,
        data: IpcBytesSender,
        /// The connection's frame ring ([`crate::frame_ring`]), made by the viewer; empty
        /// when it offers none (every frame then travels on `data`).
        ring: RingOffer,
    },
    /// Set the activation mask (kept, and applied while started).
    SetMask(u32),
    /// `exampleProfilerStart(mask)`: apply `mask` and mark profiling started.
    Start(u32),
    /// `exampleProfilerStop()`: write 0 into the mask, remembering the previous one.
    Stop,
}

/// A decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Hello(PluginHello),
    Meta(Meta),
    Events(Records),
    Counters(Counters),
    InFlight(InFlight),
    MaskAck(MaskAck),
    Bye(Bye),
}

/// The records of an Events frame, as a slice. Decoded from a buffer it is given
/// ([`decode_owned`]: the viewer's receive path), they stay in that buffer when it is aligned
/// for [`EventRecord`] (the allocator hands out 16-byte aligned buffers and the header is 16
/// bytes): copying every record out of every frame was 4 % of all CPU time at 8 M events/s.
/// From the connection's frame ring ([`decode_in_place`]) they stay in the ring, whose bytes
/// go back to the plugin when the `Records` is dropped: hold them no longer than it takes to
/// ingest them, or later frames find the ring full and take the socket.
pub struct Records(RecordsIn);

enum RecordsIn {
    Vec(Vec<EventRecord>),
    /// A whole frame whose body, at [`HEADER_SIZE`], was checked to be aligned whole records.
    Frame(Vec<u8>),
    /// The same, where it lies in the connection's frame ring.
    Ring(crate::frame_ring::RingFrame),
}

impl std::ops::Deref for Records {
    type Target = [EventRecord];
    fn deref(&self) -> &[EventRecord] {
        match &self.0 {
            RecordsIn::Vec(v) => v,
            // Checked when made (`Records::in_frame`); the buffer is never changed after.
            RecordsIn::Frame(b) => bytemuck::cast_slice(&b[HEADER_SIZE..]),
            // Checked when made (`decode_in_place`); the plugin leaves it alone until dropped.
            RecordsIn::Ring(f) => bytemuck::cast_slice(&f.bytes()[HEADER_SIZE..]),
        }
    }
}

impl Records {
    /// The records of `frame`'s body (its length a whole number of records), read in place
    /// when aligned, else copied.
    fn in_frame(frame: Vec<u8>) -> Records {
        if bytemuck::try_cast_slice::<u8, EventRecord>(&frame[HEADER_SIZE..]).is_ok() {
            Records(RecordsIn::Frame(frame))
        } else {
            Records(RecordsIn::Vec(bytemuck::pod_collect_to_vec(
                &frame[HEADER_SIZE..],
            )))
        }
    }
}

impl From<Vec<EventRecord>> for Records {
    fn from(v: Vec<EventRecord>) -> Records {
        Records(RecordsIn::Vec(v))
    }
}

impl Clone for Records {
    /// A copy of the records (a frame buffer's copy could lose its alignment).
    fn clone(&self) -> Records {
        Records(RecordsIn::Vec(self.to_vec()))
    }
}

impl PartialEq for Records {
    fn eq(&self, other: &Records) -> bool {
        self[..] == other[..]
    }
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Why a frame could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("frame too short ({0} bytes, header is {HEADER_SIZE})")]
    Short(usize),
    #[error("bad frame magic {0:?} (not an ncclprof stream)")]
    Magic([u8; 4]),
    #[error(
        "protocol version mismatch: peer speaks v{0}, this build speaks v{PROTOCOL_VERSION}; use matching ncclprof builds"
    )]
    Version(u16),
    #[error("unknown frame kind {0}")]
    Kind(u16),
    #[error("frame length {declared} does not match {actual} bytes received")]
    Length { declared: usize, actual: usize },
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("events body of {0} bytes is not a whole number of records")]
    Records(usize),
    #[error("malformed {kind:?} body: {msg}")]
    Body { kind: FrameKind, msg: String },
}

fn header_bytes(kind: FrameKind, body_len: usize) -> [u8; HEADER_SIZE] {
    raw_header(kind as u16, body_len)
}

fn raw_header(kind: u16, body_len: usize) -> [u8; HEADER_SIZE] {
    let mut h = [0; HEADER_SIZE];
    h[..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&(PROTOCOL_VERSION as u16).to_le_bytes());
    h[6..8].copy_from_slice(&kind.to_le_bytes());
    h[8..12].copy_from_slice(&(body_len as u32).to_le_bytes());
    h
}

/// Header kind of a frame that says where the next frame lies in the connection's
/// shared-memory frame ring ([`crate::frame_ring`]), instead of carrying it. Not a
/// [`FrameKind`]: the viewer's receiving end ([`crate::link::FrameReceiver`]) replaces it by
/// the frame it points to, so no decoder ever sees one.
pub const IN_RING: u16 = 8;
/// Size of an [`IN_RING`] frame: the header and two little-endian `u64`s, the frame's
/// position in the ring's byte stream and its length.
pub const IN_RING_FRAME: usize = HEADER_SIZE + 16;

/// The [`IN_RING`] frame saying that the frame at byte `at` of the ring, `len` bytes long,
/// is the next one.
pub fn encode_in_ring(at: u64, len: u64) -> [u8; IN_RING_FRAME] {
    let mut f = [0; IN_RING_FRAME];
    f[..HEADER_SIZE].copy_from_slice(&raw_header(IN_RING, 16));
    f[HEADER_SIZE..HEADER_SIZE + 8].copy_from_slice(&at.to_le_bytes());
    f[HEADER_SIZE + 8..].copy_from_slice(&len.to_le_bytes());
    f
}

/// Where an [`IN_RING`] frame points: `None` if `bytes` is not one (any other frame, or
/// bytes too short or foreign to tell: [`decode`] reports those), `Some(Err)` if it is one
/// with a malformed body.
pub fn decode_in_ring(bytes: &[u8]) -> Option<Result<(u64, u64), DecodeError>> {
    if bytes.len() < HEADER_SIZE
        || bytes[..4] != MAGIC
        || u16::from_le_bytes([bytes[6], bytes[7]]) != IN_RING
    {
        return None;
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if u32::from(version) != PROTOCOL_VERSION {
        return Some(Err(DecodeError::Version(version)));
    }
    let declared = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    if declared != IN_RING_FRAME - HEADER_SIZE || bytes.len() != IN_RING_FRAME {
        return Some(Err(DecodeError::Length {
            declared,
            actual: bytes.len() - HEADER_SIZE,
        }));
    }
    let word = |i: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&bytes[HEADER_SIZE + i..HEADER_SIZE + i + 8]);
        u64::from_le_bytes(w)
    };
    Some(Ok((word(0), word(8))))
}

fn header(kind: FrameKind, body_len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&header_bytes(kind, body_len));
}

/// Write the header of an Events frame whose records follow it in `frame` (its first
/// [`HEADER_SIZE`] bytes are the header's place): for frames built record by record.
pub fn write_events_header(frame: &mut [u8]) {
    let body = frame.len() - HEADER_SIZE;
    frame[..HEADER_SIZE].copy_from_slice(&header_bytes(FrameKind::Events, body));
}

/// Encode an Events frame into `out` (cleared first). `records.len()` must not exceed
/// [`MAX_RECORDS_PER_FRAME`]; extra records are not encoded. Returns how many were encoded.
pub fn encode_events(records: &[EventRecord], out: &mut Vec<u8>) -> usize {
    let n = records.len().min(MAX_RECORDS_PER_FRAME);
    out.clear();
    let body = EventRecord::as_bytes(&records[..n]);
    header(FrameKind::Events, body.len(), out);
    out.extend_from_slice(body);
    n
}

/// Encode a postcard-bodied frame. Fails only if the body would exceed [`MAX_FRAME`].
pub fn encode_msg<T: Serialize>(
    kind: FrameKind,
    msg: &T,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let body = postcard::to_stdvec(msg).map_err(|e| DecodeError::Body {
        kind,
        msg: e.to_string(),
    })?;
    if body.len() + HEADER_SIZE > MAX_FRAME {
        return Err(DecodeError::TooLarge(body.len() + HEADER_SIZE));
    }
    out.clear();
    header(kind, body.len(), out);
    out.extend_from_slice(&body);
    Ok(())
}

/// Convenience: encode a [`Frame`] to a fresh buffer.
pub fn encode(frame: &Frame) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    match frame {
        Frame::Hello(m) => encode_msg(FrameKind::Hello, m, &mut out)?,
        Frame::Meta(m) => encode_msg(FrameKind::Meta, m, &mut out)?,
        Frame::Events(r) => {
            if r.len() > MAX_RECORDS_PER_FRAME {
                return Err(DecodeError::TooLarge(HEADER_SIZE + r.len() * RECORD_SIZE));
            }
            encode_events(r, &mut out);
        }
        Frame::Counters(m) => encode_msg(FrameKind::Counters, m, &mut out)?,
        Frame::InFlight(m) => encode_msg(FrameKind::InFlight, m, &mut out)?,
        Frame::MaskAck(m) => encode_msg(FrameKind::MaskAck, m, &mut out)?,
        Frame::Bye(m) => encode_msg(FrameKind::Bye, m, &mut out)?,
    }
    Ok(out)
}

/// Decode one frame. Total: never panics, never allocates more than the input's size.
pub fn decode(bytes: &[u8]) -> Result<Frame, DecodeError> {
    let (kind, body) = check(bytes)?;
    decode_body(kind, body)
}

/// [`decode`] a frame it may keep: an Events frame's records stay in `bytes`
/// (see [`Records`]).
pub fn decode_owned(bytes: Vec<u8>) -> Result<Frame, DecodeError> {
    let (kind, body) = check(&bytes)?;
    if kind != FrameKind::Events {
        return decode_body(kind, body);
    }
    if !body.len().is_multiple_of(RECORD_SIZE) {
        return Err(DecodeError::Records(body.len()));
    }
    Ok(Frame::Events(Records::in_frame(bytes)))
}

/// [`decode_owned`] for a frame in the connection's frame ring: an Events frame's records
/// are read where they lie (the ring gets them back when the frame is dropped); any other
/// frame is decoded from there and let go at once.
pub fn decode_in_place(frame: crate::frame_ring::RingFrame) -> Result<Frame, DecodeError> {
    let (kind, body) = check(frame.bytes())?;
    if kind != FrameKind::Events {
        return decode_body(kind, body);
    }
    if !body.len().is_multiple_of(RECORD_SIZE) {
        return Err(DecodeError::Records(body.len()));
    }
    if bytemuck::try_cast_slice::<u8, EventRecord>(body).is_err() {
        // Frames start 16-byte aligned in the ring; if not, copy.
        return decode_body(kind, body);
    }
    Ok(Frame::Events(Records(RecordsIn::Ring(frame))))
}

/// The header's checks: the frame's kind and its body.
fn check(bytes: &[u8]) -> Result<(FrameKind, &[u8]), DecodeError> {
    if bytes.len() > MAX_FRAME {
        return Err(DecodeError::TooLarge(bytes.len()));
    }
    // Magic and version before the length: a peer of another version may have another
    // header size, and is best told which version it speaks.
    if bytes.len() < 6 {
        return Err(DecodeError::Short(bytes.len()));
    }
    let magic = [bytes[0], bytes[1], bytes[2], bytes[3]];
    if magic != MAGIC {
        return Err(DecodeError::Magic(magic));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if u32::from(version) != PROTOCOL_VERSION {
        return Err(DecodeError::Version(version));
    }
    if bytes.len() < HEADER_SIZE {
        return Err(DecodeError::Short(bytes.len()));
    }
    let kind_raw = u16::from_le_bytes([bytes[6], bytes[7]]);
    let kind = FrameKind::from_u16(kind_raw).ok_or(DecodeError::Kind(kind_raw))?;
    let declared = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    let body = &bytes[HEADER_SIZE..];
    if declared != body.len() {
        return Err(DecodeError::Length {
            declared,
            actual: body.len(),
        });
    }
    Ok((kind, body))
}

/// A frame's body, copied out of `body`.
fn decode_body(kind: FrameKind, body: &[u8]) -> Result<Frame, DecodeError> {
    fn msg<'a, T: Deserialize<'a>>(kind: FrameKind, body: &'a [u8]) -> Result<T, DecodeError> {
        postcard::from_bytes(body).map_err(|e| DecodeError::Body {
            kind,
            msg: e.to_string(),
        })
    }
    Ok(match kind {
        FrameKind::Events => Frame::Events(
            EventRecord::from_bytes(body)
                .ok_or(DecodeError::Records(body.len()))?
                .into(),
        ),
        FrameKind::Hello => Frame::Hello(msg(kind, body)?),
        FrameKind::Meta => Frame::Meta(msg(kind, body)?),
        FrameKind::Counters => Frame::Counters(msg(kind, body)?),
        FrameKind::InFlight => Frame::InFlight(msg(kind, body)?),
        FrameKind::MaskAck => Frame::MaskAck(msg(kind, body)?),
        FrameKind::Bye => Frame::Bye(msg(kind, body)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hello() -> PluginHello {
        PluginHello {
            protocol: PROTOCOL_VERSION,
            pid: 42,
            host: "node1".into(),
            uid: 1000,
            cmdline: "python train.py".into(),
            api_version: 6,
            plugin_version: "0.1.0".into(),
            mask: 5982,
            active: true,
            clock: "tsc".into(),
        }
    }

    /// `n` records numbered from 1, each with a start and an end of its own.
    fn numbered(n: u64) -> Vec<EventRecord> {
        (1..=n)
            .map(|i| EventRecord {
                id: i,
                start_ns: 10 * i,
                end_ns: 7 * i,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn roundtrip_every_kind() {
        let frames = vec![
            Frame::Hello(hello()),
            Frame::Meta(Meta {
                comms: vec![CommInfo {
                    index: 0,
                    comm_hash: 0xdead_beef,
                    name: "world".into(),
                    nranks: 8,
                    nnodes: 1,
                    rank: 3,
                    api_version: 6,
                    finalized: false,
                }],
                strings: vec![(1, "AllReduce".into())],
            }),
            Frame::Events(
                vec![EventRecord {
                    id: 1,
                    kind: 1,
                    ..Default::default()
                }]
                .into(),
            ),
            Frame::Counters(Counters {
                captured: vec![1; EventKind::COUNT],
                dropped: vec![0; DropReason::COUNT],
                ..Default::default()
            }),
            Frame::InFlight(InFlight::default()),
            Frame::MaskAck(MaskAck {
                mask: 2,
                active: true,
                requested: 2,
            }),
            Frame::Bye(Bye {
                reason: "finalize".into(),
            }),
        ];
        for f in frames {
            let bytes = encode(&f).unwrap();
            assert!(bytes.len() <= MAX_FRAME);
            assert_eq!(decode(&bytes).unwrap(), f);
            assert_eq!(decode_owned(bytes).unwrap(), f);
        }
    }

    #[test]
    fn hello_bytes_are_stable() {
        // Guards the wire format: a change here must bump PROTOCOL_VERSION.
        let bytes = encode(&Frame::Hello(hello())).unwrap();
        assert_eq!(
            &bytes[..16],
            &[b'N', b'C', b'P', b'F', 6, 0, 1, 0, 40, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(bytes.len(), 56);
    }

    #[test]
    fn an_in_ring_frame_says_where_and_nothing_else_is_one() {
        let f = encode_in_ring(1 << 40, 4096);
        assert_eq!(f.len(), IN_RING_FRAME);
        assert_eq!(decode_in_ring(&f), Some(Ok((1 << 40, 4096))));
        // Every other frame is not one; a short or foreign buffer is left to `decode`.
        let hello = encode(&Frame::Hello(hello())).unwrap();
        assert_eq!(decode_in_ring(&hello), None);
        assert_eq!(decode_in_ring(&f[..8]), None);
        assert_eq!(decode_in_ring(b"XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"), None);
        // One with a body of another length, declared or actual, is malformed.
        let mut long = f.to_vec();
        long.push(0);
        assert!(matches!(decode_in_ring(&long), Some(Err(_))));
        let mut lying = f;
        lying[8] = 15;
        assert!(matches!(decode_in_ring(&lying), Some(Err(_))));
        let mut old = f;
        old[4] = 5;
        assert_eq!(decode_in_ring(&old), Some(Err(DecodeError::Version(5))));
        // No decoder takes it for a frame.
        assert_eq!(decode(&f), Err(DecodeError::Kind(IN_RING)));
    }

    /// An Events frame in the frame ring decodes as `decode` would, its records read where
    /// they lie: while they are held the plugin cannot reuse their bytes, once dropped it can.
    #[test]
    fn an_events_frame_in_the_ring_is_read_in_place_and_given_back_when_dropped() {
        use crate::frame_ring::{MIN_BYTES, RingReader, RingWriter};
        let (mut reader, offer) = RingReader::new(MIN_BYTES);
        let mut writer = RingWriter::new(offer).unwrap();
        // 1 600 records (153 616 bytes): two fit in the smallest ring, three do not.
        let recs = numbered(1600);
        let bytes = encode(&Frame::Events(recs.clone().into())).unwrap();
        let (at, len) = writer.put(&bytes).unwrap();
        let frame = reader.take(at, len).unwrap();
        let ring_bytes = frame.bytes().as_ptr_range();
        let Ok(Frame::Events(got)) = decode_in_place(frame) else {
            panic!("not an Events frame");
        };
        assert_eq!(&got[..], &recs[..]);
        assert!(
            ring_bytes.contains(&got.as_ptr().cast::<u8>()),
            "records not in the ring"
        );
        let second = writer.put(&bytes).unwrap();
        assert_eq!(
            writer.put(&bytes),
            None,
            "the held frame's bytes are not reused"
        );
        drop(got);
        let third = writer.put(&bytes).expect("given back once dropped");
        assert_eq!(reader.take_copy(second.0, second.1).unwrap(), bytes);
        assert_eq!(reader.take_copy(third.0, third.1).unwrap(), bytes);
        // Any other frame in the ring is decoded from there and given back at once.
        let meta = encode(&Frame::Meta(Meta {
            comms: vec![],
            strings: (1..400).map(|i| (i, format!("string {i}"))).collect(),
        }))
        .unwrap();
        let (at, len) = writer.put(&meta).unwrap();
        let decoded = decode_in_place(reader.take(at, len).unwrap()).unwrap();
        assert_eq!(decoded, decode(&meta).unwrap());
    }

    /// The viewer's receive path keeps an Events frame's records where they arrived.
    #[test]
    fn an_owned_events_frame_is_read_in_place() {
        let recs = numbered(5);
        let bytes = encode(&Frame::Events(recs.clone().into())).unwrap();
        let body_at = bytes.as_ptr() as usize + HEADER_SIZE;
        let Ok(Frame::Events(got)) = decode_owned(bytes) else {
            panic!("not decoded");
        };
        assert_eq!(&got[..], &recs[..]);
        assert_eq!(got.as_ptr() as usize, body_at, "not copied");
        assert_eq!(got.clone(), got, "a clone holds the same records");
    }

    /// A peer of another protocol version is told so, whatever its header looks like.
    #[test]
    fn another_version_is_named_before_the_header_is_read() {
        let old = [b'N', b'C', b'P', b'F', 1, 0, 3, 0, 0, 0, 0, 0];
        assert_eq!(decode(&old), Err(DecodeError::Version(1)));
    }

    #[test]
    fn max_events_frame_fits() {
        let recs = vec![EventRecord::default(); MAX_RECORDS_PER_FRAME + 5];
        let mut out = Vec::new();
        assert_eq!(encode_events(&recs, &mut out), MAX_RECORDS_PER_FRAME);
        assert!(out.len() <= MAX_FRAME);
        assert!(encode(&Frame::Events(recs.into())).is_err());
    }

    #[test]
    fn a_frame_built_record_by_record_is_the_encoded_frame() {
        let recs = numbered(3);
        let mut built = vec![0xAA; HEADER_SIZE];
        for r in &recs {
            built.extend_from_slice(EventRecord::as_bytes(std::slice::from_ref(r)));
        }
        write_events_header(&mut built);
        let mut encoded = Vec::new();
        encode_events(&recs, &mut encoded);
        assert_eq!(built, encoded);
        assert_eq!(decode(&built), Ok(Frame::Events(recs.into())));
    }

    #[test]
    fn rejects_bad_input_clearly() {
        assert_eq!(decode(b"abc"), Err(DecodeError::Short(3)));
        assert!(matches!(
            decode(b"XXXXxxxxxxxx"),
            Err(DecodeError::Magic(_))
        ));
        let mut b = encode(&Frame::Bye(Bye { reason: "x".into() })).unwrap();
        b[4] = 9;
        let e = decode(&b).unwrap_err();
        assert_eq!(e, DecodeError::Version(9));
        assert!(e.to_string().contains("version mismatch"));
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let _ = decode(&bytes);
            let _ = decode_owned(bytes);
        }

        #[test]
        fn decode_never_panics_with_valid_header(kind in 0u16..10, body in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let mut b = Vec::new();
            b.extend_from_slice(&MAGIC);
            b.extend_from_slice(&(PROTOCOL_VERSION as u16).to_le_bytes());
            b.extend_from_slice(&kind.to_le_bytes());
            b.extend_from_slice(&(body.len() as u32).to_le_bytes());
            b.extend_from_slice(&[0; 4]);
            b.extend_from_slice(&body);
            let _ = decode(&b);
            let _ = decode_owned(b);
        }
    }
}
