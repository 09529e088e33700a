//! `Volume::resident`, the probe the NBD server uses to run cache hits on the connection's own
//! thread: true exactly when every block of the range is cached, and it changes nothing.

use ember_engine::device::MemDevice;
use ember_engine::WriteMode;
use ember_testkit::devices::OnTheMedium;
use ember_testkit::engine::*;
use std::sync::Arc;

#[test]
fn resident_says_whether_every_block_is_cached_and_changes_nothing() {
    let rig = Rig::new(Arc::new(MemDevice::new(1 << 20)), 1, 64, 7);
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let bs = 4096u64;
    assert!(!v.resident(0, bs), "nothing is cached yet");
    assert!(v.resident(5, 0), "an empty range is trivially resident");
    let before = engine.stats();
    let mut buf = vec![0u8; 2 * bs as usize];
    v.read(bs, &mut buf).unwrap(); // blocks 1 and 2 now cached
    assert!(v.resident(bs, 2 * bs));
    assert!(v.resident(bs + 100, 300), "an unaligned range inside block 1");
    assert!(!v.resident(0, 2 * bs), "block 0 is not cached");
    assert!(!v.resident(2 * bs, 2 * bs), "block 3 is not cached");
    assert!(!v.resident(u64::MAX - 10, 20), "an overflowing range is not resident");
    // Probing is free of side effects: the counters moved only by the one read.
    let after = engine.stats();
    assert_eq!(after.total.read_requests, before.total.read_requests + 1);
    assert_eq!(after.total.read_hits, before.total.read_hits);
    assert_eq!(after.total.read_misses, before.total.read_misses + 2);
    assert_eq!(after.resident_blocks, 2);
}

#[test]
fn hits_on_a_device_read_from_the_medium_are_not_fast() {
    let rig = Rig::new(Arc::new(OnTheMedium::new(1 << 20)), 1, 64, 7);
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let mut buf = vec![0u8; 4096];
    v.read(0, &mut buf).unwrap();
    v.read(0, &mut buf).unwrap();
    assert_eq!(engine.stats().total.read_hits, 1, "block 0 is cached");
    assert!(!v.resident(0, 4096));
}

/// The hit path (`read_if_resident`, what the NBD server calls on its reader): it serves a
/// range only when every block is resident, with the newest data (dirty blocks under
/// write-back included), and otherwise declines having changed nothing, not even the
/// replacement order or a counter.
#[test]
fn read_if_resident_serves_whole_hits_only_and_returns_the_newest_data() {
    let rig = Rig::new(Arc::new(MemDevice::new(1 << 20)), 1, 64, 11);
    let engine = rig.open(WriteMode::WriteBackFlush).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let bs = 4096usize;
    let mut model = rig.model().remove(0);
    let mut buf = vec![0u8; 2 * bs];
    assert!(v.read_if_resident(0, &mut buf).is_none(), "nothing cached");
    // Block 1 cached clean by a read miss, block 2 written (dirty under write-back).
    v.read(bs as u64, &mut buf[..bs]).unwrap();
    let data: Vec<u8> = (0..bs).map(|i| (i * 7 % 251) as u8).collect();
    v.write(2 * bs as u64, &data, false).unwrap();
    model[2 * bs..3 * bs].copy_from_slice(&data);
    let before = engine.stats();
    // Blocks 0 and 1: block 0 is missing, so nothing happens at all.
    assert!(v.read_if_resident(0, &mut buf).is_none());
    assert!(v.read_if_resident(bs as u64 - 1, &mut buf[..2]).is_none(), "straddles block 0");
    assert!(v.read_if_resident(u64::MAX - 10, &mut buf[..20]).is_none(), "overflow");
    assert!(v.read_if_resident(64 * bs as u64, &mut buf[..1]).is_none(), "past the end");
    let same = engine.stats();
    assert_eq!(same.total, before.total, "a declined hit counts nothing");
    // Blocks 1 and 2 (clean and dirty): served, byte-exact, unaligned too.
    buf.fill(0);
    v.read_if_resident(bs as u64, &mut buf).unwrap().unwrap();
    assert_eq!(buf, model[bs..3 * bs]);
    let mut odd = vec![0u8; bs + 100];
    v.read_if_resident(bs as u64 + 50, &mut odd).unwrap().unwrap();
    assert_eq!(odd, model[bs + 50..2 * bs + 150]);
    let after = engine.stats();
    assert_eq!(after.total.read_requests, before.total.read_requests + 2);
    assert_eq!(after.total.read_hits, before.total.read_hits + 4);
    assert_eq!(after.total.read_misses, before.total.read_misses);
}
