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
use crate::stream::DrainMsg;

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
        *p.server_name.lock().unwrap_or_else(|e| e.into_inner()) = name.clone();
        if let Err(e) = entry(p, &name, generation).write(&dir) {
            crate::nccl_log::warn(&format!("cannot publish the rendezvous entry: {e}"));
        }
        let (rx, first) = match server.accept() {
            Ok(x) => x,
            Err(_) => continue,
        };
        if p.shutting_down() {
            return;
        }
        let ViewerMsg::Hello { protocol, data, .. } = first else {
            continue; // not a viewer (or our own wake-up): publish again
        };
        generation += 1;
        // Viewer attached: the entry shows no server until it leaves.
        p.server_name
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        let _ = entry(p, "", generation).write(&dir);
        if protocol != PROTOCOL_VERSION {
            let _ = to_drain.send(DrainMsg::Refuse(data, format!(
                "protocol mismatch: viewer speaks v{protocol}, plugin v{PROTOCOL_VERSION}; use matching ncclprof builds"
            )));
            continue;
        }
        let _ = to_drain.send(DrainMsg::Viewer(data, generation));
        // Control messages until the viewer goes away.
        while let Ok(msg) = rx.recv() {
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
