//! The exported symbols: `ncclProfiler_v1` … `ncclProfiler_v6` (data objects holding each
//! version's function table) and `exampleProfilerStart` / `exampleProfilerStop`.
//!
//! Each shim translates its version's layout (`descr`) and hands a version-neutral record to
//! `capture`; every body runs inside `guard::call`, so no panic reaches NCCL.
//!
//! The general paths that the short ones call last (`stop_general`, `record_v4_general`, …)
//! are `extern "C"`, which cannot unwind (an unwind aborts in the function itself: as it
//! did in the entry point before, for the little they run outside `guard::call`). To the
//! compiler a Rust function may unwind, and an entry point, which must not, called it
//! through an aborting landing pad, and that call made the entry point save registers on
//! its short path too (a step's state saved one it did not use; BENCHMARKS.md §1, "Fewer
//! instructions around the short paths").

use std::ffi::{c_char, c_int, c_void};

use ncclprof_shared::kind::{EventKind, state as st};

use crate::abi::{
    InitV1, InitV4, InitV5, NCCL_SUCCESS, NcclLogger, NcclResult, ProfilerTable, SyncTable, rccl,
    v1, v2, v3, v4, v5, v6,
};
use crate::ring::Ring;
use crate::{capture, descr, guard, handle, lifecycle};

const NAME: *const c_char = c"ncclprof".as_ptr();

// ---------------------------------------------------------------- init / finalize

unsafe extern "C" fn init_v1(ctx: *mut *mut c_void, mask: *mut c_int) -> NcclResult {
    init_v(ctx, mask, 1)
}
unsafe extern "C" fn init_v2(ctx: *mut *mut c_void, mask: *mut c_int) -> NcclResult {
    init_v(ctx, mask, 2)
}
unsafe extern "C" fn init_v3(ctx: *mut *mut c_void, mask: *mut c_int) -> NcclResult {
    init_v(ctx, mask, 3)
}
fn init_v(ctx: *mut *mut c_void, mask: *mut c_int, api: u32) -> NcclResult {
    guard::call(|| lifecycle::init(ctx, mask, api, None));
    NCCL_SUCCESS
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn init_v4(
    ctx: *mut *mut c_void,
    mask: *mut c_int,
    comm_name: *const c_char,
    comm_hash: u64,
    nnodes: c_int,
    nranks: c_int,
    rank: c_int,
    logfn: NcclLogger,
) -> NcclResult {
    let id = lifecycle::CommIdentity {
        comm_name,
        comm_hash,
        nnodes,
        nranks,
        rank,
        logfn,
    };
    guard::call(|| lifecycle::init(ctx, mask, 4, Some(id)))
}

/// v5 and v6 share `init`'s signature (ctx, **commId, mask**, commName, nNodes, nranks, rank,
/// logfn); only the API version recorded differs.
macro_rules! init_v5_style {
    ($name:ident, $api:expr) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(
            ctx: *mut *mut c_void,
            comm_id: u64,
            mask: *mut c_int,
            comm_name: *const c_char,
            nnodes: c_int,
            nranks: c_int,
            rank: c_int,
            logfn: NcclLogger,
        ) -> NcclResult {
            let id = lifecycle::CommIdentity {
                comm_name,
                comm_hash: comm_id,
                nnodes,
                nranks,
                rank,
                logfn,
            };
            guard::call(|| lifecycle::init(ctx, mask, $api, Some(id)))
        }
    };
}
init_v5_style!(init_v5, 5);
init_v5_style!(init_v6, 6);

unsafe extern "C" fn finalize(ctx: *mut c_void) -> NcclResult {
    guard::call(|| lifecycle::finalize(ctx))
}

// ---------------------------------------------------------------- start

/// Common start path: always writes `*handle` (spec §3.0), records only when enabled.
#[inline(always)]
fn start_with<D>(
    ctx: *mut c_void,
    handle_out: *mut *mut c_void,
    d: *mut D,
    read: impl FnOnce(&'static crate::Plugin, &D) -> Option<(EventKind, crate::ring::Raw)>,
) -> NcclResult {
    if handle_out.is_null() {
        return NCCL_SUCCESS;
    }
    // SAFETY: NCCL passes a valid handle slot.
    unsafe { *handle_out = std::ptr::null_mut() };
    if !guard::enabled() || d.is_null() {
        return NCCL_SUCCESS;
    }
    guard::call(|| {
        let Some(p) = crate::plugin() else { return };
        // SAFETY: NCCL's descriptor is valid for the duration of the call.
        let Some((kind, raw)) = read(p, unsafe { &*d }) else {
            p.count_unknown_type();
            return;
        };
        let h = capture::start(p, ctx, kind, raw);
        // SAFETY: as above.
        unsafe { *handle_out = h };
    })
}

unsafe extern "C" fn start_v1(
    c: *mut c_void,
    h: *mut *mut c_void,
    d: *mut v1::Descr,
) -> NcclResult {
    start_with(c, h, d, |p, d| {
        descr::read_v1(p, crate::plugin_ctx(p, c), d)
    })
}
unsafe extern "C" fn start_v2(
    c: *mut c_void,
    h: *mut *mut c_void,
    d: *mut v2::Descr,
) -> NcclResult {
    start_with(c, h, d, |p, d| {
        descr::read_v2(p, crate::plugin_ctx(p, c), d)
    })
}
unsafe extern "C" fn start_v3(
    c: *mut c_void,
    h: *mut *mut c_void,
    d: *mut v3::Descr,
) -> NcclResult {
    start_with(c, h, d, |p, d| {
        descr::read_v3(p, crate::plugin_ctx(p, c), d)
    })
}
unsafe extern "C" fn start_v4(
    c: *mut c_void,
    h: *mut *mut c_void,
    d: *mut v4::Descr,
) -> NcclResult {
    start_with(c, h, d, descr::read_v4)
}
unsafe extern "C" fn start_v5(
    c: *mut c_void,
    h: *mut *mut c_void,
    d: *mut v5::Descr,
) -> NcclResult {
    // v5's descriptor is v6's minus the CE arms: same size (112) and offsets.
    start_v6_style(c, h, d.cast::<v6::Descr>())
}
unsafe extern "C" fn start_v6(
    c: *mut c_void,
    h: *mut *mut c_void,
    d: *mut v6::Descr,
) -> NcclResult {
    start_v6_style(c, h, d)
}

const PROXY_STEP_TYPE: u64 = 1 << EventKind::ProxyStep as u32;

/// v5/v6 start: a ProxyStep, most starts, takes a short path (its descriptor read without
/// decoding its type, `capture::step_start_short` inline, no call) where the plugin is on
/// with the counter clock (`guard::short_paths`), and [`step_start_general`] where that
/// does not record it; the other kinds [`start_v6_general`]. Both out of line, so that the
/// short path stays short (the calls are bound by their instruction count: BENCHMARKS.md §1,
/// "Instructions per call").
#[inline(always)]
fn start_v6_style(c: *mut c_void, h: *mut *mut c_void, d: *mut v6::Descr) -> NcclResult {
    // SAFETY: a non-NULL descriptor is valid for the duration of the call.
    if h.is_null() || d.is_null() || unsafe { (*d).type_ } != PROXY_STEP_TYPE {
        return start_v6_general(c, h, d);
    }
    if let Some(short) = guard::short_paths() {
        let (rings, contexts) = (short.rings, short.contexts());
        // SAFETY: as above; its type selects the ProxyStep arm.
        let (parent, step) = unsafe { ((*d).parent_obj as u64, (*d).u.proxy_step.step as u32) };
        let mut id = None;
        guard::call(|| id = capture::step_start_short(contexts, rings, c, parent, step));
        if let Some(id) = id {
            // SAFETY: NCCL passes a valid handle slot (written once, spec §3.0).
            unsafe { *h = id as *mut c_void };
            return NCCL_SUCCESS;
        }
    }
    // SAFETY: `h` and `d` are non-NULL, NCCL's, and `d`'s type is a ProxyStep (checked above).
    unsafe { step_start_general(c, h, d) }
}

/// A ProxyStep's start where its short path (`capture::step_start_short`) may not record it.
///
/// # Safety
/// `h` must be NCCL's handle slot and `d` its descriptor for this call (both non-NULL), with
/// `d`'s type a ProxyStep: [`start_v6_style`] checks all three.
#[inline(never)]
unsafe extern "C" fn step_start_general(
    c: *mut c_void,
    h: *mut *mut c_void,
    d: *mut v6::Descr,
) -> NcclResult {
    // SAFETY: a valid handle slot (contract; always written, spec §3.0).
    unsafe { *h = std::ptr::null_mut() };
    if !guard::enabled() {
        return NCCL_SUCCESS;
    }
    guard::call(|| {
        let Some(p) = crate::plugin() else { return };
        // SAFETY: a valid descriptor whose type selects the ProxyStep arm (contract).
        let raw = descr::step_v6(unsafe { &*d });
        let id = capture::start(p, c, EventKind::ProxyStep, raw);
        // SAFETY: a valid handle slot (contract).
        unsafe { *h = id };
    })
}

#[inline(never)]
extern "C" fn start_v6_general(
    c: *mut c_void,
    h: *mut *mut c_void,
    d: *mut v6::Descr,
) -> NcclResult {
    start_with(c, h, d, descr::read_v6)
}

// ---------------------------------------------------------------- stop

/// A ProxyStep's stop, most stops, takes a short path (`capture::step_stop`), the rest
/// [`stop_general`], out of line and called last, as `record_v4`'s.
unsafe extern "C" fn stop(h: *mut c_void) -> NcclResult {
    if step_short_path(h, |rings| capture::step_stop(rings, h)) {
        return NCCL_SUCCESS;
    }
    stop_general(h)
}

/// Run a ProxyStep call's short path `f` where it may run: `h` is a step's handle, the
/// plugin is on with the counter clock (`guard::short_paths`) and initialised. Whether `f`
/// recorded the call; where not (false, having changed nothing, or a caught panic, which
/// turns the plugin off), the entry point calls its general path.
#[inline(always)]
fn step_short_path(h: *mut c_void, f: impl FnOnce(&'static [Ring]) -> bool) -> bool {
    if !handle::is_kind(h as u64, EventKind::ProxyStep) {
        return false;
    }
    let Some(short) = guard::short_paths() else {
        return false;
    };
    let mut recorded = false;
    guard::call(|| recorded = f(short.rings));
    recorded
}

#[inline(never)]
extern "C" fn stop_general(h: *mut c_void) -> NcclResult {
    if h.is_null() || !guard::enabled() {
        return NCCL_SUCCESS;
    }
    guard::call(|| {
        if let Some(p) = crate::plugin() {
            capture::stop(p, h);
        }
    })
}

// ---------------------------------------------------------------- record state

#[inline(always)]
fn record_with(
    h: *mut c_void,
    state: c_int,
    read_args: impl FnOnce(Option<EventKind>) -> Option<[u64; 2]>,
) -> NcclResult {
    if h.is_null() || !guard::enabled() {
        return NCCL_SUCCESS;
    }
    guard::call(|| {
        if let Some(p) = crate::plugin() {
            let kind = handle::kind_of(h as u64);
            let args = read_args(kind);
            capture::state(p, h, kind, state, args);
        }
    })
}

/// v4–v6 (8-byte union). Reads only the arm meaningful for the handle's kind and state.
/// A ProxyStep's state, most calls, takes a short path (`capture::step_state`), the rest
/// [`record_v4_general`], out of line and called last, so that the short path stays short
/// and makes no call (BENCHMARKS.md §1, "Short paths without a call").
unsafe extern "C" fn record_v4(h: *mut c_void, state: c_int, a: *mut v4::StateArgs) -> NcclResult {
    let short = step_short_path(h, |rings| {
        // A step's word is its first (`pTimer`, as `record_v4_general` reads it); a NULL
        // args pointer reads as 0 there too.
        let arg = if a.is_null() {
            0
        } else {
            // SAFETY: a non-NULL args pointer points to the core's args union for this call.
            unsafe { (*a).p_timer }
        };
        capture::step_state(rings, h, state, arg)
    });
    if short {
        return NCCL_SUCCESS;
    }
    record_v4_general(h, state, a)
}

#[inline(never)]
extern "C" fn record_v4_general(h: *mut c_void, state: c_int, a: *mut v4::StateArgs) -> NcclResult {
    record_with(h, state, |kind| {
        if a.is_null() {
            return None;
        }
        // SAFETY: a non-NULL args pointer points to the core's args union for this call.
        unsafe {
            Some(match kind {
                // 23/24 may point to uninitialised memory under the v5 adapter (spec §3.8).
                Some(EventKind::GroupApi) => [0, 0],
                Some(EventKind::ProxyOp) if state as u32 == st::RCCL_PROXY_DIAG_UPDATE => {
                    let d = &*a.cast::<rccl::ProxyDiagArgs>();
                    [d.value as u64, d.value2 as u64]
                }
                Some(EventKind::ProxyOp) => [0, 0],
                Some(EventKind::ProxyCtrl) => [(*a).appended_proxy_ops as u32 as u64, 0],
                _ => [(*a).p_timer, 0],
            })
        }
    })
}

/// v1–v3 (16-byte union: `{transSize, steps}` / `{appendedProxyOps}`).
unsafe extern "C" fn record_v1(h: *mut c_void, state: c_int, a: *mut v1::StateArgs) -> NcclResult {
    record_with(h, state, |kind| {
        if a.is_null() {
            return None;
        }
        // SAFETY: a non-NULL args pointer points to the core's args union for this call.
        unsafe {
            Some(match kind {
                Some(EventKind::ProxyCtrl) => [(*a).proxy_ctrl.appended_proxy_ops as u32 as u64, 0],
                _ => [
                    (*a).proxy_op.trans_size as u64,
                    (*a).proxy_op.steps as u32 as u64,
                ],
            })
        }
    })
}

// ---------------------------------------------------------------- tables

macro_rules! table {
    ($sym:ident, $init_ty:ty, $init:ident, $descr:ty, $start:ident, $args:ty, $record:ident) => {
        #[allow(non_upper_case_globals)]
        #[unsafe(no_mangle)]
        pub static $sym: SyncTable<ProfilerTable<$init_ty, $descr, $args>> =
            SyncTable(ProfilerTable {
                name: NAME,
                init: $init,
                start_event: $start,
                stop_event: stop,
                record_event_state: $record,
                finalize,
            });
    };
}

table!(
    ncclProfiler_v1,
    InitV1,
    init_v1,
    v1::Descr,
    start_v1,
    v1::StateArgs,
    record_v1
);
table!(
    ncclProfiler_v2,
    InitV1,
    init_v2,
    v2::Descr,
    start_v2,
    v2::StateArgs,
    record_v1
);
table!(
    ncclProfiler_v3,
    InitV1,
    init_v3,
    v3::Descr,
    start_v3,
    v3::StateArgs,
    record_v1
);
table!(
    ncclProfiler_v4,
    InitV4,
    init_v4,
    v4::Descr,
    start_v4,
    v4::StateArgs,
    record_v4
);
table!(
    ncclProfiler_v5,
    InitV5,
    init_v5,
    v5::Descr,
    start_v5,
    v5::StateArgs,
    record_v4
);
table!(
    ncclProfiler_v6,
    InitV5,
    init_v6,
    v6::Descr,
    start_v6,
    v6::StateArgs,
    record_v4
);

// ---------------------------------------------------------------- example-plugin control

/// `int exampleProfilerStart(int eActivationMask, const char* name)` (spec §6.3): apply the
/// mask now (new operations follow it) and, if `name` is non-NULL, use it as the dump-file
/// prefix. Returns 0.
#[unsafe(no_mangle)]
pub extern "C" fn exampleProfilerStart(mask: c_int, name: *const c_char) -> c_int {
    guard::call(|| lifecycle::profiler_start(mask as u32, name));
    0
}

/// `int exampleProfilerStop(void)`: write 0 into the mask (remembering the previous one).
#[unsafe(no_mangle)]
pub extern "C" fn exampleProfilerStop() -> c_int {
    guard::call(lifecycle::profiler_stop);
    0
}
