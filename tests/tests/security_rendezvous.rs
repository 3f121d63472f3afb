//! Security of the rendezvous and the wire (issue 6): the directory and every socket in it are
//! private (0700, owner-checked before use, refused when another user owns it or it is
//! group/world accessible, on the plugin side and the viewer side); another user's process
//! cannot list, connect, read the stream or plant an entry the viewer trusts; frame sizes are
//! bounded; a protocol mismatch is refused politely with a Bye.
//!
//! We run as root: "another user" is uid/gid 65534 (a helper spawned with
//! `CommandExt::uid/gid`, or files `chown`ed to it).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use ncclprof_shared::link::{self, LinkError, ProcessEntry};
use ncclprof_shared::wire::{self, DecodeError, Frame, ViewerMsg};
use ncclprof_tests::faults::{Proc, driver, entry_with_server, scenario, spawn_job};
use ncclprof_tests::{Viewer, wait_for};

static SERIAL: Mutex<()> = Mutex::new(());
const NOBODY: u32 = 65534;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap();
}

#[test]
fn plugin_creates_a_private_dir_entry_and_socket() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let rdv = t.path().join("a/b/rdv");
    let (job, pid) = spawn_job(&rdv, 20, &[]);
    let e = entry_with_server(&rdv, pid);
    let me = link::my_uid();
    assert_eq!(mode(&rdv), 0o700, "rendezvous dir mode");
    assert_eq!(std::fs::metadata(&rdv).unwrap().uid(), me);
    let entry = ProcessEntry::path(&rdv, pid);
    assert_eq!(mode(&entry), 0o600, "entry file mode");
    assert_eq!(e.uid, me);
    let sock = Path::new(&e.server);
    let md = std::fs::symlink_metadata(sock).unwrap();
    assert_eq!(md.uid(), me, "socket owner");
    assert_eq!(
        mode(sock.parent().unwrap()),
        0o700,
        "the socket's directory is private"
    );
    eprintln!(
        "dir {:o}, entry {:o}, socket {:o} in a {:o} dir",
        mode(&rdv),
        mode(&entry),
        mode(sock),
        mode(sock.parent().unwrap())
    );
    drop(job);
}

/// A loose directory is refused by the plugin (no entry, one log line, the job goes on) and by
/// the viewer's `check_dir` / `list_entries`.
#[test]
fn loose_or_foreign_rendezvous_dirs_are_refused_on_both_sides() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (what, m, owner) in [
        ("world-writable", 0o777, None),
        ("group-writable", 0o770, None),
        ("other-readable", 0o705, None),
        ("owned by uid 65534", 0o700, Some(NOBODY)),
    ] {
        let t = tempfile::tempdir().unwrap();
        let rdv = t.path().join("rdv");
        std::fs::create_dir(&rdv).unwrap();
        std::fs::set_permissions(&rdv, std::fs::Permissions::from_mode(m)).unwrap();
        if let Some(u) = owner {
            chown(&rdv, u);
        }
        let (r, stderr) = scenario("init-only", &rdv, &[], Duration::from_secs(20));
        assert_eq!(r["ctx_ok"], true, "{what}: profiling (and the job) goes on");
        assert_eq!(r["entry_exists"], false, "{what}: an entry was published");
        assert!(
            stderr.contains("no viewer can attach") && stderr.contains("refusing"),
            "{what}: no log line: {stderr}"
        );
        assert_eq!(std::fs::read_dir(&rdv).unwrap().count(), 0, "{what}");
        assert_eq!(mode(&rdv), m, "{what}: never silently chmod-ed");
        let e = link::check_dir(&rdv).unwrap_err();
        match owner {
            Some(_) => assert!(
                matches!(e, LinkError::NotOwner { owner: NOBODY, .. }),
                "{e}"
            ),
            None => assert!(matches!(e, LinkError::Permissions { .. }), "{e}"),
        }
        assert!(link::list_entries(&rdv).is_err(), "{what}");
        eprintln!("{what}: plugin log: {}", stderr.trim());
    }
    // A symlink to a private directory is refused too.
    let t = tempfile::tempdir().unwrap();
    let real = t.path().join("real");
    link::ensure_dir(&real).unwrap();
    let l = t.path().join("link");
    std::os::unix::fs::symlink(&real, &l).unwrap();
    assert!(matches!(link::check_dir(&l), Err(LinkError::NotDir { .. })));
    let (r, _) = scenario("init-only", &l, &[], Duration::from_secs(20));
    assert_eq!(r["entry_exists"], false);
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
}

/// A process of another user cannot inject an entry that the viewer trusts.
#[test]
fn entry_files_of_another_user_are_rejected() {
    let t = tempfile::tempdir().unwrap();
    let rdv = t.path().join("rdv");
    link::ensure_dir(&rdv).unwrap();
    let me = std::process::id();
    let fake = ProcessEntry {
        protocol: ncclprof_shared::PROTOCOL_VERSION,
        pid: me,
        start_ticks: link::process_start_ticks(me).unwrap(),
        host: link::hostname(),
        uid: link::my_uid(),
        cmdline: "fake".into(),
        api_version: 6,
        comms: vec![],
        server: "/tmp/evil/socket".into(),
        generation: 0,
    };
    fake.write(&rdv).unwrap();
    let path = ProcessEntry::path(&rdv, me);
    assert!(ProcessEntry::read(&path).is_ok(), "own entry accepted");
    chown(&path, NOBODY);
    let e = ProcessEntry::read(&path).unwrap_err();
    assert!(e.to_string().contains("owned by uid 65534"), "{e}");
    let listed = link::list_entries(&rdv).unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].is_err(), "listed but not trusted");
    // A symlinked entry (pointing at a file of ours) is not trusted either.
    std::fs::remove_file(&path).unwrap();
    let target = t.path().join("elsewhere.json");
    std::fs::write(&target, serde_json::to_vec(&fake).unwrap()).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert!(ProcessEntry::read(&path).is_err(), "symlinked entry");
    // An entry claiming another uid is not connected to.
    let mut other = fake.clone();
    other.uid = NOBODY;
    assert!(matches!(
        link::connect(&other),
        Err(link::ConnectError::NotOwner { .. })
    ));
    // An entry whose "socket" is a regular file is not connected to.
    let mut notsock = fake.clone();
    notsock.server = target.to_string_lossy().into_owned();
    assert!(matches!(
        link::connect(&notsock),
        Err(link::ConnectError::Socket { .. })
    ));
}

/// A viewer run by another user cannot list the directory, plant an entry, connect to the
/// plugin's socket (not even directly, bypassing the viewer's checks) or read the stream.
#[test]
fn another_user_cannot_list_connect_or_plant() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    // The helper binary must be reachable by uid 65534 (tempdirs are 0700).
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let rdv = t.path().join("rdv");
    let (job, pid) = spawn_job(&rdv, 20, &[]);
    let e = entry_with_server(&rdv, pid);
    let mut cmd = Command::new(driver());
    cmd.arg("probe")
        .arg(&rdv)
        .arg(&e.server)
        .arg(pid.to_string())
        .uid(NOBODY)
        .gid(NOBODY)
        .env_remove("NCCLPROF_DIR");
    let mut p = Proc::spawn(cmd);
    let line = p.expect_line("{", Duration::from_secs(20));
    assert_eq!(p.wait(Duration::from_secs(10)), Some(0));
    let r: serde_json::Value = serde_json::from_str(&line).unwrap();
    eprintln!("probe as uid 65534: {r}");
    assert_eq!(r["uid"], NOBODY);
    assert_eq!(r["list_ok"], false, "{r}");
    assert_eq!(r["readdir_ok"], false, "{r}");
    assert_eq!(r["plant_ok"], false, "{r}");
    assert_eq!(r["raw_connect_ok"], false, "{r}");
    assert!(
        r["connect_as_published_err"]
            .as_str()
            .unwrap()
            .contains("belongs to uid"),
        "{r}"
    );
    assert!(r["connect_forged_err"].is_string(), "{r}");
    // The plugin is unharmed: the owner still attaches.
    let mut v = Viewer::attach(&rdv, pid);
    assert!(v.until(Duration::from_secs(5), |g| matches!(
        g.frames.first(),
        Some(Frame::Hello(_))
    )));
    drop(job);
}

/// ViewerMsg::Hello with a wrong protocol: the plugin answers a Bye with a reason and keeps
/// serving matching viewers; the viewer side refuses an entry of another protocol.
#[test]
fn protocol_mismatch_is_refused_politely() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let rdv = t.path().join("rdv");
    let (job, pid) = spawn_job(&rdv, 20, &[]);
    let e = entry_with_server(&rdv, pid);
    let control = ipc_channel::ipc::IpcSender::<ViewerMsg>::connect(e.server.clone()).unwrap();
    let (data_tx, data) = ipc_channel::ipc::bytes_channel().unwrap();
    control
        .send(ViewerMsg::Hello {
            protocol: ncclprof_shared::PROTOCOL_VERSION + 98,
            viewer_pid: std::process::id(),
            uid: link::my_uid(),
            data: data_tx,
            ring: wire::RingOffer::none(),
        })
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while let Ok(b) = data.recv() {
            if tx.send(b).is_err() {
                return;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(10)).expect("an answer");
    match wire::decode(&first) {
        Ok(Frame::Bye(b)) => {
            eprintln!("Bye reason: {}", b.reason);
            assert!(b.reason.contains("protocol mismatch"), "{}", b.reason);
        }
        other => panic!("expected Bye, got {other:?}"),
    }
    // Nothing but the Bye is streamed to the refused viewer.
    std::thread::sleep(Duration::from_millis(200));
    assert!(rx.try_recv().is_err(), "frames after Bye");
    drop(control);
    // A matching viewer attaches afterwards.
    let mut v = Viewer::attach(&rdv, pid);
    assert!(v.until(Duration::from_secs(5), |g| matches!(
        g.frames.first(),
        Some(Frame::Hello(_))
    )));
    drop(v);
    // Viewer side: an entry of another protocol is not connected to.
    let e = entry_with_server(&rdv, pid);
    let mut old = e.clone();
    old.protocol += 1;
    assert!(matches!(
        link::connect(&old),
        Err(link::ConnectError::Version { .. })
    ));
    assert!(wait_for(Duration::from_secs(1), || true));
    drop(job);
}

/// Every size read from the wire is bounded before anything is allocated for it.
#[test]
fn frame_sizes_are_bounded() {
    let big = vec![0u8; wire::MAX_FRAME + 1];
    assert_eq!(
        wire::decode(&big),
        Err(DecodeError::TooLarge(wire::MAX_FRAME + 1))
    );
    // A header declaring 4 GiB with a short body: a length error, no allocation.
    let mut b = wire::encode(&Frame::Bye(wire::Bye { reason: "x".into() })).unwrap();
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(wire::decode(&b), Err(DecodeError::Length { .. })));
    // A postcard body declaring a huge vector length: a body error, not an allocation.
    let mut body = vec![0xff, 0xff, 0xff, 0xff, 0x0f]; // varint u32::MAX strings
    body.extend_from_slice(&[0; 8]);
    let mut f = Vec::new();
    f.extend_from_slice(&wire::MAGIC);
    f.extend_from_slice(&(ncclprof_shared::PROTOCOL_VERSION as u16).to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes()); // Meta
    f.extend_from_slice(&(body.len() as u32).to_le_bytes());
    f.extend_from_slice(&[0; 4]); // reserved
    f.extend_from_slice(&body);
    assert!(matches!(wire::decode(&f), Err(DecodeError::Body { .. })));
    // Encoders never produce an oversized frame.
    let huge = wire::Bye {
        reason: "x".repeat(wire::MAX_FRAME),
    };
    let mut out = Vec::new();
    assert!(wire::encode_msg(wire::FrameKind::Bye, &huge, &mut out).is_err());
}
