//! Every knob of the plugin, read once from the environment at the first `init`.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `NCCL_PROFILE_EVENT_MASK` | 5982 (see `ncclprof_shared::mask::DEFAULT`) | starting activation mask: decimal, `0x` hex or kind names (`Coll,ProxyStep`) |
//! | `NCCL_PROFILE_DUMP_FILE` | unset | at the last `finalize`, write a Chrome-trace JSON snapshot to `<value>.<pid>.json` (finalize waits up to 5 s for the drain, 200 ms without a dump) |
//! | `NCCLPROF_DIR` | `$XDG_RUNTIME_DIR/ncclprof` if that exists, else `/tmp/ncclprof-<uid>` | rendezvous directory (0700, owner-checked) |
//! | `NCCLPROF_DISABLE` | unset | `1`: profile nothing (init returns a NULL context) |
//! | `NCCLPROF_NO_LISTEN` | unset | `1`: capture but publish no rendezvous entry (no viewer can attach) |
//! | `NCCLPROF_RING_EVENTS` | 65536 | capture-ring slots per NCCL thread (64 B each, 4 MiB; plus 64 KiB of open ProxySteps' states) |
//! | `NCCLPROF_RING_MAX_EVENTS` | 262144 | the most slots a ring grows to when the drain finds it more than half full (16 MiB reserved per ring, touched only as it grows; at least `NCCLPROF_RING_EVENTS`; equal to it: no growth) |
//! | `NCCLPROF_MAX_THREADS` | 128 | capture rings (NCCL threads that can record at once) |
//! | `NCCLPROF_DRAIN_US` | 2000 | drain-thread period |
//! | `NCCLPROF_HISTORY_MS` | 5000 | recent history kept for a viewer that attaches late (not aged when a dump file is asked for) |
//! | `NCCLPROF_HISTORY_EVENTS` | 200000 | ... of at most this many records (kept as Events frames, trimmed a frame of 2047 at a time: up to one frame more) |
//! | `NCCLPROF_COMPLETION_TIMEOUT_MS` | 1000 | an op with no completion signal is reported as "end unknown" after this |
//! | `NCCLPROF_MAX_OPEN` | 262144 | open events tracked at once (more are dropped, counted) |
//! | `NCCLPROF_CLOCK` | `tsc` where invariant | `monotonic` forces `clock_gettime` on NCCL's threads (and the general paths for every call: `guard::short_paths`) |
//! | `NCCLPROF_GPU_TIMER_HZ` | auto | GPU timer rate for KernelCh timestamps (RCCL ticks); auto-detected when unset |

use ncclprof_shared::mask;

#[derive(Debug, Clone)]
pub struct Config {
    pub mask: u32,
    pub mask_error: Option<String>,
    pub dump_file: Option<String>,
    pub dir: std::path::PathBuf,
    pub disable: bool,
    pub no_listen: bool,
    pub ring_events: usize,
    pub ring_max_events: usize,
    pub max_threads: usize,
    pub drain_us: u64,
    pub history_ms: u64,
    pub history_events: usize,
    pub completion_timeout_ms: u64,
    pub max_open: usize,
    pub force_monotonic: bool,
    pub gpu_timer_hz: f64,
    /// Fault injection for tests only (undocumented for users): panic in the cold
    /// unknown-event-type path.
    pub test_panic_on_unknown_type: bool,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn num<T: std::str::FromStr>(name: &str, default: T) -> T {
    var(name)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn flag(name: &str) -> bool {
    matches!(
        var(name).as_deref().map(str::trim),
        Some("1" | "true" | "yes" | "on")
    )
}

impl Config {
    pub fn from_env() -> Config {
        let (mask, mask_error) = match var("NCCL_PROFILE_EVENT_MASK") {
            None => (mask::DEFAULT, None),
            Some(v) => match mask::parse(&v) {
                Ok(m) => (m, None),
                Err(e) => (
                    mask::DEFAULT,
                    Some(format!("NCCL_PROFILE_EVENT_MASK: {e}; using the default")),
                ),
            },
        };
        Config {
            mask,
            mask_error,
            dump_file: var("NCCL_PROFILE_DUMP_FILE"),
            dir: ncclprof_shared::link::default_dir(),
            disable: flag("NCCLPROF_DISABLE"),
            no_listen: flag("NCCLPROF_NO_LISTEN"),
            ring_events: num("NCCLPROF_RING_EVENTS", 65536usize),
            ring_max_events: num("NCCLPROF_RING_MAX_EVENTS", 262_144usize),
            max_threads: num("NCCLPROF_MAX_THREADS", 128usize),
            drain_us: num("NCCLPROF_DRAIN_US", 2000u64).clamp(100, 20_000),
            history_ms: num("NCCLPROF_HISTORY_MS", 5000u64),
            history_events: num("NCCLPROF_HISTORY_EVENTS", 200_000usize),
            completion_timeout_ms: num("NCCLPROF_COMPLETION_TIMEOUT_MS", 1000u64),
            max_open: num("NCCLPROF_MAX_OPEN", 262_144usize).max(1024),
            force_monotonic: var("NCCLPROF_CLOCK").is_some_and(|v| v.trim() == "monotonic"),
            gpu_timer_hz: num("NCCLPROF_GPU_TIMER_HZ", 0.0f64),
            test_panic_on_unknown_type: flag("NCCLPROF_TEST_PANIC_ON_UNKNOWN_TYPE"),
        }
    }
}

#[cfg(test)]
mod tests {
    use ncclprof_shared::wire::DropReason;

    /// The viewer tells users which variable avoids a kind of drop (`DropReason::remedy`):
    /// every variable it names must be one read here, with the default it quotes.
    #[test]
    fn drop_remedies_name_real_knobs_with_their_defaults() {
        let src = include_str!("config.rs").replace('_', "");
        let mut named = 0;
        for r in DropReason::ALL {
            let Some(fix) = r.remedy() else { continue };
            let var = fix
                .split_whitespace()
                .find(|w| w.starts_with("NCCLPROF_"))
                .unwrap_or_else(|| panic!("{fix:?} names no variable"));
            let read = format!("num(\"{}\", ", var.replace('_', ""));
            let at = src
                .find(&read)
                .unwrap_or_else(|| panic!("{var} is not read by Config::from_env"));
            if let Some(quoted) = fix.split("above ").nth(1) {
                let quoted = quoted.split_whitespace().next().unwrap();
                let default = &src[at + read.len()..];
                assert!(
                    default.starts_with(quoted)
                        && !default[quoted.len()..].starts_with(|c: char| c.is_ascii_digit()),
                    "{var}: remedy quotes {quoted}, default is {}",
                    &default[..12]
                );
            }
            named += 1;
        }
        assert_eq!(named, 4);
    }
}
