//! The rendezvous between plugin processes and viewers: a private per-user directory holding
//! one entry file per plugin process.
//!
//! Directory: `$NCCLPROF_DIR`, else `$XDG_RUNTIME_DIR/ncclprof` (if `$XDG_RUNTIME_DIR`
//! exists), else `/tmp/ncclprof-<uid>`. It is created with mode 0700 and, before every use,
//! checked to be a real directory (not a symlink) owned by the current user with no
//! group/other permissions; otherwise it is refused. A viewer given no directory also watches
//! the other defaults ([`default_dirs`]), with the same checks, never creating them.
//!
//! Entry file: `<dir>/<pid>.json`, written atomically (temp file + rename), mode 0600, holding a
//! [`ProcessEntry`]: who the process is, its communicators and the name of the ipc-channel
//! one-shot server a viewer connects to. The entry is rewritten whenever a viewer leaves (a new
//! server is published) or a communicator is added. Stale entries (dead pid, or a pid reused by
//! another process) are recognisable with [`ProcessEntry::is_alive`].

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::wire::CommInfo;

/// Environment variable overriding the rendezvous directory.
pub const DIR_ENV: &str = "NCCLPROF_DIR";

/// Why the rendezvous directory or an entry cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("rendezvous directory {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "rendezvous directory {path} is owned by uid {owner}, not by you (uid {me}); refusing to use it. Set {DIR_ENV} to a directory of your own"
    )]
    NotOwner { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "rendezvous directory {path} has mode {mode:o}: group/other may access it; refusing to use it (chmod 700 it, or set {DIR_ENV})"
    )]
    Permissions { path: PathBuf, mode: u32 },
    #[error("rendezvous path {path} is not a directory (or is a symlink); refusing to use it")]
    NotDir { path: PathBuf },
    #[error("entry {path}: {msg}")]
    Entry { path: PathBuf, msg: String },
}

impl LinkError {
    /// The directory or file does not exist (yet): normal for a default directory no plugin has
    /// used.
    pub fn is_not_found(&self) -> bool {
        matches!(self, LinkError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LinkError + '_ {
    move |source| LinkError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The current user's uid.
pub fn my_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The rendezvous directory this process would use (not created or checked): a plugin
/// publishes its entry there, and a viewer creates it if missing.
pub fn default_dir() -> PathBuf {
    default_dirs().swap_remove(0)
}

/// Every directory a viewer started without `--dir` watches, [`default_dir`] first.
///
/// With `$NCCLPROF_DIR` set, only that one. Otherwise also the other places a plugin of the
/// same user may have chosen, because the job's environment is not the viewer's: a batch job
/// often runs without `XDG_RUNTIME_DIR` (its plugin publishes in `/tmp/ncclprof-<uid>`) while
/// the viewer runs in an SSH login that has it, or the other way round (a login without
/// `XDG_RUNTIME_DIR` looks in `/run/user/<uid>/ncclprof`, systemd's usual value).
///
/// An `XDG_RUNTIME_DIR` that does not exist here counts as unset: a batch scheduler (Slurm's
/// default) exports the submitting login's value to compute nodes where that directory was
/// never made, and a plugin that tried to create it under `/run/user` would publish nowhere.
pub fn default_dirs() -> Vec<PathBuf> {
    let xdg = existing(std::env::var_os("XDG_RUNTIME_DIR"));
    candidate_dirs(std::env::var_os(DIR_ENV), xdg, my_uid())
}

/// `dir` if it is a directory here.
fn existing(dir: Option<OsString>) -> Option<OsString> {
    dir.filter(|d| Path::new(d).is_dir())
}

/// [`default_dirs`] for the given environment: never empty, no duplicates.
fn candidate_dirs(named: Option<OsString>, xdg: Option<OsString>, uid: u32) -> Vec<PathBuf> {
    if let Some(d) = named.filter(|d| !d.is_empty()) {
        return vec![PathBuf::from(d)];
    }
    let mut dirs = Vec::with_capacity(3);
    if let Some(x) = xdg.filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(x).join("ncclprof"));
    }
    let tmp = PathBuf::from(format!("/tmp/ncclprof-{uid}"));
    if dirs.is_empty() {
        // Without XDG_RUNTIME_DIR this process itself uses /tmp: that one comes first.
        dirs.push(tmp.clone());
    }
    for d in [PathBuf::from(format!("/run/user/{uid}/ncclprof")), tmp] {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// Check that `dir` is a private directory of the current user.
pub fn check_dir(dir: &Path) -> Result<(), LinkError> {
    let md = fs::symlink_metadata(dir).map_err(io(dir))?;
    if !md.file_type().is_dir() {
        return Err(LinkError::NotDir {
            path: dir.to_path_buf(),
        });
    }
    let me = my_uid();
    if md.uid() != me {
        return Err(LinkError::NotOwner {
            path: dir.to_path_buf(),
            owner: md.uid(),
            me,
        });
    }
    let mode = md.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(LinkError::Permissions {
            path: dir.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// Create `dir` (and missing parents) with mode 0700 if needed, then [`check_dir`] it.
/// An existing directory with loose permissions is refused, never silently chmod-ed.
pub fn ensure_dir(dir: &Path) -> Result<(), LinkError> {
    if fs::symlink_metadata(dir).is_err() {
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        match fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {
                // The umask may have removed bits we wanted, never added any; make it exact.
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(dir)(e)),
        }
    }
    check_dir(dir)
}

/// What a plugin process publishes about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEntry {
    pub protocol: u32,
    pub pid: u32,
    /// Process start time in clock ticks since boot (`/proc/<pid>/stat` field 22): tells a
    /// reused pid from the original process.
    pub start_ticks: u64,
    pub host: String,
    pub uid: u32,
    pub cmdline: String,
    pub api_version: u32,
    pub comms: Vec<CommInfo>,
    /// ipc-channel one-shot server name to connect to; empty while a viewer is attached.
    pub server: String,
    /// How many viewers have connected so far.
    pub generation: u64,
}

impl ProcessEntry {
    /// Path of the entry file of `pid` in `dir`.
    pub fn path(dir: &Path, pid: u32) -> PathBuf {
        dir.join(format!("{pid}.json"))
    }

    /// Write atomically (temp + rename), mode 0600.
    pub fn write(&self, dir: &Path) -> Result<(), LinkError> {
        let path = Self::path(dir, self.pid);
        let tmp = dir.join(format!(".{}.json.tmp", self.pid));
        let json = serde_json::to_vec(self).map_err(|e| LinkError::Entry {
            path: path.clone(),
            msg: e.to_string(),
        })?;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io(&tmp))?;
        f.write_all(&json).map_err(io(&tmp))?;
        drop(f);
        fs::rename(&tmp, &path).map_err(io(&path))
    }

    /// Read and validate an entry file: it must be a regular file owned by the current user
    /// (another user cannot plant an entry the viewer trusts) and must parse.
    pub fn read(path: &Path) -> Result<ProcessEntry, LinkError> {
        let md = fs::symlink_metadata(path).map_err(io(path))?;
        if !md.file_type().is_file() {
            return Err(LinkError::Entry {
                path: path.to_path_buf(),
                msg: "not a regular file".into(),
            });
        }
        if md.uid() != my_uid() {
            return Err(LinkError::Entry {
                path: path.to_path_buf(),
                msg: format!("owned by uid {}, not by you; ignored", md.uid()),
            });
        }
        if md.len() > 1 << 20 {
            return Err(LinkError::Entry {
                path: path.to_path_buf(),
                msg: format!("{} bytes: too large for an entry", md.len()),
            });
        }
        let bytes = fs::read(path).map_err(io(path))?;
        serde_json::from_slice(&bytes).map_err(|e| LinkError::Entry {
            path: path.to_path_buf(),
            msg: format!("malformed: {e}"),
        })
    }

    /// Whether the process that wrote this entry is still running (same pid, same start time).
    pub fn is_alive(&self) -> bool {
        process_start_ticks(self.pid) == Some(self.start_ticks)
    }

    /// Remove this entry's file (best effort).
    pub fn remove(dir: &Path, pid: u32) {
        let _ = fs::remove_file(Self::path(dir, pid));
    }
}

/// Start time of `pid` in clock ticks since boot, if it is running.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts with " S ..." (field 3); start time is field 22 → index 19 in rest.
    let field = rest.split_whitespace().nth(19)?;
    let ticks = field.parse().ok()?;
    // A zombie still has a /proc entry; treat it as dead.
    let state = rest.split_whitespace().next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    Some(ticks)
}

/// List the entries in `dir` (after checking it), with the files that could not be read.
pub fn list_entries(dir: &Path) -> Result<Vec<Result<ProcessEntry, LinkError>>, LinkError> {
    check_dir(dir)?;
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        out.push(ProcessEntry::read(&e.path()));
    }
    Ok(out)
}

/// This machine's host name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its whole length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: u32) -> ProcessEntry {
        ProcessEntry {
            protocol: crate::PROTOCOL_VERSION,
            pid,
            start_ticks: process_start_ticks(pid).unwrap_or(0),
            host: hostname(),
            uid: my_uid(),
            cmdline: "test".into(),
            api_version: 6,
            comms: vec![],
            server: "/tmp/x/socket".into(),
            generation: 0,
        }
    }

    #[test]
    fn default_dirs_put_this_process_choice_first_and_add_the_other_defaults() {
        let os = |s: &str| Some(OsString::from(s));
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        // Named: only that one, whatever else is set.
        assert_eq!(
            candidate_dirs(os("/x/rdv"), os("/run/user/7"), 7),
            p(&["/x/rdv"])
        );
        // An SSH login (XDG set) also sees a batch job's /tmp directory.
        assert_eq!(
            candidate_dirs(None, os("/run/user/7"), 7),
            p(&["/run/user/7/ncclprof", "/tmp/ncclprof-7"])
        );
        // An unusual XDG_RUNTIME_DIR: systemd's usual one is watched as well.
        assert_eq!(
            candidate_dirs(os(""), os("/xdg"), 7),
            p(&["/xdg/ncclprof", "/run/user/7/ncclprof", "/tmp/ncclprof-7"])
        );
        // A batch job's shell (no XDG): its own /tmp first, then the login's directory.
        assert_eq!(
            candidate_dirs(None, os(""), 7),
            p(&["/tmp/ncclprof-7", "/run/user/7/ncclprof"])
        );
        // An XDG_RUNTIME_DIR exported to a node where it does not exist counts as unset.
        let t = tempfile::tempdir().unwrap();
        assert_eq!(
            existing(Some(t.path().into())),
            Some(t.path().as_os_str().to_owned())
        );
        assert_eq!(existing(Some(t.path().join("none").into())), None);
        assert_eq!(existing(None), None);
        // The real environment is only read, never modified (tests run in parallel).
        assert_eq!(default_dir(), default_dirs()[0]);
    }

    #[test]
    fn a_missing_directory_is_not_found_a_loose_one_is_not() {
        let t = tempfile::tempdir().unwrap();
        assert!(
            list_entries(&t.path().join("none"))
                .unwrap_err()
                .is_not_found()
        );
        let d = t.path().join("loose");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!list_entries(&d).unwrap_err().is_not_found());
    }

    #[test]
    fn creates_private_dir_and_refuses_loose_ones() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/b/ncclprof");
        ensure_dir(&d).unwrap();
        let mode = fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        let e = ensure_dir(&d).unwrap_err();
        assert!(matches!(e, LinkError::Permissions { .. }), "{e}");
        assert!(e.to_string().contains("refusing"));
        // A symlink to a private dir is refused too.
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
        let l = t.path().join("link");
        std::os::unix::fs::symlink(&d, &l).unwrap();
        assert!(matches!(check_dir(&l), Err(LinkError::NotDir { .. })));
    }

    #[test]
    fn entries_roundtrip_and_liveness() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("r");
        ensure_dir(&d).unwrap();
        let me = std::process::id();
        let e = entry(me);
        e.write(&d).unwrap();
        let mode = fs::metadata(ProcessEntry::path(&d, me))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let list = list_entries(&d).unwrap();
        assert_eq!(list.len(), 1);
        let back = list.into_iter().next().unwrap().unwrap();
        assert_eq!(back, e);
        assert!(back.is_alive());
        let mut stale = e.clone();
        stale.start_ticks += 1; // pid reused by another process
        assert!(!stale.is_alive());
        // Malformed entry: a clear error, the others still listed.
        fs::write(d.join("999999.json"), b"{not json").unwrap();
        let list = list_entries(&d).unwrap();
        assert_eq!(list.iter().filter(|r| r.is_err()).count(), 1);
    }
}

/// The viewer's end of a connection to one plugin process.
pub struct Connection {
    /// Control messages to the plugin (mask changes).
    pub control: ipc_channel::ipc::IpcSender<crate::wire::ViewerMsg>,
    /// Frames from the plugin.
    pub data: FrameReceiver,
}

/// Frames from one plugin process, in the order it sent them: from the socket, or from the
/// connection's frame ring where the socket brings an [`IN_RING`](crate::wire::IN_RING)
/// frame in their place ([`crate::frame_ring`]).
pub struct FrameReceiver {
    socket: ipc_channel::ipc::IpcBytesReceiver,
    ring: Option<crate::frame_ring::RingReader>,
    from_ring: u64,
    bytes_from_ring: u64,
    large_on_socket: u64,
}

/// A frame as it came: on the socket, or in the ring.
enum Next {
    Bytes(Vec<u8>),
    Ring(crate::frame_ring::RingFrame),
}

/// Why [`FrameReceiver::recv`] or [`FrameReceiver::recv_frame`] returned no frame.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// The plugin closed the connection (it left, or dropped this viewer), or the socket
    /// failed: nothing more will come.
    #[error("connection closed: {0}")]
    Closed(ipc_channel::IpcError),
    /// An [`IN_RING`](crate::wire::IN_RING) frame that could not be followed, or (from
    /// `recv_frame`) a frame that does not decode; the connection goes on.
    #[error("{0}")]
    BadFrame(String),
}

impl FrameReceiver {
    /// Frames from `socket`, and from `ring` where the socket says so.
    pub fn new(
        socket: ipc_channel::ipc::IpcBytesReceiver,
        ring: Option<crate::frame_ring::RingReader>,
    ) -> FrameReceiver {
        FrameReceiver {
            socket,
            ring,
            from_ring: 0,
            bytes_from_ring: 0,
            large_on_socket: 0,
        }
    }

    /// The next frame's bytes, blocking until one comes (a frame from the ring copied out).
    pub fn recv(&mut self) -> Result<Vec<u8>, RecvError> {
        Ok(match self.next()? {
            Next::Bytes(b) => b,
            Next::Ring(f) => f.bytes().to_vec(),
        })
    }

    /// The next frame, decoded, blocking until one comes. An Events frame's records stay
    /// where they arrived: in the ring, which gets them back when the frame is dropped, or in
    /// the socket's buffer ([`wire::decode_owned`](crate::wire::decode_owned)). A frame that
    /// does not decode is a [`RecvError::BadFrame`]; the connection goes on.
    pub fn recv_frame(&mut self) -> Result<crate::wire::Frame, RecvError> {
        let decoded = match self.next()? {
            Next::Bytes(b) => crate::wire::decode_owned(b),
            Next::Ring(f) => crate::wire::decode_in_place(f),
        };
        decoded.map_err(|e| RecvError::BadFrame(e.to_string()))
    }

    fn next(&mut self) -> Result<Next, RecvError> {
        let bytes = self.socket.recv().map_err(RecvError::Closed)?;
        match crate::wire::decode_in_ring(&bytes) {
            None => {
                if bytes.len() >= crate::frame_ring::MIN_FRAME_IN_RING {
                    self.large_on_socket += 1;
                }
                Ok(Next::Bytes(bytes))
            }
            Some(Err(e)) => Err(RecvError::BadFrame(e.to_string())),
            Some(Ok((at, len))) => {
                let ring = self.ring.as_mut().ok_or_else(|| {
                    RecvError::BadFrame(crate::frame_ring::RingError::NoRing.to_string())
                })?;
                let frame = ring
                    .take(at, len)
                    .map_err(|e| RecvError::BadFrame(e.to_string()))?;
                self.from_ring += 1;
                self.bytes_from_ring += len;
                Ok(Next::Ring(frame))
            }
        }
    }

    /// How many frames came through the frame ring so far.
    pub fn frames_from_ring(&self) -> u64 {
        self.from_ring
    }

    /// How many bytes came through the frame ring so far (many times its size once it has
    /// wrapped: the viewer releases what it read).
    pub fn bytes_from_ring(&self) -> u64 {
        self.bytes_from_ring
    }

    /// How many frames large enough for the ring came on the socket so far (no ring offered,
    /// or it was full when the plugin sent them).
    pub fn large_frames_on_socket(&self) -> u64 {
        self.large_on_socket
    }
}

/// Whether ipc-channel can make and send a ring of `bytes` now. It asserts on every failure
/// (a viewer's thread would die of it, and a caught panic would still run the terminal's
/// panic hook): so ask first whether the file size limit allows the memfd (`ftruncate` fails
/// with EFBIG, after a SIGXFSZ, under `ulimit -f`) and whether the descriptors it takes (the
/// memfd, the clone's and the send's duplicates) are there.
fn memfd_available(bytes: usize) -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid resource and a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) } != 0
        || (lim.rlim_cur != libc::RLIM_INFINITY && lim.rlim_cur < bytes as libc::rlim_t)
    {
        return false;
    }
    // SAFETY: a NUL-terminated name and valid flags.
    let fd = unsafe { libc::memfd_create(c"ncclprof-probe".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let dups = (0..2).all(|_| {
        // SAFETY: `fd` is ours and open.
        let d = unsafe { libc::dup(fd) };
        if d >= 0 {
            // SAFETY: `d` is ours and open, closed once.
            unsafe { libc::close(d) };
        }
        d >= 0
    });
    // SAFETY: `fd` is ours and open.
    unsafe { libc::close(fd) };
    dups
}

/// The frame ring's size a viewer offers: [`RING_MIB_ENV`](crate::frame_ring::RING_MIB_ENV)
/// in MiB if set (`0`: none), else [`DEFAULT_BYTES`](crate::frame_ring::DEFAULT_BYTES).
fn ring_bytes() -> usize {
    match std::env::var(crate::frame_ring::RING_MIB_ENV) {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .map_or(crate::frame_ring::DEFAULT_BYTES, |mib| {
                mib.saturating_mul(1 << 20)
            }),
        Err(_) => crate::frame_ring::DEFAULT_BYTES,
    }
}

/// Why a viewer could not connect to a plugin process.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "process {pid} speaks protocol v{theirs}, this viewer v{ours}: use matching ncclprof builds"
    )]
    Version { pid: u32, theirs: u32, ours: u32 },
    #[error("process {pid} belongs to uid {uid}, not to you; not connecting")]
    NotOwner { pid: u32, uid: u32 },
    #[error("process {pid} has no server published (a viewer is attached, or it is starting)")]
    Busy { pid: u32 },
    #[error("process {pid}: server socket {server}: {msg}")]
    Socket {
        pid: u32,
        server: String,
        msg: String,
    },
    #[error("process {pid}: connect failed: {msg}")]
    Ipc { pid: u32, msg: String },
}

/// Connect to the one-shot server a plugin published in `entry`, hand it a fresh frame
/// channel and frame ring (of [`RING_MIB_ENV`](crate::frame_ring::RING_MIB_ENV)'s size, or
/// [`DEFAULT_BYTES`](crate::frame_ring::DEFAULT_BYTES)) and return the viewer's ends.
/// Checks the protocol version and that the entry and its socket belong to the current user
/// before connecting.
pub fn connect(entry: &ProcessEntry) -> Result<Connection, ConnectError> {
    connect_with_ring(entry, ring_bytes())
}

/// [`connect`], offering a frame ring of `ring_bytes` (`0`: none, every frame on the socket).
pub fn connect_with_ring(
    entry: &ProcessEntry,
    ring_bytes: usize,
) -> Result<Connection, ConnectError> {
    use std::os::unix::fs::FileTypeExt;
    let pid = entry.pid;
    if entry.protocol != crate::PROTOCOL_VERSION {
        return Err(ConnectError::Version {
            pid,
            theirs: entry.protocol,
            ours: crate::PROTOCOL_VERSION,
        });
    }
    if entry.uid != my_uid() {
        return Err(ConnectError::NotOwner {
            pid,
            uid: entry.uid,
        });
    }
    if entry.server.is_empty() {
        return Err(ConnectError::Busy { pid });
    }
    let sock_err = |msg: String| ConnectError::Socket {
        pid,
        server: entry.server.clone(),
        msg,
    };
    if entry.server.contains('\0') {
        return Err(sock_err("name contains a NUL byte".into()));
    }
    let md = fs::symlink_metadata(&entry.server).map_err(|e| sock_err(e.to_string()))?;
    if !md.file_type().is_socket() {
        return Err(sock_err("not a socket".into()));
    }
    if md.uid() != my_uid() {
        return Err(sock_err(format!("owned by uid {}, not by you", md.uid())));
    }
    let ipc = |e: std::io::Error| ConnectError::Ipc {
        pid,
        msg: e.to_string(),
    };
    let control = ipc_channel::ipc::IpcSender::connect(entry.server.clone()).map_err(ipc)?;
    let (data_tx, socket) = ipc_channel::ipc::bytes_channel().map_err(ipc)?;
    let (ring, offer) = match ring_bytes {
        // ipc-channel panics where the kernel refuses a memfd: ask the kernel first, and
        // offer no ring (every frame on the socket) to one that refuses.
        bytes
            if bytes > 0
                && memfd_available(
                    bytes.clamp(crate::frame_ring::MIN_BYTES, crate::frame_ring::MAX_BYTES),
                ) =>
        {
            // Within the viewer's budget over all its rings: smaller, or none, past it.
            match crate::frame_ring::RingReader::within_budget(bytes) {
                Some((ring, offer)) => (Some(ring), crate::wire::RingOffer(offer)),
                None => (None, crate::wire::RingOffer::none()),
            }
        }
        _ => (None, crate::wire::RingOffer::none()),
    };
    control
        .send(crate::wire::ViewerMsg::Hello {
            protocol: crate::PROTOCOL_VERSION,
            viewer_pid: std::process::id(),
            uid: my_uid(),
            data: data_tx,
            ring: offer,
        })
        .map_err(|e| ConnectError::Ipc {
            pid,
            msg: e.to_string(),
        })?;
    Ok(Connection {
        control,
        data: FrameReceiver::new(socket, ring),
    })
}
