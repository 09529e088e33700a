//! Degraded mode through the engine's API: a cache device that fails (the fault-injecting
//! device), hangs (a device that sleeps past the timeout) or is given up by the operator;
//! what clients see under write-through and write-back, and the lost list.

use crate::device::hooked::{Hooked, Hooks};
use crate::device::{Device, FaultDevice, IoKind, MemDevice};
use crate::health::{DegradeCause, DegradedRecord, HealthConfig};
use crate::wb::tests::{block, format, open, BS, VOL};
use crate::{DirtyLimit, Engine, WriteMode, WritebackConfig};
use parking_lot::Mutex;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const ALL: &[IoKind] = &[IoKind::Read, IoKind::Write, IoKind::Sync, IoKind::Discard];

/// The flusher idles (min_dirty above anything these tests write).
fn lazy() -> WritebackConfig {
    WritebackConfig {
        max_dirty: Some(DirtyLimit::Blocks(200)),
        min_dirty: Some(DirtyLimit::Blocks(100)),
        max_epochs: 8,
        batch_blocks: 4,
        lru_flush_order: false,
    }
}

/// A formatted faulty cache, a memory backing, and the engine over them.
fn engine(mode: WriteMode) -> (Arc<FaultDevice>, Arc<MemDevice>, Engine) {
    let mem = Arc::new(MemDevice::new(1 << 20));
    format(mem.as_ref());
    let cache = Arc::new(FaultDevice::new(mem).unwrap());
    let backing = Arc::new(MemDevice::new(VOL));
    let e = open(cache.clone(), backing.clone(), mode, lazy()).unwrap();
    (cache, backing, e)
}

/// Records handed to the sink, in order.
fn sink(e: &Engine) -> Arc<Mutex<Vec<DegradedRecord>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    e.set_degraded_sink(Box::new(move |r: &DegradedRecord| {
        g.lock().push(r.clone());
        Ok(())
    }));
    got
}

fn read_block(v: &crate::Volume, b: u64) -> io::Result<Vec<u8>> {
    let mut buf = block(0);
    v.read(b * BS, &mut buf).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(buf)
}

#[test]
fn write_through_and_around_serve_every_request_after_the_cache_fails() {
    for mode in [WriteMode::WriteThrough, WriteMode::WriteAround] {
        let (cache, backing, e) = engine(mode);
        e.set_health(HealthConfig { error_limit: 3, ..HealthConfig::default() });
        let records = sink(&e);
        let v = e.volume("v").unwrap();
        let mut model = [0u8; 16];
        for b in 0..16u64 {
            v.write(b * BS, &block(b as u8 + 1), false).unwrap();
            model[b as usize] = b as u8 + 1;
            assert_eq!(read_block(&v, b).unwrap(), block(model[b as usize]));
        }
        cache.fail_nth(1, ALL, true);
        for round in 0..3u8 {
            for b in 0..16u64 {
                let val = 100 + round * 16 + b as u8;
                v.write(b * BS, &block(val), b % 3 == 0).unwrap_or_else(|e| panic!("{mode}: {e}"));
                model[b as usize] = val;
                let got = read_block(&v, b).unwrap_or_else(|e| panic!("{mode}: {e}"));
                assert_eq!(got, block(model[b as usize]), "{mode}: block {b}");
            }
            v.flush().unwrap();
        }
        let h = e.health();
        assert_eq!(h.state, "degraded", "{mode}: {h:?}");
        assert_eq!(h.lost_blocks, 0);
        let recs = records.lock();
        assert_eq!(recs.len(), 1, "{mode}: one record at the switch");
        assert!(recs[0].degraded && recs[0].lost.is_empty());
        assert!(e.status().volumes[0].degraded_requests > 0);
        drop(recs);
        let snap = backing.snapshot();
        for b in 0..16usize {
            assert!(snap[b * BS as usize..(b + 1) * BS as usize].iter().all(|&x| x == model[b]));
        }
        assert!(e.shutdown().is_err(), "a degraded cache is not shut down cleanly");
    }
}

#[test]
fn a_failed_sync_degrades_at_once_and_the_flush_still_succeeds() {
    let (cache, _backing, e) = engine(WriteMode::WriteThrough);
    let v = e.volume("v").unwrap();
    v.write(0, &block(5), false).unwrap();
    cache.fail_nth(1, &[IoKind::Sync], true);
    v.flush().unwrap();
    let h = e.health();
    assert_eq!((h.state, h.cause.clone()), ("degraded", Some(DegradeCause::SyncFailed)));
    assert_eq!(read_block(&v, 0).unwrap(), block(5));
}

#[test]
fn write_back_lists_the_dirty_blocks_and_refuses_to_read_them() {
    let (_cache, backing, e) = engine(WriteMode::WriteBackFlush);
    let records = sink(&e);
    let v = e.volume("v").unwrap();
    for b in 0..4u64 {
        v.write(b * BS, &block(0x40 + b as u8), false).unwrap();
    }
    assert!(e.degrade("operator test"));
    assert!(!e.degrade("again"), "decided once");
    let rec = records.lock()[0].clone();
    assert!(rec.degraded);
    assert_eq!(rec.lost.get("v"), Some(&vec![0, BS, 2 * BS, 3 * BS]));
    assert_eq!(e.lost_blocks("v"), 4);
    // A listed block: EIO, never backing's older bytes; an unlisted one: backing.
    assert!(read_block(&v, 0).is_err());
    assert_eq!(read_block(&v, 10).unwrap(), block(0));
    assert!(e.status().volumes[0].io_errors > 0);
    // A whole-block write makes block 1 current; a partial one leaves block 2 listed.
    v.write(BS, &block(0x77), false).unwrap();
    assert_eq!(read_block(&v, 1).unwrap(), block(0x77));
    v.write(2 * BS + 100, &[9u8; 10], false).unwrap();
    assert!(read_block(&v, 2).is_err());
    let last = records.lock().last().cloned().unwrap();
    assert_eq!(last.lost.get("v"), Some(&vec![0, 2 * BS, 3 * BS]));
    v.flush().unwrap();
    assert!(e.flush_all(&mut |_| {}).is_err(), "nothing left to flush on a dead device");
    assert!(e.set_write_mode(WriteMode::WriteThrough, &mut |_| {}).is_err());
    // The operator accepts backing's version.
    assert_eq!(e.clear_lost("v").unwrap(), 3);
    assert_eq!(records.lock().last().unwrap().lost.get("v"), None);
    let mut want = block(0);
    want[100..110].fill(9);
    assert_eq!(read_block(&v, 2).unwrap(), want);
    assert_eq!(read_block(&v, 0).unwrap(), block(0));
    assert_eq!(&backing.snapshot()[BS as usize..2 * BS as usize], &block(0x77)[..]);
    assert!(e.shutdown().is_err());
}

#[test]
fn write_back_failing_writes_degrade_and_the_lost_list_is_what_was_dirty() {
    let (cache, _backing, e) = engine(WriteMode::WriteBackFlush);
    e.set_health(HealthConfig { error_limit: 2, ..HealthConfig::default() });
    let records = sink(&e);
    let v = e.volume("v").unwrap();
    for b in [1u64, 3, 5] {
        v.write(b * BS, &block(b as u8), false).unwrap();
    }
    cache.fail_nth(1, &[IoKind::Write], true);
    let mut errors = 0;
    for b in 10..20u64 {
        if v.write(b * BS, &block(b as u8), false).is_err() {
            errors += 1;
        }
    }
    assert!(errors <= 2, "only the writes before the switch fail: {errors}");
    assert_eq!(e.health().state, "degraded");
    let rec = records.lock()[0].clone();
    assert_eq!(rec.lost.get("v"), Some(&vec![BS, 3 * BS, 5 * BS]), "the dirty blocks");
    for b in 10..20u64 {
        if b >= 12 {
            assert_eq!(read_block(&v, b).unwrap(), block(b as u8), "written degraded");
        }
    }
}

#[test]
fn a_restored_list_refuses_the_volume_until_cleared() {
    let (_cache, _backing, e) = engine(WriteMode::WriteThrough);
    let records = sink(&e);
    assert!(!e.is_refused("v"));
    // An earlier run's record with 8 KiB blocks: one listed block is two of these.
    assert_eq!(e.restore_lost("v", 8192, &[0]).unwrap(), 2);
    assert!(e.is_refused("v"));
    assert!(e.status().volumes[0].refused);
    assert!(e.restore_lost("nope", 4096, &[0]).is_err());
    assert_eq!(e.clear_lost("v").unwrap(), 2);
    assert!(!e.is_refused("v"));
    assert!(!records.lock().last().unwrap().degraded, "the cache itself is healthy");
}

/// A memory device whose I/O sleeps far past any timeout once `hang` is set.
struct Hanging {
    hang: AtomicBool,
}

impl Hanging {
    fn wait(&self) -> io::Result<()> {
        if self.hang.load(SeqCst) {
            std::thread::sleep(Duration::from_secs(30));
        }
        Ok(())
    }
}

impl Hooks for Hanging {
    fn describe(&self) -> String {
        "hanging".into()
    }
    fn before_read(&self, _: u64, _: u64) -> io::Result<()> {
        self.wait()
    }
    fn before_write(&self, _: u64, _: u64) -> io::Result<()> {
        self.wait()
    }
    fn before_sync(&self) -> io::Result<()> {
        self.wait()
    }
    fn before_trim(&self, _: u64, _: u64) -> io::Result<()> {
        self.wait()
    }
}

#[test]
fn a_hung_cache_device_times_out_and_write_through_goes_on_from_backing() {
    let hanging = Hanging { hang: AtomicBool::new(false) };
    let dev = Arc::new(Hooked::wrap(Arc::new(MemDevice::new(1 << 20)), hanging));
    format(dev.as_ref());
    let backing = Arc::new(MemDevice::new(VOL));
    let e = open(dev.clone(), backing, WriteMode::WriteThrough, lazy()).unwrap();
    e.set_health(HealthConfig {
        io_timeout: Some(Duration::from_millis(100)),
        ..HealthConfig::default()
    });
    let v = e.volume("v").unwrap();
    v.write(0, &block(1), false).unwrap();
    assert_eq!(read_block(&v, 0).unwrap(), block(1));
    dev.hang.store(true, SeqCst);
    let t = std::time::Instant::now();
    v.write(0, &block(2), false).unwrap();
    assert_eq!(read_block(&v, 0).unwrap(), block(2));
    v.write(BS, &block(3), true).unwrap();
    assert_eq!(read_block(&v, 1).unwrap(), block(3));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let h = e.health();
    assert_eq!((h.state, h.cause.clone()), ("degraded", Some(DegradeCause::Timeout)), "{h:?}");
}

#[test]
fn a_degraded_read_is_answered_at_once_from_backing_memory_except_a_listed_block() {
    let (_cache, backing, e) = engine(WriteMode::WriteBackFlush);
    let v = e.volume("v").unwrap();
    v.write(0, &block(0x41), false).unwrap();
    backing.write_at(5 * BS, &block(0x55)).unwrap();
    let mut buf = block(0);
    assert!(v.read_if_resident(5 * BS, &mut buf).is_none(), "a miss while healthy");
    assert!(e.degrade("operator test"));
    let before = e.status().volumes[0].degraded_requests;
    assert!(matches!(v.read_if_resident(5 * BS, &mut buf), Some(Ok(()))));
    assert_eq!(buf, block(0x55));
    assert_eq!(e.status().volumes[0].degraded_requests, before + 1);
    // A listed block is left to the ordinary path, which says EIO.
    assert!(v.read_if_resident(0, &mut buf).is_none());
    assert!(read_block(&v, 0).is_err());
    // A stripe held by a request in flight: declined, never waited for.
    {
        let _held = e.inner.stripes.lock(0, 5..6).unwrap();
        assert!(v.read_if_resident(5 * BS, &mut buf).is_none());
    }
    // Several at once (the run of an O_DIRECT cache's reader).
    let (mut a, mut b) = (block(0), block(0));
    let mut reads = [
        crate::HitRead { offset: 5 * BS, buf: &mut a, outcome: None },
        crate::HitRead { offset: 0, buf: &mut b, outcome: None },
    ];
    v.read_hits(&mut reads);
    assert!(matches!(reads[0].outcome, Some(Ok(()))));
    assert!(reads[1].outcome.is_none());
    assert_eq!(a, block(0x55));
}
