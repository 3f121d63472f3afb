//! Shared helpers: locating (or building) the do-nothing plugin.
#![allow(dead_code)]

use ncclprof_sim::SimConfig;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const LIB: &str = "libnccl_profiler_noop.so";

/// Path of `libnccl_profiler_noop.so`, building it if needed.
pub fn noop_plugin() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut candidates = Vec::new();
        if let Ok(t) = std::env::var("CARGO_TARGET_DIR") {
            candidates.push(PathBuf::from(t).join("debug").join(LIB));
        }
        candidates.push(root.join("target/debug").join(LIB));
        let own = root.join("target/sim-test-noop");
        candidates.push(own.join("debug").join(LIB));
        if let Some(p) = candidates.iter().find(|p| p.exists()) {
            return p.clone();
        }
        // build it into a private target dir, so the outer cargo's lock is not needed
        let st = Command::new(env!("CARGO"))
            .args(["build", "-p", "ncclprof-noop-plugin", "--target-dir"])
            .arg(&own)
            .current_dir(&root)
            .status()
            .expect("run cargo build -p ncclprof-noop-plugin");
        assert!(st.success(), "building the noop plugin failed");
        let p = own.join("debug").join(LIB);
        assert!(p.exists(), "{} missing after build", p.display());
        p
    })
    .clone()
}

/// A small, fast configuration against the noop plugin with every event enabled.
pub fn small() -> SimConfig {
    let mut c = SimConfig::default_for(noop_plugin());
    c.ranks = 4;
    c.iterations = 2;
    c.mask = 0x7fff;
    c.sim_exe = Some(PathBuf::from(env!("CARGO_BIN_EXE_ncclprof-sim")));
    c
}
