//! One WRITE_ZEROES (or TRIM) of a gigabyte on a slow backing must not hold
//! up a cached read of another block. Before the fix the request held every stripe lock for
//! the whole backing call, so the read waited for the zeroing to finish.
//!
//! The check is about blocking, not speed: the read's latency is measured while the zeroing
//! is still in progress (asserted), with a generous bound.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::MemDevice;
use ember_engine::{Device, WriteMode, WritebackConfig};
use ember_testkit::engine::{format, open_lru};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BS: u64 = 4096;
const GIB: u64 = 1 << 30;
/// The volume: 2 GiB, sparse in memory.
const VOL: u64 = 2 * GIB;
/// How long the slow disk takes to zero or discard a GiB.
const PER_GIB: Duration = Duration::from_millis(3000);
/// Bound on the cached read's latency during the zeroing: a hit costs microseconds and a read
/// held behind the zeroing waits its three seconds; the bound leaves room for a loaded machine.
const BOUND: Duration = Duration::from_millis(500);

/// A sparse disk whose TRIM and WRITE_ZEROES take time in proportion to their length (a
/// thin-provisioned array zeroing its extents); reads and writes are immediate.
#[derive(Default)]
struct SlowDisk {
    blocks: Mutex<HashMap<u64, Vec<u8>>>,
    discards: AtomicU64,
}

impl SlowDisk {
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.discards.fetch_add(1, SeqCst);
        assert!(offset.is_multiple_of(BS) && len.is_multiple_of(BS), "test discards whole blocks");
        std::thread::sleep(PER_GIB.mul_f64(len as f64 / GIB as f64));
        let mut m = self.blocks.lock();
        m.retain(|&b, _| !(offset / BS..(offset + len) / BS).contains(&b));
        Ok(())
    }
}

impl Device for SlowDisk {
    fn size(&self) -> u64 {
        VOL
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let m = self.blocks.lock();
        for (i, chunk) in buf.chunks_mut(BS as usize).enumerate() {
            let pos = offset + i as u64 * BS;
            assert!(pos.is_multiple_of(BS), "the engine reads backing in whole blocks");
            match m.get(&(pos / BS)) {
                Some(d) => chunk.copy_from_slice(&d[..chunk.len()]),
                None => chunk.fill(0),
            }
        }
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        assert!(offset.is_multiple_of(BS) && data.len().is_multiple_of(BS as usize));
        let mut m = self.blocks.lock();
        for (i, chunk) in data.chunks(BS as usize).enumerate() {
            m.insert(offset / BS + i as u64, chunk.to_vec());
        }
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.discard(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.discard(offset, len)
    }
    fn describe(&self) -> String {
        "slow sparse disk".into()
    }
}

fn run(mode: WriteMode, zeroes: bool) {
    let backing = Arc::new(SlowDisk::default());
    let cache: Arc<dyn Device> = Arc::new(MemDevice::new(8 << 20));
    let journal = if mode == WriteMode::WriteBackPersist { 1 << 20 } else { 0 };
    format(cache.as_ref(), &[("v", VOL)], Some(journal));
    let volumes: Vec<(&str, Arc<dyn Device>)> = vec![("v", backing.clone())];
    let engine = open_lru(cache, volumes, mode, WritebackConfig::default()).unwrap();
    let v = engine.volume("v").unwrap();
    // Data in the range to zero, and outside it; the block outside is cached (dirty under
    // the write-back policies, then read once more so it is a hit either way).
    let inside = 12345 * BS;
    let outside = GIB + 777 * BS;
    v.write(inside, &[0xAB; BS as usize], false).unwrap();
    v.write(outside, &[0xCD; BS as usize], false).unwrap();
    let mut buf = vec![0u8; BS as usize];
    v.read(outside, &mut buf).unwrap();
    assert_eq!(buf, vec![0xCD; BS as usize]);
    let hits0 = engine.stats().total.read_hits;
    v.read(outside, &mut buf).unwrap();
    assert_eq!(engine.stats().total.read_hits, hits0 + 1, "the block outside is cached");

    let done = Arc::new(AtomicBool::new(false));
    let zeroing = {
        let (v, done) = (v.clone(), done.clone());
        std::thread::spawn(move || {
            let t = Instant::now();
            let r =
                if zeroes { v.write_zeroes(0, GIB, false, true) } else { v.trim(0, GIB, false) };
            done.store(true, SeqCst);
            (r, t.elapsed())
        })
    };
    // Wait until the backing is busy zeroing.
    let t0 = Instant::now();
    while backing.discards.load(SeqCst) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "the zeroing never reached backing");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    let mut worst = Duration::ZERO;
    for _ in 0..5 {
        let t = Instant::now();
        v.read(outside, &mut buf).unwrap();
        let lat = t.elapsed();
        let finished = done.load(SeqCst);
        assert!(
            lat < BOUND,
            "a cached read waited {lat:?} behind a 1 GiB discard (discard finished: {finished})"
        );
        assert!(!finished, "the zeroing must still be in progress when the read ends");
        assert!(buf == vec![0xCD; BS as usize], "the cached block's bytes");
        worst = worst.max(lat);
        // A read inside the range while backing still holds the old bytes: whatever it
        // returns, it must not be cached (checked after the discard).
        v.read(inside, &mut buf).unwrap();
        assert!(buf == vec![0xAB; BS as usize] || buf == vec![0u8; BS as usize]);
        std::thread::sleep(Duration::from_millis(10));
    }
    let (r, took) = zeroing.join().unwrap();
    r.unwrap();
    eprintln!("{mode:?} zeroes={zeroes}: worst cached read {worst:?} during a {took:?} discard");
    assert!(worst < BOUND, "a cached read waited {worst:?} behind a 1 GiB discard");
    // The discard took effect, and the block outside kept its data.
    v.read(inside, &mut buf).unwrap();
    assert!(buf == vec![0u8; BS as usize], "zeroed: no copy read during the discard was cached");
    v.read(outside, &mut buf).unwrap();
    assert_eq!(buf, vec![0xCD; BS as usize]);
    engine.shutdown().unwrap();
    // Under write-back, the block outside reached backing at the clean stop; inside did not
    // come back.
    let mut raw = vec![0u8; BS as usize];
    backing.read_at(inside, &mut raw).unwrap();
    assert_eq!(raw, vec![0u8; BS as usize], "backing zeroed inside");
}

ember_testkit::test_cases!(run {
    write_zeroes_of_a_gib_does_not_block_a_cached_read_write_through: (
        WriteMode::WriteThrough,
        true
    ),
    trim_of_a_gib_does_not_block_a_cached_read_write_back_flush: (WriteMode::WriteBackFlush, false),
    write_zeroes_of_a_gib_does_not_block_a_cached_read_write_back_persist: (
        WriteMode::WriteBackPersist,
        true
    ),
});
