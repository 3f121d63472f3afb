//! # ncclprof-plugin
//!
//! The NCCL/RCCL profiler plugin (`libnccl-profiler-ncclprof.so`). The path of one event:
//!
//! 1. **callback** — [`entry`]: NCCL calls `ncclProfiler_vN.startEvent/stopEvent/
//!    recordEventState`; the version's shim reads its descriptor layout ([`abi`], [`descr`]).
//! 2. **capture** — [`capture`]: on NCCL's thread, a timestamp ([`clock`]), an id handle
//!    ([`handle`]) and one 64-byte record into the thread's ring ([`ring`]); a ProxyStep's
//!    states go into its entry of the ring's phases table instead and ride on its stop's
//!    record ([`step_phases`]). Nothing else.
//! 3. **completion** — [`completion`] on the drain thread: starts/states/stops → completed
//!    records with true completion times; GPU timers converted ([`gpuclock`]). Each record
//!    is written once, into the open Events frame of the [`history`].
//! 4. **stream** — [`stream`]: the history's sealed frames, shared with the sender thread
//!    through the bounded send queue to the viewer;
//!    [`link`] publishes the rendezvous entry and accepts viewers; [`control`] applies masks.
//!
//! [`lifecycle`] holds init/finalize/fork, and [`summary`] the line finalize logs about what
//! was recorded and lost; [`guard`] keeps panics out of NCCL; [`config`] documents every
//! environment variable.

pub mod abi;
pub mod capture;
pub mod clock;
pub mod completion;
pub mod config;
pub mod context;
pub mod control;
pub mod descr;
pub mod dump;
pub mod entry;
pub mod gpuclock;
pub mod guard;
pub mod handle;
pub mod history;
pub mod intern;
pub mod lifecycle;
pub mod link;
pub mod nccl_log;
pub mod open_steps;
pub mod prefetch;
pub mod ring;
pub mod step_phases;
pub mod stream;
pub mod summary;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Process-wide plugin state, created at the first `init` and never freed (the library is
/// linked `-z nodelete`, so it outlives `dlclose`).
pub struct Plugin {
    pub config: config::Config,
    pub rings: ring::RingPool,
    pub strings: intern::Interner,
    pub contexts: context::Contexts,
    pub control: control::Control,
    pub pid: u32,
    pub host: String,
    pub cmdline: String,
    pub api_version: AtomicU32,
    pub live_comms: AtomicU32,
    pub unknown_types: AtomicU64,
    pub viewer_slow: AtomicU64,
    pub frames_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub shutdown: AtomicBool,
    /// What this process's rendezvous entry says ([`link::Published`]); held by whoever
    /// writes the entry.
    pub published: Mutex<link::Published>,
    /// A communicator was created since the entry was last written: the drain writes it
    /// again ([`link::republish_if_stale`]), off NCCL's thread and once for a burst of them.
    pub entry_stale: AtomicBool,
    pub dump_prefix: Mutex<Option<String>>,
    pub to_drain: Mutex<Option<crossbeam_channel::Sender<stream::DrainMsg>>>,
}

impl Plugin {
    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// A descriptor with an event type this build does not know (a future API's): counted,
    /// no handle. Also the (cold) place of the fault-injection hook the reliability tests use
    /// to prove that a panic never reaches NCCL: `NCCLPROF_TEST_PANIC_ON_UNKNOWN_TYPE=1`.
    #[cold]
    pub fn count_unknown_type(&self) {
        self.unknown_types.fetch_add(1, Ordering::Relaxed);
        if self.config.test_panic_on_unknown_type {
            panic!("fault injection: NCCLPROF_TEST_PANIC_ON_UNKNOWN_TYPE");
        }
    }

    /// Text of an interned string id (drain side).
    pub fn string(&self, id: u16) -> String {
        if id == 0 {
            return String::new();
        }
        self.strings
            .published_from(id)
            .0
            .into_iter()
            .next()
            .filter(|(i, _)| *i == id)
            .map(|(_, s)| s)
            .unwrap_or_default()
    }
}

static PLUGIN: AtomicPtr<Plugin> = AtomicPtr::new(std::ptr::null_mut());

/// The plugin state, if initialised.
#[inline(always)]
pub fn plugin() -> Option<&'static Plugin> {
    let p = PLUGIN.load(Ordering::Acquire);
    // SAFETY: a non-null value is a leaked Box<Plugin> that is never freed.
    unsafe { p.as_ref() }
}

/// The context index of `ctx` if it is one of ours (v1–v3 identity learning).
#[inline(always)]
pub fn plugin_ctx(p: &Plugin, ctx: *mut std::ffi::c_void) -> Option<u32> {
    p.contexts.index_of(ctx)
}

pub(crate) fn install(p: Box<Plugin>) -> &'static Plugin {
    let p = Box::leak(p);
    PLUGIN.store(p, Ordering::Release);
    p
}
