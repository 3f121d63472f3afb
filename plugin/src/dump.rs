//! `NCCL_PROFILE_DUMP_FILE`: at the last `finalize`, write what the plugin holds as a
//! Chrome-trace JSON snapshot (the same format the viewer's `s` key writes), so headless jobs
//! are covered. Written atomically: temp file + rename.

use std::io::Write;
use std::path::Path;

use ncclprof_shared::record::EventRecord;
use ncclprof_shared::trace;

use crate::Plugin;

pub fn write(p: &Plugin, records: &[EventRecord], path: &Path) -> std::io::Result<()> {
    let comms = crate::stream::comm_infos(p);
    let (strings, _) = p.strings.published_from(1);
    let proc_ = trace::ProcessData {
        pid: p.pid,
        host: p.host.clone(),
        comms,
        strings: strings.into_iter().collect(),
        records: records.to_vec(),
    };
    let meta = trace::Metadata {
        mask: p.control.in_force(),
        tool: format!("ncclprof-plugin {}", env!("CARGO_PKG_VERSION")),
        ..Default::default()
    };
    let json = trace::to_chrome_trace(&[proc_], &meta);
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(json.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
