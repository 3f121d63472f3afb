//! The store with its chunks faulted in ahead (`model::prefault`, as `ncclprof-tui` runs it):
//! a process of its own, since starting the helper is once per process and the store's unit
//! tests keep it off.

use ncclprof_tui::model::prefault;
use ncclprof_tui::model::store::{Series, Timed};

/// A 32-byte item, as a proxy step is.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Item {
    start: u64,
    len: u64,
    tag: [u64; 2],
}

impl Timed for Item {
    fn start(&self, _: u64) -> u64 {
        self.start
    }
    fn end(&self, _: u64) -> u64 {
        self.start + self.len
    }
}

#[test]
fn chunks_faulted_in_ahead_keep_every_item_and_are_accounted_whole() {
    if !prefault::start() {
        eprintln!("this kernel lacks MADV_POPULATE_WRITE: nothing to test");
        return;
    }
    // 8192 items of 32 B = 256 KiB chunks: presized, as the store's step tables are.
    let cap = 8192;
    let mut s: Series<Item> = Series::new(cap, 0);
    let n = 5 * cap as u64 + 17;
    let mut accounted = 0isize;
    for i in 0..n {
        let it = Item {
            start: 1_000 + i * 10,
            len: 5,
            tag: [i, !i],
        };
        accounted += s.push(it.start, |_| Some(it));
    }
    s.settle();
    assert_eq!(s.len() as u64, n);
    assert!(
        s.iter().map(|(_, it)| it.tag[0]).eq(0..n),
        "every item, in order"
    );
    assert!(s.iter().all(|(_, it)| it.tag[1] == !it.tag[0]));
    // Six chunks, each accounted at its full size from the start: its pages are resident.
    assert_eq!(s.bytes(), 6 * cap * 32);
    assert_eq!(accounted, s.bytes() as isize);
}
