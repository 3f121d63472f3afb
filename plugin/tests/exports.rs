//! The library exports exactly the six profiler tables and the two example-plugin control
//! functions, and is marked NODELETE so `dlclose` cannot unmap code under our threads.

mod common;

use std::process::Command;

#[test]
fn exports_only_the_intended_symbols_and_is_nodelete() {
    let so = common::plugin_path();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output();
    let Ok(out) = out else {
        eprintln!("nm not available; skipping the symbol check");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        vec![
            "exampleProfilerStart",
            "exampleProfilerStop",
            "ncclProfiler_v1",
            "ncclProfiler_v2",
            "ncclProfiler_v3",
            "ncclProfiler_v4",
            "ncclProfiler_v5",
            "ncclProfiler_v6",
        ]
    );
    // The tables are data objects (NCCL dlsym's them as structs), the controls functions.
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 3 && f[2].starts_with("ncclProfiler_v") {
            assert!(matches!(f[1], "D" | "d" | "R" | "r"), "{l}");
        }
    }
    if let Ok(dynamic) = Command::new("readelf").arg("-d").arg(&so).output() {
        let d = String::from_utf8_lossy(&dynamic.stdout);
        assert!(
            d.contains("NODELETE"),
            "library not linked -z nodelete:\n{d}"
        );
    }
}
