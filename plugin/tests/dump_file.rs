//! `NCCL_PROFILE_DUMP_FILE`: the last finalize writes a Chrome-trace snapshot atomically.

mod common;

#[test]
fn last_finalize_writes_a_valid_chrome_trace() {
    common::ten_collectives_then_dump(&[], std::time::Duration::ZERO);
}
