//! Snapshot write → parse back → open round trip, example-plugin dumps with their quirks,
//! snapshot failures, and the live source against a fake plugin process.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::record::{EventRecord, F_END_UNKNOWN, F_SEND};
use ncclprof_tui::app::App;
use ncclprof_tui::model::store::{ProcState, Store};
use ncclprof_tui::model::{open, snapshot};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Every record keyed by (pid, comm hash, rank), sorted, for comparing stores.
fn records(st: &Store) -> Vec<(u32, u64, i32, Vec<EventRecord>)> {
    let mut out = Vec::new();
    for l in &st.lanes {
        let p = &st.procs[l.key.proc];
        let hash = p.comm(l.key.comm).map_or(0, |c| c.comm_hash);
        let mut recs: Vec<EventRecord> = snapshot::lane_records(l)
            .into_iter()
            .map(|(_, mut r)| {
                r.comm = 0; // comm indexes may differ; the hash is the key
                r
            })
            .collect();
        recs.sort_by_key(|r| (r.kind, r.start_ns, r.id, r.sub, r.p[0]));
        out.push((p.pid, hash, l.key.rank, recs));
    }
    out.sort_by_key(|x| (x.0, x.1, x.2));
    out
}

#[test]
fn snapshot_roundtrips_through_open() {
    let f = Fixture {
        drops: 3,
        ..Fixture::default()
    };
    let st = store(&f);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    let s = snapshot::write(&st, &path).unwrap();
    assert_eq!(s.processes, 4);
    assert_eq!(s.events as usize, st.retained);
    assert_eq!(s.dropped, 3);
    // Valid Chrome trace JSON with readable tracks.
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = evs
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"rank 3 · comm world · node-b · pid 103"),
        "{names:?}"
    );
    let colls: Vec<&Value> = evs.iter().filter(|e| e["cat"] == "Coll").collect();
    assert_eq!(colls.len(), 4 * 6);
    let c = colls[0];
    assert_eq!(c["ph"], "X");
    assert_eq!(c["ts"].as_f64().unwrap(), (T0 as f64) / 1000.0);
    assert_eq!(c["dur"].as_f64().unwrap(), 5000.0);
    assert_eq!(c["args"]["Algorithm"], "RING");
    assert_eq!(c["args"]["SeqNum"], 0);
    assert_eq!(v["otherData"]["format"], snapshot::FORMAT);
    assert_eq!(v["otherData"]["dropped"], 3);
    assert_eq!(
        v["otherData"]["hosts"],
        serde_json::json!(["node-a", "node-b"])
    );
    // No temp files left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    let mut back = Store::new(1 << 30);
    let notes = open::load(&mut back, &[path]).unwrap();
    assert!(notes[0].contains("ncclprof snapshot"));
    assert_eq!(records(&back), records(&st));
    assert_eq!(back.dropped(), 3);
    assert!(back.procs.iter().all(|p| p.state == ProcState::Offline));
    assert_eq!(back.comms.len(), 1);
    assert_eq!(back.comms[0].members.len(), 4);
}

#[test]
fn a_hung_jobs_snapshot_shows_what_it_hangs_on_in_perfetto_and_in_open() {
    // A snapshot is what gets sent around at 3 a.m.: it must hold the op a rank is stuck in,
    // not only what completed.
    let f = Fixture {
        hung: Some(2),
        ..Fixture::default()
    };
    let mut st = store(&f);
    let before = st
        .procs
        .iter()
        .find(|p| p.pid == 102)
        .unwrap()
        .open_ops
        .clone();
    assert_eq!(before.len(), 1);
    // The summary is up to 250 ms old: one op it lists completed since, and is a record here.
    let pi = st.procs.iter().position(|p| p.pid == 102).unwrap();
    let lane = st.lanes.iter().find(|l| l.key.proc == pi).unwrap();
    let (_, done) = lane.ops.iter().last().unwrap();
    let mut stale = before[0].clone();
    (stale.id, stale.start, stale.seq) = (done.id, done.start, done.seq);
    st.procs[pi].open_ops.push(stale);
    st.procs[pi].open_total += 1;
    let row = st
        .lane_rows(0)
        .into_iter()
        .find(|r| r.key.proc == pi)
        .unwrap();
    assert_eq!(st.open_ops(0, &row).len(), 1, "the live view drops it too");
    let before = &before;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hung.json");
    let s = snapshot::write(&st, &path).unwrap();
    assert_eq!(
        s.events as usize, st.retained,
        "in-flight spans are not records"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    let hung: Vec<&Value> = evs.iter().filter(|e| e["cat"] == "InFlight").collect();
    assert_eq!(hung.len(), 1, "{hung:?}");
    let h = hung[0];
    assert_eq!(h["name"], "AllReduce (in flight)");
    assert_eq!(h["args"]["SeqNum"], f.seqs);
    assert_eq!(h["args"]["AgeUs"].as_f64().unwrap(), 5_000_000.0);
    // Running since its kernel started, 50 µs after its start (the fixture's).
    assert_eq!(h["args"]["RunningUs"].as_f64().unwrap(), 4_999_950.0);
    assert_eq!(h["dur"].as_f64().unwrap(), 5_000_000.0);
    assert_eq!(h["args"]["StepsDone"], 1);
    assert_eq!(h["args"]["ChannelsDone"], 1);
    // Where it waits: channel 1's step 0, open 4 s (since 1 s into the op).
    assert_eq!(h["args"]["OldestOpenStep"]["Channel"], 1);
    assert_eq!(h["args"]["OldestOpenStep"]["Step"], 0);
    assert_eq!(h["args"]["OldestOpenStep"]["State"], "RecvWait");
    assert_eq!(
        h["args"]["OldestOpenStep"]["OpenUs"].as_f64().unwrap(),
        4_000_000.0
    );
    assert!(h["args"].get("ncclprof").is_none());
    // On rank 2's own lane, beside its completed collectives.
    let lane = evs
        .iter()
        .find(|e| {
            e["ph"] == "M"
                && e["name"] == "process_name"
                && e["args"]["name"].as_str().unwrap().starts_with("rank 2 · ")
        })
        .unwrap();
    assert_eq!(h["pid"], lane["pid"]);

    let mut back = Store::new(1 << 30);
    open::load(&mut back, &[path]).unwrap();
    let after = &back.procs.iter().find(|p| p.pid == 102).unwrap().open_ops;
    assert_eq!(after, before);
    assert_eq!(records(&back), records(&st));
}

#[test]
fn snapshot_failure_is_reported_and_nothing_is_lost() {
    let st = store(&Fixture::default());
    let before = st.retained;
    let e = snapshot::write(&st, std::path::Path::new("/nonexistent-dir/x/snap.json")).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("/nonexistent-dir/x"), "{msg}");
    assert_eq!(st.retained, before);
    // Through the app: the status bar carries the error.
    let mut app = App::new(st, false, String::new());
    app.snapshot_dir = "/nonexistent-dir/x".into();
    let fx = app.update(ncclprof_tui::action::Action::Snapshot);
    ncclprof_tui::event_loop::Effects::default().run(&mut app, fx);
    assert!(matches!(app.last_snapshot, Some(Err(_))));
    let t = render(&app, 200, 10);
    assert!(format!("{}", t.backend()).contains("snapshot FAILED"));
}

#[test]
fn example_plugin_dumps_open_with_quirks() {
    let mut st = Store::new(1 << 30);
    let files = [
        fixture("nccl_prof_12345678_0.json"),
        fixture("nccl_prof_12345678_1.json"),
    ];
    let notes = open::load(&mut st, &files).unwrap();
    assert!(notes[1].contains("1 unreadable lines skipped"), "{notes:?}");
    assert_eq!(st.procs.len(), 2);
    assert_eq!(st.comms.len(), 1);
    let g = &st.comms[0];
    assert_eq!(g.hash, 12345678);
    assert_eq!(g.nranks, 2);
    assert_eq!(g.members.len(), 2);
    let base = open::DUMP_BASE_NS;
    let rows = st.lane_rows(0);
    let ops = |i: usize| st.ops_in(rows[i].lane.unwrap(), 0, u64::MAX);
    let r0 = ops(0);
    let r1 = ops(1);
    assert_eq!(r0.len(), 2);
    assert_eq!(r1.len(), 2);
    // Aligned on seq 0: both start at rank 0's 100 µs.
    assert_eq!(r0[0].start, base + 100_000);
    assert_eq!(r1[0].start, base + 100_000);
    assert_eq!(r0[0].end, base + 200_000);
    // Execution starts at the first kernel channel.
    assert_eq!(r0[0].exec_start, base + 105_000);
    assert_eq!(st.func_of(rows[0].lane.unwrap(), &r0[0]), "AllReduce");
    let d = st.detail(rows[0].lane.unwrap(), &r0[0]);
    assert_eq!(
        (d.seq, d.count, d.dtype.as_str()),
        (0, 262144, "ncclFloat32")
    );
    assert_eq!(
        (d.algo.as_str(), d.proto.as_str(), d.n_channels),
        ("RING", "SIMPLE", 2)
    );
    // Rank 1 arrives 5 µs late at seq 1, which never ended (truncated file): under the
    // straggler floor, so not flagged.
    assert_eq!(r1[1].start, base + 305_000);
    assert!(r1[1].flags & F_END_UNKNOWN != 0);
    let strag = st.stragglers_in(&rows, 0, u64::MAX);
    assert!(strag.is_empty(), "{strag:?}");
    // Kernels: channel 1's stop was never recorded.
    let l0 = rows[0].lane.unwrap();
    let ks = st.kernels_of(l0, &r0[0]);
    assert_eq!(ks.len(), 2);
    assert_eq!((ks[0].channel, ks[0].end - ks[0].start), (0, 85_000));
    assert_eq!(ks[1].end, ks[1].start);
    assert!(ks[1].flags & F_END_UNKNOWN != 0);
    // Proxy op (Schedule + Progress) and its step with three phases.
    let po = st.proxy_ops_in(l0, 0, u64::MAX);
    assert_eq!(po.len(), 1);
    assert_eq!(po[0].start, base + 106_000);
    assert_eq!(po[0].in_progress, base + 107_000);
    assert_eq!(po[0].end, base + 180_000);
    assert!(po[0].flags & F_SEND != 0);
    assert_eq!(po[0].peer, 1);
    let br = st.step_breakdown(l0, 0, u64::MAX);
    let (ph, n) = br[&(0, 1, true)];
    assert_eq!(n, 1);
    assert_eq!(ph.map(|p| p.1), [2_000, 40_000, 20_000]);
    // API calls: ts 0.0 begins repaired from the child; unquoted values parsed.
    let other: Vec<EventRecord> = st.lanes[l0].other.iter().map(|(_, r)| *r).collect();
    let api: Vec<&EventRecord> = other
        .iter()
        .filter(|r| r.kind == EventKind::CollApi as u8)
        .collect();
    assert_eq!(api.len(), 2);
    assert_eq!(api[0].start_ns, base + 100_000);
    assert_eq!(st.procs[0].string(api[0].strings()[1]), "ncclFloat32");
    // All views render offline.
    let mut app = App::new(st, false, "files".into());
    app.fit_all();
    for v in ncclprof_tui::ui::views::ViewId::ALL {
        app.view = v;
        render(&app, 100, 20);
    }
    app.view = ncclprof_tui::ui::views::ViewId::Timeline;
    insta::assert_snapshot!("example_dump_timeline", render(&app, 100, 12).backend());
}

#[test]
fn rejects_unknown_files_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.txt");
    std::fs::write(&p, "hello").unwrap();
    let e = open::load(&mut Store::new(1 << 20), &[p]).unwrap_err();
    assert!(e.to_string().contains("neither an ncclprof snapshot"));
    let e = open::load(&mut Store::new(1 << 20), &[dir.path().join("missing.json")]).unwrap_err();
    assert!(e.to_string().contains("cannot read"));
}

mod fake_plugin {
    use super::*;
    use ipc_channel::ipc::IpcOneShotServer;
    use ncclprof_shared::link::{self, ProcessEntry};
    use ncclprof_shared::wire::{Frame, MaskAck, ViewerMsg, encode};

    /// A fake plugin process (this test process) publishing an entry and streaming the
    /// fixture's rank-0 frames, answering SetMask with MaskAck.
    pub fn start(dir: &std::path::Path) -> std::thread::JoinHandle<Vec<u32>> {
        let (server, name) = IpcOneShotServer::<ViewerMsg>::new().unwrap();
        let me = std::process::id();
        ProcessEntry {
            protocol: ncclprof_shared::PROTOCOL_VERSION,
            pid: me,
            start_ticks: link::process_start_ticks(me).unwrap(),
            host: "node-a".into(),
            uid: link::my_uid(),
            cmdline: "fake".into(),
            api_version: 6,
            comms: vec![],
            server: name,
            generation: 0,
        }
        .write(dir)
        .unwrap();
        std::thread::spawn(move || {
            let (rx, first) = server.accept().unwrap();
            let ViewerMsg::Hello { data, .. } = first else {
                panic!("expected Hello");
            };
            for fr in frames(&Fixture::default(), 0) {
                data.send(&encode(&fr).unwrap()).unwrap();
            }
            let mut got = Vec::new();
            // Answer control messages until the viewer asks to stop.
            while let Ok(m) = rx.try_recv_timeout(Duration::from_secs(10)) {
                match m {
                    ViewerMsg::SetMask(m) => {
                        got.push(m);
                        let ack = Frame::MaskAck(MaskAck {
                            mask: m,
                            active: true,
                            requested: m,
                        });
                        data.send(&encode(&ack).unwrap()).unwrap();
                    }
                    ViewerMsg::Stop => break,
                    _ => {}
                }
            }
            got
        })
    }
}

#[test]
fn live_source_connects_streams_and_controls() {
    use ncclprof_tui::event_loop::Effects;
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("rdv");
    ncclprof_shared::link::ensure_dir(&dir).unwrap();
    let plugin = fake_plugin::start(&dir);
    let live = ncclprof_tui::model::source::live(dir.clone(), Vec::new());
    let mut app = App::new(Store::new(1 << 30), true, String::new());
    let mut fx = Effects::default();
    ingest_until(&mut app, &live, &mut fx, |app, fx| {
        app.store.retained >= 78 && !fx.controls.is_empty()
    });
    assert_eq!(app.store.procs.len(), 1);
    assert_eq!(app.store.procs[0].host, "node-a");
    assert_eq!(app.store.comms[0].name, "world");
    // Toggle a kind: sent, pending until the ack arrives.
    app.view = ncclprof_tui::ui::views::ViewId::Mask;
    let effects = app.update(ncclprof_tui::action::Action::MaskToggle);
    fx.run(&mut app, effects);
    assert!(!app.store.procs[0].acked);
    let want = ncclprof_shared::mask::DEFAULT ^ 1;
    ingest_until(&mut app, &live, &mut fx, |app, _| {
        app.store.procs[0].acked && app.store.procs[0].mask == want
    });
    // Stop: the fake plugin leaves; the stream closes and the process shows as ended.
    let effects = app.update(ncclprof_tui::action::Action::StartStop);
    fx.run(&mut app, effects);
    assert_eq!(plugin.join().unwrap(), vec![want]);
    ingest_until(&mut app, &live, &mut fx, |app, _| {
        app.store.procs[0].state != ProcState::Live
    });
    assert!(matches!(app.store.procs[0].state, ProcState::Ended(_)));
    assert!(fx.controls.is_empty());
}

/// Ingest until `done` holds, for at most 10 s.
fn ingest_until(
    app: &mut App,
    live: &ncclprof_tui::model::source::Live,
    fx: &mut ncclprof_tui::event_loop::Effects,
    done: impl Fn(&App, &ncclprof_tui::event_loop::Effects) -> bool,
) {
    let t0 = Instant::now();
    while !done(app, fx) {
        ncclprof_tui::event_loop::ingest_turn(app, live, fx);
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out; errors: {:?}",
            app.store.errors
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A viewer given no directory also watches the other defaults (`link::default_dirs`): a job
/// that published in one of them (a batch job without XDG_RUNTIME_DIR, seen from an SSH login
/// with it) is found, also when it creates that directory after the viewer started; a default
/// nobody created is not an error; each bad one is reported once, as an also-watched default;
/// a process listed twice (a directory reached by two paths) is connected once.
#[test]
fn live_source_finds_a_process_in_any_watched_directory() {
    use ncclprof_tui::event_loop::Effects;
    use ncclprof_tui::model::source::{POLL, live};
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let own = t.path().join("own");
    let later = t.path().join("later");
    let loose = t.path().join("loose");
    let file = t.path().join("file");
    ncclprof_shared::link::ensure_dir(&own).unwrap();
    std::fs::create_dir(&loose).unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(&file, b"").unwrap();
    let live = live(
        own.clone(),
        vec![
            later.clone(),
            loose.clone(),
            file.clone(),
            own.join("../later"),
        ],
    );
    let mut app = App::new(Store::new(1 << 30), true, String::new());
    let mut fx = Effects::default();
    // The first polls: the two bad defaults reported, `later` (missing) not.
    ingest_until(&mut app, &live, &mut fx, |app, _| {
        app.store.errors.len() >= 2
    });
    std::thread::sleep(POLL * 2);
    ncclprof_tui::event_loop::ingest_turn(&mut app, &live, &mut fx);
    // The job starts now and creates its directory.
    ncclprof_shared::link::ensure_dir(&later).unwrap();
    let plugin = fake_plugin::start(&later);
    ingest_until(&mut app, &live, &mut fx, |app, fx| {
        app.store.retained >= 78 && !fx.controls.is_empty()
    });
    std::thread::sleep(POLL * 2);
    ncclprof_tui::event_loop::ingest_turn(&mut app, &live, &mut fx);
    assert_eq!(app.store.procs.len(), 1, "connected once");
    assert_eq!(app.store.procs[0].host, "node-a");
    // Reported once each, although the two messages alternate at every poll.
    let errors: Vec<&String> = app.store.errors.iter().collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    for (dir, why) in [(&loose, "refusing"), (&file, "not a directory")] {
        assert!(
            errors.iter().any(|e| e.starts_with("also-watched default")
                && e.contains(&dir.display().to_string())
                && e.contains(why)),
            "{errors:?}"
        );
    }
    let effects = app.update(ncclprof_tui::action::Action::StartStop);
    fx.run(&mut app, effects);
    assert!(plugin.join().unwrap().is_empty());
}

/// The viewer's own directory, unlike the other defaults, is reported when it is gone.
#[test]
fn live_source_reports_its_own_directory_missing() {
    let t = tempfile::tempdir().unwrap();
    let gone = t.path().join("gone");
    let live = ncclprof_tui::model::source::live(gone.clone(), Vec::new());
    let mut app = App::new(Store::new(1 << 30), true, String::new());
    let mut fx = ncclprof_tui::event_loop::Effects::default();
    ingest_until(&mut app, &live, &mut fx, |app, _| {
        !app.store.errors.is_empty()
    });
    let e = &app.store.errors[0];
    assert!(e.contains(&gone.display().to_string()), "{e}");
}

#[test]
fn record_writes_a_snapshot_headlessly() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("rdv");
    ncclprof_shared::link::ensure_dir(&dir).unwrap();
    let out = t.path().join("rec.json");
    let g = ncclprof_tui::cli::Global {
        max_memory: 1 << 30,
        no_color: true,
    };
    // Empty directory: still a valid (empty) snapshot.
    let line = ncclprof_tui::commands::record(
        &g,
        ncclprof_tui::cli::RecordArgs {
            duration: Duration::from_millis(200),
            output: out.clone(),
            dir: Some(dir.clone()),
        },
    )
    .unwrap();
    assert!(
        line.starts_with("recorded 0 processes, 0 events, 0 drops"),
        "{line}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["otherData"]["format"], snapshot::FORMAT);
    // A missing directory is made, private, as `live` makes it: the viewer may start first.
    let missing = t.path().join("missing");
    ncclprof_tui::commands::record(
        &g,
        ncclprof_tui::cli::RecordArgs {
            duration: Duration::from_millis(10),
            output: out.clone(),
            dir: Some(missing.clone()),
        },
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&missing).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    // A directory that is not private is refused with the reason.
    let open = t.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = ncclprof_tui::commands::record(
        &g,
        ncclprof_tui::cli::RecordArgs {
            duration: Duration::from_millis(10),
            output: out,
            dir: Some(open),
        },
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("cannot record from"), "{e:#}");
}

#[test]
fn reconnects_when_a_process_republishes_and_keeps_no_duplicates() {
    use ipc_channel::ipc::IpcOneShotServer;
    use ncclprof_shared::link::{self, ProcessEntry};
    use ncclprof_shared::wire::{Frame, ViewerMsg, encode};
    use ncclprof_tui::event_loop::{Effects, ingest_turn};

    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("rdv");
    link::ensure_dir(&dir).unwrap();
    let me = std::process::id();
    let publish = |generation: u64| {
        let (server, name) = IpcOneShotServer::<ViewerMsg>::new().unwrap();
        ProcessEntry {
            protocol: ncclprof_shared::PROTOCOL_VERSION,
            pid: me,
            start_ticks: link::process_start_ticks(me).unwrap(),
            host: "node-a".into(),
            uid: link::my_uid(),
            cmdline: "fake".into(),
            api_version: 6,
            comms: vec![],
            server: name,
            generation,
        }
        .write(&dir)
        .unwrap();
        server
    };
    let f = Fixture::default();
    let all = frames(&f, 0);
    let server = publish(0);
    let plugin = std::thread::spawn(move || {
        // First viewer: everything, then drop it.
        let (rx, first) = server.accept().unwrap();
        let ViewerMsg::Hello { data, .. } = first else {
            panic!()
        };
        for fr in &all {
            data.send(&encode(fr).unwrap()).unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        drop(data);
        drop(rx);
        all
    });
    let live = ncclprof_tui::model::source::live(dir.clone(), Vec::new());
    let mut app = App::new(Store::new(1 << 30), true, String::new());
    let mut fx = Effects::default();
    ingest_until(&mut app, &live, &mut fx, |app, _| {
        app.store
            .procs
            .first()
            .is_some_and(|p| p.state != ProcState::Live)
    });
    let first_count = app.store.retained;
    let all = plugin.join().unwrap();
    // Republish; the second viewer gets the history again plus one new op.
    let server = publish(1);
    let plugin = std::thread::spawn(move || {
        let (_rx, first) = server.accept().unwrap();
        let ViewerMsg::Hello { data, .. } = first else {
            panic!()
        };
        for fr in &all {
            data.send(&encode(fr).unwrap()).unwrap();
        }
        let newer = EventRecord {
            id: 99_999,
            start_ns: T0 + 100 * MS,
            end_ns: T0 + 101 * MS,
            comm: 0,
            rank: 0,
            kind: EventKind::Coll as u8,
            ..Default::default()
        };
        data.send(&encode(&Frame::Events(vec![newer].into())).unwrap())
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
    });
    ingest_until(&mut app, &live, &mut fx, |app, _| {
        app.store.retained > first_count
    });
    std::thread::sleep(Duration::from_millis(100));
    ingest_turn(&mut app, &live, &mut fx);
    assert_eq!(app.store.retained, first_count + 1);
    assert_eq!(app.store.procs.len(), 1);
    plugin.join().unwrap();
}

#[test]
fn background_snapshot_completes_while_the_viewer_goes_on() {
    use ncclprof_tui::event_loop::Effects;
    let dir = tempfile::tempdir().unwrap();
    let mut app = App::new(store(&Fixture::default()), true, String::new());
    app.snapshot_dir = dir.path().to_path_buf();
    app.fixed_snapshot_name = Some("bg.json".into());
    let mut fx = Effects::new(true);
    let effects = app.update(ncclprof_tui::action::Action::Snapshot);
    fx.run(&mut app, effects);
    assert!(app.message.as_deref().unwrap().contains("background"));
    // A second request while one is being written is refused, not queued.
    let effects = app.update(ncclprof_tui::action::Action::Snapshot);
    fx.run(&mut app, effects);
    let t0 = Instant::now();
    while !fx.poll(&mut app) {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(5));
    }
    let p = dir.path().join("bg.json");
    assert_eq!(app.last_snapshot, Some(Ok(p.clone())));
    let mut back = Store::new(1 << 30);
    open::load(&mut back, &[p]).unwrap();
    assert_eq!(records(&back), records(&app.store));
    // Waiting at exit.
    let effects = app.update(ncclprof_tui::action::Action::Snapshot);
    fx.run(&mut app, effects);
    fx.finish(&mut app);
    assert!(matches!(app.last_snapshot, Some(Ok(_))));
}
