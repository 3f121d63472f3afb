//! Host timestamps. NCCL's threads read a raw counter (the TSC on x86_64, the virtual counter
//! `CNTVCT_EL0` on aarch64: ~10 ns, no syscall); the drain thread converts raw values to
//! `CLOCK_MONOTONIC` ns with a calibration it refreshes, so every process on the host lands on
//! the same clock. Where the counter is not invariant (no `constant_tsc`/`nonstop_tsc`) or
//! `NCCLPROF_CLOCK=monotonic`, raw values *are* `CLOCK_MONOTONIC` ns (`clock_gettime`, ~25 ns).

use std::sync::atomic::{AtomicBool, Ordering};

use ncclprof_shared::clock::monotonic_ns;

/// Whether raw timestamps are counter ticks (true) or already monotonic ns (false).
static USE_COUNTER: AtomicBool = AtomicBool::new(false);

/// Read the raw timestamp (hot path).
#[inline(always)]
pub fn now_raw() -> u64 {
    if USE_COUNTER.load(Ordering::Relaxed) {
        counter()
    } else {
        monotonic_ns()
    }
}

/// Whether raw timestamps are counter reads ([`counter`]), not `clock_gettime`'s. NCCL's
/// most frequent calls take their short paths only then (`guard::short_paths`): a
/// `clock_gettime` is a call, and a call anywhere in a short path costs each of its calls
/// the saving and restoring of six registers (BENCHMARKS.md §1, "Short paths without a
/// call").
#[inline(always)]
pub fn counter_in_use() -> bool {
    USE_COUNTER.load(Ordering::Relaxed)
}

/// Read the counter itself: the raw timestamp where [`counter_in_use`] says so (else a
/// value on another scale: never recorded).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn counter() -> u64 {
    // SAFETY: rdtsc is available on every x86_64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub fn counter() -> u64 {
    let v: u64;
    // SAFETY: CNTVCT_EL0 is readable from EL0 on Linux (the kernel enables it for the vDSO).
    unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
    v
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
pub fn counter() -> u64 {
    monotonic_ns()
}

/// Whether this machine's counter runs at a constant rate through power states.
fn counter_is_invariant() -> bool {
    if cfg!(target_arch = "aarch64") {
        return true; // the generic timer is architecturally constant-rate
    }
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// Converts raw timestamps to monotonic ns. Owned by the drain thread.
#[derive(Debug, Clone)]
pub struct Calibration {
    counter: bool,
    /// Anchor pair (raw, ns) and the slope in ns per raw tick.
    anchor_raw: u64,
    anchor_ns: u64,
    ns_per_tick: f64,
    /// `ns_per_tick` in 32.32 fixed point: the drain converts every record, and an integer
    /// multiply-shift is several times cheaper than the float round trip.
    /// Signed, so that the conversion's product is one signed widening multiply (a signed
    /// tick difference by an unsigned slope took three); slopes are far below 2^31 ns.
    ns_per_tick_q32: i64,
    /// The oldest sample kept, to measure the slope over a long baseline.
    base_raw: u64,
    base_ns: u64,
}

/// One (raw, monotonic ns) pair, taken with the raw reads bracketing the clock_gettime.
fn sample() -> (u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..5 {
        let a = counter();
        let ns = monotonic_ns();
        let b = counter();
        let gap = b.wrapping_sub(a);
        if gap < best.2 {
            best = (a + gap / 2, ns, gap);
        }
    }
    (best.0, best.1)
}

impl Calibration {
    /// Choose the clock source and take the initial calibration (spins ~2 ms once, at the
    /// first `init`; never on the hot path). `force_monotonic` is `NCCLPROF_CLOCK=monotonic`.
    pub fn start(force_monotonic: bool) -> Calibration {
        let counter = !force_monotonic && counter_is_invariant();
        USE_COUNTER.store(counter, Ordering::Relaxed);
        if !counter {
            return Calibration {
                counter,
                anchor_raw: 0,
                anchor_ns: 0,
                ns_per_tick: 1.0,
                ns_per_tick_q32: 1 << 32,
                base_raw: 0,
                base_ns: 0,
            };
        }
        let (r0, n0) = sample();
        let deadline = n0 + 2_000_000;
        while monotonic_ns() < deadline {
            std::hint::spin_loop();
        }
        let (r1, n1) = sample();
        let slope = (n1 - n0) as f64 / (r1.wrapping_sub(r0)).max(1) as f64;
        Calibration {
            counter,
            anchor_raw: r1,
            anchor_ns: n1,
            ns_per_tick: slope,
            ns_per_tick_q32: q32(slope),
            base_raw: r0,
            base_ns: n0,
        }
    }

    /// Name of the source, for the Hello frame.
    pub fn source(&self) -> &'static str {
        if self.counter {
            if cfg!(target_arch = "aarch64") {
                "cntvct"
            } else {
                "tsc"
            }
        } else {
            "clock_gettime"
        }
    }

    /// Refresh the anchor and slope (drain thread, ~every second). The slope is measured over
    /// a baseline of up to a minute; older baselines are dropped so NTP slewing of
    /// `CLOCK_MONOTONIC` is followed.
    pub fn refresh(&mut self) {
        if !self.counter {
            return;
        }
        let (r, n) = sample();
        if n.saturating_sub(self.base_ns) > 60_000_000_000 {
            self.base_raw = self.anchor_raw;
            self.base_ns = self.anchor_ns;
        }
        let dr = r.wrapping_sub(self.base_raw);
        if dr > 0 && n > self.base_ns {
            self.ns_per_tick = (n - self.base_ns) as f64 / dr as f64;
            self.ns_per_tick_q32 = q32(self.ns_per_tick);
        }
        self.anchor_raw = r;
        self.anchor_ns = n;
    }

    /// Raw timestamp → monotonic ns.
    #[inline]
    pub fn to_ns(&self, raw: u64) -> u64 {
        if !self.counter || raw == 0 {
            return raw;
        }
        // Ticks from the anchor (negative for records taken before the last refresh), scaled
        // in fixed point; the anchor is at most ~1 s old, so the product fits easily.
        let d = raw.wrapping_sub(self.anchor_raw) as i64;
        let scaled = (i128::from(d) * i128::from(self.ns_per_tick_q32)) >> 32;
        // Saturated at both ends, but tested as one range check: a 128-bit `clamp` was two
        // compare chains, 10 % of the drain's instructions.
        let ns = i128::from(self.anchor_ns) + scaled;
        u64::try_from(ns).unwrap_or(if ns < 0 { 0 } else { u64::MAX })
    }
}

/// ns per tick in 32.32 fixed point.
fn q32(ns_per_tick: f64) -> i64 {
    (ns_per_tick * 4_294_967_296.0).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converted_counter_matches_clock_gettime() {
        let cal = Calibration::start(false);
        for _ in 0..100 {
            let raw = now_raw();
            let ns = monotonic_ns();
            let conv = cal.to_ns(raw);
            // Within 20 µs (calibration error plus the two reads' distance).
            assert!(conv.abs_diff(ns) < 20_000, "conv {conv} ns {ns}");
        }
    }

    /// The conversion saturates exactly as the clamped full-width formula, at every distance
    /// from the anchor, both ends included.
    #[test]
    fn conversion_saturates_as_the_clamped_formula() {
        for slope in [0.25, 1.0, 40.0] {
            for anchor_ns in [0, 1_000, 5_000_000_000_000, u64::MAX - 1_000] {
                let cal = Calibration {
                    counter: true,
                    anchor_raw: 1 << 40,
                    anchor_ns,
                    ns_per_tick: slope,
                    ns_per_tick_q32: q32(slope),
                    base_raw: 0,
                    base_ns: 0,
                };
                let clamped = |raw: u64| {
                    let d = raw.wrapping_sub(cal.anchor_raw) as i64;
                    let scaled = (i128::from(d) * i128::from(cal.ns_per_tick_q32)) >> 32;
                    (i128::from(cal.anchor_ns) + scaled).clamp(0, i128::from(u64::MAX)) as u64
                };
                let a = cal.anchor_raw;
                for raw in [
                    1,
                    a - 1_000_000,
                    a + 1,
                    a + (1 << 50),
                    a + (1 << 61),
                    a + (1 << 62),
                    a.wrapping_add(i64::MAX as u64),
                    a.wrapping_add(i64::MIN as u64),
                    u64::MAX,
                ] {
                    assert_eq!(
                        cal.to_ns(raw),
                        clamped(raw),
                        "slope {slope} anchor {anchor_ns} raw {raw}"
                    );
                }
            }
        }
    }

    #[test]
    fn monotonic_mode_is_identity() {
        let cal = Calibration {
            counter: false,
            anchor_raw: 0,
            anchor_ns: 0,
            ns_per_tick: 1.0,
            ns_per_tick_q32: 1 << 32,
            base_raw: 0,
            base_ns: 0,
        };
        assert_eq!(cal.to_ns(123_456), 123_456);
    }

    #[test]
    fn fixed_point_conversion_matches_the_float_formula() {
        // TSCs of 1–4 GHz, a 25 MHz Arm counter, a 1 GHz CNTVCT; records up to 2 s either side
        // of the anchor (refreshes are ~1 s apart).
        for slope in [0.25, 0.3571428, 0.5, 0.999_999_7, 1.0, 40.0] {
            let cal = Calibration {
                counter: true,
                anchor_raw: 1 << 40,
                anchor_ns: 5_000_000_000_000,
                ns_per_tick: slope,
                ns_per_tick_q32: q32(slope),
                base_raw: 0,
                base_ns: 0,
            };
            let span = (2e9 / slope) as i64;
            for d in [-span, -12_345, -1, 0, 1, 999, 7_777_777, span] {
                let raw = (cal.anchor_raw as i64 + d) as u64;
                let float = cal.anchor_ns as f64 + d as f64 * slope;
                let got = cal.to_ns(raw) as f64;
                assert!(
                    (got - float).abs() <= 1.0,
                    "slope {slope} d {d}: {got} vs {float}"
                );
            }
        }
    }
}
