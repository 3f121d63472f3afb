//! Several processes: the fake NCCL host spawns 4 rank processes, each loading the real
//! plugin; a viewer attaches to every one of them through the rendezvous directory while the
//! job runs, and every process streams its own ranks' collectives.

use std::time::{Duration, Instant};

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::link;

#[test]
fn every_rank_process_publishes_and_streams() {
    let dir = tempfile::tempdir().unwrap();
    let rdv = dir.path().join("rdv");
    let sim = ncclprof_tests::artifact("ncclprof-sim", "ncclprof-sim");
    let plugin = ncclprof_tests::plugin_path();
    let mut child = std::process::Command::new(&sim)
        .args(["--plugin", plugin.to_str().unwrap()])
        .args([
            "--ranks",
            "4",
            "--procs",
            "4",
            "--rate",
            "1",
            "--duration",
            "1.5",
        ])
        .args(["--workload", "allreduce", "--straggler", "2:1ms", "--quiet"])
        .env("NCCLPROF_DIR", &rdv)
        .spawn()
        .expect("spawn ncclprof-sim");
    // Wait for four live entries with a server.
    let deadline = Instant::now() + Duration::from_secs(10);
    let entries = loop {
        let live: Vec<link::ProcessEntry> = link::list_entries(&rdv)
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .filter(|e| e.is_alive() && !e.server.is_empty())
            .collect();
        if live.len() == 4 {
            break live;
        }
        assert!(
            Instant::now() < deadline,
            "only {} live entries",
            live.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut viewers: Vec<_> = entries
        .iter()
        .map(|e| ncclprof_tests::Viewer::attach(&rdv, e.pid))
        .collect();
    for (v, e) in viewers.iter_mut().zip(&entries) {
        let ok = v.until(Duration::from_secs(10), |g| {
            g.records()
                .iter()
                .filter(|r| r.kind == EventKind::Coll as u8)
                .count()
                >= 3
        });
        assert!(ok, "process {} streamed no collectives", e.pid);
        let hello = v.got.frames.iter().find_map(|f| match f {
            ncclprof_shared::wire::Frame::Hello(h) => Some(h.clone()),
            _ => None,
        });
        assert_eq!(hello.map(|h| h.pid), Some(e.pid));
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "sim exited with {status}");
    // After the job, entries are recognisably stale.
    for e in &entries {
        let back = link::ProcessEntry::read(&link::ProcessEntry::path(&rdv, e.pid));
        if let Ok(back) = back {
            assert!(
                !back.is_alive(),
                "entry of exited pid {} still looks alive",
                e.pid
            );
        }
    }
}
