//! The frame ring (the shared memory a connection's large frames cross instead of the
//! socket), against a job at full speed: a viewer that offers one gets its Events through it;
//! one that offers none gets them on the socket; a viewer too slow for a small ring gets the
//! frames that found it full on the socket, in their place. Every frame decodes either way,
//! its records read where they arrived, Hello first, every record once, and a string is
//! announced (Meta) before any record names it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ncclprof_shared::frame_ring::MIN_BYTES;
use ncclprof_shared::kind::EventKind;
use ncclprof_shared::link::{self, RecvError};
use ncclprof_shared::wire::Frame;
use ncclprof_tests::faults::{entry_with_server, spawn_job};

static SERIAL: Mutex<()> = Mutex::new(());

/// What one connection received.
struct Seen {
    records: u64,
    from_ring: u64,
    bytes_from_ring: u64,
    large_on_socket: u64,
}

/// Connect offering `ring_bytes`, and read until `want` records came (at most 20 s), pausing
/// `delay` after each Events frame; check each frame on the way.
fn receive(rdv: &Path, pid: u32, ring_bytes: usize, delay: Duration, want: u64) -> Seen {
    let entry = entry_with_server(rdv, pid);
    let mut conn = link::connect_with_ring(&entry, ring_bytes).expect("connect");
    let mut strings: HashSet<u16> = HashSet::new();
    // Every record once: a frame read twice, or a stale one the plugin had overwritten,
    // would repeat records.
    let mut seen: HashSet<[u8; 96]> = HashSet::new();
    let (mut records, mut frames) = (0u64, 0u64);
    let end = Instant::now() + Duration::from_secs(20);
    while records < want && Instant::now() < end {
        // As the viewer reads: an Events frame's records where they arrived.
        let frame = match conn.data.recv_frame() {
            Ok(f) => f,
            Err(RecvError::Closed(e)) => panic!("the plugin closed the connection: {e:?}"),
            Err(e) => panic!("a frame the viewer cannot follow or decode: {e}"),
        };
        if frames == 0 {
            assert!(matches!(frame, Frame::Hello(_)), "Hello first: {frame:?}");
        }
        frames += 1;
        match frame {
            Frame::Meta(m) => strings.extend(m.strings.iter().map(|(id, _)| *id)),
            Frame::Events(r) => {
                for rec in r.iter() {
                    assert!(seen.insert(*rec.bytes()), "a record came twice: {rec:?}");
                }
                for rec in r.iter().filter(|r| r.kind() == Some(EventKind::Coll)) {
                    // A collective names its function, datatype, algorithm and protocol.
                    for id in rec.strings() {
                        assert!(
                            id == 0 || strings.contains(&id),
                            "a record names string {id} before its Meta"
                        );
                    }
                }
                records += r.len() as u64;
                std::thread::sleep(delay);
            }
            _ => {}
        }
    }
    assert!(records >= want, "only {records} records in 20 s");
    Seen {
        records,
        from_ring: conn.data.frames_from_ring(),
        bytes_from_ring: conn.data.bytes_from_ring(),
        large_on_socket: conn.data.large_frames_on_socket(),
    }
}

#[test]
fn events_cross_the_frame_ring_or_the_socket_whole_and_in_order() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let rdv = t.path().join("rdv");
    let (job, pid) = spawn_job(&rdv, 60, &[]);

    // A 4 MiB ring goes round several times in 300 000 records (28 MB): its bytes come back.
    const RING: usize = 4 << 20;
    let ring = receive(&rdv, pid, RING, Duration::ZERO, 300_000);
    eprintln!(
        "ring offered: {} records, {} frames ({} bytes) from the ring, {} large frames on the socket",
        ring.records, ring.from_ring, ring.bytes_from_ring, ring.large_on_socket
    );
    assert!(ring.from_ring > 0, "no frame came through the ring");
    assert!(
        ring.bytes_from_ring > 3 * RING as u64,
        "{} bytes through a {RING}-byte ring: it did not go round",
        ring.bytes_from_ring
    );

    let none = receive(&rdv, pid, 0, Duration::ZERO, 300_000);
    eprintln!(
        "no ring: {} records, {} large frames on the socket",
        none.records, none.large_on_socket
    );
    assert_eq!(none.from_ring, 0);
    assert!(none.large_on_socket > 0);

    // The smallest ring holds two of the largest frames: a viewer pausing 5 ms per Events
    // frame leaves it full, and the frames behind it go on the socket meanwhile.
    let slow = receive(&rdv, pid, MIN_BYTES, Duration::from_millis(5), 300_000);
    eprintln!(
        "small ring, slow viewer: {} records, {} frames from the ring, {} large frames on the socket",
        slow.records, slow.from_ring, slow.large_on_socket
    );
    assert!(slow.from_ring > 0, "no frame came through the ring");
    assert!(
        slow.large_on_socket > 0,
        "no frame found the small ring full"
    );
    drop(job);
}
