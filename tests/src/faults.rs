//! Fault-injection helpers of the reliability and security tests: drive the real plugin `.so`
//! through `ncclProfiler_v6` by hand (so tests can pass it exactly the bad input they want),
//! run the `ncclprof-fault-driver` helper in a child process (the plugin keeps process-global
//! state, so each scenario gets its own process) and read its one-line JSON report.
//!
//! The `V6` methods take raw handle and context values on purpose: accepting any value NCCL
//! (or a buggy core) passes is exactly what these tests check, so they are not `unsafe fn`.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{CStr, c_int, c_void};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicI32;
use std::time::{Duration, Instant};

use ncclprof_sim::abi::{self, ev, v4::ncclProfilerEventStateArgs_v4_t as StateArgs};

pub use ncclprof_sim::abi::v6::ncclProfilerEventDescr_v6_t as Descr;

/// The core's activation mask (the plugin keeps a pointer to it for its lifetime).
pub static MASK: AtomicI32 = AtomicI32::new(0);

/// The plugin, loaded with `dlopen(RTLD_NOW | RTLD_LOCAL)` and bound to `ncclProfiler_v6`.
pub struct V6 {
    lib: Option<libloading::os::unix::Library>,
    t: abi::ProfilerTable,
}

// SAFETY: the table holds function pointers NCCL calls from any thread; never written.
unsafe impl Sync for V6 {}
// SAFETY: as above.
unsafe impl Send for V6 {}

impl V6 {
    pub fn load(path: &Path) -> V6 {
        // SAFETY: loading the plugin runs its initialisers, which have no preconditions.
        let lib = unsafe {
            libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_LOCAL)
        }
        .expect("dlopen plugin");
        // SAFETY: the exported data object has the 48-byte table layout.
        let t = unsafe {
            let sym = lib
                .get::<*const abi::ProfilerTable>(b"ncclProfiler_v6\0")
                .expect("ncclProfiler_v6");
            std::ptr::read(*sym)
        };
        V6 { lib: Some(lib), t }
    }

    /// `init` (v6 argument order); returns the context (NULL = not profiled).
    pub fn init(&self, comm_id: u64, name: &CStr, rank: c_int) -> *mut c_void {
        let mut ctx: *mut c_void = std::ptr::null_mut();
        // SAFETY: `init` has the v5/v6 signature in the v6 table.
        let f: abi::InitV5 = unsafe { std::mem::transmute(self.t.init) };
        // SAFETY: valid context slot, a 'static mask, a NUL-terminated name; no logger (the
        // plugin then writes its warnings to stderr).
        unsafe {
            f(
                &mut ctx,
                comm_id,
                MASK.as_ptr(),
                name.as_ptr(),
                1,
                8,
                rank,
                None,
            )
        };
        ctx
    }

    /// `startEvent`; returns the handle the plugin wrote.
    pub fn start(&self, ctx: *mut c_void, d: &mut Descr) -> *mut c_void {
        let mut h: *mut c_void = std::ptr::null_mut();
        let f = self.t.startEvent.expect("startEvent");
        // SAFETY: a v6 descriptor valid during the call.
        unsafe { f(ctx, &mut h, (d as *mut Descr).cast()) };
        h
    }

    /// `startEvent` with a NULL descriptor; returns the handle written.
    pub fn start_null_descr(&self, ctx: *mut c_void) -> *mut c_void {
        let mut h: *mut c_void = std::ptr::dangling_mut::<c_void>();
        let f = self.t.startEvent.expect("startEvent");
        // SAFETY: the plugin checks the descriptor pointer for NULL.
        unsafe { f(ctx, &mut h, std::ptr::null_mut()) };
        h
    }

    /// `startEvent` with a NULL handle slot.
    pub fn start_null_slot(&self, ctx: *mut c_void, d: &mut Descr) {
        let f = self.t.startEvent.expect("startEvent");
        // SAFETY: the plugin checks the handle slot for NULL.
        unsafe { f(ctx, std::ptr::null_mut(), (d as *mut Descr).cast()) };
    }

    pub fn stop(&self, h: *mut c_void) {
        let f = self.t.stopEvent.expect("stopEvent");
        // SAFETY: the plugin accepts any handle value (it never dereferences handles).
        unsafe { f(h) };
    }

    /// `recordEventState` with an 8-byte args union holding `arg` (or NULL args).
    pub fn record(&self, h: *mut c_void, state: c_int, arg: Option<u64>) {
        let f = self.t.recordEventState.expect("recordEventState");
        let mut a = StateArgs {
            kernelCh_pTimer: arg.unwrap_or(0),
        };
        let p: *mut c_void = if arg.is_some() {
            (&raw mut a).cast()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: args valid during the call (or NULL).
        unsafe { f(h, state, p) };
    }

    pub fn finalize(&self, ctx: *mut c_void) {
        let f = self.t.finalize.expect("finalize");
        // SAFETY: the plugin checks the context is one of its own.
        unsafe { f(ctx) };
    }

    /// `dlclose` the library.
    pub fn close(mut self) {
        drop(self.lib.take());
    }

    /// One collective in NCCL's call order: Coll → ProxyOp → `steps` ProxySteps (three
    /// states each) → stops. Returns the number of calls and the slowest call.
    pub fn op_cycle(&self, ctx: *mut c_void, seq: u64, steps: i32) -> (u64, Duration) {
        let mut calls = 0u64;
        let mut worst = Duration::ZERO;
        let mut t = |f: &mut dyn FnMut()| {
            let s = Instant::now();
            f();
            worst = worst.max(s.elapsed());
            calls += 1;
        };
        let mut coll = std::ptr::null_mut();
        t(&mut || coll = self.start(ctx, &mut coll_descr(seq, std::ptr::null_mut())));
        let mut op = std::ptr::null_mut();
        t(&mut || op = self.start(ctx, &mut proxy_op_descr(coll, 0, std::process::id() as i32)));
        t(&mut || self.stop(coll));
        t(&mut || self.record(op, abi::st::PROXY_OP_IN_PROGRESS, Some(0)));
        for s in 0..steps {
            let mut h = std::ptr::null_mut();
            t(&mut || h = self.start(ctx, &mut step_descr(op, s)));
            t(&mut || self.record(h, abi::st::STEP_SEND_GPU_WAIT, Some(0)));
            t(&mut || self.record(h, abi::st::STEP_SEND_WAIT, Some(4096)));
            t(&mut || self.stop(h));
        }
        t(&mut || self.stop(op));
        (calls, worst)
    }
}

/// An all-zero v6 descriptor of `type_` with `parent`.
pub fn descr(type_: u64, parent: *mut c_void) -> Descr {
    // SAFETY: all-zero is a valid descriptor (NULL pointers, zero integers).
    let mut d: Descr = unsafe { std::mem::zeroed() };
    d.type_ = type_;
    d.parentObj = parent;
    d
}

pub fn coll_descr(seq: u64, parent: *mut c_void) -> Descr {
    let mut d = descr(ev::COLL, parent);
    d.u.coll.seqNumber = seq;
    d.u.coll.func = c"AllReduce".as_ptr();
    d.u.coll.datatype = c"ncclFloat32".as_ptr();
    d.u.coll.algo = c"RING".as_ptr();
    d.u.coll.proto = c"SIMPLE".as_ptr();
    d.u.coll.count = 1 << 20;
    d.u.coll.nChannels = 1;
    d
}

pub fn proxy_op_descr(parent: *mut c_void, channel: u8, pid: i32) -> Descr {
    let mut d = descr(ev::PROXY_OP, parent);
    d.u.proxyOp.pid = pid;
    d.u.proxyOp.channelId = channel;
    d.u.proxyOp.peer = 1;
    d.u.proxyOp.nSteps = 8;
    d.u.proxyOp.chunkSize = 4096;
    d.u.proxyOp.isSend = 1;
    d
}

pub fn step_descr(parent: *mut c_void, step: i32) -> Descr {
    let mut d = descr(ev::PROXY_STEP, parent);
    d.u.proxyStep.step = step;
    d
}

/// The helper binary of this crate.
pub fn driver() -> PathBuf {
    static P: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| crate::artifact("ncclprof-fault-driver", "ncclprof-tests"))
        .clone()
}

/// The plugin `.so` (built once per test process).
pub fn plugin() -> PathBuf {
    static P: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(crate::plugin_path).clone()
}

/// Resident set size of `pid` in KiB.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A child process that is killed (SIGKILL) when dropped.
pub struct Proc {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Proc {
    /// Spawn `cmd` with piped stdout (read line by line) and stderr (collected).
    pub fn spawn(mut cmd: Command) -> Proc {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn helper");
        let out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let e2 = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    return;
                }
                e2.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Proc {
            child,
            lines,
            stderr,
        }
    }

    /// Close the child's stdin (the `job` scenario stops at EOF).
    pub fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next stdout line, waiting at most `timeout`.
    pub fn line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Wait for a stdout line starting with `prefix` (others are skipped).
    pub fn expect_line(&self, prefix: &str, timeout: Duration) -> String {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.line(left) {
                Some(l) if l.starts_with(prefix) => return l,
                Some(_) => continue,
                None => panic!(
                    "helper {} printed no '{prefix}' line within {timeout:?}; stderr: {}",
                    self.pid(),
                    self.stderr.lock().unwrap()
                ),
            }
        }
    }

    /// Send `sig` to the child.
    pub fn signal(&self, sig: c_int) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }

    /// Wait for exit at most `timeout`; kills the child on timeout. Returns the exit code.
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s.code();
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run the driver's `scenario` in a fresh process with `NCCLPROF_DIR=<dir>` and `env`;
/// returns its JSON report (the last stdout line starting with `{`) and its stderr.
pub fn scenario(
    name: &str,
    dir: &Path,
    env: &[(&str, &str)],
    timeout: Duration,
) -> (serde_json::Value, String) {
    let mut cmd = Command::new(driver());
    cmd.arg(name)
        .arg(plugin())
        .env("NCCLPROF_DIR", dir)
        .env("NCCL_PROFILE_EVENT_MASK", "0x7fff");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut p = Proc::spawn(cmd);
    let mut report = None;
    let end = Instant::now() + timeout;
    while let Some(l) = p.line(end.saturating_duration_since(Instant::now())) {
        if l.starts_with('{') {
            report = Some(l);
        }
    }
    let code = p.wait(end.saturating_duration_since(Instant::now()) + Duration::from_secs(1));
    let stderr = p.stderr.lock().unwrap().clone();
    assert_eq!(
        code,
        Some(0),
        "scenario {name} did not exit cleanly (timeout or crash); stderr:\n{stderr}"
    );
    let report = report.unwrap_or_else(|| panic!("scenario {name}: no report; stderr:\n{stderr}"));
    (
        serde_json::from_str(&report).expect("report is JSON"),
        stderr,
    )
}

/// Start the driver's `job` scenario (op cycles at full speed until stdin closes, at most
/// `max_s`) with `NCCLPROF_DIR=<rdv>`; returns it once it printed `ready PID`.
pub fn spawn_job(rdv: &Path, max_s: u32, env: &[(&str, &str)]) -> (Proc, u32) {
    let mut cmd = Command::new(driver());
    cmd.arg("job")
        .arg(plugin())
        .arg(max_s.to_string())
        .env("NCCLPROF_DIR", rdv)
        .env("NCCL_PROFILE_EVENT_MASK", "0x7fff");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let p = Proc::spawn(cmd);
    let l = p.expect_line("ready", Duration::from_secs(20));
    let pid = l["ready ".len()..].trim().parse().expect("pid");
    (p, pid)
}

/// Wait for `pid`'s entry in `rdv` with a published server.
pub fn entry_with_server(rdv: &Path, pid: u32) -> ncclprof_shared::link::ProcessEntry {
    use ncclprof_shared::link::ProcessEntry;
    let path = ProcessEntry::path(rdv, pid);
    let mut entry = None;
    let found = crate::wait_for(Duration::from_secs(10), || {
        entry = ProcessEntry::read(&path)
            .ok()
            .filter(|e| !e.server.is_empty());
        entry.is_some()
    });
    assert!(found, "no entry with a server at {}", path.display());
    entry.expect("entry")
}
