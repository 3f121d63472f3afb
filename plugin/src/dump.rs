//! `NCCL_PROFILE_DUMP_FILE`: at the last `finalize`, write what the plugin holds as the same
//! snapshot the viewer's `s` key writes (`ncclprof_shared::trace`), so headless jobs are covered
//! and `ncclprof-tui open` reads the file. Written atomically: temp file + rename.

use std::path::Path;

use ncclprof_shared::record::EventRecord;
use ncclprof_shared::trace;
use ncclprof_shared::wire::{CommInfo, Counters};

use crate::Plugin;

pub fn write(
    p: &Plugin,
    records: &[EventRecord],
    counters: &Counters,
    path: &Path,
) -> std::io::Result<()> {
    let (list, _) = p.strings.published_from(1);
    let mut strings = vec![String::new(); list.last().map_or(1, |(id, _)| usize::from(*id) + 1)];
    for (id, text) in list {
        strings[usize::from(id)] = text;
    }
    let proc_ = trace::Process {
        src: 1,
        pid: p.pid,
        host: p.host.clone(),
        cmdline: p.cmdline.clone(),
        api_version: p.api_version.load(std::sync::atomic::Ordering::Relaxed),
        plugin_version: env!("CARGO_PKG_VERSION").to_string(),
        clock: "CLOCK_MONOTONIC".into(),
        mask: p.control.in_force(),
        active: p.control.active(),
        requested_mask: None,
        state: "ended: finalized".into(),
        comms: comms_of(p, records),
        strings,
        captured: counters.captured.clone(),
        completed: counters.completed.clone(),
        dropped: counters.dropped.clone(),
        // The finalize flush already emitted what was in flight, flagged F_IN_FLIGHT.
        in_flight: None,
    };
    let lanes = trace::lanes_of(0, records);
    let totals = trace::Totals {
        retained: records.len() as u64,
        evicted: 0,
        dropped: counters.total_dropped(),
        writer: format!("ncclprof-plugin {}", env!("CARGO_PKG_VERSION")),
    };
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        trace::write(&mut f, &[proc_], &lanes, &totals)?;
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// The communicators `records` name: those in the slots now, and those whose slots were
/// reused since (the history is not aged when a dump is asked for, so it may hold records of
/// a communicator finalized long ago; without its entry the dump named it by number only).
fn comms_of(p: &Plugin, records: &[EventRecord]) -> Vec<CommInfo> {
    let mut comms = crate::stream::comm_infos(p);
    let named: std::collections::HashSet<u32> = records.iter().map(|r| r.comm).collect();
    // Past ids (older generations) are never a slot's current one.
    comms.extend(crate::stream::past_comm_infos(p, &named));
    comms
}
