//! The plugin's end of the rendezvous: publish this process's entry with an ipc-channel
//! one-shot server name, accept one viewer at a time, read its control messages, and publish
//! a fresh server when it leaves (spec: a viewer can come and go any number of times).
//!
//! Runs on its own thread ("ncclprof-link"); blocking here never touches NCCL's threads.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crossbeam_channel::Sender;
use ipc_channel::ipc::IpcOneShotServer;
use ncclprof_shared::PROTOCOL_VERSION;
use ncclprof_shared::link::{self, ProcessEntry};
use ncclprof_shared::wire::ViewerMsg;

use crate::Plugin;
use crate::stream::{DrainMsg, ViewerOut};
use ncclprof_shared::frame_ring::RingWriter;

/// What this process's rendezvous entry says besides its communicators: the one-shot server
/// waiting for a viewer (empty while one is attached) and how many viewers have connected.
/// The lock around it (`Plugin::published`) is held while the entry is written, so the link
/// thread and the drain ([`republish_if_stale`]) never write it at once, and the drain
/// writes what the link thread last published, not a server it has replaced.
#[derive(Debug, Default)]
pub struct Published {
    pub server: String,
    pub generation: u64,
}

/// Write this process's entry, saying `server` and `generation` (and remember them).
fn publish(p: &Plugin, dir: &Path, server: &str, generation: u64) -> Result<(), String> {
    let mut pb = p.published.lock().unwrap_or_else(|e| e.into_inner());
    pb.server = server.to_string();
    pb.generation = generation;
    entry(p, server, generation)
        .write(dir)
        .map_err(|e| e.to_string())
}

/// Write the entry again as the link thread last published it, with the communicators as
/// they are now, if one was created since it was written ([`Plugin::entry_stale`]); nothing
/// while a viewer is attached (it gets new communicators in its Meta, and the entry is
/// written again when it leaves) or before the link thread published. The drain calls this
/// after each pass: a burst of communicator inits costs one write per pass, not one each.
/// If the link thread is writing the entry right now, the next pass tries again.
pub fn republish_if_stale(p: &Plugin) {
    if !p.entry_stale.load(Ordering::Acquire) {
        return;
    }
    let pb = match p.published.try_lock() {
        Ok(pb) => pb,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    // Cleared before the slots are read, acquiring what every init that marked it wrote: a
    // communicator whose init marks it after this is written by the next pass.
    if p.entry_stale.swap(false, Ordering::AcqRel) && !pb.server.is_empty() {
        let _ = entry(p, &pb.server, pb.generation).write(&p.config.dir);
    }
}

/// Build this process's entry from the context slots.
pub fn entry(p: &Plugin, server: &str, generation: u64) -> ProcessEntry {
    ProcessEntry {
        protocol: PROTOCOL_VERSION,
        pid: p.pid,
        start_ticks: link::process_start_ticks(p.pid).unwrap_or(0),
        host: p.host.clone(),
        uid: link::my_uid(),
        cmdline: p.cmdline.clone(),
        api_version: p.api_version.load(Ordering::Relaxed),
        comms: crate::stream::comm_infos(p),
        server: server.to_string(),
        generation,
    }
}

/// Make the one-shot server's socket directory private (ipc-channel creates it 0755 under
/// `$TMPDIR`; its socket is not connectable by others, but nobody else should even list it).
fn tighten(server_name: &str) {
    if let Some(dir) = Path::new(server_name).parent() {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
}

/// The link thread's loop. Exits when the plugin shuts down.
pub fn run(p: &'static Plugin, dir: PathBuf, to_drain: Sender<DrainMsg>) {
    let mut generation = 0u64;
    loop {
        if p.shutting_down() {
            return;
        }
        let (server, name) = match IpcOneShotServer::<ViewerMsg>::new() {
            Ok(s) => s,
            Err(e) => {
                crate::nccl_log::warn(&format!(
                    "cannot create the viewer socket ({e}); no viewer can attach"
                ));
                return;
            }
        };
        tighten(&name);
        if let Err(e) = publish(p, &dir, &name, generation) {
            crate::nccl_log::warn(&format!("cannot publish the rendezvous entry: {e}"));
        }
        let (rx, first) = match ipc_caught(|| server.accept()) {
            Some(Ok(x)) => x,
            Some(Err(_)) => continue,
            None => {
                crate::nccl_log::warn(
                    "a viewer's first message could not be received (ipc-channel failed on it); waiting for the next viewer",
                );
                continue;
            }
        };
        if p.shutting_down() {
            return;
        }
        let ViewerMsg::Hello {
            protocol,
            data,
            ring,
            ..
        } = first
        else {
            continue; // not a viewer (or our own wake-up): publish again
        };
        generation += 1;
        // Viewer attached: the entry shows no server until it leaves.
        let _ = publish(p, &dir, "", generation);
        if protocol != PROTOCOL_VERSION {
            let _ = to_drain.send(DrainMsg::Refuse(data, format!(
                "protocol mismatch: viewer speaks v{protocol}, plugin v{PROTOCOL_VERSION}; use matching ncclprof builds"
            )));
            continue;
        }
        // A ring that is not one (or none offered): every frame goes on the socket.
        let out = ViewerOut {
            socket: data,
            ring: RingWriter::new(ring.0),
        };
        let _ = to_drain.send(DrainMsg::Viewer(out, generation));
        // Control messages until the viewer goes away (or sends one ipc-channel fails on).
        while let Some(Ok(msg)) = ipc_caught(|| rx.recv()) {
            let requested = match msg {
                ViewerMsg::SetMask(m) => {
                    p.control.set_mask(m);
                    m
                }
                ViewerMsg::Start(m) => {
                    p.control.start(m);
                    m
                }
                ViewerMsg::Stop => {
                    p.control.stop();
                    0
                }
                ViewerMsg::Hello { .. } => continue,
            };
            let _ = to_drain.send(DrainMsg::MaskChanged(requested));
        }
        let _ = to_drain.send(DrainMsg::ViewerGone(generation));
        if p.shutting_down() {
            return;
        }
    }
}

/// Run an ipc-channel receive, catching a panic: ipc-channel maps every memory object a
/// message carries, and panics (`assert!`) when that fails (a viewer's frame ring the
/// process cannot map: our viewer offers at most 64 MiB, so an address-space limit below
/// that). Caught here, such a message costs its connection, not the link thread and with
/// it every later viewer. `None` if it panicked. Two limits: the descriptors that message
/// carried leak (the viewer then waits for a Hello that does not come), and in a debug
/// build of ipc-channel a drop check on them fires during the unwinding and aborts; the
/// plugin a job loads is a release build.
fn ipc_caught<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// Wake a link thread blocked in `accept` (used at shutdown).
pub fn wake(server_name: &str) {
    if server_name.is_empty() {
        return;
    }
    if let Ok(tx) = ipc_channel::ipc::IpcSender::<ViewerMsg>::connect(server_name.to_string()) {
        let _ = tx.send(ViewerMsg::Stop);
    }
}

/// Remove this process's entry (at exit of the last communicator with nothing to show).
pub fn unpublish(dir: &Path, pid: u32) {
    ProcessEntry::remove(dir, pid);
}
