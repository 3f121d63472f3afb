//! A snapshot that hits a full disk mid-write: a clear error, nothing retained is lost, and no
//! half-written file is left as if complete. The "full disk" is RLIMIT_FSIZE (writes past the
//! limit fail with EFBIG, as ENOSPC would), so this file holds one test in its own process.

mod common;

use common::*;
use ncclprof_tui::model::snapshot;

#[test]
fn full_disk_mid_snapshot_is_an_error_and_leaves_nothing_behind() {
    let st = store(&Fixture::default());
    let before = st.retained;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    // SAFETY: ignoring SIGXFSZ and lowering this process's own file-size limit.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: 16 * 1024,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
    let e = snapshot::write(&st, &path).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("snap.json"), "the error names the file: {msg}");
    assert!(
        !path.exists(),
        "no half-written snapshot under the final name"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(leftovers.is_empty(), "temp file left behind: {leftovers:?}");
    assert_eq!(st.retained, before, "nothing held is lost");
    // With room again, the same store writes fine.
    // SAFETY: restoring the limit.
    unsafe {
        let lim = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
    }
    snapshot::write(&st, &path).unwrap();
    assert!(path.exists());
}
