//! The simulated core of one process: init, application threads, CUDA-callback threads,
//! proxy progress threads, teardown, and the truth they record.

use crate::abi::{net, st};
use crate::config::{NetKind, RankSeq, SimConfig};
use crate::mask::{Kind, version_bits, wants};
use crate::model::{CallSpec, ENQUEUE_NS, Planner, ProxySpec, Row, call_spec};
use crate::plugin::{Args, Counters, Ev, Func, H, InitArgs, Plugin, comm_name};
use crate::rng::{hash, unit};
use crate::truth::{ChannelTruth, OpTruth, ProcTruth, ProxyOpTruth, RankTruth, StepTruth, Truth};
use anyhow::{Result, bail};
use ncclprof_shared::clock::monotonic_ns;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::ffi::{CString, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The core's one process-global activation mask (`ncclProfilerEventMask`).
pub static MASK: AtomicI32 = AtomicI32::new(0);

/// Serialises in-process runs: they share the process-global mask, as NCCL communicators do.
static RUN_LOCK: Mutex<()> = Mutex::new(());

/// Set by SIGTERM/SIGINT in the binary.
pub static SIGNALLED: AtomicBool = AtomicBool::new(false);

const NCCL_STEPS: u32 = 8;
const APPEND_BATCH: usize = 16;

fn live_mask(version: u32) -> u64 {
    (MASK.load(Ordering::Relaxed) as u32 as u64) & version_bits(version)
}

/// Simulated GPU clock of one rank.
#[derive(Clone, Copy, Debug)]
pub struct GpuClock {
    pub base: u64,
    pub offset: i64,
    pub ppm: f64,
    pub hz: Option<u64>,
}

impl GpuClock {
    /// The raw timer value for a GPU event at host monotonic time `host`.
    pub fn raw(&self, host: u64) -> u64 {
        let dt = host as f64 - self.base as f64;
        let ns =
            (host as i128 + self.offset as i128 + (dt * self.ppm * 1e-6) as i128).max(0) as u128;
        match self.hz {
            Some(hz) => (ns * hz as u128 / 1_000_000_000u128) as u64,
            None => ns as u64,
        }
    }
}

/// Run-wide state shared by the threads of one process.
struct Shared {
    cfg: SimConfig,
    plugin: Plugin,
    v: u32,
    t0: u64,
    rate: f64,
    pid: i32,
    stop: AtomicBool,
    died: AtomicBool,
    counters: Mutex<Counters>,
    foreign_pid: AtomicI32,
    board: crate::board::Board,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || SIGNALLED.load(Ordering::Relaxed)
    }
    /// Real monotonic target of virtual time `v` (ns).
    fn real(&self, v: f64) -> u64 {
        if self.rate <= 0.0 {
            0
        } else {
            self.t0 + (v.max(0.0) / self.rate) as u64
        }
    }
    fn sleep_until_v(&self, v: f64) {
        if self.rate <= 0.0 {
            return;
        }
        self.sleep_until_real(self.real(v));
    }
    fn sleep_until_real(&self, target: u64) {
        loop {
            if self.stopped() {
                return;
            }
            let now = monotonic_ns();
            if now >= target {
                return;
            }
            std::thread::sleep(Duration::from_nanos((target - now).min(50_000_000)));
        }
    }
    fn merge_counters(&self, c: &Counters) {
        self.counters.lock().unwrap().add(c);
    }
    fn foreign_pid(&self) -> i32 {
        let p = self.foreign_pid.load(Ordering::Relaxed);
        if p != 0 {
            return p;
        }
        let mut chosen = self.pid + 100_000;
        if self.cfg.procs > 1 {
            // a sibling process of the job, if one can be seen
            // SAFETY: getppid has no preconditions.
            let ppid = unsafe { libc::getppid() };
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{ppid}/task/{ppid}/children"))
                && let Some(sib) = s
                    .split_whitespace()
                    .filter_map(|x| x.parse::<i32>().ok())
                    .find(|&x| x != self.pid)
            {
                chosen = sib;
            }
        }
        self.foreign_pid.store(chosen, Ordering::Relaxed);
        chosen
    }
}

/// A call handed from the enqueue side to a proxy thread.
struct Posted {
    k: u64,
    live: Vec<u32>,
    row_s: f64,
    d_ch: Vec<f64>,
    kstart: f64,
    post_v: f64,
    posted_real: u64,
    mask: u64,
    hung: bool,
    tasks: Vec<PostedTask>,
}

struct PostedTask {
    /// Index in the comm-rank truth ops; None for a foreign (PXN) op.
    truth: Option<usize>,
    handle: H,
    ctx: H,
    rank: i32,
    pid: i32,
    channels: Vec<u8>,
    proxies: Vec<ProxySpec>,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Posted>,
    done: bool,
}

/// Per-op truth produced by the proxy side.
#[derive(Default)]
struct ProxyPart {
    channels: Vec<ChannelTruth>,
    proxy_ops: Vec<ProxyOpTruth>,
    first_progress: Option<u64>,
}

#[derive(Default)]
struct Store {
    /// Whether per-op truth is kept at all. A binary run without `--truth` (the live demo,
    /// `--duration 0`) would otherwise grow without bound: ~180 MB/s at 2 ranks.
    keep: bool,
    app: BTreeMap<usize, OpTruth>,
    proxy: BTreeMap<usize, ProxyPart>,
    foreign: Vec<ProxyOpTruth>,
}

/// One communicator context of one rank.
struct CommRank {
    comm: usize,
    rank: usize,
    ctx: H,
    hash: u64,
    name: CString,
    gpu: GpuClock,
    queue: Mutex<Queue>,
    cv: Condvar,
    completed: Mutex<u64>,
    completed_cv: Condvar,
    store: Mutex<Store>,
}

impl CommRank {
    fn post(&self, p: Posted) {
        self.queue.lock().unwrap().items.push_back(p);
        self.cv.notify_all();
    }
    fn finish_app(&self) {
        self.queue.lock().unwrap().done = true;
        self.cv.notify_all();
    }
    fn mark_completed(&self) {
        *self.completed.lock().unwrap() += 1;
        self.completed_cv.notify_all();
    }
}

/// Result of running one process.
pub struct ProcResult {
    pub truth: Truth,
    pub died: bool,
}

/// Runs the ranks `ranks` of the job in this process.
pub fn run_process(
    cfg: &SimConfig,
    ranks: std::ops::Range<usize>,
    proc_index: usize,
) -> Result<ProcResult> {
    if cfg.ranks == 0 || cfg.comms == 0 {
        bail!("--ranks and --comms must be at least 1");
    }
    // A fault on a rank the job does not have would change nothing, or (--absent) hang every
    // rank with no culprit to find: refused, as is --die on a rank an --absent call holds
    // (it never gets to the call it would die in, or hangs before).
    for (flag, list) in [("--hang", &cfg.hang), ("--absent", &cfg.absent)] {
        if let Some(h) = list.iter().find(|h| h.rank >= cfg.ranks) {
            bail!(
                "{flag} {}:{}: the job has ranks 0..{}",
                h.rank,
                h.seq,
                cfg.ranks - 1
            );
        }
    }
    if let Some(d) = cfg.die {
        if d.rank >= cfg.ranks {
            bail!(
                "--die {}:{}: the job has ranks 0..{}",
                d.rank,
                d.seq,
                cfg.ranks - 1
            );
        }
        if let Some(a) = cfg.absent.iter().find(|a| a.seq <= d.seq) {
            bail!(
                "--die {}:{} with --absent {}:{}: from call {} on every call hangs or is never made, so no rank could die in call {}",
                d.rank,
                d.seq,
                a.rank,
                a.seq,
                a.seq,
                d.seq
            );
        }
    }
    let _guard = RUN_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    crate::plugin::set_log_quiet(cfg.quiet);
    let log0 = crate::plugin::log_calls();
    let plugin = Plugin::load(&cfg.plugin, cfg.api)?;
    let v = plugin.version;
    if !cfg.quiet {
        eprintln!(
            "ncclprof-sim: loaded {} (v{v}) from {} for ranks {:?}",
            plugin.name,
            cfg.plugin.display(),
            ranks
        );
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let wall0 = monotonic_ns();
    MASK.store(cfg.mask, Ordering::Relaxed);

    // ---- init: one NCCL-created thread per communicator context, concurrently
    let comm_hashes: Vec<u64> = (0..cfg.comms)
        .map(|c| hash(&[cfg.seed, 0xC044, c as u64]) | 1)
        .collect();
    let mut specs = Vec::new();
    for c in 0..cfg.comms {
        for r in ranks.clone() {
            specs.push((c, r));
        }
    }
    let nnodes = cfg.ranks as i32;
    let inits: Vec<(usize, usize, H, c_int)> = std::thread::scope(|s| {
        let hs: Vec<_> = specs
            .iter()
            .map(|&(c, r)| {
                let plugin = &plugin;
                let name = comm_name(c);
                let hashv = comm_hashes[c];
                let nranks = cfg.ranks as i32;
                std::thread::Builder::new()
                    .name(format!("nccl-init-{c}-{r}"))
                    .spawn_scoped(s, move || {
                        let a = InitArgs {
                            comm_id: hashv,
                            comm_name: &name,
                            n_nodes: nnodes,
                            nranks,
                            rank: r as i32,
                        };
                        let (rc, ctx) = plugin.init(&MASK, &a);
                        if v == 5 {
                            // the 2.29+ v5 adapter clears the CE bits after every init
                            MASK.fetch_and(!0x7000, Ordering::Relaxed);
                        }
                        (c, r, ctx, rc)
                    })
                    .expect("spawn init thread")
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("init thread"))
            .collect()
    });
    if let Some(m) = cfg.force_mask {
        MASK.store(m, Ordering::Relaxed);
    }
    let mask_after = MASK.load(Ordering::Relaxed);
    if !cfg.quiet {
        eprintln!(
            "ncclprof-sim: {} init(s) done, mask = {mask_after:#x}",
            inits.len()
        );
    }

    let t0 = cfg.epoch_ns.unwrap_or_else(|| monotonic_ns() + 1_000_000);
    let mut cfg_v = cfg.clone();
    cfg_v.api = Some(v);
    let shared = Arc::new(Shared {
        cfg: cfg_v,
        plugin,
        v,
        t0,
        rate: cfg.rate.max(0.0),
        pid,
        stop: AtomicBool::new(false),
        died: AtomicBool::new(false),
        counters: Mutex::new(Counters::default()),
        foreign_pid: AtomicI32::new(0),
        board: match &cfg.board {
            Some(p) => crate::board::Board::open(p, cfg.comms, cfg.ranks)?,
            None => crate::board::Board::in_process(cfg.comms, cfg.ranks),
        },
    });

    let mut crs: Vec<Arc<CommRank>> = Vec::new();
    for &(c, r, ctx, rc) in &inits {
        if rc != 0 {
            if v <= 4 {
                // 2.23–2.27: a failing init turns the profiler off for the whole process
                shared.plugin.disabled.store(true, Ordering::Relaxed);
            }
            if !cfg.quiet {
                eprintln!(
                    "ncclprof-sim: init of comm {c} rank {r} returned {rc} ({})",
                    if v <= 4 {
                        "profiler disabled, as NCCL 2.23-2.27"
                    } else {
                        "ignored, as NCCL 2.28+"
                    }
                );
            }
        }
        let g = hash(&[cfg.seed, 0x6B0, r as u64]);
        let spread = cfg.gpu_drift_ppm * (2.0 * unit(&[g, 1]) - 1.0);
        let offset = 1_700_000_000_000_000_000i64 + (g % 100_000_000_000_000_000) as i64;
        crs.push(Arc::new(CommRank {
            comm: c,
            rank: r,
            ctx,
            hash: comm_hashes[c],
            name: comm_name(c),
            gpu: GpuClock {
                base: t0,
                offset,
                ppm: spread,
                hz: cfg.gpu_ticks_hz,
            },
            queue: Mutex::new(Queue::default()),
            cv: Condvar::new(),
            completed: Mutex::new(0),
            completed_cv: Condvar::new(),
            store: Mutex::new(Store {
                keep: cfg.truth.is_some() || !cfg.real_exit,
                ..Store::default()
            }),
        }));
    }

    // ---- threads
    let mut proxies = Vec::new();
    for cr in &crs {
        let sh = shared.clone();
        let cr = cr.clone();
        proxies.push(
            std::thread::Builder::new()
                .name(format!("NCCL Progress {}", cr.rank))
                .spawn(move || proxy_thread(&sh, &cr))?,
        );
    }
    let mut apps = Vec::new();
    for r in ranks.clone() {
        let mine: Vec<Arc<CommRank>> = crs.iter().filter(|x| x.rank == r).cloned().collect();
        let sh = shared.clone();
        apps.push(
            std::thread::Builder::new()
                .name(format!("app-rank-{r}"))
                .spawn(move || app_thread(&sh, r, &mine))?,
        );
    }
    // duration end / signals
    let deadline = cfg
        .duration
        .filter(|d| *d > 0.0)
        .map(|d| monotonic_ns() + (d * 1e9) as u64);
    loop {
        if apps.iter().all(|h| h.is_finished()) {
            break;
        }
        if let Some(dl) = deadline
            && monotonic_ns() >= dl
        {
            shared.stop.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    for h in apps {
        let _ = h.join();
    }
    for cr in &crs {
        cr.finish_app();
    }
    for h in proxies {
        let _ = h.join();
    }
    let died = shared.died.load(Ordering::Relaxed);

    // ---- teardown: finalize per communicator (not for a dead process)
    let mut finalizes = 0;
    if !died && !shared.plugin.disabled.load(Ordering::Relaxed) {
        for cr in &crs {
            if v <= 4 || cr.ctx != 0 {
                shared.plugin.finalize(cr.ctx);
                finalizes += 1;
            }
        }
    }
    let wall_ns = monotonic_ns() - wall0;

    // ---- truth
    let mut truth = Truth {
        version: 1,
        api: v,
        plugin_name: shared.plugin.name.clone(),
        mask: mask_after,
        inits: inits.len() as u64,
        finalizes,
        wall_ns,
        procs: vec![ProcTruth {
            index: proc_index,
            pid,
            exit_code: None,
            died,
        }],
        ..Default::default()
    };
    for cr in &crs {
        let mut st = cr.store.lock().unwrap();
        let st = &mut *st;
        let mut ops = Vec::new();
        for (idx, mut op) in std::mem::take(&mut st.app) {
            if let Some(pp) = st.proxy.remove(&idx) {
                op.channels = pp.channels;
                op.proxy_ops = pp.proxy_ops;
                if op.exec_start.is_none() {
                    op.exec_start = op
                        .channels
                        .iter()
                        .map(|c| c.gpu_start_host)
                        .min()
                        .or(pp.first_progress);
                }
            }
            if !op.ce {
                let complete = !op.hung
                    && op.channels.iter().all(|c| c.gpu_end_host.is_some())
                    && op.proxy_ops.iter().all(|p| !p.network || p.stop.is_some());
                let last = op
                    .channels
                    .iter()
                    .filter_map(|c| c.gpu_end_host)
                    .chain(op.proxy_ops.iter().filter_map(|p| p.stop))
                    .max();
                op.end = if complete { last } else { None };
            }
            ops.push(op);
        }
        truth.ranks.push(RankTruth {
            rank: cr.rank as i32,
            comm: cr.comm as u32,
            pid,
            comm_hash: cr.hash,
            comm_name: cr.name.to_string_lossy().into_owned(),
            nranks: cfg.ranks as i32,
            context: cr.ctx as u64,
            died,
            gpu_offset_ns: cr.gpu.offset,
            gpu_drift_ppm: cr.gpu.ppm,
            gpu_ticks_hz: cr.gpu.hz,
            ops,
            foreign_proxy_ops: std::mem::take(&mut st.foreign),
        });
    }
    let c = shared.counters.lock().unwrap().clone();
    for k in Kind::ALL {
        truth
            .counts
            .insert(k.name().to_string(), c.starts[k as usize]);
    }
    truth.counts.insert("states".into(), c.states);
    truth.counts.insert("stops".into(), c.stops);
    truth.total_calls = c.total();
    truth.log_calls = crate::plugin::log_calls() - log0;
    truth.log = crate::plugin::log_lines_since(log0);

    match Arc::try_unwrap(shared) {
        Ok(sh) => {
            if !died {
                sh.plugin.close(cfg.keep_loaded);
            } else {
                sh.plugin.close(true);
            }
        }
        Err(_) => bail!("simulator threads still hold the plugin"),
    }
    Ok(ProcResult { truth, died })
}

// ------------------------------------------------------------------------------------------
// Application side

struct Captured {
    api: Vec<H>,
    seqs: Vec<u64>,
    mask: u64,
}

struct AppCtx<'a> {
    sh: &'a Shared,
    sh_arc: Arc<Shared>,
    c: Counters,
    /// Per comm-rank: per-function seq counters, next truth index, calls posted, CE seq.
    seq: Vec<[u64; 7]>,
    next_idx: Vec<usize>,
    posted: Vec<u64>,
    ce_seq: Vec<u64>,
}

fn func_slot(f: Func) -> usize {
    match f {
        Func::Broadcast => 0,
        Func::AllGather => 1,
        Func::ReduceScatter => 2,
        Func::AllReduce => 3,
        Func::Send => 4,
        Func::Recv => 5,
        Func::AlltoAll => 6,
    }
}

fn stream_of(cr: &CommRank) -> H {
    0x5e00_0000 + cr.rank * 0x1000 + cr.comm * 0x10
}

fn buf_of(cr: &CommRank, k: u64, t: usize) -> H {
    0x7f00_0000_0000 + (cr.rank << 32) + (cr.comm << 28) + ((k as usize % 4096) << 12) + t * 64
}

type ReplayJob = Box<dyn FnOnce(&mut Counters) + Send>;

fn app_thread(sh: &Arc<Shared>, rank: usize, crs: &[Arc<CommRank>]) {
    let cfg = &sh.cfg;
    let ncomm = crs.len();
    let mut a = AppCtx {
        sh,
        sh_arc: sh.clone(),
        c: Counters::default(),
        seq: vec![[0; 7]; ncomm],
        next_idx: vec![0; ncomm],
        posted: vec![0; ncomm],
        ce_seq: vec![0; ncomm],
    };
    let mut planner = Planner::new(cfg);
    let per_iter = planner.calls_per_iter();
    let duration_mode = cfg.duration.is_some();
    let graph = cfg.graph_replays > 0;
    let iterations = if graph {
        cfg.graph_replays
    } else {
        cfg.iterations
    };

    // CUDA host-callback thread for graph replays
    let (cb_tx, cb_handle) = if graph || cfg.nonblocking {
        let (tx, rx) = mpsc::channel::<ReplayJob>();
        let sh2 = sh.clone();
        let h = std::thread::Builder::new()
            .name(if graph {
                format!("cuda-callback-{rank}")
            } else {
                format!("nccl-group-job-{rank}")
            })
            .spawn(move || {
                let mut c = Counters::default();
                while let Ok(job) = rx.recv() {
                    job(&mut c);
                }
                sh2.merge_counters(&c);
            })
            .expect("spawn callback thread");
        (Some(tx), Some(h))
    } else {
        (None, None)
    };

    // graph capture: one iteration of API calls, recorded once
    let mut captured: Vec<Vec<Option<Arc<Captured>>>> = vec![vec![None; per_iter]; ncomm];
    if graph {
        let mut cap_planner = Planner::new(cfg);
        for _ in 0..per_iter * cfg.comms {
            let row = cap_planner.next_row();
            let Some(ci) = crs.iter().position(|x| x.comm == row.comm) else {
                continue;
            };
            let spec = call_spec(cfg, rank, row.k, row.kind, row.size);
            let mask = live_mask(sh.v);
            let cap = a.capture(&crs[ci], ci, &row, &spec, mask);
            captured[ci][row.pos] = Some(Arc::new(cap));
        }
        planner.advance_app((per_iter * cfg.comms) as f64 * ENQUEUE_NS);
    }

    loop {
        if sh.stopped() {
            break;
        }
        let row = planner.next_row();
        if !duration_mode && row.iter >= iterations {
            break;
        }
        let Some(ci) = crs.iter().position(|x| x.comm == row.comm) else {
            continue;
        };
        let cr = &crs[ci];
        // Whether `list` (--hang, --absent: operations on communicator 0) names this row for
        // this rank (`mine`) or for another rank.
        let listed = |list: &[RankSeq], mine: bool| {
            row.comm == 0
                && list
                    .iter()
                    .any(|h| h.seq == row.k && (h.rank == rank) == mine)
        };
        // The application blocks (a hung op, or stuck elsewhere) until the run is stopped
        // (its --duration, a signal): its process stays alive, its op in flight. (It used to
        // return at once: in a multi-process run the hung rank's process then finalized and
        // exited within a second, so a viewer never saw the hang.) With --iterations the
        // thread ends at once and the other ranks finish.
        let block = || {
            while duration_mode && !sh.stopped() {
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        if listed(&cfg.absent, true) {
            // This rank's application is stuck elsewhere and never calls the operation its
            // peers wait in: it makes no call at all from here on, and its process stays
            // (its plugin keeps reporting nothing in flight for it), as a real one would.
            block();
            break;
        }
        // backpressure: at most 2 calls in flight per communicator
        {
            let mut done = cr.completed.lock().unwrap();
            while a.posted[ci] >= *done + 2 && !sh.stopped() {
                done = cr
                    .completed_cv
                    .wait_timeout(done, Duration::from_millis(20))
                    .unwrap()
                    .0;
            }
        }
        if sh.stopped() {
            break;
        }
        if sh.rate > 0.0 {
            sh.sleep_until_v(row.arrive[rank]);
            let strag: u64 = cfg
                .straggler
                .iter()
                .filter(|s| s.rank == rank)
                .map(|s| s.delay_ns)
                .sum();
            if strag > 0 {
                // a straggler arrives DELAY after the last non-straggler, even on an overloaded
                // host where the plan cannot be kept
                let others: Vec<u32> = row
                    .live
                    .iter()
                    .copied()
                    .filter(|&x| !cfg.straggler.iter().any(|s| s.rank == x as usize))
                    .collect();
                while !sh.board.all_arrived(row.comm, &others, row.k) && !sh.stopped() {
                    std::thread::sleep(Duration::from_micros(50));
                }
                sh.sleep_until_real(monotonic_ns() + (strag as f64 / sh.rate) as u64);
            }
        }
        let spec = call_spec(cfg, rank, row.k, row.kind, row.size);
        // Hung: this rank's op never finishes (--hang), or a peer never joins it (--absent).
        let hang = listed(&cfg.hang, true) || listed(&cfg.absent, false);
        if spec.tasks.is_empty() {
            if hang {
                // A hung call with nothing to launch (size 0): the application blocks all
                // the same.
                block();
                break;
            }
            continue;
        }
        let ce_only = spec.tasks.iter().all(|t| t.ce);
        if graph && ce_only {
            // copy-engine work was enqueued once at capture; a replay emits no profiler event
            sh.board.arrive(row.comm, rank, row.k);
        } else if let (true, Some(tx), Some(cap)) = (graph, &cb_tx, captured[ci][row.pos].clone()) {
            // replay: the host callback thread issues Group/Coll/P2p with the captured parents
            let replay = row.iter;
            let sh2 = sh.clone();
            let cr2 = cr.clone();
            let row2 = row.clone();
            let kernel_ch = cap.mask & Kind::KernelCh.bit() != 0;
            let seqs: Vec<u64> = if kernel_ch {
                spec.tasks
                    .iter()
                    .map(|t| {
                        let s = &mut a.seq[ci][func_slot(t.func)];
                        *s += 1;
                        *s - 1
                    })
                    .collect()
            } else {
                cap.seqs.clone()
            };
            let idx0 = a.next_idx[ci];
            a.next_idx[ci] += spec.tasks.len();
            a.posted[ci] += 1;
            let _ = tx.send(Box::new(move |c: &mut Counters| {
                launch_part(
                    &sh2,
                    &cr2,
                    c,
                    &row2,
                    &spec,
                    cap.mask,
                    &cap.api,
                    &seqs,
                    idx0,
                    Some(replay),
                    hang,
                    None,
                );
            }));
        } else {
            a.call(cr, ci, &row, &spec, hang, cb_tx.as_ref());
        }
        if hang {
            // The application blocks on the hung operation, as a real one does inside NCCL.
            block();
            break;
        }
        if let Some(d) = cfg.die
            && d.rank == rank
            && row.comm == 0
            && d.seq == row.k
        {
            // die while the operation is in flight: once the proxy has taken it (or 50 ms)
            let t_end = monotonic_ns() + 50_000_000;
            while !cr.queue.lock().unwrap().items.is_empty() && monotonic_ns() < t_end {
                std::thread::sleep(Duration::from_micros(50));
            }
            std::thread::sleep(Duration::from_micros(200));
            for x in cfg.ranks_of_proc(cfg.proc_index.unwrap_or(0)) {
                if cfg.procs > 1 {
                    sh.board.mark_dead(x);
                }
            }
            sh.died.store(true, Ordering::Relaxed);
            sh.stop.store(true, Ordering::Relaxed);
            break;
        }
    }
    drop(cb_tx);
    if let Some(h) = cb_handle {
        let _ = h.join();
    }
    sh.merge_counters(&a.c);
}

impl AppCtx<'_> {
    fn start(&mut self, ctx: H, parent: H, rank: i32, ev: &Ev) -> H {
        self.sh.plugin.start(ctx, parent, rank, ev, &mut self.c)
    }

    /// API layer of a call (v5+): GroupApi start + 23, CollApi/P2pApi start/stop.
    fn api_layer(
        &mut self,
        cr: &CommRank,
        spec: &CallSpec,
        mask: u64,
        graph: bool,
        launch: bool,
    ) -> (H, Vec<H>, Vec<(u64, u64)>) {
        let v = self.sh.v;
        let mut hga = 0;
        if v >= 5 && wants(Kind::GroupApi, mask) {
            // a lone collective is its own implicit group (depth 1); grouped p2p calls sit
            // inside the user's ncclGroupStart (depth 2)
            let depth = if spec.api.len() > 1 { 2 } else { 1 };
            hga = self.start(cr.ctx, 0, 0, &Ev::GroupApi { depth, graph });
            if hga != 0 {
                self.sh
                    .plugin
                    .record(hga, st::GROUP_START_API_STOP, Args::Null, &mut self.c);
            }
        }
        let mut handles = Vec::with_capacity(spec.api.len());
        let mut times = Vec::with_capacity(spec.api.len());
        let stream = stream_of(cr);
        for api in &spec.api {
            let t0 = monotonic_ns();
            let mut h = 0;
            if v >= 5 {
                let (kind, ev) = if api.p2p {
                    (
                        Kind::P2pApi,
                        Ev::P2pApi {
                            func: api.func,
                            count: api.count as usize,
                            dtype: api.dtype,
                            stream,
                            graph,
                        },
                    )
                } else {
                    (
                        Kind::CollApi,
                        Ev::CollApi {
                            func: api.func,
                            count: api.count as usize,
                            dtype: api.dtype,
                            root: api.root,
                            stream,
                            graph,
                        },
                    )
                };
                if wants(kind, mask) {
                    h = self.start(cr.ctx, hga, 0, &ev);
                    if h != 0 {
                        self.sh.plugin.stop(h, &mut self.c);
                    }
                }
            }
            handles.push(h);
            times.push((t0, monotonic_ns()));
        }
        if hga != 0 {
            self.sh
                .plugin
                .record(hga, st::GROUP_END_API_START, Args::Null, &mut self.c);
        }
        let has_kernel = spec.tasks.iter().any(|t| !t.ce);
        if launch && has_kernel {
            kernel_launch(self.sh, cr, hga, mask, &mut self.c);
        }
        (hga, handles, times)
    }

    fn capture(
        &mut self,
        cr: &CommRank,
        ci: usize,
        row: &Row,
        spec: &CallSpec,
        mask: u64,
    ) -> Captured {
        let (hga, api, times) = self.api_layer(cr, spec, mask, true, true);
        if !spec.tasks.is_empty() && spec.tasks.iter().all(|t| t.ce) {
            // copy-engine collectives are enqueued (and reported) once, at capture
            let idx0 = self.next_idx[ci];
            self.next_idx[ci] += spec.tasks.len();
            self.ce_call(cr, ci, row, spec, &api, &times, idx0, false);
        }
        if hga != 0 {
            self.sh.plugin.stop(hga, &mut self.c);
        }
        let seqs = spec
            .tasks
            .iter()
            .map(|t| {
                let s = &mut self.seq[ci][func_slot(t.func)];
                *s += 1;
                *s - 1
            })
            .collect();
        Captured { api, seqs, mask }
    }

    /// A normal (non-graph) call: API layer, launch, Group/Coll/P2p, post, stops.
    fn call(
        &mut self,
        cr: &Arc<CommRank>,
        ci: usize,
        row: &Row,
        spec: &CallSpec,
        hang: bool,
        jobs: Option<&mpsc::Sender<ReplayJob>>,
    ) {
        // the per-API-call mask snapshot (spec §4.8)
        let mask = live_mask(self.sh.v);
        let ce_only = spec.tasks.iter().all(|t| t.ce);
        let job = jobs.filter(|_| self.sh.cfg.nonblocking && !ce_only);
        let (hga, api, times) = self.api_layer(cr, spec, mask, false, job.is_none());
        let seqs: Vec<u64> = spec
            .tasks
            .iter()
            .map(|t| {
                let slot = if t.ce { 6 } else { func_slot(t.func) };
                let s = &mut self.seq[ci][slot];
                *s += 1;
                *s - 1
            })
            .collect();
        let idx0 = self.next_idx[ci];
        self.next_idx[ci] += spec.tasks.len();
        if ce_only {
            self.ce_call(cr, ci, row, spec, &api, &times, idx0, hang);
            self.sh.board.arrive(cr.comm, cr.rank, row.k);
        } else if let Some(tx) = job {
            // non-blocking: the group job thread launches; ncclGroupEnd returns ncclInProgress
            self.posted[ci] += 1;
            let (sh2, cr2, row2, spec2) =
                (self.sh_arc.clone(), cr.clone(), row.clone(), spec.clone());
            let _ = tx.send(Box::new(move |c: &mut Counters| {
                kernel_launch(&sh2, &cr2, hga, mask, c);
                launch_part(
                    &sh2,
                    &cr2,
                    c,
                    &row2,
                    &spec2,
                    mask,
                    &api,
                    &seqs,
                    idx0,
                    None,
                    hang,
                    Some(&times),
                );
            }));
        } else {
            self.posted[ci] += 1;
            launch_part(
                self.sh,
                cr,
                &mut self.c,
                row,
                spec,
                mask,
                &api,
                &seqs,
                idx0,
                None,
                hang,
                Some(&times),
            );
        }
        if hga != 0 {
            self.sh.plugin.stop(hga, &mut self.c);
        }
    }

    /// Copy-engine collective (v6): CollApi → CeColl → CeSync/CeBatch, all on the launch thread.
    #[allow(clippy::too_many_arguments)]
    fn ce_call(
        &mut self,
        cr: &CommRank,
        ci: usize,
        row: &Row,
        spec: &CallSpec,
        api: &[H],
        times: &[(u64, u64)],
        idx0: usize,
        hang: bool,
    ) {
        let v = self.sh.v;
        for (ti, t) in spec.tasks.iter().enumerate() {
            let seq = self.ce_seq[ci];
            self.ce_seq[ci] += 1;
            let t_start = monotonic_ns();
            let mut issued = false;
            let parent = api.get(t.api).copied().unwrap_or(0);
            let mask = live_mask(v);
            let mut hce = 0;
            if v >= 6 && wants(Kind::CeColl, mask) {
                issued = true;
                hce = self.start(
                    cr.ctx,
                    parent,
                    cr.rank as i32,
                    &Ev::CeColl {
                        seq,
                        func: t.func,
                        send: buf_of(cr, row.k, ti),
                        recv: buf_of(cr, row.k, ti) + 32,
                        count: t.count as usize,
                        dtype: t.dtype,
                        sync_mc: unit(&[self.sh.cfg.seed, 0xCE, cr.comm as u64]) < 0.5,
                        stream: stream_of(cr),
                    },
                );
            }
            let nb = 1 + (hash(&[self.sh.cfg.seed, 0xCEB, row.k, cr.rank as u64]) % 3) as usize;
            let sync = |this: &mut Self, complete: bool| {
                if hce != 0 && wants(Kind::CeSync, live_mask(v)) {
                    let h = this.start(
                        cr.ctx,
                        hce,
                        cr.rank as i32,
                        &Ev::CeSync {
                            complete,
                            nranks: this.sh.cfg.ranks as i32,
                        },
                    );
                    if h != 0 {
                        this.sh.plugin.stop(h, &mut this.c);
                    }
                }
            };
            sync(self, false);
            for b in 0..nb {
                if hce != 0 && wants(Kind::CeBatch, live_mask(v)) {
                    let per = t.bytes / nb as u64;
                    let h = self.start(
                        cr.ctx,
                        hce,
                        cr.rank as i32,
                        &Ev::CeBatch {
                            num_ops: (self.sh.cfg.ranks as i32 - 1).max(1),
                            total_bytes: (per + u64::from(b == 0) * (t.bytes % nb as u64)) as usize,
                            intra: false,
                        },
                    );
                    if h != 0 {
                        self.sh.plugin.stop(h, &mut self.c);
                    }
                }
            }
            sync(self, true);
            if hce != 0 {
                self.sh.plugin.stop(hce, &mut self.c);
            }
            let t_stop = monotonic_ns();
            let (a0, a1) = times.get(t.api).copied().unwrap_or((t_start, t_start));
            let mut st = cr.store.lock().unwrap();
            if st.keep {
                st.app.insert(
                    idx0 + ti,
                    OpTruth {
                        kind: "Coll".into(),
                        func: t.func.name().into(),
                        seq,
                        call: row.k,
                        count: t.count,
                        bytes: t.bytes,
                        peer: -1,
                        root: t.root,
                        n_channels: 0,
                        graph_replay: None,
                        ce: true,
                        hung: hang,
                        issued,
                        api_start: Some(a0),
                        api_stop: Some(a1),
                        enqueue_start: t_start,
                        enqueue_stop: t_stop,
                        exec_start: Some(t_start),
                        end: if hang { None } else { Some(t_stop) },
                        channels: vec![],
                        proxy_ops: vec![],
                    },
                );
            }
        }
    }
}

/// KernelLaunch start/stop (v5+), parented to the GroupApi handle.
fn kernel_launch(sh: &Shared, cr: &CommRank, hga: H, mask: u64, c: &mut Counters) {
    if sh.v >= 5 && wants(Kind::KernelLaunch, mask) {
        let h = sh.plugin.start(
            cr.ctx,
            hga,
            0,
            &Ev::KernelLaunch {
                stream: stream_of(cr),
            },
            c,
        );
        if h != 0 {
            sh.plugin.stop(h, c);
        }
    }
}

/// Group → Coll/P2p starts → post to the proxy → Coll/P2p stops → Group stop. Runs on the
/// launch thread (normal calls) or the CUDA host-callback thread (graph replays).
#[allow(clippy::too_many_arguments)]
fn launch_part(
    sh: &Shared,
    cr: &Arc<CommRank>,
    c: &mut Counters,
    row: &Row,
    spec: &CallSpec,
    mask: u64,
    api: &[H],
    seqs: &[u64],
    idx0: usize,
    replay: Option<u64>,
    hang: bool,
    api_times: Option<&[(u64, u64)]>,
) {
    let v = sh.v;
    let pl = &sh.plugin;
    let rank = cr.rank as i32;
    let mut hg = 0;
    if wants(Kind::Group, mask) {
        hg = pl.start(cr.ctx, 0, 0, &Ev::Group, c);
    }
    let mut handles = Vec::with_capacity(spec.tasks.len());
    let mut starts = Vec::with_capacity(spec.tasks.len());
    let mut issued = Vec::with_capacity(spec.tasks.len());
    for (ti, t) in spec.tasks.iter().enumerate() {
        let t0 = monotonic_ns();
        let kind = if t.p2p { Kind::P2p } else { Kind::Coll };
        // v1–v4 (2.23–2.27): Coll/P2p only when the Group handle is non-NULL
        let allowed = wants(kind, mask) && (v >= 5 || hg != 0);
        let mut h = 0;
        if allowed {
            let parent = if v >= 5 {
                api.get(t.api).copied().unwrap_or(0)
            } else {
                hg
            };
            let ev = if t.p2p {
                Ev::P2p {
                    func: t.func,
                    buff: buf_of(cr, row.k, ti),
                    dtype: t.dtype,
                    count: t.count as usize,
                    peer: t.peer,
                    nch: t.channels.len() as u8,
                    parent_group: hg,
                    comm_name: cr.name.as_ptr(),
                    comm_hash: cr.hash,
                }
            } else {
                Ev::Coll {
                    seq: seqs[ti],
                    func: t.func,
                    send: buf_of(cr, row.k, ti),
                    recv: buf_of(cr, row.k, ti) + 32,
                    count: t.count as usize,
                    root: t.root,
                    dtype: t.dtype,
                    nch: t.channels.len() as u8,
                    proto: t.proto,
                    parent_group: hg,
                    comm_name: cr.name.as_ptr(),
                    comm_hash: cr.hash,
                    traffic: t.traffic as usize,
                }
            };
            h = pl.start(cr.ctx, parent, rank, &ev, c);
        }
        handles.push(h);
        starts.push(t0);
        issued.push(allowed);
    }
    // post the proxy operations (the proxy thread may start them before the stops below)
    let mut tasks: Vec<PostedTask> = spec
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.ce)
        .map(|(ti, t)| PostedTask {
            truth: Some(idx0 + ti),
            handle: handles[ti],
            ctx: cr.ctx,
            rank,
            pid: sh.pid,
            channels: t.channels.clone(),
            proxies: t.proxies.clone(),
        })
        .collect();
    if sh.cfg.pxn && sh.cfg.ranks > 1 {
        // a foreign operation executed by this proxy on behalf of another rank
        if let Some(px) = spec
            .tasks
            .iter()
            .flat_map(|t| t.proxies.iter())
            .find(|p| p.network)
        {
            let n = sh.cfg.ranks;
            let origin = (cr.rank + 1) % n;
            let mut p = px.clone();
            p.peer = ((cr.rank + 2) % n) as i32;
            p.is_send = true;
            tasks.push(PostedTask {
                truth: None,
                handle: 0x7ffd_0000_0000 + ((row.k as usize % 65536) << 6),
                ctx: 0x7ffe_0000_0000 + origin * 0x1000,
                rank: origin as i32,
                pid: sh.foreign_pid(),
                channels: vec![],
                proxies: vec![p],
            });
        }
    }
    let posted_real = monotonic_ns();
    cr.post(Posted {
        k: row.k,
        live: row.live.clone(),
        row_s: row.s,
        d_ch: row.d_ch.clone(),
        kstart: row.kstart[cr.rank],
        post_v: row.arrive[cr.rank] + ENQUEUE_NS,
        posted_real,
        mask,
        hung: hang,
        tasks,
    });
    let mut stops = Vec::with_capacity(spec.tasks.len());
    for &h in &handles {
        if h != 0 {
            pl.stop(h, c);
        }
        stops.push(monotonic_ns());
    }
    sh.board.arrive(cr.comm, cr.rank, row.k);
    if hg != 0 {
        pl.stop(hg, c);
    }
    let mut store = cr.store.lock().unwrap();
    let keep = store.keep;
    for (ti, t) in spec.tasks.iter().enumerate().filter(|_| keep) {
        let (a0, a1) = match api_times.and_then(|x| x.get(t.api)) {
            Some(&(a, b)) => (Some(a), Some(b)),
            None => (None, None),
        };
        store.app.insert(
            idx0 + ti,
            OpTruth {
                kind: if t.p2p { "P2p" } else { "Coll" }.into(),
                func: t.func.name().into(),
                seq: seqs[ti],
                call: row.k,
                count: t.count,
                bytes: t.bytes,
                peer: t.peer,
                root: t.root,
                n_channels: t.channels.len() as u32,
                graph_replay: replay,
                ce: false,
                hung: hang,
                issued: issued[ti],
                api_start: a0,
                api_stop: a1,
                enqueue_start: starts[ti],
                enqueue_stop: stops[ti],
                exec_start: None,
                end: None,
                channels: vec![],
                proxy_ops: vec![],
            },
        );
    }
}

// ------------------------------------------------------------------------------------------
// Proxy progress thread

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum What {
    KStart,
    KStop,
    StepStart,
    Phase(u8),
    GroupStop(bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Item {
    key: u64,
    seq: u64,
    slot: u32,
    task: u16,
    idx: u16,
    step: u32,
    what: What,
}

struct AProxy {
    spec: ProxySpec,
    handle: H,
    seed: u64,
    d: f64,
    s: f64,
    post_v: f64,
    /// step handles by ring slot
    steps: [H; NCCL_STEPS as usize],
    net: [H; NCCL_STEPS as usize],
    net_started: [bool; NCCL_STEPS as usize],
    ib: [net::ncclProfilerNetIbDescr_v1_t; NCCL_STEPS as usize],
    truth: ProxyOpTruth,
    cut: Option<u32>,
    /// Step 0's data is ready (its first SendPeerWait was recorded).
    ready0: bool,
}

impl AProxy {
    fn ts(&self) -> f64 {
        self.d / self.spec.nsteps.max(1) as f64
    }
    fn c(&self, i: u32) -> f64 {
        let ts = self.ts();
        self.s + (i as f64 + 1.0) * ts - 0.3 * ts * unit(&[self.seed, i as u64])
    }
    fn stop_v(&self, i: u32) -> f64 {
        if self.spec.is_send {
            self.c(i) + 1.0
        } else {
            self.c(i) + 0.2 * self.ts() + 2.0
        }
    }
    fn start_v(&self, i: u32) -> f64 {
        if i < NCCL_STEPS {
            self.post_v + i as f64
        } else {
            self.stop_v(i - NCCL_STEPS) + 1.0
        }
    }
}

struct AKernel {
    ch: u8,
    handle: H,
    issued: bool,
    truth: ChannelTruth,
    start_v: f64,
    end_v: f64,
}

struct ATask {
    truth: Option<usize>,
    handle: H,
    ctx: H,
    rank: i32,
    proxies: Vec<AProxy>,
    kernels: Vec<AKernel>,
}

struct ACall {
    /// Events waiting for the barrier.
    parked: Vec<Item>,
    last_tick: u64,
    /// Call index whose data flow waits for every live rank's arrival (rate > 0).
    barrier: Option<(u64, Vec<u32>)>,
    /// Real ns by which the data flow started later than planned.
    shift: u64,
    row_s: f64,
    mask: u64,
    hung: bool,
    posted_real: u64,
    tasks: Vec<ATask>,
    remaining: usize,
    first_progress: Option<u64>,
}

struct Proxy<'a> {
    sh: &'a Shared,
    cr: &'a CommRank,
    c: Counters,
    heap: BinaryHeap<Reverse<Item>>,
    seq: u64,
    calls: Vec<Option<ACall>>,
    free: Vec<u32>,
    active: usize,
    blocked: bool,
}

fn proxy_thread(sh: &Shared, cr: &CommRank) {
    let mut p = Proxy {
        sh,
        cr,
        c: Counters::default(),
        heap: BinaryHeap::new(),
        seq: 0,
        calls: Vec::new(),
        free: Vec::new(),
        active: 0,
        blocked: false,
    };
    p.run();
    p.flush_all();
    sh.merge_counters(&p.c);
}

impl Proxy<'_> {
    fn ctrl(&mut self, states: &[(i32, Args)]) -> H {
        let v = self.sh.v;
        if !wants(Kind::ProxyCtrl, live_mask(v)) {
            return 0;
        }
        let h = self
            .sh
            .plugin
            .start(self.cr.ctx, 0, 0, &Ev::ProxyCtrl, &mut self.c);
        if h != 0 {
            for &(s, a) in states {
                if wants(Kind::ProxyCtrl, live_mask(v)) {
                    self.sh.plugin.record(h, s, a, &mut self.c);
                }
            }
        }
        h
    }

    fn ctrl_once(&mut self, states: &[(i32, Args)]) {
        let h = self.ctrl(states);
        if h != 0 {
            self.sh.plugin.stop(h, &mut self.c);
        }
    }

    fn push(&mut self, key: f64, slot: u32, task: usize, idx: usize, step: u32, what: What) {
        self.seq += 1;
        self.heap.push(Reverse(Item {
            key: key.max(0.0) as u64,
            seq: self.seq,
            slot,
            task: task as u16,
            idx: idx as u16,
            step,
            what,
        }));
    }

    fn run(&mut self) {
        let mut idle = true;
        let mut pass: u64 = 0;
        loop {
            if self.sh.stopped() {
                return;
            }
            self.blocked = false;
            if self.sh.rate > 0.0 {
                self.check_barriers();
            }
            let fetch = idle || self.active == 0 || pass.is_multiple_of(8);
            let mut appended: Vec<Posted> = Vec::new();
            if fetch {
                let mut q = self.cr.queue.lock().unwrap();
                if q.items.is_empty() && self.heap.is_empty() {
                    if q.done && !self.blocked {
                        return;
                    }
                    if self.active == 0 {
                        drop(q);
                        // nothing to do: sleep on the ops condition variable
                        let h = self.ctrl(&[(st::CTRL_SLEEP, Args::Ctrl(0))]);
                        q = self.cr.queue.lock().unwrap();
                        while q.items.is_empty() && !q.done && !self.sh.stopped() {
                            q = self
                                .cr
                                .cv
                                .wait_timeout(q, Duration::from_millis(20))
                                .unwrap()
                                .0;
                        }
                        drop(q);
                        if h != 0 {
                            if wants(Kind::ProxyCtrl, live_mask(self.sh.v)) {
                                self.sh.plugin.record(
                                    h,
                                    st::CTRL_WAKEUP,
                                    Args::Ctrl(0),
                                    &mut self.c,
                                );
                            }
                            self.sh.plugin.stop(h, &mut self.c);
                        }
                        q = self.cr.queue.lock().unwrap();
                        if q.items.is_empty() {
                            continue;
                        }
                    } else {
                        // only hung operations, or ones waiting for a late peer, remain
                        let wait = if self.blocked {
                            Duration::from_micros(100)
                        } else {
                            Duration::from_millis(20)
                        };
                        q = self.cr.cv.wait_timeout(q, wait).unwrap().0;
                        if q.items.is_empty() {
                            continue;
                        }
                    }
                }
                while appended.len() < APPEND_BATCH {
                    match q.items.pop_front() {
                        Some(x) => appended.push(x),
                        None => break,
                    }
                }
            }
            if !appended.is_empty() {
                self.append(appended);
                if idle {
                    self.ctrl_once(&[(st::CTRL_ACTIVE, Args::Ctrl(0))]);
                    idle = false;
                }
            }
            let n = self.progress();
            if self.blocked && n == 0 {
                // waiting for a late peer
                let q = self.cr.queue.lock().unwrap();
                if q.items.is_empty() {
                    let _ = self.cr.cv.wait_timeout(q, Duration::from_micros(100));
                }
            } else if n == 0 && !self.heap.is_empty() && self.sh.rate > 0.0 {
                let next = self.heap.peek().copied().map(|x| x.0);
                let shift = next
                    .and_then(|x| self.calls[x.slot as usize].as_ref().map(|c| c.shift))
                    .unwrap_or(0);
                let target = self.sh.real(next.map(|x| x.key).unwrap_or(0) as f64) + shift;
                let now = monotonic_ns();
                if target > now {
                    let q = self.cr.queue.lock().unwrap();
                    if q.items.is_empty() {
                        let wait = Duration::from_nanos((target - now).min(20_000_000));
                        let _ = self.cr.cv.wait_timeout(q, wait);
                    }
                }
            }
            if self.active == 0 && !idle {
                self.ctrl_once(&[(st::CTRL_IDLE, Args::Ctrl(0))]);
                idle = true;
            }
            pass += 1;
        }
    }

    /// Takes posted calls: ProxyCtrl Append … AppendEnd with the ProxyOp starts in between,
    /// then the first progress pass (InProgress) and the schedule of everything else.
    fn append(&mut self, posted: Vec<Posted>) {
        let v = self.sh.v;
        let n = posted.len() as i32;
        let hc = self.ctrl(&[(st::CTRL_APPEND, Args::Ctrl(0))]);
        let mut slots = Vec::new();
        for p in posted {
            let slot = match self.free.pop() {
                Some(s) => s,
                None => {
                    self.calls.push(None);
                    (self.calls.len() - 1) as u32
                }
            };
            let mut call = ACall {
                mask: p.mask,
                hung: p.hung,
                posted_real: p.posted_real,
                tasks: Vec::new(),
                remaining: 0,
                first_progress: None,
                parked: Vec::new(),
                last_tick: 0,
                barrier: if self.sh.rate > 0.0 {
                    Some((p.k, p.live.clone()))
                } else {
                    None
                },
                shift: 0,
                row_s: p.row_s,
            };
            for (ti, t) in p.tasks.iter().enumerate() {
                let mut at = ATask {
                    truth: t.truth,
                    handle: t.handle,
                    ctx: t.ctx,
                    rank: t.rank,
                    proxies: Vec::new(),
                    kernels: Vec::new(),
                };
                for (pi, ps) in t.proxies.iter().enumerate() {
                    let now = monotonic_ns();
                    let mut h = 0;
                    if wants(Kind::ProxyOp, p.mask) {
                        h = self.sh.plugin.start(
                            t.ctx,
                            t.handle,
                            t.rank,
                            &Ev::ProxyOp {
                                pid: t.pid,
                                ch: ps.channel,
                                peer: ps.peer,
                                nsteps: ps.nsteps as i32,
                                chunk: ps.chunk as i32,
                                is_send: ps.is_send,
                            },
                            &mut self.c,
                        );
                    }
                    let seed = hash(&[
                        self.sh.cfg.seed,
                        0x9a0,
                        self.cr.comm as u64,
                        t.rank as u64,
                        p.k,
                        ti as u64,
                        pi as u64,
                    ]);
                    let cut = if p.hung { Some(ps.nsteps / 2) } else { None };
                    at.proxies.push(AProxy {
                        spec: ps.clone(),
                        handle: h,
                        seed,
                        d: p.d_ch.get(ps.channel as usize).copied().unwrap_or(1000.0),
                        s: p.row_s,
                        post_v: p.post_v,
                        steps: [0; NCCL_STEPS as usize],
                        net: [0; NCCL_STEPS as usize],
                        net_started: [false; NCCL_STEPS as usize],
                        ib: [net::ncclProfilerNetIbDescr_v1_t::default(); NCCL_STEPS as usize],
                        truth: ProxyOpTruth {
                            channel: ps.channel as u32,
                            peer: ps.peer,
                            is_send: ps.is_send,
                            network: ps.network,
                            n_steps: ps.nsteps,
                            chunk_size: ps.chunk,
                            pid: t.pid,
                            origin_rank: t.rank,
                            start: now,
                            ..Default::default()
                        },
                        cut,
                        ready0: false,
                    });
                }
                for (chi, &ch) in t.channels.iter().enumerate() {
                    let d = p.d_ch.get(ch as usize).copied().unwrap_or(1000.0);
                    let gs = p.kstart + 200.0 * chi as f64;
                    let last = at
                        .proxies
                        .iter()
                        .filter(|x| x.spec.channel == ch && x.spec.network)
                        .map(|x| x.c(x.spec.nsteps - 1) + 0.15 * x.ts())
                        .fold(f64::NAN, f64::max);
                    let ge = if last.is_nan() {
                        p.row_s.max(gs) + d
                    } else {
                        last
                    }
                    .max(gs + 100.0);
                    at.kernels.push(AKernel {
                        ch,
                        handle: 0,
                        issued: false,
                        truth: ChannelTruth {
                            channel: ch as u32,
                            ..Default::default()
                        },
                        start_v: gs,
                        end_v: ge,
                    });
                    let poll = 2_000.0
                        + 48_000.0 * unit(&[self.sh.cfg.seed, 0x9011, p.k, ti as u64, chi as u64]);
                    self.push(gs + poll, slot, ti, chi, 0, What::KStart);
                    call.remaining += 1; // KStop
                }
                call.tasks.push(at);
            }
            self.calls[slot as usize] = Some(call);
            self.active += 1;
            slots.push(slot);
        }
        if hc != 0 {
            if wants(Kind::ProxyCtrl, live_mask(v)) {
                self.sh
                    .plugin
                    .record(hc, st::CTRL_APPEND_END, Args::Ctrl(n), &mut self.c);
            }
            self.sh.plugin.stop(hc, &mut self.c);
        }
        // first progress pass: InProgress, first steps, group stops
        for slot in slots {
            let mut call = self.calls[slot as usize].take().expect("just appended");
            let now = monotonic_ns();
            call.first_progress = Some(now);
            let mut pushes: Vec<(f64, usize, usize, u32, What)> = Vec::new();
            for (ti, t) in call.tasks.iter_mut().enumerate() {
                for (pi, px) in t.proxies.iter_mut().enumerate() {
                    if !px.spec.network {
                        continue;
                    }
                    if v >= 4 && px.handle != 0 {
                        self.sh.plugin.record(
                            px.handle,
                            st::PROXY_OP_IN_PROGRESS,
                            Args::Step(0),
                            &mut self.c,
                        );
                    }
                    px.truth.in_progress = Some(monotonic_ns());
                    pushes.push((px.start_v(0), ti, pi, 0, What::StepStart));
                }
                for is_send in [true, false] {
                    let group: Vec<&AProxy> = t
                        .proxies
                        .iter()
                        .filter(|x| x.spec.network && x.spec.is_send == is_send)
                        .collect();
                    if group.is_empty() || call.hung {
                        continue;
                    }
                    let k = group
                        .iter()
                        .map(|x| x.stop_v(x.spec.nsteps - 1))
                        .fold(0.0, f64::max)
                        + 1.0;
                    pushes.push((k, ti, 0, 0, What::GroupStop(is_send)));
                }
            }
            call.remaining += pushes
                .iter()
                .filter(|x| matches!(x.4, What::GroupStop(_)))
                .count();
            if call.hung {
                // the kernel of a hung op never stops
                call.remaining = usize::MAX / 2;
            } else if call.remaining == 0 {
                // nothing for the proxy to do (e.g. single-rank or all-copy-engine work)
                self.finish(call);
                self.free.push(slot);
                self.active -= 1;
                self.cr.mark_completed();
                continue;
            }
            self.calls[slot as usize] = Some(call);
            for (k, ti, pi, s, w) in pushes {
                self.push(k, slot, ti, pi, s, w);
            }
        }
    }

    /// Processes due events; returns how many.
    /// Whether an event may run before every participant arrived: kernel starts, slot grants
    /// and receive posts of the first steps, and a send's "data ready" (then SendPeerWait).
    fn bypasses_barrier(it: &Item) -> bool {
        match it.what {
            What::KStart => true,
            What::StepStart => it.step < NCCL_STEPS,
            What::Phase(1) | What::Phase(10) | What::Phase(11) => it.step < NCCL_STEPS,
            _ => false,
        }
    }

    /// Releases calls whose participants all arrived; while one waits, its ready sends keep
    /// recording SendPeerWait (the receiver has not posted a buffer yet).
    fn check_barriers(&mut self) {
        let v = self.sh.v;
        let mut repush = Vec::new();
        for slot in 0..self.calls.len() {
            let Some(call) = self.calls[slot].as_mut() else {
                continue;
            };
            let Some((k, live)) = &call.barrier else {
                continue;
            };
            let now = monotonic_ns();
            if self.sh.board.all_arrived(self.cr.comm, live, *k) {
                call.shift = now.saturating_sub(self.sh.real(call.row_s));
                call.barrier = None;
                repush.append(&mut call.parked);
                continue;
            }
            if call.parked.is_empty() {
                continue;
            }
            self.blocked = true;
            let tick = (50_000.0 / self.sh.rate.max(1e-9)) as u64;
            if now < call.last_tick + tick {
                continue;
            }
            call.last_tick = now;
            let cap = self.sh.cfg.truth_steps;
            for t in &mut call.tasks {
                for px in t.proxies.iter_mut().filter(|p| p.spec.is_send && p.ready0) {
                    if v >= 4 {
                        let h = px.steps[0];
                        record_step(
                            &self.sh.plugin,
                            &mut self.c,
                            px,
                            0,
                            h,
                            st::STEP_SEND_PEER_WAIT,
                            false,
                            cap,
                        );
                    }
                }
            }
        }
        for it in repush {
            self.heap.push(Reverse(it));
        }
    }

    /// Processes due events; returns how many.
    fn progress(&mut self) -> usize {
        let mut n = 0;
        let rate = self.sh.rate;
        let now = if rate > 0.0 { monotonic_ns() } else { 0 };
        let mut looked = 0;
        while let Some(Reverse(top)) = self.heap.peek().copied() {
            looked += 1;
            if n >= 512 || looked > 4096 {
                break;
            }
            let mut shift = 0;
            if let Some(call) = self.calls[top.slot as usize].as_mut() {
                if call.barrier.is_some() && !Self::bypasses_barrier(&top) {
                    // the data flow needs every participant's kernel: wait for the last one
                    self.heap.pop();
                    call.parked.push(top);
                    self.blocked = true;
                    continue;
                }
                shift = call.shift;
            }
            if rate > 0.0 && self.sh.real(top.key as f64) + shift > now {
                break;
            }
            self.heap.pop();
            self.handle(top);
            n += 1;
        }
        n
    }

    fn handle(&mut self, it: Item) {
        let Some(mut call) = self.calls[it.slot as usize].take() else {
            return;
        };
        let completed = self.handle_in(&mut call, it);
        if completed {
            self.finish(call);
            self.free.push(it.slot);
            self.active -= 1;
            self.cr.mark_completed();
        } else {
            self.calls[it.slot as usize] = Some(call);
        }
    }

    /// Moves a call's truth into the store.
    fn finish(&mut self, call: ACall) {
        let mut st = self.cr.store.lock().unwrap();
        if !st.keep {
            return;
        }
        for t in call.tasks {
            let pops: Vec<ProxyOpTruth> = t.proxies.into_iter().map(|p| p.truth).collect();
            match t.truth {
                Some(idx) => {
                    st.proxy.insert(
                        idx,
                        ProxyPart {
                            channels: t
                                .kernels
                                .into_iter()
                                .filter(|k| k.issued)
                                .map(|k| k.truth)
                                .collect(),
                            proxy_ops: pops,
                            first_progress: call.first_progress,
                        },
                    );
                }
                None => st.foreign.extend(pops),
            }
        }
    }

    fn flush_all(&mut self) {
        for slot in 0..self.calls.len() {
            if let Some(call) = self.calls[slot].take() {
                self.finish(call);
            }
        }
    }

    fn gpu_host(&self, v: f64, lo: u64, shift: u64) -> u64 {
        let now = monotonic_ns();
        if self.sh.rate <= 0.0 {
            return now;
        }
        (self.sh.real(v) + shift).max(lo).min(now)
    }

    /// Returns true when the call is complete.
    fn handle_in(&mut self, call: &mut ACall, it: Item) -> bool {
        let v = self.sh.v;
        let pl = &self.sh.plugin;
        let mask = call.mask;
        let ti = it.task as usize;
        match it.what {
            What::KStart => {
                let posted_real = call.posted_real;
                let k_issue = v >= 3 && wants(Kind::KernelCh, mask);
                let task = &mut call.tasks[ti];
                let kidx = it.idx as usize;
                let gs_v = it.key as f64; // includes the poll delay; the GPU time is earlier
                let host = self.gpu_host(task.kernels[kidx].start_v, posted_real, 0);
                let raw = self.cr.gpu.raw(host);
                let k = &mut task.kernels[kidx];
                k.truth.gpu_start_host = host;
                k.truth.gpu_start_raw = raw;
                if k_issue {
                    k.truth.cb_start = monotonic_ns();
                    k.handle = pl.start(
                        task.ctx,
                        task.handle,
                        0,
                        &Ev::KernelCh {
                            ch: k.ch,
                            ptimer: raw,
                        },
                        &mut self.c,
                    );
                    k.issued = true;
                }
                let end_v = k.end_v.max(gs_v);
                if !call.hung {
                    let poll2 = 2_000.0 + 48_000.0 * unit(&[it.seq, 9]);
                    self.push(end_v + poll2, it.slot, ti, kidx, 0, What::KStop);
                }
                false
            }
            What::KStop => {
                let shift = call.shift;
                let task = &mut call.tasks[ti];
                let k = &mut task.kernels[it.idx as usize];
                let host = self.gpu_host(k.end_v, k.truth.gpu_start_host + 1, shift);
                let raw = self.cr.gpu.raw(host);
                k.truth.gpu_end_host = Some(host);
                k.truth.gpu_end_raw = Some(raw);
                if k.issued && k.handle != 0 {
                    if v >= 4 {
                        pl.record(k.handle, st::KERNEL_CH_STOP, Args::Timer(raw), &mut self.c);
                    }
                    pl.stop(k.handle, &mut self.c);
                }
                if k.issued {
                    k.truth.cb_stop = Some(monotonic_ns());
                }
                call.remaining -= 1;
                call.remaining == 0
            }
            What::GroupStop(is_send) => {
                let task = &mut call.tasks[ti];
                for px in task
                    .proxies
                    .iter_mut()
                    .filter(|x| x.spec.network && x.spec.is_send == is_send)
                {
                    if px.handle != 0 {
                        pl.stop(px.handle, &mut self.c);
                    }
                    px.truth.stop = Some(monotonic_ns());
                }
                call.remaining -= 1;
                call.remaining == 0
            }
            What::StepStart => {
                self.step_start(call, it);
                false
            }
            What::Phase(ph) => {
                self.step_phase(call, it, ph);
                false
            }
        }
    }

    fn step_start(&mut self, call: &mut ACall, it: Item) {
        let v = self.sh.v;
        let mask = call.mask;
        let ti = it.task as usize;
        let pi = it.idx as usize;
        let i = it.step;
        let cap = self.sh.cfg.truth_steps;
        let net_kind = self.sh.cfg.net;
        let mut pushes: Vec<(f64, u32, What)> = Vec::new();
        {
            let task = &mut call.tasks[ti];
            let (ctx, rank) = (task.ctx, task.rank);
            let px = &mut task.proxies[pi];
            let slot = (i % NCCL_STEPS) as usize;
            let step_issue = wants(Kind::ProxyStep, mask) && (v >= 2 || px.handle != 0);
            let st_v = px.start_v(i);
            let c_i = px.c(i);
            let ts = px.ts();
            let u2 = unit(&[px.seed, i as u64, 2]);
            let restart = !px.spec.is_send && unit(&[px.seed, i as u64, 3]) < 0.03;
            let sh = self.sh;
            let pl = &sh.plugin;
            let mut h = 0;
            if step_issue {
                h = pl.start(
                    ctx,
                    px.handle,
                    rank,
                    &Ev::ProxyStep { step: i as i32 },
                    &mut self.c,
                );
            }
            px.steps[slot] = h;
            px.truth.steps_started += 1;
            let bytes = px.spec.step_bytes(i);
            px.truth.trans_size += bytes;
            if (i as usize) < cap {
                px.truth.steps.push(StepTruth {
                    step: i,
                    start: monotonic_ns(),
                    trans_size: bytes,
                    ..Default::default()
                });
            }
            if px.spec.is_send {
                // slot granted: SendGPUWait right away
                let legacy = v <= 3;
                record_step(
                    pl,
                    &mut self.c,
                    px,
                    i,
                    h,
                    st::STEP_SEND_GPU_WAIT,
                    legacy,
                    cap,
                );
                if legacy && px.handle != 0 {
                    pl.record(
                        px.handle,
                        st::PROXY_OP_SEND_POSTED,
                        Args::OpLegacy {
                            trans: bytes as usize,
                            steps: i as i32 + 1,
                        },
                        &mut self.c,
                    );
                }
                let ready = (st_v + 1.0).max(px.s + i as f64 * ts + 0.1 * ts);
                let kpw = if u2 < 0.5 {
                    0
                } else if u2 < 0.8 {
                    1
                } else {
                    2 + (u2 * 10.0) as u32 % 2
                };
                let gap = ((c_i - ready) / (kpw as f64 + 4.0)).max(1.0);
                // phases: 1 = ready (20 / legacy 1), 2 = peer wait again, 3 = net start, 4 = SendWait, 5 = net update, 6 = net stop, 7 = stop
                pushes.push((ready, 1, What::Phase(1)));
                for j in 1..=kpw {
                    pushes.push((ready + gap * j as f64, 2, What::Phase(2)));
                }
                let acc = ready + gap * (kpw as f64 + 1.0);
                if net_kind != NetKind::None && v >= 3 {
                    pushes.push((acc, 3, What::Phase(3)));
                }
                pushes.push((acc + 1.0, 4, What::Phase(4)));
                if net_kind != NetKind::None && v >= 4 {
                    pushes.push((acc + gap, 5, What::Phase(5)));
                }
                if net_kind != NetKind::None && v >= 3 {
                    pushes.push((c_i.max(acc + 2.0), 6, What::Phase(6)));
                }
                pushes.push((c_i.max(acc + 2.0) + 1.0, 7, What::Phase(7)));
            } else {
                let span = (c_i - st_v).max(20.0);
                let post = st_v + 0.05 * span;
                if restart {
                    pushes.push((st_v + 0.02 * span, 0, What::Phase(10)));
                }
                // phases: 10 = restart, 11 = net start + RecvWait, 12 = net update, 13 = net stop, 14 = RecvFlushWait, 15 = RecvGPUWait, 16 = stop
                pushes.push((post, 11, What::Phase(11)));
                if net_kind != NetKind::None && v >= 4 {
                    pushes.push(((post + c_i) / 2.0, 12, What::Phase(12)));
                }
                if net_kind != NetKind::None && v >= 3 {
                    pushes.push((c_i - 1.0, 13, What::Phase(13)));
                }
                pushes.push((c_i, 14, What::Phase(14)));
                pushes.push((c_i + 0.1 * ts + 1.0, 15, What::Phase(15)));
                pushes.push((px.stop_v(i), 16, What::Phase(16)));
            }
            // a hung op stops progressing at its cut step
            if let Some(cut) = px.cut
                && i >= cut
            {
                pushes.retain(|x| {
                    matches!(
                        x.2,
                        What::Phase(1) | What::Phase(2) | What::Phase(10) | What::Phase(11)
                    )
                });
            }
            let next_ok = i + 1 < px.spec.nsteps && px.cut.is_none_or(|c| i < c);
            if next_ok {
                pushes.push((px.start_v(i + 1), 0, What::StepStart));
            }
        }
        // monotone keys within the step
        let mut last = 0.0f64;
        for (k, _, w) in pushes {
            let key = if matches!(w, What::StepStart) {
                k
            } else {
                k.max(last)
            };
            if !matches!(w, What::StepStart) {
                last = key;
            }
            let step = if matches!(w, What::StepStart) {
                i + 1
            } else {
                i
            };
            self.push(key, it.slot, ti, pi, step, w);
        }
    }

    fn step_phase(&mut self, call: &mut ACall, it: Item, ph: u8) {
        let v = self.sh.v;
        let mask = call.mask;
        let ti = it.task as usize;
        let pi = it.idx as usize;
        let i = it.step;
        let cap = self.sh.cfg.truth_steps;
        let net_kind = self.sh.cfg.net;
        let sh = self.sh;
        let pl = &sh.plugin;
        let task = &mut call.tasks[ti];
        let (ctx, rank) = (task.ctx, task.rank);
        let px = &mut task.proxies[pi];
        let slot = (i % NCCL_STEPS) as usize;
        let h = px.steps[slot];
        let bytes = px.spec.step_bytes(i);
        let legacy = v <= 3;
        let net_on = wants(Kind::NetPlugin, mask) && v >= 3;
        let c = &mut self.c;
        let legacy_op = |c: &mut Counters, px: &AProxy, s: i32| {
            if legacy && px.handle != 0 {
                pl.record(
                    px.handle,
                    s,
                    Args::OpLegacy {
                        trans: bytes as usize,
                        steps: i as i32 + 1,
                    },
                    c,
                );
            }
        };
        match ph {
            1 => {
                if !legacy {
                    record_step(pl, c, px, i, h, st::STEP_SEND_PEER_WAIT, legacy, cap);
                }
                legacy_op(c, px, st::PROXY_OP_SEND_REM_FIFO_WAIT);
                if i == 0 {
                    px.ready0 = true;
                }
            }
            2 if !legacy => {
                record_step(pl, c, px, i, h, st::STEP_SEND_PEER_WAIT, legacy, cap);
            }
            3 | 11 => {
                // the network plugin posts the work request and calls the profiler callback
                let is_send = ph == 3;
                px.net[slot] = 0;
                px.net_started[slot] = net_on;
                if net_on {
                    let (id, data): (i64, *mut c_void) = match net_kind {
                        NetKind::Socket => {
                            let mut d = net::ncclProfilerNetSockDescr_v1_t {
                                type_: 1,
                                sock: net::NetSock {
                                    fd: 40 + px.spec.channel as i32,
                                    op: i32::from(!is_send),
                                    length: bytes as usize,
                                },
                            };
                            // the socket descriptor is a stack temporary valid during startEvent
                            let h2 = pl.start(
                                ctx,
                                h,
                                rank,
                                &Ev::NetPlugin {
                                    id: net::NET_ID_SOCK,
                                    data: (&raw mut d).cast(),
                                },
                                c,
                            );
                            px.net[slot] = h2;
                            (net::NET_ID_SOCK, std::ptr::null_mut())
                        }
                        _ => {
                            let d = &mut px.ib[slot];
                            *d = net::ncclProfilerNetIbDescr_v1_t {
                                type_: 1,
                                qp: net::NetIbQp {
                                    device: (px.spec.channel % 2) as i32,
                                    wr_id: hash(&[px.seed, i as u64]),
                                    opcode: if is_send { 2 } else { 0 },
                                    qpNum: 0x100 + px.spec.channel as i32,
                                    length: if is_send { bytes as usize } else { 0 },
                                },
                            };
                            (
                                net::NET_ID_IB,
                                (d as *mut net::ncclProfilerNetIbDescr_v1_t).cast(),
                            )
                        }
                    };
                    if id == net::NET_ID_IB {
                        px.net[slot] = pl.start(ctx, h, rank, &Ev::NetPlugin { id, data }, c);
                    }
                }
                if ph == 11 {
                    record_step(pl, c, px, i, h, st::STEP_RECV_WAIT, legacy, cap);
                    legacy_op(c, px, st::PROXY_OP_RECV_POSTED);
                }
            }
            4 => {
                record_step(pl, c, px, i, h, st::STEP_SEND_WAIT, legacy, cap);
                legacy_op(c, px, st::PROXY_OP_SEND_TRANSMITTED);
            }
            5 | 12 => {
                // update: no NULL check on the net-plugin path
                let data: *mut c_void = (&raw mut px.ib[slot]).cast();
                if px.net_started[slot] {
                    pl.record(px.net[slot], st::NET_PLUGIN_UPDATE, Args::Net(data), c);
                }
            }
            // stop: no NULL check on the net-plugin path
            6 | 13 if px.net_started[slot] => {
                pl.stop(px.net[slot], c);
                px.net_started[slot] = false;
            }
            7 | 16 => {
                if h != 0 {
                    pl.stop(h, c);
                }
                if let Some(s) = px.truth.steps.get_mut(i as usize) {
                    s.stop = Some(monotonic_ns());
                }
                legacy_op(
                    c,
                    px,
                    if ph == 7 {
                        st::PROXY_OP_SEND_DONE
                    } else {
                        st::PROXY_OP_RECV_DONE
                    },
                );
            }
            10 => {
                // the receive was not posted in that pass: start again, abandoning the old handle
                let step_issue = wants(Kind::ProxyStep, mask) && (v >= 2 || px.handle != 0);
                if step_issue {
                    px.steps[slot] =
                        pl.start(ctx, px.handle, rank, &Ev::ProxyStep { step: i as i32 }, c);
                }
                if let Some(s) = px.truth.steps.get_mut(i as usize) {
                    s.restarts += 1;
                    s.start = monotonic_ns();
                }
            }
            14 => {
                record_step(pl, c, px, i, h, st::STEP_RECV_FLUSH_WAIT, legacy, cap);
                legacy_op(c, px, st::PROXY_OP_RECV_RECEIVED);
            }
            15 => {
                record_step(pl, c, px, i, h, st::STEP_RECV_GPU_WAIT, legacy, cap);
                legacy_op(c, px, st::PROXY_OP_RECV_TRANSMITTED);
            }
            _ => {}
        }
    }
}

/// Records a ProxyStep state (only when the parent ProxyOp handle is non-NULL, spec §4.2).
#[allow(clippy::too_many_arguments)]
fn record_step(
    pl: &Plugin,
    c: &mut Counters,
    px: &mut AProxy,
    i: u32,
    h: H,
    state: i32,
    legacy: bool,
    cap: usize,
) {
    let bytes = px.spec.step_bytes(i);
    if h != 0 && px.handle != 0 {
        // 2.23–2.26 native cores passed NULL args for ProxyStep states
        let args = if legacy {
            Args::Null
        } else {
            Args::Step(bytes as usize)
        };
        pl.record(h, state, args, c);
    }
    if (i as usize) < cap
        && let Some(s) = px.truth.steps.get_mut(i as usize)
    {
        s.states.push((state, monotonic_ns()));
    }
}
