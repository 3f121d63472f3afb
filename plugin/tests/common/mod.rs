//! Helpers for the plugin's load tests: find and dlopen the built `.so`, attach a test viewer.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nccl_profiler_ncclprof::abi::v6;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::link::{self, ProcessEntry};
use ncclprof_shared::wire::{self, Frame};

/// A v6 descriptor of `kind` under `parent`, every other field zero (callers fill theirs).
pub fn descr(kind: EventKind, parent: *mut std::ffi::c_void) -> v6::Descr {
    // SAFETY: all-zero is a valid bit pattern for the descriptor (pointers NULL, ints 0).
    let mut d: v6::Descr = unsafe { std::mem::zeroed() };
    d.type_ = u64::from(kind.bit());
    d.parent_obj = parent;
    d
}

/// Path of the cdylib built for this test run.
pub fn plugin_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps.to_path_buf(), deps.parent().unwrap().to_path_buf()] {
        let p = dir.join("libnccl_profiler_ncclprof.so");
        if p.exists() {
            return p;
        }
    }
    panic!(
        "libnccl_profiler_ncclprof.so not found next to {}",
        exe.display()
    );
}

pub fn load() -> libloading::Library {
    // SAFETY: loading our own plugin; its initialisers have no preconditions.
    unsafe {
        libloading::os::unix::Library::open(
            Some(plugin_path()),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
        )
    }
    .unwrap()
    .into()
}

/// Wait until `pred` holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if pred() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    pred()
}

/// A viewer attached to the one plugin process in `dir`, collecting decoded frames.
pub struct TestViewer {
    pub frames: Arc<Mutex<Vec<Frame>>>,
    pub control: ipc_channel::ipc::IpcSender<wire::ViewerMsg>,
    pub closed: Arc<Mutex<bool>>,
}

impl TestViewer {
    pub fn attach(dir: &std::path::Path, pid: u32) -> TestViewer {
        let path = ProcessEntry::path(dir, pid);
        let mut entry = None;
        assert!(
            wait_for(Duration::from_secs(5), || {
                entry = ProcessEntry::read(&path)
                    .ok()
                    .filter(|e| !e.server.is_empty());
                entry.is_some()
            }),
            "no rendezvous entry with a server at {}",
            path.display()
        );
        let conn = link::connect(&entry.unwrap()).unwrap();
        let frames = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(Mutex::new(false));
        let (f, c) = (frames.clone(), closed.clone());
        let data = conn.data;
        std::thread::spawn(move || {
            while let Ok(bytes) = data.recv() {
                f.lock()
                    .unwrap()
                    .push(wire::decode(&bytes).expect("plugin sent a bad frame"));
            }
            *c.lock().unwrap() = true;
        });
        TestViewer {
            frames,
            control: conn.control,
            closed,
        }
    }

    pub fn records(&self) -> Vec<ncclprof_shared::record::EventRecord> {
        self.frames
            .lock()
            .unwrap()
            .iter()
            .filter_map(|f| match f {
                Frame::Events(r) => Some(r.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// The newest Counters frame received.
    pub fn last_counters(&self) -> Option<wire::Counters> {
        self.frames
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find_map(|f| match f {
                Frame::Counters(c) => Some(c.clone()),
                _ => None,
            })
    }

    pub fn strings(&self) -> std::collections::HashMap<u16, String> {
        self.frames
            .lock()
            .unwrap()
            .iter()
            .filter_map(|f| match f {
                Frame::Meta(m) => Some(m.strings.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }
}
