//! The real binary's reading of its environment.

use std::process::Command;

/// `NCCLPROF_DIR=` (set, empty) means unset, as for the plugin: the viewer uses its default
/// directory instead of refusing `--dir ""`; `NCCLPROF_MAX_MEMORY=` keeps the default cap.
#[test]
fn empty_variables_are_unset() {
    let t = tempfile::tempdir().unwrap();
    let xdg = t.path().join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    let out = t.path().join("rec.json");
    let o = Command::new(env!("CARGO_BIN_EXE_ncclprof-tui"))
        .args(["record", "--duration", "50ms", "-o"])
        .arg(&out)
        .env("NCCLPROF_DIR", "")
        .env("NCCLPROF_MAX_MEMORY", "")
        .env("XDG_RUNTIME_DIR", &xdg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("recorded "));
    assert!(xdg.join("ncclprof").is_dir(), "its own default, created");
    assert!(out.is_file());
}
