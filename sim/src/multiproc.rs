//! `--procs N`: re-spawn the simulator once per process and merge the children's truths.

use crate::board::Board;
use crate::config::SimConfig;
use crate::engine::SIGNALLED;
use crate::truth::{self, Truth};
use anyhow::{Context, Result, bail};
use ncclprof_shared::clock::monotonic_ns;
use std::process::{Child, Command};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The simulator binary: the current executable if it is `ncclprof-sim`, else an
/// `ncclprof-sim` next to it or one directory up (a test binary in `target/debug/deps`).
pub fn find_sim_exe() -> Result<std::path::PathBuf> {
    let me = std::env::current_exe().context("current_exe")?;
    if me
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("ncclprof-sim"))
    {
        return Ok(me);
    }
    let mut dir = me.parent();
    for _ in 0..2 {
        let Some(d) = dir else { break };
        let c = d.join("ncclprof-sim");
        if c.exists() {
            return Ok(c);
        }
        dir = d.parent();
    }
    bail!(
        "--procs > 1 needs the ncclprof-sim binary: set SimConfig::sim_exe or NCCLPROF_SIM_EXE (not found near {})",
        me.display()
    )
}

/// Spawns the children, waits for them (forwarding SIGTERM), merges their truths.
pub fn run_parent(cfg: &SimConfig) -> Result<Truth> {
    let exe = match &cfg.sim_exe {
        Some(p) => p.clone(),
        None => find_sim_exe()?,
    };
    let dir = std::env::temp_dir().join(format!(
        "ncclprof-sim-{}-{}",
        std::process::id(),
        monotonic_ns()
    ));
    std::fs::create_dir_all(&dir)?;
    let epoch = monotonic_ns() + 300_000_000;
    let board_path = dir.join("board");
    Board::create_file(&board_path, cfg.comms, cfg.ranks)?;
    let board = Board::open(&board_path, cfg.comms, cfg.ranks)?;
    // Children record per-op truth only if someone will read it (a `--truth` file, or an
    // in-process caller of `run`): a demo running until killed must not grow without bound.
    let keep_truth = cfg.truth.is_some() || !cfg.real_exit;
    let mut children: Vec<(usize, Child)> = Vec::new();
    for i in 0..cfg.procs {
        if cfg.ranks_of_proc(i).is_empty() {
            continue;
        }
        let mut c = cfg.clone();
        c.proc_index = Some(i);
        c.epoch_ns = Some(epoch);
        c.truth = keep_truth.then(|| dir.join(format!("truth-{i}.json")));
        c.board = Some(board_path.clone());
        // A child outliving this parent (SIGKILLed, so it forwarded no SIGTERM) would run a
        // demo's `--duration 0` for good.
        let child = ncclprof_shared::child::die_with_parent(&mut Command::new(&exe), libc::SIGTERM)
            .args(c.to_args())
            .spawn()
            .with_context(|| format!("spawn {}", exe.display()))?;
        children.push((i, child));
    }
    let mut codes: Vec<Option<i32>> = vec![None; cfg.procs];
    let mut pending: Vec<(usize, Child)> = children;
    let mut forwarded = false;
    while !pending.is_empty() {
        if SIGNALLED.load(Ordering::Relaxed) && !forwarded {
            for (_, ch) in &pending {
                // SAFETY: sending SIGTERM to our own child process.
                unsafe { libc::kill(ch.id() as i32, libc::SIGTERM) };
            }
            forwarded = true;
        }
        let mut still = Vec::new();
        for (i, mut ch) in pending {
            match ch.try_wait()? {
                Some(st) => {
                    codes[i] = st.code();
                    // its ranks will never arrive again: let the others go on
                    for r in cfg.ranks_of_proc(i) {
                        board.mark_dead(r);
                    }
                }
                None => still.push((i, ch)),
            }
        }
        pending = still;
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut parts = Vec::new();
    for (i, code) in codes.iter().enumerate() {
        if cfg.ranks_of_proc(i).is_empty() || !keep_truth {
            continue;
        }
        let p = dir.join(format!("truth-{i}.json"));
        match truth::read(&p) {
            Ok(mut t) => {
                for pr in &mut t.procs {
                    pr.exit_code = *code;
                }
                parts.push(t);
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                bail!("process {i} (exit {code:?}) left no truth: {e}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let merged = Truth::merge(parts);
    if let Some(p) = &cfg.truth {
        truth::write(&merged, p)?;
    }
    Ok(merged)
}
