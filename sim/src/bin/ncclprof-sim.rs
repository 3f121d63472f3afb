//! `ncclprof-sim`: the fake NCCL host. See `--help`.

use clap::Parser;
use ncclprof_sim::SimConfig;
use std::sync::atomic::Ordering;

extern "C" fn on_signal(_: libc::c_int) {
    ncclprof_sim::engine::SIGNALLED.store(true, Ordering::Relaxed);
}

fn main() {
    let mut cfg = SimConfig::parse();
    cfg.real_exit = true;
    let handler: extern "C" fn(libc::c_int) = on_signal;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
    match ncclprof_sim::run(&cfg) {
        Ok(t) => {
            if !cfg.quiet {
                eprintln!(
                    "ncclprof-sim: api v{} mask {:#x}: {} plugin calls ({} ops over {} contexts) in {:.3} s",
                    t.api,
                    t.mask,
                    t.total_calls,
                    t.ranks.iter().map(|r| r.ops.len()).sum::<usize>(),
                    t.ranks.len(),
                    t.wall_ns as f64 / 1e9
                );
            }
            let code = t
                .procs
                .iter()
                .filter_map(|p| p.exit_code)
                .find(|&c| c != 0)
                .unwrap_or(0);
            std::process::exit(code);
        }
        Err(e) => {
            eprintln!("ncclprof-sim: error: {e:#}");
            std::process::exit(2);
        }
    }
}
