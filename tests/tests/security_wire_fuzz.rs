//! Property-based fuzzing of `ncclprof_shared::wire::decode`, the one function that parses
//! bytes from another process: random bytes, valid headers with random bodies, and mutations
//! (byte flips, truncation, extension, header rewrites) of valid frames of every kind. Decode
//! must never panic, never accept more than `MAX_FRAME` bytes, and re-encoding whatever it
//! accepts must give a frame it decodes to the same value. Each property runs 20 000 cases
//! (a fixed seed-free runner; counts are printed for RELIABILITY.md).

use std::time::Instant;

use ncclprof_shared::PROTOCOL_VERSION;
use ncclprof_shared::record::EventRecord;
use ncclprof_shared::wire::{self, Frame};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const CASES: u32 = 20_000;

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: CASES,
        max_shrink_iters: 2_000,
        failure_persistence: None,
        ..Config::default()
    })
}

fn header(kind: u16, len: usize) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&wire::MAGIC);
    b.extend_from_slice(&(PROTOCOL_VERSION as u16).to_le_bytes());
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&(len as u32).to_le_bytes());
    b.extend_from_slice(&[0; 4]); // reserved
    b
}

/// Decode must not panic; anything accepted must round-trip, and the viewer's decode of a
/// buffer it keeps must agree with the copying one.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let owned = wire::decode_owned(bytes.to_vec());
    prop_assert_eq!(&owned, &wire::decode(bytes));
    if let Ok(f) = owned {
        prop_assert!(bytes.len() <= wire::MAX_FRAME);
        let again = wire::encode(&f).expect("an accepted frame re-encodes");
        prop_assert!(again.len() <= wire::MAX_FRAME);
        prop_assert_eq!(wire::decode(&again).expect("re-decodes"), f);
    }
    Ok(())
}

/// `len` pseudo-random bytes from `seed` (splitmix64): proptest draws two numbers per case
/// instead of thousands of byte value trees, which keeps 20 000 cases fast in debug builds.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn valid_frames() -> Vec<Vec<u8>> {
    let rec = EventRecord {
        id: 1 << 59,
        kind: 1,
        start_ns: 10,
        end_ns: 20,
        ..Default::default()
    };
    [
        Frame::Hello(wire::PluginHello {
            protocol: PROTOCOL_VERSION,
            pid: 42,
            host: "node".into(),
            uid: 0,
            cmdline: "python train.py".into(),
            api_version: 6,
            plugin_version: "0.1.0".into(),
            mask: 5982,
            active: true,
            clock: "tsc".into(),
        }),
        Frame::Meta(wire::Meta {
            comms: vec![wire::CommInfo {
                index: 0,
                comm_hash: 7,
                name: "world".into(),
                nranks: 8,
                nnodes: 1,
                rank: 3,
                api_version: 6,
                finalized: false,
            }],
            strings: vec![(1, "AllReduce".into()), (2, "ncclFloat32".into())],
        }),
        Frame::Events(vec![rec; 3].into()),
        Frame::Counters(wire::Counters {
            captured: vec![1; 15],
            completed: vec![1; 15],
            dropped: vec![0; 7],
            ..Default::default()
        }),
        Frame::InFlight(wire::InFlight {
            at_ns: 1,
            ops: vec![wire::OpenOp {
                comm: 0,
                rank: 0,
                kind: 1,
                id: 5,
                seq: 1,
                func: 1,
                start_ns: 3,
                exec_start_ns: 4,
                steps_done: vec![1, 2],
                channels_done: 1,
                n_channels: 2,
                oldest_step: None,
            }],
            total: 1,
        }),
        Frame::MaskAck(wire::MaskAck {
            mask: 2,
            active: true,
            requested: 2,
        }),
        Frame::Bye(wire::Bye {
            reason: "finalize".into(),
        }),
    ]
    .iter()
    .map(|f| wire::encode(f).unwrap())
    .collect()
}

fn report(name: &str, runs: u64, t: Instant) {
    eprintln!(
        "fuzz {name}: {runs} decode executions in {:.2} s",
        t.elapsed().as_secs_f64()
    );
}

#[test]
fn decode_random_bytes() {
    let t = Instant::now();
    let runs = std::cell::Cell::new(0u64);
    runner()
        .run(
            &(any::<u64>(), 0usize..4096, 0u8..3),
            |(seed, len, prefix)| {
                runs.set(runs.get() + 1);
                let mut b = bytes(seed, len);
                // Mostly garbage, sometimes with the magic (and version) so later checks are hit.
                if prefix >= 1 && b.len() >= 4 {
                    b[..4].copy_from_slice(&wire::MAGIC);
                }
                if prefix >= 2 && b.len() >= 6 {
                    b[4..6].copy_from_slice(&(PROTOCOL_VERSION as u16).to_le_bytes());
                }
                check(&b)
            },
        )
        .unwrap();
    report("random bytes", runs.get(), t);
    assert!(runs.get() >= u64::from(CASES));
}

#[test]
fn decode_valid_header_random_body() {
    let t = Instant::now();
    let runs = std::cell::Cell::new(0u64);
    let s = (0u16..10, any::<u64>(), 0usize..3000, any::<bool>());
    runner()
        .run(&s, |(kind, seed, len, lie)| {
            runs.set(runs.get() + 1);
            let body = bytes(seed, len);
            // Half the cases declare a wrong length.
            let declared = if lie { body.len() * 3 + 1 } else { body.len() };
            let mut b = header(kind, declared);
            b.extend_from_slice(&body);
            check(&b)
        })
        .unwrap();
    report("valid header + random body", runs.get(), t);
    assert!(runs.get() >= u64::from(CASES));
}

#[test]
fn decode_mutated_valid_frames() {
    let frames = valid_frames();
    let t = Instant::now();
    let runs = std::cell::Cell::new(0u64);
    let s = (
        0..frames.len(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        0usize..64,
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
    );
    runner()
        .run(&s, |(which, flips, cut, tail, fix_len)| {
            runs.set(runs.get() + 1);
            let mut b = frames[which].clone();
            for (i, v) in flips {
                let i = i.index(b.len());
                b[i] = v;
            }
            b.truncate(b.len().saturating_sub(cut));
            b.extend_from_slice(&tail);
            if fix_len && b.len() >= wire::HEADER_SIZE {
                // Keep the header consistent so the body parser is reached.
                let n = (b.len() - wire::HEADER_SIZE) as u32;
                b[8..12].copy_from_slice(&n.to_le_bytes());
                b[0..4].copy_from_slice(&wire::MAGIC);
                b[4..6].copy_from_slice(&(PROTOCOL_VERSION as u16).to_le_bytes());
            }
            check(&b)
        })
        .unwrap();
    report("mutated valid frames", runs.get(), t);
    assert!(runs.get() >= u64::from(CASES));
}

#[test]
fn decode_oversized_inputs_are_rejected_before_parsing() {
    let t = Instant::now();
    let runs = std::cell::Cell::new(0u64);
    let mut r = TestRunner::new(Config {
        cases: 200,
        failure_persistence: None,
        ..Config::default()
    });
    r.run(&(1usize..100_000, any::<u8>()), |(extra, fill)| {
        runs.set(runs.get() + 1);
        let mut b = header(3, wire::MAX_FRAME - wire::HEADER_SIZE + extra);
        b.resize(wire::MAX_FRAME + extra, fill);
        prop_assert_eq!(
            wire::decode(&b),
            Err(wire::DecodeError::TooLarge(wire::MAX_FRAME + extra))
        );
        Ok(())
    })
    .unwrap();
    report("oversized", runs.get(), t);
}
