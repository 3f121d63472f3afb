//! The fake NCCL host drives the real plugin through `ncclProfiler_v6`; the stream a viewer
//! receives is checked against the host's ground truth.

#[test]
fn stream_matches_truth_through_v6() {
    let mut run = ncclprof_tests::e2e::run(6, |_| {});
    ncclprof_tests::e2e::check(&mut run);
    assert_eq!(run.truth.api, 6);
}
