//! Helpers for the plugin's load tests: find and dlopen the built `.so`, attach a test viewer.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::ffi::{CStr, c_int, c_void};

use nccl_profiler_ncclprof::abi::{InitV5, ProfilerTable, v4, v6};
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

/// The plugin's v6 function table, as NCCL sees it.
pub type V6Table = ProfilerTable<InitV5, v6::Descr, v4::StateArgs>;

/// The loaded plugin's v6 table. The tests keep `lib` loaded to their end, past every use.
pub fn v6_table(lib: &libloading::Library) -> &'static V6Table {
    // SAFETY: the symbol is a data object with the v6 table layout; see above for how long
    // it stays valid.
    unsafe { &**lib.get::<*const V6Table>(b"ncclProfiler_v6").unwrap() }
}

/// `init` a communicator: rank `rank` of `nranks` on one node, the core's mask at `mask` (a
/// valid int for the plugin's life); its context (NULL if not profiled).
pub fn init_comm(
    t: &V6Table,
    comm_hash: u64,
    mask: *mut c_int,
    name: &CStr,
    nranks: c_int,
    rank: c_int,
) -> *mut c_void {
    let mut ctx: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid pointers; `name` is NUL-terminated and outlives the call.
    unsafe {
        (t.init)(
            &mut ctx,
            comm_hash,
            mask,
            name.as_ptr(),
            1,
            nranks,
            rank,
            None,
        )
    };
    ctx
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
        let mut data = conn.data;
        std::thread::spawn(move || {
            while let Some(bytes) = next_frame(&mut data) {
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
                Frame::Events(r) => Some(r.to_vec()),
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

    /// The newest Counters frame once it covers every record made before this call: the
    /// plugin sends one every 250 ms, so the newest after 600 ms does.
    pub fn settled_counters(&self) -> wire::Counters {
        std::thread::sleep(Duration::from_millis(600));
        assert!(
            wait_for(Duration::from_secs(5), || self.last_counters().is_some()),
            "no Counters frame"
        );
        self.last_counters().unwrap()
    }

    /// The states the in-flight summaries so far showed for collective `coll`'s oldest open
    /// step, where that step is step number `step`, in the order they came.
    #[allow(dead_code)] // not every test binary uses every helper
    pub fn oldest_step_states(&self, coll: u64, step: u32) -> Vec<u8> {
        let frames = self.frames.lock().unwrap();
        let ops = frames.iter().filter_map(|f| match f {
            Frame::InFlight(i) => Some(&i.ops),
            _ => None,
        });
        ops.flatten()
            .filter(|o| o.id == coll)
            .filter_map(|o| o.oldest_step.as_ref())
            .filter(|s| s.step == step)
            .map(|s| s.state)
            .collect()
    }

    /// Wait until an in-flight summary shows collective `coll`'s oldest open step, step
    /// number `step`, waiting in `state`, and check that none ever showed it in `never`.
    #[allow(dead_code)] // not every test binary uses every helper
    pub fn assert_open_step_shown(&self, coll: u64, step: u32, state: u8, never: u8) {
        let shown = || self.oldest_step_states(coll, step);
        assert!(
            wait_for(Duration::from_secs(10), || shown().contains(&state)),
            "the in-flight summary shows the open step"
        );
        assert!(
            !shown().contains(&never),
            "never the state it does not have: {:?}",
            shown()
        );
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

/// The dump-file scenario of `dump_file.rs` and `dump_file_idle.rs`: with `env` set too, 10
/// Coll events, `idle` without NCCL work, then the last finalize, whose dump must hold all
/// 10, written atomically, with their end flagged unknown (no completion signal).
pub fn ten_collectives_then_dump(env: &[(&str, &str)], idle: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("job");
    // SAFETY: set before the plugin's first init.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", dir.path().join("rdv"));
        std::env::set_var("NCCL_PROFILE_DUMP_FILE", &prefix);
        for (k, v) in env {
            std::env::set_var(k, v);
        }
    }
    let lib = load();
    let t = v6_table(&lib);
    let mut mask: c_int = 0;
    let ctx = init_comm(t, 42, &mut mask, c"dumpcomm", 1, 0);
    for i in 0..10u64 {
        // SAFETY: zeroed descriptors are valid; handles come from start_event.
        unsafe {
            let mut d: v6::Descr = std::mem::zeroed();
            d.type_ = u64::from(EventKind::Coll.bit());
            d.u.coll.seq_number = i;
            d.u.coll.func = c"AllGather".as_ptr();
            let mut h = std::ptr::null_mut();
            (t.start_event)(ctx, &mut h, &mut d);
            (t.stop_event)(h);
        }
    }
    std::thread::sleep(idle);
    let t0 = std::time::Instant::now();
    // SAFETY: ctx from init.
    unsafe { (t.finalize)(ctx) };
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(1),
        "finalize must return promptly"
    );
    let path = format!("{}.{}.json", prefix.display(), std::process::id());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let spans: Vec<&serde_json::Value> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "Coll")
        .collect();
    assert_eq!(spans.len(), 10);
    assert_eq!(spans[0]["name"], "AllGather");
    // Ops without completion signal are reported as such, never with an invented end.
    let flags = spans[0]["args"]["ncclprof"]["flags"].as_u64().unwrap() as u16;
    assert_ne!(flags & ncclprof_shared::record::F_END_UNKNOWN, 0);
    assert_eq!(v["otherData"]["format"], ncclprof_shared::trace::FORMAT);
    assert!(text.contains("dumpcomm"));
    assert!(!std::path::Path::new(&format!("{path}.tmp")).exists());
}

/// NCCL's v6 calls on one communicator, handles as plain integers: `Copy` and `Send`, so a
/// helper thread makes them as NCCL's helper threads do. Test-only conveniences: `start`
/// trusts the descriptor's string pointers as NCCL's are trusted, and a copy may outlive the
/// `Library` only because the plugin is linked `-z nodelete` (never unmapped).
#[derive(Clone, Copy)]
pub struct V6Calls {
    start_event: nccl_profiler_ncclprof::abi::StartEvent<v6::Descr>,
    record_event_state: nccl_profiler_ncclprof::abi::RecordEventState<v4::StateArgs>,
    stop_event: nccl_profiler_ncclprof::abi::StopEvent,
    ctx: usize,
}

impl V6Calls {
    /// `startEvent`; the handle, which must not be NULL.
    pub fn start(&self, d: &mut v6::Descr) -> u64 {
        let mut h: *mut c_void = std::ptr::null_mut();
        // SAFETY: a context from init, a valid handle slot and descriptor.
        unsafe { (self.start_event)(self.ctx as *mut c_void, &mut h, d) };
        assert!(!h.is_null(), "startEvent gave no handle");
        h as u64
    }

    /// `recordEventState` with the 8-byte args union holding `arg` (`None`: NULL args).
    pub fn state(&self, h: u64, state: u32, arg: Option<u64>) {
        let mut args = v4::StateArgs {
            p_timer: arg.unwrap_or(0),
        };
        let p = if arg.is_some() {
            &mut args as *mut _
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: a handle from startEvent; valid args or NULL.
        unsafe { (self.record_event_state)(h as *mut c_void, state as c_int, p) };
    }

    /// `stopEvent`.
    pub fn stop(&self, h: u64) {
        // SAFETY: a handle from startEvent.
        unsafe { (self.stop_event)(h as *mut c_void) };
    }
}

/// What most load tests set up first: the plugin loaded with its rendezvous in a fresh
/// temporary directory and `env` set, one communicator (`comm_hash`, rank 0 of 2) initialised,
/// a test viewer attached. One per test process (the plugin reads its environment once).
pub struct V6Session {
    pub lib: libloading::Library,
    pub t: &'static V6Table,
    pub ctx: *mut c_void,
    /// The core's mask int (valid, never freed).
    pub mask: *mut c_int,
    pub calls: V6Calls,
    pub viewer: TestViewer,
    _dir: tempfile::TempDir,
}

impl V6Session {
    pub fn open(comm_hash: u64, env: &[(&str, &str)]) -> V6Session {
        let dir = tempfile::tempdir().unwrap();
        let rdv = dir.path().join("rdv");
        // SAFETY: set before the plugin reads its configuration; no other thread reads env yet.
        unsafe {
            std::env::set_var("NCCLPROF_DIR", &rdv);
            for (k, v) in env {
                std::env::set_var(k, v);
            }
        }
        let lib = load();
        let t = v6_table(&lib);
        let mask: *mut c_int = Box::into_raw(Box::new(0));
        let ctx = init_comm(t, comm_hash, mask, c"world", 2, 0);
        assert!(!ctx.is_null(), "init gave no context");
        let viewer = TestViewer::attach(&rdv, std::process::id());
        let calls = V6Calls {
            start_event: t.start_event,
            record_event_state: t.record_event_state,
            stop_event: t.stop_event,
            ctx: ctx as usize,
        };
        V6Session {
            lib,
            t,
            ctx,
            mask,
            calls,
            viewer,
            _dir: dir,
        }
    }

    /// `finalize` the communicator.
    pub fn finalize(&self) {
        // SAFETY: the context came from init.
        unsafe { (self.t.finalize)(self.ctx) };
    }

    /// `recordEventState` of `h` from another thread (a ring of its own), and wait until the
    /// drain has read it: a ProxyCtrl marker follows it on that thread's ring, and once the
    /// viewer has the marker, the drain has read the state too.
    pub fn state_from_another_thread(&self, h: u64, state: u32, arg: Option<u64>) {
        let calls = self.calls;
        let markers = || {
            self.viewer
                .records()
                .iter()
                .filter(|r| r.kind == EventKind::ProxyCtrl as u8)
                .count()
        };
        let before = markers();
        std::thread::spawn(move || {
            calls.state(h, state, arg);
            let mut d = descr(EventKind::ProxyCtrl, std::ptr::null_mut());
            let m = calls.start(&mut d);
            calls.stop(m);
        })
        .join()
        .unwrap();
        assert!(
            wait_for(Duration::from_secs(10), || markers() > before),
            "the other thread's marker reaches the viewer"
        );
    }
}

/// The next frame, `None` once the plugin closed the connection; a frame the ring could not
/// give is a bug the test reports.
fn next_frame(data: &mut ncclprof_shared::link::FrameReceiver) -> Option<Vec<u8>> {
    match data.recv() {
        Ok(bytes) => Some(bytes),
        Err(ncclprof_shared::link::RecvError::Closed(_)) => None,
        Err(e) => panic!("plugin sent a frame the viewer cannot follow: {e}"),
    }
}
