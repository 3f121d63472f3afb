//! ncclprof-sim: a fake NCCL core that dlopens a profiler plugin and drives it.
pub mod abi;
pub mod board;
pub mod config;
pub mod engine;
pub mod mask;
pub mod model;
pub mod multiproc;
pub mod plugin;
pub mod rng;
pub mod truth;

pub use config::SimConfig;
pub use truth::{Truth, call_stats};

/// Runs the job described by `cfg` and returns its ground truth (also written to
/// `cfg.truth` if set). With `procs == 1` everything runs in this process; with more, the
/// simulator executable (`cfg.sim_exe`, `NCCLPROF_SIM_EXE`, or the current executable) is
/// spawned once per process and the children's truths are merged.
pub fn run(cfg: &SimConfig) -> anyhow::Result<Truth> {
    if cfg.procs > 1 && cfg.proc_index.is_none() {
        return multiproc::run_parent(cfg);
    }
    let idx = cfg.proc_index.unwrap_or(0);
    let ranks = if cfg.procs > 1 {
        cfg.ranks_of_proc(idx)
    } else {
        0..cfg.ranks
    };
    let res = engine::run_process(cfg, ranks, idx)?;
    if let Some(p) = &cfg.truth {
        truth::write(&res.truth, p)?;
    }
    if res.died && cfg.real_exit {
        // SAFETY: _exit ends the process immediately, which is what --die asks for.
        unsafe { libc::_exit(1) };
    }
    Ok(res.truth)
}
