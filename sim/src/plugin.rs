//! Loading a profiler plugin and calling it in the selected API version's layout.

use crate::abi::{self, v1, v2, v3, v4, v5, v6};
use crate::mask::Kind;
use anyhow::{Context, Result, anyhow, bail};
use std::collections::VecDeque;
use std::ffi::{CStr, CString, c_char, c_int, c_ulong, c_void};
use std::path::Path;
use std::ptr::null_mut;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// An opaque event handle or context pointer as a plain value (never dereferenced).
pub type H = usize;

/// Collective / p2p function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Broadcast,
    AllGather,
    ReduceScatter,
    AllReduce,
    Send,
    Recv,
    AlltoAll,
}

impl Func {
    pub fn cstr(self) -> &'static CStr {
        match self {
            Func::Broadcast => c"Broadcast",
            Func::AllGather => c"AllGather",
            Func::ReduceScatter => c"ReduceScatter",
            Func::AllReduce => c"AllReduce",
            Func::Send => c"Send",
            Func::Recv => c"Recv",
            Func::AlltoAll => c"AlltoAll",
        }
    }
    pub fn name(self) -> &'static str {
        self.cstr().to_str().unwrap_or("Invalid")
    }
    /// `ncclFunc_t` code used by v1 (AlltoAll is reported as Send by 2.27+ adapters; 8 natively).
    pub fn v1_code(self) -> u8 {
        match self {
            Func::Broadcast => 0,
            Func::AllGather => 2,
            Func::ReduceScatter => 3,
            Func::AllReduce => 4,
            Func::Send => 6,
            Func::Recv => 7,
            Func::AlltoAll => 8,
        }
    }
}

/// Data type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    Int8,
    Float32,
}

impl Dtype {
    pub fn cstr(self) -> &'static CStr {
        match self {
            Dtype::Int8 => c"ncclInt8",
            Dtype::Float32 => c"ncclFloat32",
        }
    }
    pub fn size(self) -> u64 {
        match self {
            Dtype::Int8 => 1,
            Dtype::Float32 => 4,
        }
    }
    pub fn v1_code(self) -> u8 {
        match self {
            Dtype::Int8 => 0,
            Dtype::Float32 => 7,
        }
    }
}

/// Protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Ll,
    Ll128,
    Simple,
}

impl Proto {
    pub fn cstr(self) -> &'static CStr {
        match self {
            Proto::Ll => c"LL",
            Proto::Ll128 => c"LL128",
            Proto::Simple => c"SIMPLE",
        }
    }
    pub fn v1_code(self) -> u8 {
        match self {
            Proto::Ll => 0,
            Proto::Ll128 => 1,
            Proto::Simple => 2,
        }
    }
}

/// The algorithm is always RING in this simulator.
pub const ALGO_RING: &CStr = c"RING";
const ALGO_RING_V1: u8 = 1;

/// One event to start, in version-neutral form.
#[derive(Clone, Copy, Debug)]
pub enum Ev {
    GroupApi {
        depth: i32,
        graph: bool,
    },
    CollApi {
        func: Func,
        count: usize,
        dtype: Dtype,
        root: i32,
        stream: H,
        graph: bool,
    },
    P2pApi {
        func: Func,
        count: usize,
        dtype: Dtype,
        stream: H,
        graph: bool,
    },
    KernelLaunch {
        stream: H,
    },
    Group,
    Coll {
        seq: u64,
        func: Func,
        send: H,
        recv: H,
        count: usize,
        root: i32,
        dtype: Dtype,
        nch: u8,
        proto: Proto,
        parent_group: H,
        comm_name: *const c_char,
        comm_hash: u64,
        traffic: usize,
    },
    P2p {
        func: Func,
        buff: H,
        dtype: Dtype,
        count: usize,
        peer: i32,
        nch: u8,
        parent_group: H,
        comm_name: *const c_char,
        comm_hash: u64,
    },
    ProxyOp {
        pid: i32,
        ch: u8,
        peer: i32,
        nsteps: i32,
        chunk: i32,
        is_send: bool,
    },
    ProxyStep {
        step: i32,
    },
    ProxyCtrl,
    KernelCh {
        ch: u8,
        ptimer: u64,
    },
    NetPlugin {
        id: i64,
        data: *mut c_void,
    },
    CeColl {
        seq: u64,
        func: Func,
        send: H,
        recv: H,
        count: usize,
        dtype: Dtype,
        sync_mc: bool,
        stream: H,
    },
    CeSync {
        complete: bool,
        nranks: i32,
    },
    CeBatch {
        num_ops: i32,
        total_bytes: usize,
        intra: bool,
    },
}

impl Ev {
    pub fn kind(&self) -> Kind {
        match self {
            Ev::GroupApi { .. } => Kind::GroupApi,
            Ev::CollApi { .. } => Kind::CollApi,
            Ev::P2pApi { .. } => Kind::P2pApi,
            Ev::KernelLaunch { .. } => Kind::KernelLaunch,
            Ev::Group => Kind::Group,
            Ev::Coll { .. } => Kind::Coll,
            Ev::P2p { .. } => Kind::P2p,
            Ev::ProxyOp { .. } => Kind::ProxyOp,
            Ev::ProxyStep { .. } => Kind::ProxyStep,
            Ev::ProxyCtrl => Kind::ProxyCtrl,
            Ev::KernelCh { .. } => Kind::KernelCh,
            Ev::NetPlugin { .. } => Kind::NetPlugin,
            Ev::CeColl { .. } => Kind::CeColl,
            Ev::CeSync { .. } => Kind::CeSync,
            Ev::CeBatch { .. } => Kind::CeBatch,
        }
    }
}

/// State arguments, in version-neutral form.
#[derive(Clone, Copy, Debug)]
pub enum Args {
    /// A NULL `eStateArgs` pointer.
    Null,
    /// v1–v3 ProxyOp legacy states: `{transSize, steps}`.
    OpLegacy { trans: usize, steps: i32 },
    /// ProxyCtrl: `appendedProxyOps`.
    Ctrl(i32),
    /// v4+ ProxyStep: `transSize`.
    Step(usize),
    /// v4+ NetPlugin update: `data`.
    Net(*mut c_void),
    /// v4+ KernelCh stop: `pTimer`.
    Timer(u64),
}

/// Per-thread call counters, merged at the end.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    pub starts: [u64; 15],
    pub states: u64,
    pub stops: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        for (a, b) in self.starts.iter_mut().zip(o.starts.iter()) {
            *a += b;
        }
        self.states += o.states;
        self.stops += o.stops;
    }
    pub fn total(&self) -> u64 {
        self.starts.iter().sum::<u64>() + self.states + self.stops
    }
}

/// Geometry handed to `init`.
pub struct InitArgs<'a> {
    pub comm_id: u64,
    pub comm_name: &'a CStr,
    pub n_nodes: i32,
    pub nranks: i32,
    pub rank: i32,
}

unsafe extern "C" {
    fn ncclprof_sim_logger(
        level: c_int,
        flags: c_ulong,
        file: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    );
    fn ncclprof_sim_set_log_sink(
        sink: Option<unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char)>,
    );
}

static LOG_QUIET: AtomicBool = AtomicBool::new(false);
/// Messages logged so far in this process, and the newest of them (for [`log_lines_since`]).
static LOG: Mutex<(u64, VecDeque<String>)> = Mutex::new((0, VecDeque::new()));
const LOG_LINES_KEPT: usize = 1024;

unsafe extern "C" fn log_sink(
    level: c_int,
    flags: c_ulong,
    file: *const c_char,
    line: c_int,
    msg: *const c_char,
) {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: the C logger passes NUL-terminated strings (its buffer, or the plugin's file name).
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let msg = text(msg).trim_end().to_string();
    if !LOG_QUIET.load(Ordering::Relaxed) {
        eprintln!(
            "NCCL-SIM LOG level={level} flags={flags:#x} {}:{line} {msg}",
            text(file),
        );
    }
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    log.0 += 1;
    log.1.push_back(msg);
    if log.1.len() > LOG_LINES_KEPT {
        log.1.pop_front();
    }
}

/// How many times plugins called the logger in this process (also a mark for
/// [`log_lines_since`]).
pub fn log_calls() -> u64 {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).0
}

/// The messages logged since `mark` (from [`log_calls`]), oldest first, kept even when
/// quiet; only the newest 1 024 are kept.
pub fn log_lines_since(mark: u64) -> Vec<String> {
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    let (total, kept) = (log.0, &log.1);
    let new = (total.saturating_sub(mark) as usize).min(kept.len());
    kept.iter().skip(kept.len() - new).cloned().collect()
}

/// Silences (or not) the logger's stderr output.
pub fn set_log_quiet(q: bool) {
    LOG_QUIET.store(q, Ordering::Relaxed);
}

/// The logger function pointer given to v4+ `init`.
pub fn logger() -> abi::LogFn {
    // SAFETY: installing a sink is a plain store of a function pointer in the C file.
    unsafe { ncclprof_sim_set_log_sink(Some(log_sink)) };
    ncclprof_sim_logger
}

/// A loaded plugin, bound to one API version.
pub struct Plugin {
    lib: Option<libloading::os::unix::Library>,
    /// Set when a v1–v4 init failed: 2.23–2.27 then turn the profiler off process-wide.
    pub disabled: AtomicBool,
    pub version: u32,
    pub name: String,
    table: abi::ProfilerTable,
}

// SAFETY: the table holds function pointers and a static string of the plugin; calling them
// from any thread is what NCCL does and what the ABI requires plugins to support.
unsafe impl Send for Plugin {}
// SAFETY: as above; the table is never written after loading.
unsafe impl Sync for Plugin {}

impl Plugin {
    /// dlopens `path` with RTLD_NOW|RTLD_LOCAL and binds `ncclProfiler_v<api>` (or the newest found).
    pub fn load(path: &Path, api: Option<u32>) -> Result<Plugin> {
        let flags = libc::RTLD_NOW | libc::RTLD_LOCAL;
        // SAFETY: loading a shared object runs its initialisers; that is the point of the simulator.
        let lib = unsafe { libloading::os::unix::Library::open(Some(path), flags) }
            .with_context(|| format!("dlopen {}", path.display()))?;
        let versions: Vec<u32> = match api {
            Some(v) => vec![v],
            None => (1..=6).rev().collect(),
        };
        for v in versions {
            let sym = format!("ncclProfiler_v{v}\0");
            // SAFETY: the symbol is a data object; we only read its address.
            let ptr = match unsafe { lib.get::<*const abi::ProfilerTable>(sym.as_bytes()) } {
                Ok(s) => *s,
                Err(_) => continue,
            };
            if ptr.is_null() {
                continue;
            }
            // SAFETY: the exported object has the 48-byte table layout (spec §3.0).
            let table = unsafe { std::ptr::read(ptr) };
            if table.init.is_null()
                || table.startEvent.is_none()
                || table.stopEvent.is_none()
                || table.recordEventState.is_none()
                || table.finalize.is_none()
            {
                bail!(
                    "ncclProfiler_v{v} in {} has NULL function pointers",
                    path.display()
                );
            }
            let name = if table.name.is_null() {
                String::new()
            } else {
                // SAFETY: `name` points to a NUL-terminated static string of the plugin.
                unsafe { CStr::from_ptr(table.name) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Ok(Plugin {
                lib: Some(lib),
                disabled: AtomicBool::new(false),
                version: v,
                name,
                table,
            });
        }
        Err(anyhow!(
            "{} exports no {}",
            path.display(),
            match api {
                Some(v) => format!("ncclProfiler_v{v}"),
                None => "ncclProfiler_v1..v6".into(),
            }
        ))
    }

    /// Calls `init` with this version's argument order; returns (result, context).
    pub fn init(&self, mask: &std::sync::atomic::AtomicI32, a: &InitArgs) -> (c_int, H) {
        let mask = mask.as_ptr();
        let mut ctx: *mut c_void = null_mut();
        let rc = match self.version {
            1..=3 => {
                // SAFETY: `init` has the v1–v3 signature for these versions.
                let f: abi::InitV1 = unsafe { std::mem::transmute(self.table.init) };
                // SAFETY: valid context slot and the process-global mask.
                unsafe { f(&mut ctx, mask) }
            }
            4 => {
                // SAFETY: `init` has the v4 signature.
                let f: abi::InitV4 = unsafe { std::mem::transmute(self.table.init) };
                // SAFETY: arguments as documented in spec §3.4.
                unsafe {
                    f(
                        &mut ctx,
                        mask,
                        a.comm_name.as_ptr(),
                        a.comm_id,
                        a.n_nodes,
                        a.nranks,
                        a.rank,
                        Some(logger()),
                    )
                }
            }
            _ => {
                // SAFETY: `init` has the v5/v6 signature.
                let f: abi::InitV5 = unsafe { std::mem::transmute(self.table.init) };
                // SAFETY: arguments as documented in spec §3.5.
                unsafe {
                    f(
                        &mut ctx,
                        a.comm_id,
                        mask,
                        a.comm_name.as_ptr(),
                        a.n_nodes,
                        a.nranks,
                        a.rank,
                        Some(logger()),
                    )
                }
            }
        };
        (rc, ctx as H)
    }

    /// Calls `finalize(context)`.
    pub fn finalize(&self, ctx: H) -> c_int {
        let f = self.table.finalize.expect("checked at load");
        // SAFETY: the context is the one init produced.
        unsafe { f(ctx as *mut c_void) }
    }

    /// Closes the library (dlclose) unless `keep` is set.
    pub fn close(mut self, keep: bool) {
        if let Some(lib) = self.lib.take() {
            if keep {
                std::mem::forget(lib);
            } else {
                drop(lib);
            }
        }
    }

    /// `startEvent` with a descriptor built for this version; returns the handle written.
    pub fn start(&self, ctx: H, parent: H, rank: i32, ev: &Ev, c: &mut Counters) -> H {
        if self.disabled.load(Ordering::Relaxed) {
            return 0;
        }
        c.starts[ev.kind() as usize] += 1;
        let f = self.table.startEvent.expect("checked at load");
        let mut h: *mut c_void = null_mut();
        let ctx = ctx as *mut c_void;
        macro_rules! go {
            ($d:expr) => {{
                let mut d = $d;
                // SAFETY: a descriptor of this version's layout, valid during the call.
                unsafe { f(ctx, &mut h, (&raw mut d).cast()) };
            }};
        }
        match self.version {
            1 => go!(descr_v1(parent, rank, ev)),
            2 => go!(descr_v2(parent, rank, ev)),
            3 => go!(descr_v3(parent, rank, ev)),
            4 => go!(descr_v4(parent, rank, ev)),
            5 => go!(descr_v5(parent, rank, ev)),
            _ => go!(descr_v6(parent, rank, ev)),
        }
        h as H
    }

    /// `stopEvent(handle)`.
    pub fn stop(&self, h: H, c: &mut Counters) {
        if self.disabled.load(Ordering::Relaxed) {
            return;
        }
        c.stops += 1;
        let f = self.table.stopEvent.expect("checked at load");
        // SAFETY: handle as returned by startEvent (or NULL on the net-plugin path).
        unsafe { f(h as *mut c_void) };
    }

    /// `recordEventState(handle, state, args)`.
    pub fn record(&self, h: H, state: i32, args: Args, c: &mut Counters) {
        if self.disabled.load(Ordering::Relaxed) {
            return;
        }
        c.states += 1;
        let f = self.table.recordEventState.expect("checked at load");
        let h = h as *mut c_void;
        if self.version <= 3 {
            // SAFETY: all-zero is a valid value of this union of integers.
            let mut a: v1::ncclProfilerEventStateArgs_v1_t = unsafe { std::mem::zeroed() };
            let p: *mut c_void = match args {
                Args::Null => null_mut(),
                Args::OpLegacy { trans, steps } => {
                    a.proxyOp = v1::ArgsProxyOp {
                        transSize: trans,
                        steps,
                    };
                    (&raw mut a).cast()
                }
                Args::Ctrl(n) => {
                    a.proxyCtrl = v1::ArgsProxyCtrl {
                        appendedProxyOps: n,
                    };
                    (&raw mut a).cast()
                }
                Args::Step(_) | Args::Net(_) | Args::Timer(_) => (&raw mut a).cast(),
            };
            // SAFETY: args valid during the call, of the v1 layout.
            unsafe { f(h, state, p) };
        } else {
            // SAFETY: all-zero is a valid value of this union.
            let mut a: v4::ncclProfilerEventStateArgs_v4_t = unsafe { std::mem::zeroed() };
            let p: *mut c_void = match args {
                Args::Null => null_mut(),
                Args::Ctrl(n) => {
                    a.proxyCtrl_appendedProxyOps = n;
                    (&raw mut a).cast()
                }
                Args::Step(s) => {
                    a.proxyStep_transSize = s;
                    (&raw mut a).cast()
                }
                Args::Net(d) => {
                    a.netPlugin_data = d;
                    (&raw mut a).cast()
                }
                Args::Timer(t) => {
                    a.kernelCh_pTimer = t;
                    (&raw mut a).cast()
                }
                Args::OpLegacy { trans, .. } => {
                    a.proxyStep_transSize = trans;
                    (&raw mut a).cast()
                }
            };
            // SAFETY: args valid during the call, of the v4 layout.
            unsafe { f(h, state, p) };
        }
    }
}

/// A comm name kept alive for descriptors.
pub fn comm_name(c: usize) -> CString {
    CString::new(format!("sim-comm-{c}")).expect("no NUL")
}

fn p(h: H) -> *mut c_void {
    h as *mut c_void
}

macro_rules! zeroed {
    ($t:ty) => {{
        // SAFETY: descriptors are plain C structs of integers and pointers; all-zero is valid.
        let d: $t = unsafe { std::mem::zeroed() };
        d
    }};
}

fn descr_v1(parent: H, rank: i32, ev: &Ev) -> v1::ncclProfilerEventDescr_v1_t {
    let mut d = zeroed!(v1::ncclProfilerEventDescr_v1_t);
    d.type_ = ev.kind().bit() as u8;
    d.parentObj = p(parent);
    d.rank = rank;
    match *ev {
        Ev::Coll {
            seq,
            func,
            send,
            recv,
            count,
            root,
            dtype,
            nch,
            proto,
            comm_name,
            comm_hash,
            traffic,
            ..
        } => {
            d.u.coll = v1::Coll {
                name: comm_name,
                commHash: comm_hash,
                seqNumber: seq,
                func: func.v1_code(),
                sendBuff: p(send),
                recvBuff: p(recv),
                count,
                root,
                datatype: dtype.v1_code(),
                op: 0,
                trafficBytes: traffic,
                nMaxChannels: nch,
                nWarps: 16,
                algo: ALGO_RING_V1,
                proto: proto.v1_code(),
                isCollnet: 0,
                isNvls: 0,
            }
        }
        Ev::P2p {
            func,
            buff,
            dtype,
            count,
            peer,
            comm_name,
            comm_hash,
            ..
        } => {
            d.u.p2p = v1::P2p {
                name: comm_name,
                commHash: comm_hash,
                func: func.v1_code(),
                buff: p(buff),
                datatype: dtype.v1_code(),
                count,
                peer,
            }
        }
        Ev::ProxyOp {
            pid,
            ch,
            peer,
            nsteps,
            chunk,
            is_send,
        } => d.u.proxyOp = proxy_op(pid, ch, peer, nsteps, chunk, is_send),
        Ev::ProxyStep { step } => d.u.proxyStep = v1::ProxyStep { step },
        _ => {}
    }
    d
}

fn proxy_op(pid: i32, ch: u8, peer: i32, nsteps: i32, chunk: i32, is_send: bool) -> v1::ProxyOp {
    v1::ProxyOp {
        pid,
        channelId: ch,
        peer,
        nSteps: nsteps,
        chunkSize: chunk,
        isSend: is_send as c_int,
    }
}

fn descr_v2(parent: H, rank: i32, ev: &Ev) -> v2::ncclProfilerEventDescr_v2_t {
    let mut d = zeroed!(v2::ncclProfilerEventDescr_v2_t);
    d.type_ = ev.kind().bit() as u8;
    d.parentObj = p(parent);
    d.rank = rank;
    match *ev {
        Ev::Coll {
            seq,
            func,
            send,
            recv,
            count,
            root,
            dtype,
            nch,
            proto,
            comm_name,
            comm_hash,
            traffic,
            ..
        } => {
            d.u.coll = v2::Coll {
                name: comm_name,
                commHash: comm_hash,
                seqNumber: seq,
                func: func.cstr().as_ptr(),
                sendBuff: p(send),
                recvBuff: p(recv),
                count,
                root,
                datatype: dtype.cstr().as_ptr(),
                trafficBytes: traffic,
                nMaxChannels: nch,
                nWarps: 16,
                algo: ALGO_RING.as_ptr(),
                proto: proto.cstr().as_ptr(),
            }
        }
        Ev::P2p {
            func,
            buff,
            dtype,
            count,
            peer,
            comm_name,
            comm_hash,
            ..
        } => d.u.p2p = p2p_v2(func, buff, dtype, count, peer, comm_name, comm_hash),
        Ev::ProxyOp {
            pid,
            ch,
            peer,
            nsteps,
            chunk,
            is_send,
        } => d.u.proxyOp = proxy_op(pid, ch, peer, nsteps, chunk, is_send),
        Ev::ProxyStep { step } => d.u.proxyStep = v1::ProxyStep { step },
        _ => {}
    }
    d
}

fn p2p_v2(
    func: Func,
    buff: H,
    dtype: Dtype,
    count: usize,
    peer: i32,
    name: *const c_char,
    hash: u64,
) -> v2::P2p {
    v2::P2p {
        name,
        commHash: hash,
        func: func.cstr().as_ptr(),
        buff: p(buff),
        datatype: dtype.cstr().as_ptr(),
        count,
        peer,
    }
}

fn descr_v3(parent: H, rank: i32, ev: &Ev) -> v3::ncclProfilerEventDescr_v3_t {
    let mut d = zeroed!(v3::ncclProfilerEventDescr_v3_t);
    d.type_ = ev.kind().bit() as u8;
    d.parentObj = p(parent);
    d.rank = rank;
    match *ev {
        Ev::Coll {
            seq,
            func,
            send,
            recv,
            count,
            root,
            dtype,
            nch,
            proto,
            comm_name,
            comm_hash,
            ..
        } => {
            d.u.coll = v3::Coll {
                name: comm_name,
                commHash: comm_hash,
                seqNumber: seq,
                func: func.cstr().as_ptr(),
                sendBuff: p(send),
                recvBuff: p(recv),
                count,
                root,
                datatype: dtype.cstr().as_ptr(),
                nMaxChannels: nch,
                nWarps: 16,
                algo: ALGO_RING.as_ptr(),
                proto: proto.cstr().as_ptr(),
            }
        }
        Ev::P2p {
            func,
            buff,
            dtype,
            count,
            peer,
            comm_name,
            comm_hash,
            ..
        } => d.u.p2p = p2p_v2(func, buff, dtype, count, peer, comm_name, comm_hash),
        Ev::ProxyOp {
            pid,
            ch,
            peer,
            nsteps,
            chunk,
            is_send,
        } => d.u.proxyOp = proxy_op(pid, ch, peer, nsteps, chunk, is_send),
        Ev::ProxyStep { step } => d.u.proxyStep = v1::ProxyStep { step },
        Ev::KernelCh { ch, .. } => d.u.kernelCh = v3::KernelCh { channelId: ch },
        Ev::NetPlugin { id, data } => d.u.netPlugin = v3::NetPlugin { id, data },
        _ => {}
    }
    d
}

fn descr_v4(parent: H, rank: i32, ev: &Ev) -> v4::ncclProfilerEventDescr_v4_t {
    let mut d = zeroed!(v4::ncclProfilerEventDescr_v4_t);
    d.type_ = ev.kind().bit() as u8;
    d.parentObj = p(parent);
    d.rank = rank;
    match *ev {
        Ev::Coll {
            seq,
            func,
            send,
            recv,
            count,
            root,
            dtype,
            nch,
            proto,
            ..
        } => {
            d.u.coll = v4::Coll {
                seqNumber: seq,
                func: func.cstr().as_ptr(),
                sendBuff: p(send),
                recvBuff: p(recv),
                count,
                root,
                datatype: dtype.cstr().as_ptr(),
                nChannels: nch,
                nWarps: 16,
                algo: ALGO_RING.as_ptr(),
                proto: proto.cstr().as_ptr(),
            }
        }
        Ev::P2p {
            func,
            buff,
            dtype,
            count,
            peer,
            nch,
            ..
        } => {
            d.u.p2p = v4::P2p {
                func: func.cstr().as_ptr(),
                buff: p(buff),
                datatype: dtype.cstr().as_ptr(),
                count,
                peer,
                nChannels: nch,
            }
        }
        Ev::ProxyOp {
            pid,
            ch,
            peer,
            nsteps,
            chunk,
            is_send,
        } => d.u.proxyOp = proxy_op(pid, ch, peer, nsteps, chunk, is_send),
        Ev::ProxyStep { step } => d.u.proxyStep = v1::ProxyStep { step },
        Ev::KernelCh { ch, ptimer } => {
            d.u.kernelCh = v4::KernelCh {
                channelId: ch,
                pTimer: ptimer,
            }
        }
        Ev::NetPlugin { id, data } => d.u.netPlugin = v3::NetPlugin { id, data },
        _ => {}
    }
    d
}

fn fill_v5_union(u: &mut v5::Union, ev: &Ev) {
    match *ev {
        Ev::GroupApi { depth, graph } => {
            u.groupApi = v5::GroupApi {
                graphCaptured: graph,
                groupDepth: depth,
            }
        }
        Ev::CollApi {
            func,
            count,
            dtype,
            root,
            stream,
            graph,
        } => {
            u.collApi = v5::CollApi {
                func: func.cstr().as_ptr(),
                count,
                datatype: dtype.cstr().as_ptr(),
                root,
                stream: p(stream),
                graphCaptured: graph,
            }
        }
        Ev::P2pApi {
            func,
            count,
            dtype,
            stream,
            graph,
        } => {
            u.p2pApi = v5::P2pApi {
                func: func.cstr().as_ptr(),
                count,
                datatype: dtype.cstr().as_ptr(),
                stream: p(stream),
                graphCaptured: graph,
            }
        }
        Ev::KernelLaunch { stream } => u.kernelLaunch = v5::KernelLaunch { stream: p(stream) },
        Ev::Coll {
            seq,
            func,
            send,
            recv,
            count,
            root,
            dtype,
            nch,
            proto,
            parent_group,
            ..
        } => {
            u.coll = v5::Coll {
                seqNumber: seq,
                func: func.cstr().as_ptr(),
                sendBuff: p(send),
                recvBuff: p(recv),
                count,
                root,
                datatype: dtype.cstr().as_ptr(),
                nChannels: nch,
                nWarps: 16,
                algo: ALGO_RING.as_ptr(),
                proto: proto.cstr().as_ptr(),
                parentGroup: p(parent_group),
            }
        }
        Ev::P2p {
            func,
            buff,
            dtype,
            count,
            peer,
            nch,
            parent_group,
            ..
        } => {
            u.p2p = v5::P2p {
                func: func.cstr().as_ptr(),
                buff: p(buff),
                datatype: dtype.cstr().as_ptr(),
                count,
                peer,
                nChannels: nch,
                parentGroup: p(parent_group),
            }
        }
        Ev::ProxyOp {
            pid,
            ch,
            peer,
            nsteps,
            chunk,
            is_send,
        } => u.proxyOp = proxy_op(pid, ch, peer, nsteps, chunk, is_send),
        Ev::ProxyStep { step } => u.proxyStep = v1::ProxyStep { step },
        Ev::KernelCh { ch, ptimer } => {
            u.kernelCh = v4::KernelCh {
                channelId: ch,
                pTimer: ptimer,
            }
        }
        Ev::NetPlugin { id, data } => u.netPlugin = v3::NetPlugin { id, data },
        _ => {}
    }
}

fn descr_v5(parent: H, rank: i32, ev: &Ev) -> v5::ncclProfilerEventDescr_v5_t {
    let mut d = zeroed!(v5::ncclProfilerEventDescr_v5_t);
    d.type_ = ev.kind().bit();
    d.parentObj = p(parent);
    d.rank = rank;
    fill_v5_union(&mut d.u, ev);
    d
}

fn descr_v6(parent: H, rank: i32, ev: &Ev) -> v6::ncclProfilerEventDescr_v6_t {
    let mut d = zeroed!(v6::ncclProfilerEventDescr_v6_t);
    d.type_ = ev.kind().bit();
    d.parentObj = p(parent);
    d.rank = rank;
    match *ev {
        Ev::CeColl {
            seq,
            func,
            send,
            recv,
            count,
            dtype,
            sync_mc,
            stream,
        } => {
            d.u.ceColl = v6::CeColl {
                seqNumber: seq,
                func: func.cstr().as_ptr(),
                sendBuff: p(send),
                recvBuff: p(recv),
                count,
                root: 0,
                datatype: dtype.cstr().as_ptr(),
                syncStrategy: if sync_mc {
                    c"MC".as_ptr()
                } else {
                    c"UC".as_ptr()
                },
                intraBatchSync: false,
                batchSize: 0,
                numBatches: 0,
                ceSeqNum: seq as u32,
                stream: p(stream),
            }
        }
        Ev::CeSync { complete, nranks } => {
            d.u.ceCollSync = v6::CeCollSync {
                isComplete: complete,
                nRanks: nranks,
            }
        }
        Ev::CeBatch {
            num_ops,
            total_bytes,
            intra,
        } => {
            d.u.ceCollBatch = v6::CeCollBatch {
                numOps: num_ops,
                totalBytes: total_bytes,
                useIntraSync: intra,
            }
        }
        _ => {
            // SAFETY: the v6 union is the v5 union plus three arms at the same offsets; writing
            // a v5 arm through a v5 view of the same bytes is layout-identical.
            let u5 = unsafe { &mut *(&raw mut d.u).cast::<v5::Union>() };
            fill_v5_union(u5, ev);
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_logger_formats_and_counts() {
        set_log_quiet(true);
        let f = logger();
        let before = log_calls();
        let mark = log_calls();
        // SAFETY: calling the C variadic logger with a matching format.
        unsafe {
            f(
                3,
                0x4000,
                c"x.c".as_ptr(),
                7,
                c"%s %d".as_ptr(),
                c"hello".as_ptr(),
                42 as c_int,
            )
        };
        // SAFETY: a plain "%s" message, as plugins commonly send.
        unsafe { f(2, 0, std::ptr::null(), 0, c"%s".as_ptr(), c"only".as_ptr()) };
        assert!(log_calls() >= before + 2);
        // Kept even when quiet, formatted (other tests of this binary may log meanwhile).
        let lines = log_lines_since(mark);
        assert!(lines.iter().any(|l| l == "hello 42"), "{lines:?}");
        assert!(lines.iter().any(|l| l == "only"), "{lines:?}");
    }

    #[test]
    fn func_codes() {
        assert_eq!(Func::AllReduce.v1_code(), 4);
        assert_eq!(Func::AllGather.name(), "AllGather");
        assert_eq!(Dtype::Float32.v1_code(), 7);
        assert_eq!(Proto::Simple.v1_code(), 2);
    }
}
