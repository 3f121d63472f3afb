//! Viewer faults against a job running at full speed (issue 6): a viewer SIGKILLed, SIGSTOPped
//! for 3 s, slower than the stream, and restarted 100 times. The plugin must drop and count,
//! never block NCCL's threads, keep memory bounded and let a new viewer attach cleanly; a
//! rank process that dies mid-stream ends the viewer's stream, its entry reads as dead and
//! the viewer keeps what it received.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ncclprof_shared::link::{self, ProcessEntry};
use ncclprof_shared::wire::{self, DropReason, Frame};
use ncclprof_tests::faults::{Proc, driver, plugin, rss_kb};
use ncclprof_tests::{Viewer, wait_for};

static SERIAL: Mutex<()> = Mutex::new(());

fn job(rdv: &Path) -> (Proc, u32) {
    let mut cmd = Command::new(driver());
    cmd.arg("job")
        .arg(plugin())
        .arg("45")
        .env("NCCLPROF_DIR", rdv)
        .env("NCCL_PROFILE_EVENT_MASK", "0x7fff")
        // Each of the 100 viewers gets the history replayed: keep it at 20k records (1.9 MB).
        .env("NCCLPROF_HISTORY_EVENTS", "20000");
    let p = Proc::spawn(cmd);
    let l = p.expect_line("ready", Duration::from_secs(20));
    let pid = l["ready ".len()..].parse().unwrap();
    (p, pid)
}

fn helper_viewer(rdv: &Path, pid: u32, mode: &str) -> Proc {
    let mut cmd = Command::new(driver());
    cmd.arg("view").arg(rdv).arg(pid.to_string()).arg(mode);
    let p = Proc::spawn(cmd);
    p.expect_line("hello", Duration::from_secs(10));
    p
}

fn attach_cleanly(rdv: &Path, pid: u32) -> Viewer {
    let mut v = Viewer::attach(rdv, pid);
    assert!(
        v.until(Duration::from_secs(5), |g| {
            matches!(g.frames.first(), Some(Frame::Hello(_)))
                && g.frames.iter().any(|f| matches!(f, Frame::Events(_)))
        }),
        "a new viewer did not get Hello then Events: {:?}",
        v.got.frames.iter().take(3).collect::<Vec<_>>()
    );
    v
}

#[test]
fn viewer_killed_stopped_slow_and_restarted_100_times() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let rdv = t.path().join("rdv");
    let (mut job, pid) = job(&rdv);
    std::thread::sleep(Duration::from_millis(1000));
    let rss_start = rss_kb(pid).unwrap();

    // 1. SIGKILL an attached viewer; a new one attaches cleanly.
    let v = helper_viewer(&rdv, pid, "read");
    std::thread::sleep(Duration::from_millis(300));
    v.signal(libc::SIGKILL);
    drop(v);
    drop(attach_cleanly(&rdv, pid));

    // 2. SIGSTOP an attached viewer for 3 s (its socket fills, the plugin's sender blocks).
    let v = helper_viewer(&rdv, pid, "read");
    v.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(3));
    v.signal(libc::SIGCONT);
    std::thread::sleep(Duration::from_millis(200));
    drop(v);
    let mut after_stop = attach_cleanly(&rdv, pid);
    after_stop.until(Duration::from_secs(2), |g| g.last_counters().is_some());
    let slow_after_stop = after_stop
        .got
        .last_counters()
        .map(|c| c.dropped_for(DropReason::ViewerSlow))
        .unwrap();
    drop(after_stop);

    // 3. A viewer slower than the stream (20 ms per frame) for 2 s.
    let v = helper_viewer(&rdv, pid, "slow");
    std::thread::sleep(Duration::from_secs(2));
    drop(v);

    // 4. 100 viewers in a row, each attaching cleanly (Hello first, then a Meta or Events).
    let t100 = Instant::now();
    for i in 0..100 {
        let mut v = Viewer::attach(&rdv, pid);
        assert!(
            v.until(Duration::from_secs(5), |g| g.frames.len() >= 2),
            "viewer {i} got no stream"
        );
        assert!(matches!(v.got.frames[0], Frame::Hello(_)), "viewer {i}");
    }
    let restarts_s = t100.elapsed().as_secs_f64();
    let mut last = attach_cleanly(&rdv, pid);
    assert!(last.until(Duration::from_secs(2), |g| g.last_counters().is_some()));
    let c = last.got.last_counters().unwrap();
    drop(last);
    let rss_end = rss_kb(pid).unwrap();

    job.close_stdin();
    let report = job.expect_line("{", Duration::from_secs(20));
    assert_eq!(job.wait(Duration::from_secs(10)), Some(0));
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    eprintln!(
        "job report: {r}\nrss start {rss_start} kB end {rss_end} kB; 100 restarts in {restarts_s:.2} s; \
         viewer-slow drops after SIGSTOP {slow_after_stop}; final counters {c:?}"
    );
    // NCCL's thread was never blocked by a viewer (the SIGSTOP lasted 3 s).
    let max_call = r["max_call_ms"].as_f64().unwrap();
    assert!(max_call < 1000.0, "slowest plugin call {max_call} ms");
    assert!(r["finalize_ms"].as_f64().unwrap() < 1000.0, "{r}");
    // Drops are counted, by reason; the stream was never silent about them.
    assert!(
        c.dropped_for(DropReason::ViewerSlow) >= slow_after_stop,
        "counters are monotonic"
    );
    // Memory stays bounded: history, frame queue and tables are all capped.
    let growth_mb = (rss_end as f64 - rss_start as f64) / 1024.0;
    assert!(growth_mb < 160.0, "RSS grew {growth_mb:.0} MiB");
}

#[test]
fn rank_process_dying_mid_stream_ends_the_stream_and_the_viewer_keeps_its_data() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let rdv = t.path().join("rdv");
    let (job, pid) = job(&rdv);
    let path = ProcessEntry::path(&rdv, pid);
    let mut entry = None;
    assert!(wait_for(Duration::from_secs(5), || {
        entry = ProcessEntry::read(&path)
            .ok()
            .filter(|e| !e.server.is_empty());
        entry.is_some()
    }));
    let entry = entry.unwrap();
    assert!(entry.is_alive());
    let mut conn = link::connect(&entry).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut records = 0usize;
        loop {
            match conn.data.recv() {
                Ok(b) => {
                    if let Ok(Frame::Events(r)) = wire::decode(&b) {
                        records += r.len();
                        let _ = tx.send(records);
                    }
                }
                Err(e) => return (records, format!("{e:?}")),
            }
        }
    });
    let mut seen = 0;
    while seen < 10_000 {
        seen = rx.recv_timeout(Duration::from_secs(5)).expect("records");
    }
    let killed = Instant::now();
    job.signal(libc::SIGKILL);
    // The viewer's receive fails once the process is gone.
    let (kept, err) = reader.join().unwrap();
    let noticed = killed.elapsed();
    drop(job);
    eprintln!("stream ended {noticed:?} after SIGKILL ({err}); viewer kept {kept} records");
    assert!(noticed < Duration::from_secs(5));
    assert!(kept >= seen, "the viewer keeps what it received");
    // The entry stays on disk but reads as dead.
    let stale = ProcessEntry::read(&path).unwrap();
    assert!(
        !stale.is_alive(),
        "a dead process's entry must read as not alive"
    );
    let listed = link::list_entries(&rdv).unwrap();
    assert!(
        listed
            .iter()
            .flatten()
            .all(|e| e.pid != pid || !e.is_alive())
    );
}

#[test]
fn a_second_recorder_names_the_process_another_viewer_holds() {
    // One viewer per process at a time; a second `record` (seen on a real-NCCL run) said
    // "recorded 0 processes" and nothing else.
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let rdv = dir.path().join("rdv");
    let (_job, pid) = job(&rdv);
    let _first = attach_cleanly(&rdv, pid);
    let global = ncclprof_tui::cli::Global {
        max_memory: 64 << 20,
        no_color: true,
    };
    let args = ncclprof_tui::cli::RecordArgs {
        duration: Duration::from_millis(1500),
        output: dir.path().join("second.json"),
        dir: Some(rdv.clone()),
    };
    let line = ncclprof_tui::commands::record(&global, args).expect("record writes a snapshot");
    assert!(
        line.contains(&format!(
            "not recorded: 1 process attached to another viewer (pid {pid})"
        )),
        "{line}"
    );
}
