//! `Volume::read_hits` (`ember serve --direct` at depth): a run of READs whose
//! blocks are resident is served with every cache-device read in flight at once (io_uring
//! on an O_DIRECT file), byte-exact; the others are declined having done nothing; and a
//! write to a block whose batched read is in flight waits for that read (the stripe locks
//! and pins are held across it), so no read is ever served data older than a write
//! acknowledged before it was issued.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::{
    reads_through_io_uring, AlignedBuf, FileDevice, FileOptions, MemDevice,
};
use ember_engine::{Device, HitRead, WriteMode};
use ember_testkit::devices::{Wrap, Wrapper};
use ember_testkit::engine::*;
use ember_testkit::io_uring_available;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[test]
fn a_run_of_hits_on_an_o_direct_file_is_served_byte_exact_and_misses_are_declined() {
    // Under target/, which is on a disk file system (tmpfs refuses O_DIRECT).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dev = FileDevice::open(
        &dir.path().join("cache.img"),
        FileOptions { direct: true, create_size: Some(2 << 20), exclusive: false },
    )
    .expect("O_DIRECT cache file");
    let rig = Rig::new(Arc::new(dev), 1, 128, 21);
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let mut model = rig.model().remove(0);
    let bs = BS as usize;
    // Blocks 0..48 cached by read misses; block 7 rewritten through the cache.
    let mut scratch = vec![0u8; 48 * bs];
    v.read(0, &mut scratch).unwrap();
    let seven: Vec<u8> = (0..bs).map(|i| (i * 13 % 251) as u8).collect();
    v.write(7 * BS, &seven, false).unwrap();
    model[7 * bs..8 * bs].copy_from_slice(&seven);
    let before = engine.stats().total;
    // 40 READs: 1- and 2-block hits (block 7 among them), a miss (block 100), a READ
    // straddling cached and uncached blocks (47..49), and a partial block (declined).
    let mut plan: Vec<(u64, usize)> =
        (0..36u64).map(|i| ((i * 5) % 46, 1 + (i % 2) as usize)).collect();
    plan.push((7, 1));
    plan.push((100, 1));
    plan.push((47, 2));
    plan.push((3, 0)); // marker for the partial read below
                       // Every buffer in its own 4 KiB-aligned slot of one allocation (what O_DIRECT needs
                       // for the reads to go out through io_uring without a bounce copy).
    let mut slots = AlignedBuf::new(plan.len() * 2 * bs);
    let mut rest: &mut [u8] = slots.as_mut_slice();
    let mut reads: Vec<HitRead<'_>> = Vec::new();
    for &(b, n) in &plan {
        let (slot, tail) = std::mem::take(&mut rest).split_at_mut(2 * bs);
        rest = tail;
        let len = if n == 0 { 100 } else { n * bs };
        reads.push(HitRead { offset: b * BS, buf: &mut slot[..len], outcome: None });
    }
    let uring_before = reads_through_io_uring();
    v.read_hits(&mut reads);
    let uring_reads = reads_through_io_uring() - uring_before;
    let outcomes: Vec<Option<bool>> =
        reads.iter().map(|r| r.outcome.as_ref().map(|o| o.is_ok())).collect();
    drop(reads);
    let bufs: Vec<&[u8]> = slots
        .as_slice()
        .chunks(2 * bs)
        .zip(&plan)
        .map(|(slot, &(_, n))| &slot[..if n == 0 { 100 } else { n * bs }])
        .collect();
    let mut served_blocks = 0;
    for (k, (&(b, n), buf)) in plan.iter().zip(&bufs).enumerate() {
        let want_served = n > 0 && b + n as u64 <= 48;
        assert_eq!(outcomes[k], want_served.then_some(true), "READ {k} at block {b} x {n}");
        if want_served {
            let at = b as usize * bs;
            assert!(buf[..] == model[at..at + n * bs], "READ {k} at block {b}: bytes");
            served_blocks += n as u64;
        } else {
            assert!(buf.iter().all(|&x| x == 0), "a declined READ {k} wrote nothing");
        }
    }
    let after = engine.stats().total;
    assert_eq!(after.read_hits - before.read_hits, served_blocks);
    assert_eq!(after.read_misses, before.read_misses, "declined READs count nothing");
    assert_eq!(after.read_requests - before.read_requests, 37);
    assert_eq!(after.cache_read_bytes - before.cache_read_bytes, served_blocks * BS);
    // At least one device read per served READ (one per run of adjacent cache blocks) went
    // through the ring, unless this kernel or sandbox has no io_uring.
    if io_uring_available() {
        assert!(uring_reads >= 37, "{uring_reads} reads through io_uring");
    }
}

/// A device whose `read_many` waits at a gate (reads in flight that have not completed).
struct Gated {
    inner: MemDevice,
    gate: Mutex<bool>,
    changed: Condvar,
    entered: AtomicBool,
}

impl Gated {
    fn open(&self) {
        *self.gate.lock().unwrap() = true;
        self.changed.notify_all();
    }
}

impl Wrapper for Gated {
    fn inner(&self) -> &dyn Device {
        &self.inner
    }
    fn read_many(
        &self,
        reads: &mut [(u64, &mut [u8])],
        done: &mut dyn FnMut(usize, io::Result<()>),
    ) {
        // The reads take their data now, then "complete" only once the gate opens.
        for (i, (offset, buf)) in reads.iter_mut().enumerate() {
            let r = self.inner.read_at(*offset, buf);
            self.entered.store(true, Ordering::SeqCst);
            let mut open = self.gate.lock().unwrap();
            while !*open {
                open = self.changed.wait(open).unwrap();
            }
            done(i, r);
        }
    }
    fn describe(&self) -> String {
        "gated".into()
    }
    fn identity(&self) -> io::Result<ember_engine::device::Identity> {
        self.inner.identity()
    }
}

#[test]
fn a_write_waits_for_the_batched_read_in_flight_on_its_block() {
    for mode in [WriteMode::WriteThrough, WriteMode::WriteBackFlush] {
        let dev = Arc::new(Wrap(Gated {
            inner: MemDevice::new(1 << 20),
            gate: Mutex::new(true),
            changed: Condvar::new(),
            entered: AtomicBool::new(false),
        }));
        let rig = Rig::new(dev.clone(), 1, 64, 3);
        let engine = rig.open(mode).unwrap();
        let v = exports(&engine, &rig).remove(0);
        let old = rig.model().remove(0);
        let bs = BS as usize;
        let mut scratch = vec![0u8; 8 * bs];
        v.read(0, &mut scratch).unwrap(); // blocks 0..8 cached
        *dev.gate.lock().unwrap() = false;
        let new: Vec<u8> = vec![0xA5; bs];
        let wrote = Arc::new(AtomicBool::new(false));
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut a = vec![0u8; bs];
                let mut b = vec![0u8; 2 * bs];
                let mut reads = [
                    HitRead { offset: 5 * BS, buf: &mut a, outcome: None },
                    HitRead { offset: 2 * BS, buf: &mut b, outcome: None },
                ];
                v.read_hits(&mut reads);
                assert!(reads.iter().all(|r| matches!(r.outcome, Some(Ok(())))), "{mode:?}");
                (a, b)
            });
            while !dev.entered.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let writer = s.spawn(|| {
                v.write(5 * BS, &new, false).unwrap();
                wrote.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(200));
            let early = wrote.load(Ordering::SeqCst);
            // Open the gate before any assertion, so a failure cannot leave the scope hung.
            dev.open();
            let (a, b) = reader.join().unwrap();
            writer.join().unwrap();
            assert!(
                !early,
                "{mode:?}: the write to block 5 was acknowledged while its read was in flight"
            );
            assert!(a == old[5 * bs..6 * bs], "{mode:?}: the read in flight saw block 5 whole");
            assert!(b == old[2 * bs..4 * bs], "{mode:?}");
        });
        // After the write: the new bytes, through a batch and through the plain path.
        let mut a = vec![0u8; bs];
        let mut reads = [HitRead { offset: 5 * BS, buf: &mut a, outcome: None }];
        v.read_hits(&mut reads);
        assert!(matches!(reads[0].outcome, Some(Ok(()))));
        assert_eq!(a, new, "{mode:?}: the read after the write sees it");
        let mut c = vec![0u8; bs];
        v.read(5 * BS, &mut c).unwrap();
        assert_eq!(c, new);
    }
}
