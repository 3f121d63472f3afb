//! Stragglers are judged per collective instance, (function, seq): NCCL numbers each
//! function's collectives separately (spec §4.14), so a mixed job has an AllGather n and a
//! ReduceScatter n (FSDP) that are different collectives.

mod common;

use common::*;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::wire::{Frame, encode};
use ncclprof_tui::model::ingest;
use ncclprof_tui::model::store::Store;

/// The fixture numbered as NCCL does: its AllGathers (ops 2 and 5) get their own counter,
/// 0 and 1, which AllReduces 0 and 1 also carry, 10–50 ms apart. Rank 3 is 2 ms late to
/// every op. Keyed by seq alone, AllReduce 0 and AllGather 0 were one instance of 8 ops:
/// rank 3's AllGather, 20 ms after the others' median, its "lag".
#[test]
fn equal_seqs_of_two_functions_are_two_collectives() {
    let f = Fixture::default();
    let mut st = Store::new(1 << 30);
    for r in 0..f.ranks {
        for fr in frames(&f, r) {
            let fr = match fr {
                Frame::Events(recs) => {
                    let mut recs = recs.to_vec();
                    let (mut reduce, mut gather) = (0, 0);
                    for rec in recs.iter_mut().filter(|x| x.kind == EventKind::Coll as u8) {
                        let is_gather = rec.p[0] % 3 == 2;
                        let n = if is_gather { &mut gather } else { &mut reduce };
                        rec.p[0] = *n;
                        *n += 1;
                    }
                    Frame::Events(recs.into())
                }
                other => other,
            };
            let bytes = encode(&fr).expect("encode");
            ingest::apply_bytes(&mut st, r as u32 + 1, 100 + r as u32, &bytes);
        }
    }
    let rows = st.lane_rows(0);
    let strag = st.stragglers_in(&rows, 0, u64::MAX);
    // 4 AllReduces (0..4) and 2 AllGathers (0, 1): six instances, each with rank 3 last by
    // its 2 ms (+ its 30 µs start offset, - the others' median offset of 10 µs).
    assert_eq!(strag.len(), 6, "{strag:?}");
    for ((func, seq), s) in &strag {
        assert_eq!(s.rank, 3, "{func} {seq}");
        assert_eq!(s.lag_ns, 2 * MS + 20 * US, "{func} {seq}");
    }
    assert!(strag.contains_key(&("AllGather", 1)) && strag.contains_key(&("AllReduce", 1)));
}
