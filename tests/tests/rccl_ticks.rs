//! RCCL's kernel timer counts device ticks, not ns: with the rate given
//! (`NCCLPROF_GPU_TIMER_HZ`), converted kernel times still land on the host clock.

#[test]
fn tick_based_gpu_timer_is_scaled() {
    // SAFETY: before the plugin's first init in this process.
    unsafe { std::env::set_var("NCCLPROF_GPU_TIMER_HZ", "100000000") };
    let mut run = ncclprof_tests::e2e::run(6, |c| c.gpu_ticks_hz = Some(100_000_000));
    ncclprof_tests::e2e::check(&mut run);
}
