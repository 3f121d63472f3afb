//! Bad input from NCCL (issue 6): NULL and reused strings, garbage/stale/foreign parents,
//! unknown types and states, channel ids ≥ 64, more than 8 open steps, stop without start,
//! double stop, events after finalize; and panic injection at the FFI boundary. Each scenario
//! runs in its own `ncclprof-fault-driver` process against the real plugin `.so`.

use std::sync::Mutex;
use std::time::Duration;

use ncclprof_tests::faults::scenario;
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

fn bad_input() -> Value {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let (r, _) = scenario(
        "bad-input",
        &t.path().join("rdv"),
        &[("NCCLPROF_COMPLETION_TIMEOUT_MS", "30")],
        Duration::from_secs(30),
    );
    eprintln!("bad-input report: {r}");
    r
}

#[test]
fn bad_input_never_crashes_and_is_counted() {
    let r = bad_input();
    assert_eq!(r["survived"], true);
    assert_eq!(r["stream_complete"], true, "{r}");
    assert_eq!(
        r["disabled"], false,
        "bad input must not disable the plugin"
    );
    // NULL strings: recorded, no string ids.
    assert_eq!(r["null_strings_record"], serde_json::json!([0, 0, 0, 0]));
    // Garbage parent: kept as a value, flagged unknown, never dereferenced.
    assert_eq!(r["garbage_parent_flags"][1], true, "{r}");
    // Foreign PXN ProxyOp (other pid, foreign context and parent): a foreign record, no comm.
    assert_eq!(r["pxn_handle_nonnull"], true);
    assert_eq!(r["pxn_record_foreign"][0], true, "{r}");
    assert_eq!(r["pxn_record_foreign"][1], u64::from(u32::MAX));
    // Stale graph-replay parent: the parent value is kept for the viewer to link.
    for s in r["stale_parent"].as_array().unwrap() {
        assert_eq!(s[0], true, "{r}");
    }
    // Unknown types: no handle. Unknown states: ignored, the event still completes.
    assert_eq!(r["unknown_type_handle_null"], true);
    assert_eq!(r["all_bits_type_handle_null"], true);
    assert_eq!(r["unknown_state_coll_seen"], true);
    // Channel ids ≥ 64 are carried, not used as unchecked indices.
    assert_eq!(r["channel_200_proxyop"], true);
    assert_eq!(r["channel_255_kernelch"], true);
    // 20 steps open at once under one op: the 10 stopped ones are records.
    assert_eq!(r["steps_of_20_open"], 10);
    // Stop/state without start (3 garbage handles × stop + state) and double stops: counted.
    let unknown = r["dropped"]["unknown_handle"].as_u64().unwrap();
    assert!(unknown >= 6, "unknown handles counted: {unknown}");
    assert_eq!(
        r["double_stop_coll_records"], 1,
        "a double stop makes one record"
    );
    // NULL descriptor: NULL handle.
    assert_eq!(r["null_descr_handle_null"], true);
    // Leaked steps (never stopped, not tracked by their op) are abandoned, counted.
    assert!(r["dropped"]["abandoned"].as_u64().unwrap() >= 1, "{r}");
}

/// The string interner is keyed by the pointer value and checks the text's first bytes: a
/// buffer the core reuses for other text is copied again, not shown with its first text.
#[test]
fn reused_string_buffer_shows_the_current_text() {
    let r = bad_input();
    assert_eq!(r["reused_buffer_first"], "BufferOne");
    assert_eq!(r["reused_buffer_second"], "BufferTwo", "{r}");
}

/// Steps still open when their ProxyOp stops (NCCL abandoned them) are counted as
/// `Abandoned`, never lost silently: of 20 steps started (10 stopped), records + drops = 20.
#[test]
fn every_open_step_is_a_record_or_counted() {
    let r = bad_input();
    let recs = r["steps_of_20_open"].as_u64().unwrap();
    let abandoned = r["dropped"]["abandoned"].as_u64().unwrap();
    assert_eq!(recs + abandoned, 20, "{r}");
}

#[test]
fn panic_inside_the_plugin_is_caught_and_later_calls_are_noops() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let (r, stderr) = scenario(
        "panic",
        &t.path().join("rdv"),
        &[("NCCLPROF_TEST_PANIC_ON_UNKNOWN_TYPE", "1")],
        Duration::from_secs(30),
    );
    eprintln!("panic report: {r}");
    assert_eq!(r["survived"], true, "the process continued after the panic");
    assert_eq!(r["before_handle_ok"], true);
    assert_eq!(r["unknown_handle_null"], true);
    assert_eq!(r["later_handle_null"], true, "later calls are no-ops");
    assert_eq!(r["later_recorded"], false);
    assert_eq!(r["counters_disabled"], true, "the viewer is told: {r}");
    assert!(r["finalize_ms"].as_f64().unwrap() < 1000.0);
    // One log line (no logger in v6 init here: it goes to stderr), with the panic message.
    assert_eq!(
        stderr.matches("profiler plugin disabled").count(),
        1,
        "stderr: {stderr}"
    );
    assert!(stderr.contains("fault injection"), "stderr: {stderr}");
    // And the finalize summary, a warning, says the profile stops there.
    assert!(
        stderr.contains("profiling was disabled by an internal error"),
        "stderr: {stderr}"
    );
}
