//! Lifecycle faults (issue 6): finalize while a viewer is attached, with no viewer, and while
//! a send to a stopped viewer is in progress; the library loaded, unloaded and loaded again;
//! the application forks. Each scenario runs in its own `ncclprof-fault-driver` process.

use std::sync::Mutex;
use std::time::Duration;

use ncclprof_tests::faults::scenario;
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

fn run(name: &str) -> Value {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let (r, _) = scenario(name, &t.path().join("rdv"), &[], Duration::from_secs(40));
    eprintln!("{name} report: {r}");
    r
}

fn f(r: &Value, k: &str) -> f64 {
    r[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {r}"))
}

/// The rendezvous entry lists every communicator, however late it comes: it was written
/// once, when the link thread opened its server, so a second communicator never appeared in
/// it, nor the first when the link thread got there before it (a `hang_inflight` test then
/// waited for rank 1's entry in vain, 1 run in 8 under load).
#[test]
fn the_entry_lists_communicators_created_after_it() {
    let r = run("late-comm");
    assert_eq!(r["first_listed"], true, "{r}");
    assert_eq!(r["both_listed"], true, "{r}");
}

#[test]
fn finalize_with_a_viewer_attached_is_prompt_and_loses_nothing() {
    let r = run("finalize-viewer");
    assert!(f(&r, "finalize_ms") < 1000.0, "{r}");
    assert_eq!(r["colls_received"], r["colls_issued"], "{r}");
    assert_eq!(r["steps_received"], r["steps_issued"], "{r}");
    assert_eq!(r["dropped_total"], 0, "{r}");
}

#[test]
fn finalize_without_a_viewer_is_prompt_and_history_replays_later() {
    let r = run("finalize-none");
    assert!(f(&r, "finalize_ms") < 1000.0, "{r}");
    assert_eq!(r["colls_replayed_after"], r["colls_issued"], "{r}");
}

#[test]
fn finalize_while_a_send_blocks_on_a_stopped_viewer_is_bounded() {
    let r = run("finalize-send");
    // The flush wait is bounded (200 ms in lifecycle::finalize) even when the sender thread
    // is stuck in a send to a SIGSTOPped viewer.
    assert!(f(&r, "finalize_ms") < 1000.0, "{r}");
    assert!(f(&r, "max_call_ms") < 1000.0, "NCCL thread blocked: {r}");
    assert!(f(&r, "ops") > 0.0);
}

#[test]
fn load_unload_load_in_one_process() {
    let r = run("reload");
    for k in ["first_ctx_ok", "second_ctx_ok", "third_ctx_ok", "stream_ok"] {
        assert_eq!(r[k], true, "{k}: {r}");
    }
    assert_eq!(r["colls_received"], 200, "{r}");
    assert_eq!(r["colls_after_reload"], 100, "{r}");
}

#[test]
fn fork_child_gets_fresh_state_and_parent_keeps_streaming() {
    let r = run("fork");
    // 0: the inherited context records nothing in the child, the child's own init works,
    // publishes the child's own entry, and a viewer of the child gets the child's events.
    assert_eq!(r["child_code"], 0, "child result bits: {r}");
    assert_eq!(r["parent_streaming_after_fork"], true, "{r}");
    assert!(f(&r, "parent_colls_after_fork") >= 100.0);
    // The child's stop of an event open across the fork did not end it for the parent.
    assert_eq!(r["open_across_fork_end_after_fork"], true, "{r}");
    assert_eq!(r["parent_entry_pid_ok"], true);
}
