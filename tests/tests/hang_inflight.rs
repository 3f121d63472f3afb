//! A hung collective is visible as hung: rank 1 never finishes AllReduce seq 3; the plugin's
//! periodic in-flight summary keeps reporting it, with its age growing and the time it
//! started to run, while the other ranks' ops complete.

use std::time::Duration;

use ncclprof_shared::kind::EventKind;
use ncclprof_shared::wire::Frame;

#[test]
fn hung_allreduce_is_reported_in_flight_with_growing_age() {
    let dir = tempfile::tempdir().unwrap();
    let rdv = dir.path().join("rdv");
    // SAFETY: before the plugin's first init in this process.
    unsafe { std::env::set_var("NCCLPROF_DIR", &rdv) };
    let plugin = ncclprof_tests::plugin_path();
    let cfg = <ncclprof_sim::SimConfig as clap::Parser>::parse_from([
        "ncclprof-sim",
        "--plugin",
        plugin.to_str().unwrap(),
        "--ranks",
        "4",
        "--rate",
        "1",
        "--duration",
        "2.5",
        "--iterations",
        "1000000",
        "--workload",
        "allreduce",
        "--hang",
        "1:3",
        "--quiet",
    ]);
    let sim = std::thread::spawn(move || ncclprof_sim::run(&cfg));
    let mut viewer = ncclprof_tests::Viewer::attach(&rdv, std::process::id());
    // Wait for two in-flight summaries ≥ 500 ms apart that both hold rank 1's seq 3.
    let mut first: Option<(u64, u64)> = None;
    let ok = viewer.until(Duration::from_secs(10), |got| {
        for f in &got.frames {
            if let Frame::InFlight(s) = f
                && let Some(op) = s
                    .ops
                    .iter()
                    .find(|o| o.rank == 1 && o.seq == 3 && o.kind == EventKind::Coll as u8)
            {
                match first {
                    None => first = Some((s.at_ns, op.start_ns)),
                    Some((t0, start)) if s.at_ns > t0 + 500_000_000 => {
                        assert_eq!(op.start_ns, start, "same op");
                        // Its kernel channels started (they never stop): it is running, and
                        // the viewer times its hang from then.
                        assert!(
                            op.exec_start_ns >= op.start_ns && op.exec_start_ns < s.at_ns,
                            "{op:?}"
                        );
                        return true;
                    }
                    _ => {}
                }
            }
        }
        false
    });
    assert!(ok, "the hung op never showed up in two in-flight summaries");
    let t = sim.join().unwrap().expect("sim run");
    // Meanwhile the healthy ranks completed many collectives.
    let done = viewer
        .got
        .records()
        .iter()
        .filter(|r| r.kind == EventKind::Coll as u8 && r.rank == 0)
        .count();
    assert!(done > 3, "rank 0 completed only {done} collectives");
    assert!(t.ranks.iter().any(|r| r.ops.iter().any(|o| o.hung)));
}

/// A hung rank in a job of several processes stays visible: its process blocks in the hung
/// op, as a real one blocks inside NCCL, so a viewer attached well after the hang began gets
/// it in flight. (The simulator's hung rank used to return from its application loop, and in
/// a multi-process run its process then finalized and exited within a second: `ncclprof-tui
/// demo -- --hang 2:300` showed rank 2 vanish, not hang.)
#[test]
fn a_hung_rank_process_stays_and_is_seen_hung_by_a_late_viewer() {
    let dir = tempfile::tempdir().unwrap();
    let rdv = dir.path().join("rdv");
    let sim = ncclprof_tests::artifact("ncclprof-sim", "ncclprof-sim");
    // Until stopped (`--duration 0`), so a slow machine cannot end the run before the viewer
    // attaches; SIGTERMed at the end, SIGKILLed (`Proc`'s drop) if an assertion fails first.
    let mut cmd = std::process::Command::new(&sim);
    cmd.args(["--plugin", ncclprof_tests::plugin_path().to_str().unwrap()])
        .args([
            "--ranks",
            "2",
            "--procs",
            "2",
            "--rate",
            "1",
            "--duration",
            "0",
        ])
        .args(["--workload", "allreduce", "--hang", "1:3", "--quiet"])
        .env("NCCLPROF_DIR", &rdv);
    let mut sim = ncclprof_tests::faults::Proc::spawn(cmd);
    // The process of rank 1, once it has published.
    let mut pid = None;
    assert!(
        ncclprof_tests::wait_for(Duration::from_secs(10), || {
            pid = ncclprof_shared::link::list_entries(&rdv)
                .ok()
                .into_iter()
                .flatten()
                .flatten()
                .find(|e| e.comms.iter().any(|c| c.rank == 1))
                .map(|e| e.pid);
            pid.is_some()
        }),
        "rank 1 never published"
    );
    // Well after the hang (its 4th call, about 20 ms in).
    std::thread::sleep(Duration::from_millis(2000));
    let mut viewer = ncclprof_tests::Viewer::attach(&rdv, pid.unwrap());
    let ok = viewer.until(Duration::from_secs(5), |got| {
        got.frames.iter().any(|f| {
            matches!(f, Frame::InFlight(s) if s.ops.iter().any(|o| o.rank == 1
                && o.kind == EventKind::Coll as u8
                && s.at_ns.saturating_sub(o.start_ns) > 1_500_000_000))
        })
    });
    assert!(
        ok,
        "rank 1's hung op was not reported in flight to a late viewer"
    );
    drop(viewer);
    sim.signal(libc::SIGTERM);
    assert_eq!(sim.wait(Duration::from_secs(10)), Some(0));
}

/// The hang a user meets most: one rank never calls the collective its peers wait in (its
/// application is stuck elsewhere). Four ranks in four processes, rank 2 absent from
/// AllReduce 5 (`--absent 2:5`); the real viewer pipeline (live source, ingest, store,
/// timeline) must trace the hang to rank 2: the banner names it as not started, over the
/// three ranks hung in the collective.
#[test]
fn the_viewer_names_the_rank_absent_from_a_hung_allreduce() {
    let dir = tempfile::tempdir().unwrap();
    let rdv = dir.path().join("rdv");
    let sim = ncclprof_tests::artifact("ncclprof-sim", "ncclprof-sim");
    let mut cmd = std::process::Command::new(&sim);
    cmd.args(["--plugin", ncclprof_tests::plugin_path().to_str().unwrap()])
        .args([
            "--ranks",
            "4",
            "--procs",
            "4",
            "--rate",
            "1",
            "--duration",
            "0",
        ])
        .args(["--workload", "allreduce", "--absent", "2:5", "--quiet"])
        .env("NCCLPROF_DIR", &rdv);
    let mut sim = ncclprof_tests::faults::Proc::spawn(cmd);
    ncclprof_shared::link::ensure_dir(&rdv).unwrap();
    let live = ncclprof_tui::model::source::live(rdv.clone(), Vec::new());
    let mut app = ncclprof_tui::app::App::new(
        ncclprof_tui::model::store::Store::new(64 << 20),
        true,
        "test".into(),
    );
    let mut fx = ncclprof_tui::event_loop::Effects::new(false);
    // What the test checks of the latest hang summary, copied out: the summary borrows the
    // store, which the next turn changes.
    #[derive(Debug)]
    struct Seen {
        not_started: Vec<ncclprof_tui::model::query::NotStarted>,
        /// (ranks_in, ranks, unknown, more)
        counts: (usize, usize, usize, usize),
        /// The named op's function and seq.
        op: (String, u64),
    }
    let mut last: Option<Seen> = None;
    let named = ncclprof_tests::wait_for(Duration::from_secs(30), || {
        ncclprof_tui::event_loop::ingest_turn(&mut app, &live, &mut fx);
        let st = &app.store;
        last = (0..st.comms.len())
            .filter_map(|c| st.hang_summary(c, &st.lane_rows(c)))
            .next()
            .map(|h| Seen {
                not_started: h.not_started.clone(),
                counts: (h.ranks_in, h.ranks, h.unknown, h.more),
                op: (h.op.func.to_string(), h.op.row.seq),
            });
        // Rank 2 named, and each of the three others' op judged hung in turn (their kernels
        // started up to a few ms apart, their summaries come every ~60 ms: the first two can
        // be judged before the third).
        last.as_ref()
            .is_some_and(|h| !h.not_started.is_empty() && h.counts.3 == 2)
    });
    let h = last.expect("no hang seen");
    assert!(named, "no rank named: {h:?}");
    assert_eq!(h.not_started.len(), 1, "{h:?}");
    assert_eq!(h.not_started[0].rank, 2, "{h:?}");
    assert_eq!(h.counts, (3, 4, 0, 2), "{h:?}");
    assert_eq!((h.op.0.as_str(), h.op.1), ("AllReduce", 5), "{h:?}");
    // Its last AllReduce was the one before.
    assert_eq!(h.not_started[0].last.map(|(seq, _)| seq), Some(4), "{h:?}");
    // And the timeline says so.
    app.fit_all();
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(240, 20)).unwrap();
    term.draw(|f| ncclprof_tui::ui::render(f, &app)).unwrap();
    let screen = format!("{}", term.backend());
    assert!(
        screen.lines().any(|l| l.contains("HUNG: AllReduce seq 5")
            && l.contains("on 3 of 4 ranks; not started on rank 2")),
        "{screen}"
    );
    // The Channels view says where each rank waits and how far it got, rank 2 not at all.
    app.view = ncclprof_tui::ui::views::ViewId::Channels;
    term.draw(|f| ncclprof_tui::ui::render(f, &app)).unwrap();
    let screen = format!("{}", term.backend());
    assert!(
        screen.contains("r2   has not started AllReduce seq 5 (its last, seq 4, ended"),
        "{screen}"
    );
    for r in [0, 1, 3] {
        assert!(
            screen
                .lines()
                .any(|l| l.contains(&format!("r{r}   AllReduce seq 5 · running"))
                    && l.contains("· oldest open step: ch ")
                    && l.contains(", waiting for ")
                    && l.contains("steps done per channel")),
            "rank {r}:\n{screen}"
        );
    }
    sim.signal(libc::SIGTERM);
    assert_eq!(sim.wait(Duration::from_secs(10)), Some(0));
}
