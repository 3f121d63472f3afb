//! Scale: how the plugin's added cost per call moves from 2 to 64 ranks and from 1 to 64
//! communicators, with NCCL's real call patterns (the fake NCCL host, as fast as possible),
//! against the do-nothing plugin in the same run, runs alternated.
//!
//! Run: `cargo build --release -p ncclprof-plugin -p ncclprof-noop-plugin && cargo bench -p ncclprof-tests --bench scale`

use std::time::Duration;

use ncclprof_sim::SimConfig;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn ns_per_call(plugin: &std::path::Path, ranks: usize, comms: usize, noop: bool) -> f64 {
    let mut cfg = SimConfig::default_for(plugin);
    cfg.ranks = ranks;
    cfg.comms = comms;
    cfg.iterations = (64 / ranks.max(1)).max(2) as u64 * 4;
    cfg.rate = 0.0;
    cfg.quiet = true;
    cfg.seed = 3;
    if noop {
        // The do-nothing plugin writes no mask: give the core the same mask ncclprof sets.
        cfg.force_mask = Some(ncclprof_shared::mask::DEFAULT as i32);
    }
    let t = ncclprof_sim::run(&cfg).expect("sim run");
    t.wall_ns as f64 / t.total_calls.max(1) as f64
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("scale: bench");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: before the plugin's first init in this process.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", dir.path().join("rdv"));
        std::env::set_var("NCCLPROF_RING_EVENTS", "262144");
    }
    let prof = ncclprof_tests::plugin_path();
    let noop = ncclprof_tests::noop_path();
    println!(
        "scale: wall ns per plugin call of the whole fake job (all its threads on this machine), median of 3 alternated runs"
    );
    println!("| ranks | comms | noop ns/call | ncclprof ns/call | added ns/call |");
    println!("|-------|-------|--------------|------------------|---------------|");
    for (ranks, comms) in [
        (2, 1),
        (8, 1),
        (16, 1),
        (32, 1),
        (64, 1),
        (8, 8),
        (8, 32),
        (2, 64),
    ] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            a.push(ns_per_call(&noop, ranks, comms, true));
            b.push(ns_per_call(&prof, ranks, comms, false));
            std::thread::sleep(Duration::from_millis(50));
        }
        let (x, y) = (median(&mut a), median(&mut b));
        println!(
            "| {ranks:>5} | {comms:>5} | {x:>12.1} | {y:>16.1} | {:>13.1} |",
            y - x
        );
    }
}
