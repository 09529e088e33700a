//! Replacing a failed cache device while serving, through the engine's API: the refusals,
//! the cold cache that hits again, the lost list untouched, the failed device never touched
//! again, requests running through the swap, and a crash after it.

use crate::device::{Device, MemDevice};
use crate::health::DegradedRecord;
use crate::wb::tests::{block, format, open, BS, VOL};
use crate::{DirtyLimit, Engine, EngineError, WriteMode, WritebackConfig};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

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

/// Records handed to a sink, in order, and the sink.
fn records() -> (Arc<Mutex<Vec<DegradedRecord>>>, crate::DegradedSink) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    (
        got,
        Box::new(move |r: &DegradedRecord| {
            g.lock().push(r.clone());
            Ok(())
        }),
    )
}

fn read_block(v: &crate::Volume, b: u64) -> Result<Vec<u8>, EngineError> {
    let mut buf = block(0);
    v.read(b * BS, &mut buf)?;
    Ok(buf)
}

fn hits(e: &Engine) -> u64 {
    e.stats().total.read_hits
}

#[test]
fn a_degraded_cache_takes_a_new_device_and_caches_again() {
    for mode in [WriteMode::WriteThrough, WriteMode::WriteBackFlush, WriteMode::WriteBackPersist] {
        let old = Arc::new(MemDevice::new(1 << 20));
        format(old.as_ref());
        let backing = Arc::new(MemDevice::new(VOL));
        let e = open(old.clone(), backing.clone(), mode, lazy()).unwrap();
        let (first, sink) = records();
        e.set_degraded_sink(sink);
        let v = e.volume("v").unwrap();
        for b in 0..4u64 {
            v.write(b * BS, &block(0x10 + b as u8), false).unwrap();
        }
        let fresh = || -> Arc<dyn Device> { Arc::new(MemDevice::new(1 << 20)) };
        let (_, sink) = records();
        let r = e.replace_cache(fresh(), false, sink);
        assert!(matches!(r, Err(EngineError::Refused(ref m)) if m.contains("healthy")), "{mode}");

        assert!(e.degrade("operator test"));
        let lost = if mode.is_write_back() { 4 } else { 0 };
        assert_eq!(e.lost_blocks("v"), lost, "{mode}");
        let old_bytes = old.snapshot();

        let (_, sink) = records();
        let small: Arc<dyn Device> = Arc::new(MemDevice::new(64 << 10));
        let r = e.replace_cache(small, false, sink);
        assert!(matches!(r, Err(EngineError::Refused(ref m)) if m.contains("needs")), "{r:?}");
        let formatted = fresh();
        format(formatted.as_ref());
        let (_, sink) = records();
        let r = e.replace_cache(formatted.clone(), false, sink);
        assert!(matches!(r, Err(EngineError::Refused(ref m)) if m.contains("--format")), "{r:?}");
        assert_eq!(e.health().state, "degraded", "a refusal changes nothing");

        let (after, sink) = records();
        let report = e.replace_cache(formatted, true, sink).unwrap();
        assert!(report.reformatted);
        assert_eq!(report.lost_blocks, lost);
        assert_eq!(e.health().state, "healthy", "{mode}");
        let rec = after.lock()[0].clone();
        assert!(!rec.degraded && rec.reason.is_empty());
        assert_eq!(rec.lost.get("v").map_or(0, |l| l.len() as u64), lost, "{mode}");
        assert_eq!(e.lost_blocks("v"), lost, "the lost list is unchanged");
        assert_eq!(e.stats().resident_blocks, 0, "{mode}: the new cache starts cold");
        if lost > 0 {
            assert!(read_block(&v, 0).is_err(), "{mode}: a listed block still reads EIO");
        } else {
            assert_eq!(read_block(&v, 0).unwrap(), block(0x10));
        }

        // Caching again: a block read twice hits the second time.
        v.write(10 * BS, &block(0xa0), false).unwrap();
        let h = hits(&e);
        assert_eq!(read_block(&v, 12).unwrap(), block(0));
        assert_eq!(read_block(&v, 12).unwrap(), block(0));
        assert_eq!(read_block(&v, 10).unwrap(), block(0xa0));
        assert!(hits(&e) > h, "{mode}: hits grow again");
        v.flush().unwrap();
        if mode.is_write_back() {
            e.flush_all(&mut |_| {}).unwrap();
        }
        assert_eq!(&backing.snapshot()[(10 * BS) as usize..(11 * BS) as usize], &block(0xa0)[..]);
        assert_eq!(old.snapshot(), old_bytes, "{mode}: the failed device is never touched");
        // A listed block stays listed through writes until the operator clears it.
        v.write(0, &block(0x55), false).unwrap();
        if lost > 0 {
            assert!(read_block(&v, 0).is_err(), "{mode}: listed until clear-lost");
            assert_eq!(e.clear_lost("v").unwrap(), lost);
            assert!(!after.lock().last().unwrap().lost.contains_key("v"));
        }
        assert_eq!(read_block(&v, 0).unwrap(), block(0x55), "{mode}");
        assert_eq!(first.lock().len(), 1, "{mode}: the old sink is not called again");
        assert!(e.shutdown().is_ok(), "{mode}: a clean stop on the new device");
    }
}

#[test]
fn a_crash_after_the_replacement_recovers_from_the_new_device() {
    let old = Arc::new(MemDevice::new(1 << 20));
    format(old.as_ref());
    let backing = Arc::new(MemDevice::new(VOL));
    let new = Arc::new(MemDevice::new(2 << 20));
    {
        let e = open(old.clone(), backing.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
        let v = e.volume("v").unwrap();
        v.write(0, &block(1), false).unwrap();
        assert!(e.degrade("operator test"));
        let (_, sink) = records();
        let r = e.replace_cache(new.clone(), false, sink).unwrap();
        assert!(r.unused_bytes >= 1 << 20, "a larger device keeps the layout: {r:?}");
        v.write(5 * BS, &block(5), false).unwrap();
        v.flush().unwrap();
        // A crash: no shutdown.
    }
    assert_eq!(&backing.snapshot()[(5 * BS) as usize..(6 * BS) as usize], &block(0)[..]);
    let e = open(new, backing, WriteMode::WriteBackPersist, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    assert_eq!(read_block(&v, 5).unwrap(), block(5), "the flushed write is recovered");
    assert_eq!(e.dirty_blocks(), 1);
}

#[test]
fn requests_run_through_a_replacement_and_never_see_wrong_bytes() {
    let old = Arc::new(MemDevice::new(1 << 20));
    format(old.as_ref());
    let backing = Arc::new(MemDevice::new(VOL));
    let e = Arc::new(open(old, backing, WriteMode::WriteThrough, lazy()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (e, stop) = (e.clone(), stop.clone());
        std::thread::spawn(move || {
            let v = e.volume("v").unwrap();
            let mut model = [0u8; 32];
            let mut i = 0u64;
            while !stop.load(SeqCst) {
                let b = (i * 7) % 32;
                let val = (i % 251) as u8 + 1;
                v.write(b * BS, &block(val), false).unwrap();
                model[b as usize] = val;
                let r = (i * 13) % 32;
                assert_eq!(read_block(&v, r).unwrap(), block(model[r as usize]), "block {r}");
                i += 1;
            }
            i
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(e.degrade("operator test"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (_, sink) = records();
    e.replace_cache(Arc::new(MemDevice::new(1 << 20)), false, sink).unwrap();
    // The worker's writes after the replacement cache on the new device (however slowly a
    // loaded machine schedules it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while e.stats().resident_blocks == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    stop.store(true, SeqCst);
    assert!(worker.join().unwrap() > 0);
    assert_eq!(e.health().state, "healthy");
    assert!(e.stats().resident_blocks > 0, "the new device caches");
}

#[test]
fn a_warmup_log_in_its_own_file_preloads_the_new_device() {
    let dir = tempfile::tempdir().unwrap();
    let old = Arc::new(MemDevice::new(1 << 20));
    format(old.as_ref());
    let backing = Arc::new(MemDevice::new(VOL));
    let e = open(old, backing, WriteMode::WriteThrough, lazy()).unwrap();
    let mut opts = crate::warmup::WarmupOptions::new(dir.path().join("warmup.log"));
    opts.region_bytes = BS;
    e.start_warmup(&opts).unwrap();
    let v = e.volume("v").unwrap();
    for b in 0..8u64 {
        read_block(&v, b).unwrap();
    }
    // The log writer drains its staging buffer every 10 ms: wait for the eight records (32
    // bytes each) to be in the log file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while e.warmup_stats().log_bytes_written < 8 * 32 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(e.degrade("operator test"));
    let (_, sink) = records();
    let r = e.replace_cache(Arc::new(MemDevice::new(1 << 20)), false, sink).unwrap();
    let line = r.warmup.unwrap_or_default();
    assert!(line.starts_with("preloading"), "{line}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while e.stats().resident_blocks < 8 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(e.stats().resident_blocks >= 8, "the logged blocks are preloaded");
    let h = hits(&e);
    assert_eq!(read_block(&v, 3).unwrap(), block(0));
    assert!(hits(&e) > h, "a preloaded block hits");
    e.shutdown().unwrap();
}
