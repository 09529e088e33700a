//! A WRITE_ZEROES (or TRIM) and a WRITE on different bytes of one block, at the same time,
//! under the write-back policies: both must take effect. The block holds a dirty version, the
//! discard covers its second half, the write its first half. The discard raises its fence,
//! writes the dirty edge back and passes down to backing without holding the block's lock;
//! a write planned inside the fence went through to backing merged with the dirty version,
//! so it put the old second half back over the zeroes once the zeroing had reached backing.
//! Before the fix the block read back `0xAA` (the old bytes) where the acknowledged
//! WRITE_ZEROES had zeroed it.
//!
//! Deterministic: the backing holds the discard inside its backing call (after the zeroes
//! landed) until the write has finished, or for 2 s if the write waits for the discard (the
//! fixed engine: a write-back write to a fenced block waits until the fence is lowered).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::MemDevice;
use ember_engine::{Device, WriteMode, WritebackConfig};
use ember_testkit::devices::{Wrap, Wrapper};
use ember_testkit::engine::{format, open_lru};
use std::io;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BS: usize = 4096;
const HALF: usize = BS / 2;

/// Memory backing whose TRIM / WRITE_ZEROES, once done, reports on `zeroed` and waits for a
/// word on `release` before returning to the engine.
struct HoldingDisk {
    inner: MemDevice,
    zeroed: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<Option<mpsc::Receiver<()>>>,
}

impl HoldingDisk {
    fn hold(&self) {
        if let Some(tx) = self.zeroed.lock().unwrap().take() {
            let _ = tx.send(());
            if let Some(rx) = self.release.lock().unwrap().take() {
                let _ = rx.recv();
            }
        }
    }
}

impl Wrapper for HoldingDisk {
    fn inner(&self) -> &dyn Device {
        &self.inner
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.write_zeroes(offset, len)?;
        self.hold();
        Ok(())
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.write_zeroes(offset, len)?;
        self.hold();
        Ok(())
    }
    fn describe(&self) -> String {
        "memory disk holding its discards".into()
    }
}

fn run(mode: WriteMode, zeroes: bool) {
    let (zeroed_tx, zeroed_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let backing = Arc::new(Wrap(HoldingDisk {
        inner: MemDevice::new(64 * BS as u64),
        zeroed: Mutex::new(Some(zeroed_tx)),
        release: Mutex::new(Some(release_rx)),
    }));
    let cache: Arc<dyn Device> = Arc::new(MemDevice::new(4 << 20));
    let journal = if mode == WriteMode::WriteBackPersist { 1 << 20 } else { 0 };
    format(cache.as_ref(), &[("v", 64 * BS as u64)], Some(journal));
    let volumes: Vec<(&str, Arc<dyn Device>)> = vec![("v", backing.clone())];
    let engine = open_lru(cache, volumes, mode, WritebackConfig::default()).unwrap();
    let v = engine.volume("v").unwrap();
    // Block 5 gets a dirty version: 0xAA throughout.
    let block = 5 * BS as u64;
    v.write(block, &[0xAA; BS], false).unwrap();

    // The discard of the block's second half, held inside its backing call.
    let discard = {
        let v = v.clone();
        std::thread::spawn(move || {
            let (off, len) = (block + HALF as u64, HALF as u64);
            if zeroes {
                v.write_zeroes(off, len, false, true)
            } else {
                v.trim(off, len, false)
            }
        })
    };
    zeroed_rx.recv_timeout(Duration::from_secs(10)).expect("the discard reached backing");
    // Meanwhile, the write of the block's first half.
    let (wrote_tx, wrote_rx) = mpsc::channel();
    let write = {
        let v = v.clone();
        std::thread::spawn(move || {
            let r = v.write(block, &[0xBB; HALF], false);
            let _ = wrote_tx.send(());
            r
        })
    };
    let finished_first = wrote_rx.recv_timeout(Duration::from_secs(2)).is_ok();
    release_tx.send(()).unwrap();
    discard.join().unwrap().unwrap();
    write.join().unwrap().unwrap();

    let mut back = vec![0u8; BS];
    v.read(block, &mut back).unwrap();
    let mut want = vec![0xBBu8; HALF];
    want.extend_from_slice(&[0u8; HALF]);
    let first_bad = back.iter().zip(&want).position(|(a, b)| a != b);
    assert!(
        first_bad.is_none(),
        "{mode:?} {}: byte {} of the block reads {:#04x}, want {:#04x} (the write finished \
         while the discard was held: {finished_first})",
        if zeroes { "WRITE_ZEROES" } else { "TRIM" },
        first_bad.unwrap_or(0),
        back[first_bad.unwrap_or(0)],
        want[first_bad.unwrap_or(0)],
    );
    engine.shutdown().unwrap();
    if mode.keeps_closed_epochs() {
        // A clean stop writes every dirty block back (write-back persist keeps them dirty
        // in the cache): backing holds the same.
        let mut raw = vec![0u8; BS];
        backing.read_at(block, &mut raw).unwrap();
        assert!(raw == want, "backing after a clean stop differs from what was acknowledged");
    }
}

ember_testkit::test_cases!(run {
    write_zeroes_and_a_write_on_one_block_both_take_effect_write_back_persist: (
        WriteMode::WriteBackPersist,
        true
    ),
    write_zeroes_and_a_write_on_one_block_both_take_effect_write_back_flush: (
        WriteMode::WriteBackFlush,
        true
    ),
    write_zeroes_and_a_write_on_one_block_both_take_effect_ordered_write_back: (
        WriteMode::OrderedWriteBack,
        true
    ),
});
