//! `NCCL_PROFILE_DUMP_FILE` with a job that idles longer than the history's age bound
//! (`NCCLPROF_HISTORY_MS`) before it finalizes (a checkpoint, an evaluation): the dump still
//! holds what was recorded. The history was aged like a viewer's replay and the dump came out
//! empty (found in review).

mod common;

#[test]
fn a_job_idle_past_the_age_bound_still_dumps_its_events() {
    // The job idles longer than the age bound (300 ms) before it destroys its communicator;
    // the drain's 250 ms summaries trim meanwhile.
    common::ten_collectives_then_dump(
        &[
            ("NCCLPROF_HISTORY_MS", "300"),
            ("NCCLPROF_COMPLETION_TIMEOUT_MS", "100"),
        ],
        std::time::Duration::from_millis(1500),
    );
}
