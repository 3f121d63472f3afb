//! A hint that a cache line is about to be written: the capture rings' slots ahead of NCCL's
//! thread (`ring`), and the drain's open Events frame ahead of completion (`history`). Both
//! write records one after another into memory last touched long before (a ring's lap, the
//! history's bound), and the hardware's own prefetchers, which stop at page boundaries and
//! start late, left the writes waiting for their lines.

/// Bring the cache line at `p` close to this core ahead of a write: x86 `PREFETCHT0`
/// (SSE, on every x86_64 CPU; `PREFETCHW`, which asks for ownership, measured the same and
/// is not on every one), aarch64 `PRFM PSTL1KEEP`. A prefetch never faults, even on an
/// unmapped page, so any address will do.
#[inline(always)]
pub fn for_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and does not fault.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a prefetch has no architectural effect and does not fault.
    unsafe {
        core::arch::asm!("prfm pstl1keep, [{}]", in(reg) p, options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}
