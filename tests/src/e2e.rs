//! The end-to-end check shared by the per-API-version tests: run the fake NCCL host against
//! the real plugin in this process, attach a viewer afterwards (the plugin's history replays
//! everything), and compare the stream with the host's ground truth.

use std::collections::HashMap;
use std::time::Duration;

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::*;
use ncclprof_shared::wire::Frame;
use ncclprof_sim::{SimConfig, Truth};

use crate::{Viewer, plugin_path};

/// Result of one run, for the caller's extra checks.
pub struct Run {
    pub truth: Truth,
    pub viewer: Viewer,
    pub dir: tempfile::TempDir,
}

/// Run the sim with `tweak` applied to a small default job, then attach a viewer.
pub fn run(api: u32, tweak: impl FnOnce(&mut SimConfig)) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let rdv = dir.path().join("rdv");
    // SAFETY: set before the plugin's first init reads its configuration; this test process
    // runs one test.
    unsafe {
        std::env::set_var("NCCLPROF_DIR", &rdv);
        std::env::set_var("NCCL_PROFILE_EVENT_MASK", "0x7fff");
    }
    let mut cfg = SimConfig::default_for(plugin_path());
    cfg.api = Some(api);
    cfg.ranks = 4;
    cfg.iterations = 12;
    cfg.rate = 0.0;
    cfg.seed = 7;
    cfg.truth_steps = 100_000;
    cfg.quiet = true;
    tweak(&mut cfg);
    let truth = ncclprof_sim::run(&cfg).expect("sim run");
    let viewer = Viewer::attach(&rdv, std::process::id());
    Run { truth, viewer, dir }
}

fn count(truth: &Truth, k: EventKind) -> u64 {
    truth.counts.get(k.name()).copied().unwrap_or(0)
}

/// Wait until the viewer holds as many records of each kind as the truth predicts.
pub fn collect(r: &mut Run) {
    let want: Vec<(EventKind, u64)> = [
        EventKind::Coll,
        EventKind::P2p,
        EventKind::KernelCh,
        EventKind::ProxyOp,
    ]
    .into_iter()
    .map(|k| (k, count(&r.truth, k)))
    .collect();
    let ok = r.viewer.until(Duration::from_secs(10), |g| {
        let recs = g.records();
        want.iter()
            .all(|&(k, n)| recs.iter().filter(|x| x.kind == k as u8).count() as u64 >= n)
    });
    let recs = r.viewer.got.records();
    let have: Vec<(EventKind, usize)> = want
        .iter()
        .map(|&(k, _)| (k, recs.iter().filter(|x| x.kind == k as u8).count()))
        .collect();
    assert!(ok, "stream incomplete: want {want:?}, have {have:?}");
}

/// The standard comparison: counts per kind, true completion and GPU times against truth.
pub fn check(r: &mut Run) {
    collect(r);
    let truth = &r.truth;
    let recs = r.viewer.got.records();
    let strings = r.viewer.got.strings();
    let comms: HashMap<u32, u64> = r
        .viewer
        .got
        .frames
        .iter()
        .filter_map(|f| match f {
            Frame::Meta(m) => Some(m.comms.clone()),
            _ => None,
        })
        .flatten()
        .map(|c| (c.index, c.comm_hash))
        .collect();
    let n = |k: EventKind| recs.iter().filter(|x| x.kind == k as u8).count() as u64;
    for k in [
        EventKind::Coll,
        EventKind::P2p,
        EventKind::KernelCh,
        EventKind::CollApi,
        EventKind::P2pApi,
        EventKind::GroupApi,
        EventKind::KernelLaunch,
        EventKind::NetPlugin,
        EventKind::ProxyCtrl,
        EventKind::CeColl,
        EventKind::CeSync,
        EventKind::CeBatch,
    ] {
        assert_eq!(n(k), count(truth, k), "{k:?}: records vs truth starts");
    }
    // ProxyOps: every start becomes a record (non-network ones flagged).
    assert_eq!(
        n(EventKind::ProxyOp),
        count(truth, EventKind::ProxyOp),
        "ProxyOp"
    );
    // ProxySteps: restarted receive steps are abandoned by NCCL, never stopped.
    let restarts: u64 = truth
        .ranks
        .iter()
        .flat_map(|rk| rk.ops.iter())
        .flat_map(|o| o.proxy_ops.iter())
        .flat_map(|p| p.steps.iter())
        .map(|s| u64::from(s.restarts))
        .sum();
    assert_eq!(
        n(EventKind::ProxyStep) + restarts,
        count(truth, EventKind::ProxyStep),
        "ProxyStep"
    );

    for k in recs
        .iter()
        .filter(|x| x.kind == EventKind::KernelCh as u8)
        .take(12)
    {
        let t = truth
            .ranks
            .iter()
            .flat_map(|rk| rk.ops.iter())
            .flat_map(|o| o.channels.iter())
            .find(|c| c.gpu_start_raw == k.p[0]);
        eprintln!(
            "kch parent {:x} flags {:x} is_coll {} comm {} ch {} start {} truth {:?} cb {} err {:?}",
            k.parent,
            k.flags,
            recs.iter().any(|c| c.id == k.parent && c.kind == 1),
            k.comm,
            k.sub,
            k.start_ns,
            t.map(|t| t.gpu_start_host),
            k.p[2],
            t.map(|t| k.start_ns as i64 - t.gpu_start_host as i64)
        );
    }
    // True completion of every Coll/P2p against the truth.
    let key = |hash: u64, rank: i32, func: &str, seq: u64, peer: i32| {
        (hash, rank, func.to_string(), seq, peer)
    };
    let mut by_key: HashMap<_, &EventRecord> = HashMap::new();
    for x in recs.iter().filter(|x| x.kind == EventKind::Coll as u8) {
        let f = strings.get(&x.strings()[0]).cloned().unwrap_or_default();
        let hash = comms.get(&x.comm).copied().unwrap_or(0);
        by_key.insert(key(hash, x.rank, &f, x.p[0], -1), x);
    }
    // The sim stamps its truth just before each callback; on a loaded 2-core machine a
    // preemption between the two can add milliseconds to single samples, so the check is on
    // the distribution: nearly all within 300 µs, none beyond 20 ms.
    let (mut end_errs, mut exec_errs) = (Vec::new(), Vec::new());
    for rk in &truth.ranks {
        for op in rk
            .ops
            .iter()
            .filter(|o| o.kind == "Coll" && o.issued && !o.ce)
        {
            let Some(x) = by_key.get(&key(rk.comm_hash, rk.rank, &op.func, op.seq, -1)) else {
                panic!("no record for {} seq {} rank {}", op.func, op.seq, rk.rank)
            };
            let Some(end) = op.end else { continue };
            assert!(
                x.has(F_END_KNOWN),
                "{} seq {} rank {}: end not known: record {x:?}",
                op.func,
                op.seq,
                rk.rank
            );
            end_errs.push((x.end_ns as i64 - end as i64).abs());
            // Before v4 there is no InProgress state and no kernel timer: execution start is
            // the first progress state the core reports, later than the truth's notional one.
            if let Some(es) = op.exec_start.filter(|_| truth.api >= 4) {
                exec_errs.push((x.exec_start_ns() as i64 - es as i64).abs());
            }
        }
    }
    assert!(
        !end_errs.is_empty() || count(truth, EventKind::Coll) == 0,
        "no collective compared"
    );
    for (what, errs) in [("end", &mut end_errs), ("exec start", &mut exec_errs)] {
        if errs.is_empty() {
            continue;
        }
        errs.sort_unstable();
        let p95 = errs[(errs.len() * 95 / 100).min(errs.len() - 1)];
        let max = errs[errs.len() - 1];
        eprintln!(
            "{} collectives: {what} error p50 {} ns, p95 {p95} ns, max {max} ns",
            errs.len(),
            errs[errs.len() / 2]
        );
        assert!(p95 < 300_000, "{what}: p95 error {p95} ns");
        assert!(max < 20_000_000, "{what}: max error {max} ns");
    }

    // Converted GPU times: never after the truth by more than the polling delay bound.
    let mut gpu_checked = 0;
    let kernels: Vec<&EventRecord> = recs
        .iter()
        .filter(|x| x.kind == EventKind::KernelCh as u8)
        .collect();
    let by_raw: HashMap<u64, &&EventRecord> = kernels.iter().map(|k| (k.p[0], k)).collect();
    let mut gpu_errs = Vec::new();
    for rk in &truth.ranks {
        for op in &rk.ops {
            for ch in &op.channels {
                if let Some(k) = by_raw.get(&ch.gpu_start_raw)
                    && k.has(F_GPU_CONVERTED)
                {
                    gpu_errs.push((k.start_ns as i64 - ch.gpu_start_host as i64).abs());
                    gpu_checked += 1;
                }
            }
        }
    }
    if !gpu_errs.is_empty() {
        gpu_errs.sort_unstable();
        let p95 = gpu_errs[(gpu_errs.len() * 95 / 100).min(gpu_errs.len() - 1)];
        let max = gpu_errs[gpu_errs.len() - 1];
        eprintln!(
            "{} kernel starts: conversion error p50 {} ns, p95 {p95} ns, max {max} ns",
            gpu_errs.len(),
            gpu_errs[gpu_errs.len() / 2]
        );
        assert!(p95 < 100_000, "kernel start conversion: p95 error {p95} ns");
        assert!(
            max < 20_000_000,
            "kernel start conversion: max error {max} ns"
        );
    }
    if count(truth, EventKind::KernelCh) > 0 && truth.api >= 4 {
        assert!(gpu_checked > 0, "no converted kernel timestamps");
    }
    // Nothing dropped in a small job.
    if let Some(c) = r.viewer.got.last_counters() {
        assert_eq!(
            c.dropped_for(ncclprof_shared::wire::DropReason::RingFull),
            0
        );
        assert_eq!(
            c.dropped_for(ncclprof_shared::wire::DropReason::TableFull),
            0
        );
    }
}
