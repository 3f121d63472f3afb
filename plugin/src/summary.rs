//! The line the last `finalize` logs through NCCL's logger: what was recorded and what was
//! lost, by reason, with the knob that avoids each loss at the value in force, so that a job
//! run without a viewer (or with a dump file) still says whether its profile is complete.

use std::time::Duration;

use ncclprof_shared::wire::DropReason;

/// How the final flush of the drain thread went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// The drain answered: `completed` events since start; the drops are its counters.
    Answered { completed: u64 },
    /// No answer within `waited`; `unread` records were still in the rings. The drops are
    /// then only those counted outside the drain thread.
    TimedOut { waited: Duration, unread: u64 },
    /// There is no drain thread (it never started or has stopped).
    NoDrain { unread: u64 },
}

/// The limits in force, which may differ from what the environment asked for (rings are
/// rounded to a power of two, clamped, and halved when memory is short).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Slots each ring starts with (`NCCLPROF_RING_EVENTS`), in force and asked.
    pub ring_slots: u64,
    pub ring_slots_asked: usize,
    /// The most slots a ring may grow to (`NCCLPROF_RING_MAX_EVENTS`), in force and asked.
    pub ring_max_slots: u64,
    pub ring_max_asked: usize,
    /// Slots in the largest ring at finalize: whether any ring grew as far as it may.
    pub ring_largest: u64,
    pub rings: usize,
    pub rings_asked: usize,
    pub max_open: usize,
}

/// The summary, and whether it is a warning: data lost to the profiler's own limits (NCCL
/// shows warnings only with `NCCL_DEBUG=WARN` or more), an unfinished drain, or a plugin that
/// disabled itself after an internal error. NCCL's own odd handles (abandoned, unknown, a
/// newer API's type) are listed but are normal life, not a warning.
pub fn loss_summary(
    flush: Flush,
    dropped: &[u64],
    limits: &Limits,
    disabled: bool,
) -> (String, bool) {
    let n = |r: DropReason| dropped.get(r as usize).copied().unwrap_or(0);
    let mut parts = Vec::new();
    let mut lost = !matches!(flush, Flush::Answered { .. }) || disabled;
    let mut records = 0;
    for r in DropReason::ALL {
        // A string that did not fit the table loses its name, not its record.
        if n(r) == 0 || r == DropReason::StringsFull {
            continue;
        }
        records += n(r);
        // The knob that avoids this reason: its variable, the value in force, the value asked,
        // and what the figures say beyond that.
        let knob = match r {
            // Rings grow where they fill, up to their most: a ring that got there needs a
            // larger most; drops with room left to grow came while rings were growing (or
            // were refused memory to grow), which only rings that start larger avoid.
            DropReason::RingFull if limits.ring_largest >= limits.ring_max_slots => Some((
                "NCCLPROF_RING_MAX_EVENTS",
                limits.ring_max_slots as usize,
                limits.ring_max_asked,
                String::new(),
            )),
            DropReason::RingFull => Some((
                "NCCLPROF_RING_EVENTS",
                limits.ring_slots as usize,
                limits.ring_slots_asked,
                format!(
                    "; lost while rings grew: the largest is {} of NCCLPROF_RING_MAX_EVENTS {}",
                    limits.ring_largest, limits.ring_max_slots
                ),
            )),
            DropReason::NoRing => Some((
                "NCCLPROF_MAX_THREADS",
                limits.rings,
                limits.rings_asked,
                String::new(),
            )),
            DropReason::TableFull => Some((
                "NCCLPROF_MAX_OPEN",
                limits.max_open,
                limits.max_open,
                String::new(),
            )),
            _ => None,
        };
        let hint = match knob {
            Some((var, now, asked, more)) if now < asked => {
                format!(" ({var} asked {asked}, in force {now}: the most this host allowed{more})")
            }
            Some((var, now, _, more)) => format!(" ({var} is {now}: raise it{more})"),
            None => r.remedy().map(|h| format!(" ({h})")).unwrap_or_default(),
        };
        lost |= !matches!(
            r,
            DropReason::UnknownHandle | DropReason::Abandoned | DropReason::UnknownType
        );
        parts.push(format!("{} {}{hint}", r.name(), n(r)));
    }
    let mut drops = if records == 0 {
        "no records dropped".to_string()
    } else {
        format!("{records} records dropped: {}", parts.join(", "))
    };
    let strings = n(DropReason::StringsFull);
    if strings > 0 {
        lost = true;
        drops += &format!("; {strings} names not kept (the string table was full; shown as \"?\")");
    }
    let mut text = match flush {
        Flush::Answered { completed } => {
            format!("{completed} events recorded since start, {drops}")
        }
        Flush::TimedOut { waited, unread } => format!(
            "the drain thread did not finish within {} s of the last finalize ({unread} \
             records still unread); counted on NCCL's threads so far: {drops}",
            waited.as_secs_f64()
        ),
        Flush::NoDrain { unread } => format!(
            "the drain thread is not running ({unread} records unread); counted on NCCL's \
             threads so far: {drops}"
        ),
    };
    if disabled {
        text += "; profiling was disabled by an internal error, later events were not recorded";
    }
    (text, lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dropped(by: &[(DropReason, u64)]) -> Vec<u64> {
        let mut d = vec![0; DropReason::COUNT];
        for &(r, n) in by {
            d[r as usize] = n;
        }
        d
    }

    const LIMITS: Limits = Limits {
        ring_slots: 1024,
        ring_slots_asked: 1000,
        ring_max_slots: 1024,
        ring_max_asked: 1000,
        ring_largest: 1024,
        rings: 128,
        rings_asked: 128,
        max_open: 262_144,
    };
    const DONE: Flush = Flush::Answered { completed: 42 };

    #[test]
    fn every_loss_is_counted_with_the_knob_at_the_value_in_force() {
        let (text, lost) = loss_summary(DONE, &dropped(&[]), &LIMITS, false);
        assert_eq!(text, "42 events recorded since start, no records dropped");
        assert!(!lost);

        let d = dropped(&[(DropReason::RingFull, 7), (DropReason::ViewerSlow, 3)]);
        let (text, lost) = loss_summary(DONE, &d, &LIMITS, false);
        assert_eq!(
            text,
            "42 events recorded since start, 10 records dropped: ring full 7 \
             (NCCLPROF_RING_MAX_EVENTS is 1024: raise it), viewer slow 3 (narrow the mask, or \
             raise NCCLPROF_HISTORY_EVENTS)"
        );
        assert!(lost);

        // A limit the host cut below what was asked: raising it would not help.
        let cut = Limits {
            ring_max_slots: 512,
            ring_largest: 512,
            ..LIMITS
        };
        let (text, _) = loss_summary(DONE, &dropped(&[(DropReason::RingFull, 1)]), &cut, false);
        assert!(
            text.ends_with(
                "ring full 1 (NCCLPROF_RING_MAX_EVENTS asked 1000, in force 512: the most this \
                 host allowed)"
            ),
            "{text}"
        );
    }

    /// Rings that had room left to grow lost records while growing: a larger most would not
    /// have helped, rings that start larger would.
    #[test]
    fn ring_drops_with_room_to_grow_name_the_size_rings_start_at() {
        let growing = Limits {
            ring_max_slots: 4096,
            ring_max_asked: 4096,
            ring_largest: 2048,
            ..LIMITS
        };
        let (text, lost) = loss_summary(
            DONE,
            &dropped(&[(DropReason::RingFull, 9)]),
            &growing,
            false,
        );
        assert!(
            text.ends_with(
                "ring full 9 (NCCLPROF_RING_EVENTS is 1024: raise it; lost while rings grew: \
                 the largest is 2048 of NCCLPROF_RING_MAX_EVENTS 4096)"
            ),
            "{text}"
        );
        assert!(lost);

        // Rings at their most: the most is the knob.
        let grown = Limits {
            ring_largest: 4096,
            ..growing
        };
        let (text, _) = loss_summary(DONE, &dropped(&[(DropReason::RingFull, 9)]), &grown, false);
        assert!(
            text.ends_with("ring full 9 (NCCLPROF_RING_MAX_EVENTS is 4096: raise it)"),
            "{text}"
        );
    }

    #[test]
    fn nccls_odd_handles_are_listed_but_are_not_a_warning() {
        let d = dropped(&[(DropReason::Abandoned, 5), (DropReason::UnknownHandle, 1)]);
        let (text, lost) = loss_summary(DONE, &d, &LIMITS, false);
        assert_eq!(
            text,
            "42 events recorded since start, 6 records dropped: unknown handle 1, abandoned 5"
        );
        assert!(!lost);
    }

    #[test]
    fn names_lost_to_a_full_string_table_are_not_records_dropped() {
        let d = dropped(&[(DropReason::StringsFull, 106)]);
        let (text, lost) = loss_summary(DONE, &d, &LIMITS, false);
        assert_eq!(
            text,
            "42 events recorded since start, no records dropped; 106 names not kept (the \
             string table was full; shown as \"?\")"
        );
        assert!(lost);
    }

    #[test]
    fn an_unfinished_or_missing_drain_and_a_disabled_plugin_are_warnings() {
        let timed_out = Flush::TimedOut {
            waited: Duration::from_millis(200),
            unread: 900,
        };
        let (text, lost) = loss_summary(timed_out, &dropped(&[]), &LIMITS, false);
        assert_eq!(
            text,
            "the drain thread did not finish within 0.2 s of the last finalize (900 records \
             still unread); counted on NCCL's threads so far: no records dropped"
        );
        assert!(lost);
        // Even with nothing left unread: the drain may still have been completing.
        let timed_out = Flush::TimedOut {
            waited: Duration::from_millis(200),
            unread: 0,
        };
        assert!(loss_summary(timed_out, &dropped(&[]), &LIMITS, false).1);

        let (text, lost) =
            loss_summary(Flush::NoDrain { unread: 3 }, &dropped(&[]), &LIMITS, false);
        assert_eq!(
            text,
            "the drain thread is not running (3 records unread); counted on NCCL's threads so \
             far: no records dropped"
        );
        assert!(lost);

        let (text, lost) = loss_summary(DONE, &dropped(&[]), &LIMITS, true);
        assert_eq!(
            text,
            "42 events recorded since start, no records dropped; profiling was disabled by an \
             internal error, later events were not recorded"
        );
        assert!(lost);
    }
}
