//! End-to-end runs of the simulator against the do-nothing plugin.

mod common;

use common::{noop_plugin, small};
use ncclprof_sim::config::{RankDelay, RankSeq, Workload};
use ncclprof_sim::{SimConfig, Truth, call_stats, run};

fn sane(t: &Truth) {
    for r in &t.ranks {
        for o in &r.ops {
            assert!(o.enqueue_start <= o.enqueue_stop, "{o:?}");
            if let (Some(a), Some(b)) = (o.api_start, o.api_stop) {
                assert!(a <= b && a <= o.enqueue_start || o.graph_replay.is_some());
            }
            for c in &o.channels {
                assert!(
                    c.gpu_start_host <= c.cb_start,
                    "GPU start after its callback: {c:?}"
                );
                if let (Some(e), Some(cb)) = (c.gpu_end_host, c.cb_stop) {
                    assert!(c.gpu_start_host <= e && e <= cb, "{c:?}");
                    assert!(c.gpu_end_raw.unwrap() >= c.gpu_start_raw);
                }
            }
            for p in &o.proxy_ops {
                if let Some(ip) = p.in_progress {
                    assert!(p.start <= ip);
                }
                if let (Some(ip), Some(s)) = (p.in_progress, p.stop) {
                    assert!(ip <= s);
                    assert!(p.network);
                }
                if !p.network {
                    assert!(p.in_progress.is_none() && p.stop.is_none() && p.steps.is_empty());
                }
                assert!(p.steps.len() as u64 <= p.steps_started);
                // at most NCCL_STEPS = 8 steps of one op open at once
                for (i, s) in p.steps.iter().enumerate() {
                    let open = p.steps[..i]
                        .iter()
                        .filter(|x| x.stop.is_none_or(|e| e > s.start))
                        .count();
                    assert!(open < 8, "step {} starts with {open} steps open", s.step);
                }
                for s in &p.steps {
                    let mut last = s.start;
                    for &(_, ts) in &s.states {
                        assert!(ts >= last);
                        last = ts;
                    }
                    if let Some(e) = s.stop {
                        assert!(e >= last);
                    }
                }
            }
            // An op with nothing to tell its end (no kernel channel recorded, every proxy op
            // on a non-network transport) has none in the truth either, as for the plugin.
            let signalled = !o.channels.is_empty() || o.proxy_ops.iter().any(|p| p.network);
            if !o.hung && signalled {
                assert!(o.end.is_some(), "op never completed: {o:?}");
                if let (Some(x), Some(e)) = (o.exec_start, o.end) {
                    assert!(x <= e);
                }
            }
        }
    }
}

#[test]
fn every_api_version() {
    for v in 1..=6u32 {
        let mut c = small();
        c.api = Some(v);
        c.workload = Workload::Mixed;
        c.ce = true;
        c.iterations = 1;
        let t = run(&c).unwrap();
        assert_eq!(t.api, v);
        assert_eq!(t.ranks.len(), 4);
        assert_eq!(t.inits, 4);
        assert_eq!(t.finalizes, 4);
        for k in ["Group", "Coll", "P2p", "ProxyOp", "ProxyStep", "ProxyCtrl"] {
            assert!(t.count(k) > 0, "v{v}: no {k}");
        }
        for k in ["GroupApi", "CollApi", "P2pApi", "KernelLaunch"] {
            assert_eq!(t.count(k) > 0, v >= 5, "v{v}: {k} = {}", t.count(k));
        }
        for k in ["KernelCh", "NetPlugin"] {
            assert_eq!(t.count(k) > 0, v >= 3, "v{v}: {k} = {}", t.count(k));
        }
        for k in ["CeColl", "CeSync", "CeBatch"] {
            assert_eq!(t.count(k) > 0, v >= 6, "v{v}: {k} = {}", t.count(k));
        }
        // one Group per call, except the copy-engine calls (AllGather, AlltoAll) of v6
        assert_eq!(
            t.count("Group"),
            if v >= 6 { 4 * 4 } else { 4 * 6 },
            "v{v}: one Group per call"
        );
        let starts: u64 = t
            .counts
            .iter()
            .filter(|(k, _)| *k != "states" && *k != "stops")
            .map(|(_, v)| v)
            .sum();
        assert_eq!(
            call_stats(&t),
            starts + t.count("states") + t.count("stops")
        );
        // state 20 (SendPeerWait) exists from v4 on; v1–v3 get the legacy ProxyOp states instead
        let has20 = t
            .ranks
            .iter()
            .flat_map(|r| &r.ops)
            .flat_map(|o| &o.proxy_ops)
            .flat_map(|p| &p.steps)
            .any(|s| s.states.iter().any(|&(st, _)| st == 20));
        assert_eq!(has20, v >= 4, "v{v}");
        // v1/v2 have no KernelCh: exec_start falls back to the first InProgress
        if v < 3 {
            assert!(
                t.ranks
                    .iter()
                    .flat_map(|r| &r.ops)
                    .all(|o| o.channels.is_empty())
            );
        }
        sane(&t);
    }
}

#[test]
fn default_mask_is_zero_so_noop_gets_nothing() {
    let mut c = small();
    c.mask = 0;
    // the plugin's own env vars pass through, but the noop plugin ignores them
    let t = run(&c).unwrap();
    assert_eq!(t.mask, 0);
    assert_eq!(call_stats(&t), 0);
    assert!(!t.ranks[0].ops.is_empty(), "the workload still ran");
    sane(&t);
}

#[test]
fn ancestor_rule_proxy_op_only() {
    let mut c = small();
    c.mask = 8;
    let t = run(&c).unwrap();
    for k in ["GroupApi", "CollApi", "Group", "Coll", "ProxyOp"] {
        assert!(t.count(k) > 0, "{k}");
    }
    for k in [
        "ProxyStep",
        "KernelCh",
        "KernelLaunch",
        "ProxyCtrl",
        "NetPlugin",
        "P2p",
    ] {
        assert_eq!(t.count(k), 0, "{k}");
    }
}

#[test]
fn force_mask_and_kernel_only() {
    let mut c = small();
    c.mask = 0;
    c.force_mask = Some(64);
    let t = run(&c).unwrap();
    assert_eq!(t.mask, 64);
    assert!(t.count("KernelCh") > 0 && t.count("Coll") > 0 && t.count("GroupApi") > 0);
    assert_eq!(t.count("ProxyOp"), 0);
    assert_eq!(t.count("KernelLaunch"), 0);
    // per channel: start + record 22 + stop
    let kch = t.count("KernelCh");
    assert!(t.count("states") >= kch);
    for o in t.ranks.iter().flat_map(|r| &r.ops) {
        assert_eq!(o.channels.len() as u32, o.n_channels);
        assert_eq!(
            o.exec_start,
            o.channels.iter().map(|c| c.gpu_start_host).min()
        );
    }
}

#[test]
fn multi_process_merges() {
    let mut c = small();
    c.procs = 2;
    let t = run(&c).unwrap();
    assert_eq!(t.ranks.len(), 4);
    assert_eq!(t.procs.len(), 2);
    assert!(t.procs.iter().all(|p| p.exit_code == Some(0)));
    let pids: std::collections::BTreeSet<i32> = t.ranks.iter().map(|r| r.pid).collect();
    assert_eq!(pids.len(), 2);
    assert_eq!(t.inits, 4);
    let one = {
        let mut c1 = small();
        c1.procs = 1;
        run(&c1).unwrap()
    };
    assert_eq!(t.count("Coll"), one.count("Coll"));
    assert_eq!(t.count("ProxyOp"), one.count("ProxyOp"));
    sane(&t);
}

#[test]
fn straggler_arrives_late() {
    let mut c = small();
    c.rate = 1.0;
    c.iterations = 4;
    c.sizes = ncclprof_sim::config::Sizes(vec![64 << 10]);
    c.straggler = vec![RankDelay {
        rank: 2,
        delay_ns: 3_000_000,
    }];
    let t = run(&c).unwrap();
    let r2 = t.ranks.iter().find(|r| r.rank == 2).unwrap();
    let mut lates = Vec::new();
    for (i, o) in r2.ops.iter().enumerate() {
        let others: Vec<u64> = t
            .ranks
            .iter()
            .filter(|r| r.rank != 2)
            .map(|r| r.ops[i].enqueue_start)
            .collect();
        let max_other = *others.iter().max().unwrap();
        lates.push(o.enqueue_start as i64 - max_other as i64);
    }
    let mean = lates.iter().sum::<i64>() / lates.len() as i64;
    assert!(mean > 1_500_000, "straggler not late enough: {lates:?}");
    sane(&t);
}

fn op_list(t: &Truth) -> Vec<String> {
    t.ranks
        .iter()
        .flat_map(|r| {
            r.ops.iter().map(move |o| {
                let px: Vec<_> = o
                    .proxy_ops
                    .iter()
                    .map(|p| (p.channel, p.peer, p.is_send, p.n_steps, p.network))
                    .collect();
                format!(
                    "{} {} {} {} {} {} {} {} {} {px:?}",
                    r.rank, o.kind, o.func, o.seq, o.call, o.count, o.bytes, o.peer, o.n_channels
                )
            })
        })
        .collect()
}

#[test]
fn deterministic_for_seed() {
    let mut c = small();
    c.workload = Workload::Mixed;
    c.seed = 42;
    c.intra_node = Some(0.3);
    let a = run(&c).unwrap();
    let b = run(&c).unwrap();
    assert_eq!(op_list(&a), op_list(&b));
    assert_eq!(a.ranks[0].comm_hash, b.ranks[0].comm_hash);
    // The seed changes the non-network choice, made once per rank pair (4 pairs talk here),
    // so two seeds may choose alike and one may choose none; of ten, some differ and some
    // choose a non-network pair.
    let base = c.seed;
    let runs: Vec<Truth> = (1..=10)
        .map(|i| {
            c.seed = base + i;
            run(&c).unwrap()
        })
        .collect();
    assert!(
        runs.iter().any(|t| op_list(t) != op_list(&a)),
        "the seed changes the non-network choice"
    );
    assert!(runs.iter().any(|t| {
        t.ranks
            .iter()
            .flat_map(|r| &r.ops)
            .flat_map(|o| &o.proxy_ops)
            .any(|p| !p.network)
    }));
}

#[test]
fn hang_leaves_op_in_progress() {
    let mut c = small();
    c.iterations = 4;
    c.hang = vec![RankSeq { rank: 1, seq: 2 }];
    let t = run(&c).unwrap();
    let r1 = t.ranks.iter().find(|r| r.rank == 1).unwrap();
    assert_eq!(r1.ops.len(), 3, "the app blocks on the hung op");
    let h = &r1.ops[2];
    assert!(h.hung && h.end.is_none());
    assert!(
        h.proxy_ops
            .iter()
            .any(|p| p.network && p.in_progress.is_some() && p.stop.is_none())
    );
    assert!(h.channels.iter().all(|c| c.gpu_end_host.is_none()));
    let r0 = t.ranks.iter().find(|r| r.rank == 0).unwrap();
    assert_eq!(r0.ops.len(), 4);
    sane(&t);
}

/// A rank absent from a call: it never makes it (nor any later one), and every other rank
/// makes it and hangs in it, its peers' op in progress as with --hang.
#[test]
fn an_absent_rank_never_calls_and_its_peers_hang_waiting() {
    let mut c = small();
    c.iterations = 4;
    c.absent = vec![RankSeq { rank: 1, seq: 2 }];
    let t = run(&c).unwrap();
    for r in &t.ranks {
        if r.rank == 1 {
            assert_eq!(r.ops.len(), 2, "rank 1 stops before call 2");
            assert!(r.ops.iter().all(|o| !o.hung && o.end.is_some()));
            continue;
        }
        assert_eq!(r.ops.len(), 3, "rank {}: blocked in call 2", r.rank);
        let h = &r.ops[2];
        assert!(h.hung && h.end.is_none(), "rank {}: {h:?}", r.rank);
        assert!(h.channels.iter().all(|c| c.gpu_end_host.is_none()));
        assert!(
            h.proxy_ops
                .iter()
                .any(|p| p.network && p.in_progress.is_some() && p.stop.is_none())
        );
    }
    sane(&t);
}

/// Faults that could not happen as asked are refused, not run as something else.
#[test]
fn faults_on_missing_ranks_or_unreachable_calls_are_refused() {
    let mut c = small();
    c.absent = vec![RankSeq { rank: 4, seq: 1 }];
    let e = run(&c).unwrap_err().to_string();
    assert!(e.contains("--absent 4:1: the job has ranks 0..3"), "{e}");
    c.absent = vec![RankSeq { rank: 2, seq: 1 }];
    c.die = Some(RankSeq { rank: 0, seq: 1 });
    let e = run(&c).unwrap_err().to_string();
    assert!(e.contains("no rank could die in call 1"), "{e}");
    c.absent.clear();
    c.hang = vec![RankSeq { rank: 9, seq: 1 }];
    assert!(run(&c).is_err());
}

#[test]
fn die_in_process_stops_without_finalize() {
    let mut c = small();
    c.iterations = 5;
    c.die = Some(RankSeq { rank: 1, seq: 1 });
    let t = run(&c).unwrap();
    assert!(t.procs[0].died);
    assert_eq!(t.finalizes, 0);
    assert!(t.ranks.iter().all(|r| r.died));
}

#[test]
fn die_multi_process_exits_one() {
    let mut c = small();
    c.procs = 2;
    c.iterations = 4;
    c.die = Some(RankSeq { rank: 3, seq: 1 });
    let t = run(&c).unwrap();
    let dead: Vec<_> = t.procs.iter().filter(|p| p.died).collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].exit_code, Some(1));
    assert!(t.ranks.iter().filter(|r| r.rank >= 2).all(|r| r.died));
    assert!(
        t.ranks
            .iter()
            .filter(|r| r.rank < 2)
            .all(|r| !r.died && r.ops.len() == 4)
    );
}

#[test]
fn graph_replays_repeat_seq_and_reuse_parents() {
    let mut c = small();
    c.mask = 2; // Coll only: seq numbers do not advance on replay
    c.graph_replays = 3;
    c.sizes = ncclprof_sim::config::Sizes(vec![8, 1 << 20]);
    let t = run(&c).unwrap();
    assert_eq!(t.count("CollApi"), 4 * 2, "API events only at capture");
    assert_eq!(t.count("Coll"), 4 * 2 * 3);
    let seqs: Vec<u64> = t.ranks[0].ops.iter().map(|o| o.seq).collect();
    // per-function AllReduce seq 0 (8 B) and 1 (1 MiB), repeated by every replay
    assert_eq!(seqs, vec![0, 1, 0, 1, 0, 1]);
    assert!(t.ranks[0].ops.iter().all(|o| o.graph_replay.is_some()));
}

#[test]
fn pxn_foreign_ops_and_alltoall() {
    let mut c = small();
    c.pxn = true;
    c.workload = Workload::Alltoall;
    c.iterations = 1;
    let t = run(&c).unwrap();
    let r = &t.ranks[0];
    assert_eq!(r.ops.len(), 2 * 3, "one P2p per peer and direction");
    assert_eq!(t.count("P2pApi"), 4 * 6);
    assert!(!r.foreign_proxy_ops.is_empty());
    for f in &r.foreign_proxy_ops {
        assert_ne!(f.pid, r.pid);
        assert_ne!(f.origin_rank, r.rank);
    }
    sane(&t);
}

#[test]
fn rccl_ticks_and_drift() {
    let mut c = small();
    c.gpu_ticks_hz = Some(100_000_000);
    c.iterations = 1;
    let t = run(&c).unwrap();
    let ch = &t.ranks[0].ops[0].channels[0];
    // 100 MHz ticks of an epoch-like clock: ~1.7e17, not ~1.7e18
    assert!(
        ch.gpu_start_raw > 100_000_000_000_000_000 && ch.gpu_start_raw < 1_000_000_000_000_000_000
    );
    let mut c2 = small();
    c2.iterations = 1;
    let t2 = run(&c2).unwrap();
    assert!(t2.ranks[0].ops[0].channels[0].gpu_start_raw > 1_600_000_000_000_000_000);
    assert!(t2.ranks.iter().all(|r| r.gpu_drift_ppm.abs() <= 20.0));
}

#[test]
fn several_comms_and_truth_file() {
    let dir = std::env::temp_dir().join(format!("ncclprof-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.json");
    let mut c = small();
    c.comms = 2;
    c.truth = Some(f.clone());
    c.truth_steps = 2;
    let t = run(&c).unwrap();
    assert_eq!(t.ranks.len(), 8);
    assert_eq!(t.inits, 8);
    let hashes: std::collections::BTreeSet<u64> = t.ranks.iter().map(|r| r.comm_hash).collect();
    assert_eq!(hashes.len(), 2);
    let back = ncclprof_sim::truth::read(&f).unwrap();
    assert_eq!(back, t);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    assert_eq!(v["version"], 1);
    assert!(
        v["ranks"][0]["ops"][0]["proxy_ops"][0]["steps"]
            .as_array()
            .unwrap()
            .len()
            <= 2
    );
    assert!(v["counts"]["Coll"].as_u64().unwrap() > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cli_help_documents_flags() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ncclprof-sim"))
        .arg("--help")
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    for f in [
        "--plugin",
        "--api",
        "--ranks",
        "--procs",
        "--comms",
        "--channels",
        "--workload",
        "--sizes",
        "--iterations",
        "--duration",
        "--rate",
        "--seed",
        "--straggler",
        "--slow-channel",
        "--hang",
        "--die",
        "--pxn",
        "--graph-replays",
        "--ce",
        "--gpu-drift-ppm",
        "--gpu-ticks-hz",
        "--intra-node",
        "--truth",
        "--quiet",
        "--bw-gbps",
        "--latency-us",
        "--mask",
        "NCCLPROF_SIM_PLUGIN",
    ] {
        assert!(s.contains(f), "--help lacks {f}");
    }
}

#[test]
fn binary_runs_and_writes_truth() {
    let dir = std::env::temp_dir().join(format!("ncclprof-sim-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.json");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_ncclprof-sim"))
        .args([
            "--ranks",
            "2",
            "--iterations",
            "2",
            "--rate",
            "0",
            "--mask",
            "32767",
            "--quiet",
            "--truth",
        ])
        .arg(&f)
        .env("NCCLPROF_SIM_PLUGIN", noop_plugin())
        .status()
        .unwrap();
    assert!(st.success());
    let t = ncclprof_sim::truth::read(&f).unwrap();
    assert_eq!(t.ranks.len(), 2);
    assert!(t.total_calls > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn default_for_is_fast() {
    let c = SimConfig::default_for("/nonexistent.so");
    assert_eq!(c.rate, 0.0);
    assert_eq!(c.ranks, 8);
    assert!(run(&c).is_err(), "a missing plugin is an error");
}

#[test]
fn slow_channel_takes_longer() {
    let mut c = small();
    c.rate = 1.0;
    c.iterations = 2;
    c.sizes = ncclprof_sim::config::Sizes(vec![4 << 20]);
    c.slow_channel = vec![ncclprof_sim::config::ChannelFactor {
        channel: 0,
        factor: 10.0,
    }];
    let t = run(&c).unwrap();
    // within one op (same data-flow start), channel 0 ends ~2.5 ms after the others
    for o in t.ranks.iter().flat_map(|r| &r.ops) {
        let dur = |ch: &ncclprof_sim::truth::ChannelTruth| {
            ch.gpu_end_host.unwrap() as i64 - ch.gpu_start_host as i64
        };
        let slow = o
            .channels
            .iter()
            .filter(|c| c.channel == 0)
            .map(dur)
            .max()
            .unwrap();
        let fast = o
            .channels
            .iter()
            .filter(|c| c.channel != 0)
            .map(dur)
            .max()
            .unwrap();
        assert!(
            slow > fast + 1_000_000,
            "slow channel {slow} ns vs others {fast} ns"
        );
    }
}

#[test]
fn binary_die_exits_1_with_truth() {
    let dir = std::env::temp_dir().join(format!("ncclprof-sim-die-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.json");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_ncclprof-sim"))
        .args([
            "--ranks",
            "2",
            "--iterations",
            "5",
            "--rate",
            "0",
            "--mask",
            "32767",
            "--quiet",
            "--die",
            "0:2",
        ])
        .arg("--plugin")
        .arg(noop_plugin())
        .arg("--truth")
        .arg(&f)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(1));
    let t = ncclprof_sim::truth::read(&f).unwrap();
    assert!(t.procs[0].died);
    assert_eq!(t.finalizes, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn straggler_in_another_process() {
    let mut c = small();
    c.procs = 2;
    c.rate = 1.0;
    c.iterations = 4;
    c.sizes = ncclprof_sim::config::Sizes(vec![64 << 10]);
    c.straggler = vec![RankDelay {
        rank: 0,
        delay_ns: 3_000_000,
    }];
    let t = run(&c).unwrap();
    let r0 = t.ranks.iter().find(|r| r.rank == 0).unwrap();
    for (i, o) in r0.ops.iter().enumerate() {
        let latest = t
            .ranks
            .iter()
            .filter(|r| r.rank != 0)
            .map(|r| r.ops[i].enqueue_start)
            .max()
            .unwrap();
        assert!(
            o.enqueue_start > latest + 2_000_000,
            "op {i}: straggler not last by the delay"
        );
    }
    // the others' data flow waited for it: their ops end after the straggler's enqueue
    for r in t.ranks.iter().filter(|r| r.rank != 0) {
        for (i, o) in r.ops.iter().enumerate() {
            assert!(
                o.end.unwrap() > r0.ops[i].enqueue_start,
                "rank {} op {i} ended before the straggler came",
                r.rank
            );
        }
    }
}

#[test]
fn nonblocking_same_events() {
    let mut c = small();
    c.workload = Workload::Mixed;
    c.iterations = 1;
    let a = run(&c).unwrap();
    c.nonblocking = true;
    let b = run(&c).unwrap();
    for k in [
        "GroupApi",
        "CollApi",
        "P2pApi",
        "KernelLaunch",
        "Group",
        "Coll",
        "P2p",
        "KernelCh",
    ] {
        assert_eq!(a.count(k), b.count(k), "{k}");
    }
    assert_eq!(op_list(&a), op_list(&b));
    sane(&b);
}

#[test]
fn graph_with_copy_engine_and_single_rank_finish() {
    let mut c = small();
    c.graph_replays = 2;
    c.ce = true;
    c.workload = Workload::Mixed;
    let t = run(&c).unwrap();
    assert!(t.count("CeColl") > 0, "CE events are reported at capture");
    let mut c1 = small();
    c1.ranks = 1;
    let t1 = run(&c1).unwrap();
    for (k, v) in &t1.counts {
        if k != "ProxyCtrl" && k != "states" && k != "stops" {
            assert_eq!(*v, 0, "a single-rank communicator emits no {k}");
        }
    }
    assert!(t1.ranks[0].ops.is_empty());
}

/// A rank pair's transport is fixed, as NCCL's is at communicator init: the same both ways, on
/// every channel, in every call. (Chosen per call, a non-network op, which reports `isSend` 0,
/// shared its peer and channel with network receives that progress, and the plugin held its
/// collective in flight for the completion timeout: the demo showed every rank HUNG.)
#[test]
fn a_pairs_transport_is_the_same_both_ways_on_every_channel() {
    let mut c = small();
    c.workload = Workload::Mixed;
    c.intra_node = Some(0.5);
    c.iterations = 3;
    c.comms = 2;
    let (mut network, mut not) = (0, 0);
    for seed in 1..=5 {
        c.seed = seed;
        // Keyed by the rank pair alone: across communicators too.
        let mut seen = std::collections::HashMap::new();
        let t = run(&c).unwrap();
        for r in &t.ranks {
            for p in r.ops.iter().flat_map(|o| &o.proxy_ops) {
                let pair = (r.rank.min(p.peer), r.rank.max(p.peer));
                let first = *seen.entry(pair).or_insert(p.network);
                assert_eq!(
                    first, p.network,
                    "seed {seed}: pair {pair:?} changed transport"
                );
                if p.network {
                    network += 1;
                } else {
                    not += 1;
                }
            }
        }
    }
    assert!(network > 0 && not > 0, "{network} network, {not} not");
}
