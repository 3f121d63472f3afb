//! Awkward truths NCCL really produces, through the real plugin: several communicators per
//! process, PXN ProxyOps with a foreign pid and foreign parent/context pointers, and CUDA-graph
//! replays reusing stale CollApi parents with repeated sequence numbers.

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::*;

#[test]
fn pxn_graph_replays_and_many_comms_stream_correctly() {
    let mut run = ncclprof_tests::e2e::run(6, |c| {
        c.comms = 3;
        c.pxn = true;
        c.graph_replays = 4;
    });
    ncclprof_tests::e2e::collect(&mut run);
    let recs = run.viewer.got.records();
    let n = |k: EventKind| recs.iter().filter(|r| r.kind == k as u8).count() as u64;
    let count = |k: EventKind| run.truth.counts.get(k.name()).copied().unwrap_or(0);
    for k in [
        EventKind::Coll,
        EventKind::P2p,
        EventKind::ProxyOp,
        EventKind::KernelCh,
    ] {
        assert_eq!(n(k), count(k), "{k:?}");
    }
    // Foreign ProxyOps are recorded, flagged, never linked to a local parent.
    let foreign: Vec<&EventRecord> = recs
        .iter()
        .filter(|r| r.kind == EventKind::ProxyOp as u8 && r.has(F_FOREIGN))
        .collect();
    let truth_foreign: usize = run
        .truth
        .ranks
        .iter()
        .map(|r| r.foreign_proxy_ops.len())
        .sum();
    assert!(truth_foreign > 0, "the sim issued no PXN ops");
    assert_eq!(foreign.len(), truth_foreign);
    assert!(foreign.iter().all(|r| r.comm == u32::MAX));
    // Graph replays: the replayed Coll events name capture-time parents; each still completes.
    let replays = run
        .truth
        .ranks
        .iter()
        .flat_map(|r| r.ops.iter())
        .filter(|o| o.graph_replay.is_some() && o.kind == "Coll")
        .count();
    assert!(replays > 0, "the sim replayed nothing");
    let colls_done = recs
        .iter()
        .filter(|r| r.kind == EventKind::Coll as u8 && r.has(F_END_KNOWN))
        .count();
    assert!(
        colls_done >= replays,
        "{colls_done} completed vs {replays} replayed"
    );
    // Three communicators per rank, each named in Meta.
    let comms: std::collections::HashSet<u64> = run
        .viewer
        .got
        .frames
        .iter()
        .filter_map(|f| match f {
            ncclprof_shared::wire::Frame::Meta(m) => Some(m.comms.clone()),
            _ => None,
        })
        .flatten()
        .map(|c| c.comm_hash)
        .collect();
    assert_eq!(comms.len(), 3);
}
