//! The fake NCCL host drives the real plugin through `ncclProfiler_v3`; the stream a viewer
//! receives is checked against the host's ground truth.

#[test]
fn stream_matches_truth_through_v3() {
    let mut run = ncclprof_tests::e2e::run(3, |_| {});
    ncclprof_tests::e2e::check(&mut run);
    assert_eq!(run.truth.api, 3);
}
