//! `Volume::resident`, the probe the NBD server uses to run cache hits on the connection's own
//! thread: true exactly when every block of the range is cached, and it changes nothing.

mod common;

use common::*;
use ember_engine::device::MemDevice;
use ember_engine::WriteMode;
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

/// A cache device read with O_DIRECT waits on the medium for every hit: nothing is resident
/// in the sense of "served at once", so the NBD server keeps such reads on its workers.
struct OnTheMedium(MemDevice);

impl ember_engine::Device for OnTheMedium {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write_at(offset, data)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.0.sync()
    }
    fn trim(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.0.trim(offset, len)
    }
    fn describe(&self) -> String {
        "memory read as if O_DIRECT".into()
    }
    fn reads_from_memory(&self) -> bool {
        false
    }
}

#[test]
fn hits_on_a_device_read_from_the_medium_are_not_fast() {
    let rig = Rig::new(Arc::new(OnTheMedium(MemDevice::new(1 << 20))), 1, 64, 7);
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let mut buf = vec![0u8; 4096];
    v.read(0, &mut buf).unwrap();
    v.read(0, &mut buf).unwrap();
    assert_eq!(engine.stats().total.read_hits, 1, "block 0 is cached");
    assert!(!v.resident(0, 4096));
}
