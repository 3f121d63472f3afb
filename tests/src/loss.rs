//! ncclprof's loss summary, read back from the log of a fake-NCCL run (the benches report
//! what a run dropped).

use ncclprof_shared::wire::DropReason;

/// What a summary says was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Losses {
    /// Records dropped since the plugin was loaded, by [`DropReason`]; `None`: not reported.
    pub by_reason: [Option<u64>; DropReason::COUNT],
    /// Records the drain had not read when finalize stopped waiting.
    pub unread: u64,
}

/// Records dropped so far, by reason, and records unread, from ncclprof's summary at the last
/// finalize (`summary::loss_summary`). Both count since the plugin was loaded. A summary
/// written while the drain was behind (finalize stopped waiting) lists only what NCCL's
/// threads counted: the reasons only the drain counts are `None` there, not 0 (taking its
/// total for the same count as a full summary's once made a run read 692 % dropped).
pub fn drops_by_reason(log: &[String]) -> Option<Losses> {
    let first_number = |s: &str| s.split_whitespace().find_map(|w| w.parse::<u64>().ok());
    let line = log
        .iter()
        .rev()
        .find(|l| l.contains("records dropped") && l.contains("NCCLPROF"))?;
    let (unread, drops) = match line.split_once(" events recorded since start, ") {
        Some((_, rest)) => (None, rest),
        None => {
            let (head, rest) = line.split_once("so far: ")?;
            (Some(first_number(head.split_once('(')?.1)?), rest)
        }
    };
    let mut by = [Some(0); DropReason::COUNT];
    for r in DropReason::ALL {
        if unread.is_some() && DropReason::DRAIN_ONLY.contains(&r) {
            by[r as usize] = None;
        } else if let Some((_, rest)) = drops
            .split_once("dropped: ")
            .and_then(|(_, list)| list.split_once(&format!("{} ", r.name())))
        {
            // The count follows the name at once; a hint, with numbers of its own, may follow.
            let digits = rest.split(|c: char| !c.is_ascii_digit()).next()?;
            by[r as usize] = Some(digits.parse().ok()?);
        }
    }
    Some(Losses {
        by_reason: by,
        unread: unread.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_written_while_behind_leaves_the_drains_reasons_unknown() {
        let full = "NCCLPROF 900 events recorded since start, 30 records dropped: ring full 20 \
                    (NCCLPROF_RING_EVENTS asked 1000, in force 1024: the most this host \
                    allowed), table full 10 (NCCLPROF_MAX_OPEN is 5: raise it)";
        let Losses {
            by_reason: by,
            unread,
        } = drops_by_reason(&[full.into()]).unwrap();
        assert_eq!(unread, 0);
        assert_eq!(by[DropReason::RingFull as usize], Some(20));
        assert_eq!(by[DropReason::TableFull as usize], Some(10));
        assert_eq!(by[DropReason::NoRing as usize], Some(0));
        let behind = "NCCLPROF the drain thread did not finish within 0.2 s of the last finalize \
                      (4096 records still unread); counted on NCCL's threads so far: 25 records \
                      dropped: ring full 25 (NCCLPROF_RING_EVENTS is 1024: raise it)";
        let Losses {
            by_reason: by,
            unread,
        } = drops_by_reason(&[full.into(), behind.into()]).unwrap();
        assert_eq!(unread, 4096);
        assert_eq!(by[DropReason::RingFull as usize], Some(25));
        assert_eq!(by[DropReason::TableFull as usize], None);
        // Reasons without a hint are followed by a comma or a semicolon straight away.
        let bare = "NCCLPROF 9 events recorded since start, 6 records dropped: unknown handle \
                    1, abandoned 5; 106 names not kept (the string table was full)";
        let by = drops_by_reason(&[bare.into()]).unwrap().by_reason;
        assert_eq!(by[DropReason::UnknownHandle as usize], Some(1));
        assert_eq!(by[DropReason::Abandoned as usize], Some(5));
        assert_eq!(by[DropReason::StringsFull as usize], Some(0));
        let none = "NCCLPROF 5 events recorded since start, no records dropped";
        let by = drops_by_reason(&[none.into()]).unwrap().by_reason;
        assert!(by.iter().all(|&n| n == Some(0)));
    }
}
