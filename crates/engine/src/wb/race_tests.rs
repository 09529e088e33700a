//! The flusher against foreground requests on the blocks of the batch it is writing
//!: the flusher holds no stripe lock across its backing writes and
//! sync, so a write to a block of the batch completes while the batch's backing write is
//! stuck; a write that goes to backing directly (write-through fallback at max_dirty) and a
//! WRITE_ZEROES of a block being flushed wait for its in-flight mark, so the flusher's older
//! copy never lands after them; and a version rewritten while in flight stays dirty and is
//! flushed again. Each test checks every byte of backing and of the volume.

use super::tests::{backing_block, block, devices, format, open, BS, VOL};
use crate::device::fault::PowerCut;
use crate::device::hooked::{unidentified, Hooked, Hooks, Trap};
use crate::device::{FaultDevice, Identity, MemDevice};
use crate::{Device, DirtyLimit, Engine, Volume, WriteMode, WritebackConfig};
use parking_lot::Mutex;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Backing that, once armed, holds the next write that arrives until it is released; every
/// other write, read, sync and discard passes at once.
#[derive(Default)]
struct Latch {
    trap: Trap,
}

impl Latch {
    fn arm(&self) {
        self.trap.arm();
    }
    fn release(&self) {
        self.trap.release();
    }
    /// Wait until the armed write arrived (the flusher's batch), at most 10 s.
    fn wait_caught(&self) {
        self.trap.wait_caught("the flusher never wrote to backing");
    }
}

impl Hooks for Latch {
    fn describe(&self) -> String {
        "latch".into()
    }
    fn before_write(&self, _: u64, _: u64) -> std::io::Result<()> {
        self.trap.pass();
        Ok(())
    }
    fn identity(&self, _: &dyn Device) -> std::io::Result<Identity> {
        unidentified()
    }
}

/// The flusher runs as soon as anything is dirty; `max_dirty` bounds the dirty blocks.
fn eager(max_dirty: u64) -> WritebackConfig {
    WritebackConfig {
        max_dirty: Some(DirtyLimit::Blocks(max_dirty)),
        min_dirty: Some(DirtyLimit::Blocks(0)),
        max_epochs: 4,
        batch_blocks: 64,
        lru_flush_order: false,
    }
}

/// An engine under write-back flush over a [`Latch`]ed memory backing, whose flusher is
/// stuck in its backing write of `data` (written at `offset`): (backing memory, latch,
/// engine, volume).
fn stuck_flush(offset: u64, data: &[u8]) -> (Arc<MemDevice>, Arc<Hooked<Latch>>, Engine, Volume) {
    let (cache, mem) = devices();
    let latch = Arc::new(Hooked::wrap(mem.clone(), Latch::default()));
    let e = open(cache, latch.clone(), WriteMode::WriteBackFlush, eager(200)).unwrap();
    let v = e.volume("v").unwrap();
    latch.arm();
    v.write(offset, data, false).unwrap();
    latch.wait_caught();
    (mem, latch, e, v)
}

/// A volume's bytes with block `b` filled with `x` for each (b, x), zeros elsewhere.
fn volume_with(blocks: &[(u64, u8)]) -> Vec<u8> {
    let mut want = vec![0u8; VOL as usize];
    for &(b, x) in blocks {
        want[(b * BS) as usize..((b + 1) * BS) as usize].fill(x);
    }
    want
}

/// The outcome of `f` run by [`within`]: at once if it finished, else waited for (at most
/// 10 s more; `what` names it in the panic).
fn finished<T>(done: Option<T>, rx: &mpsc::Receiver<T>, what: &str) -> T {
    match done {
        Some(r) => r,
        None => rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{what}")),
    }
}

/// Blocks 0..4 holding 1, 2, 3, 4 (one request: one flusher batch, one backing write).
fn four_blocks() -> Vec<u8> {
    (1..=4u8).flat_map(block).collect()
}

/// Every byte of `got` equals `want`; names the first block that differs.
fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len());
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: byte {i} (block {}) is {} where {} was written last",
            i as u64 / BS,
            got[i],
            want[i]
        );
    }
}

/// Run `f` on a thread; Some(result) if it finished within `secs`, None if it is still
/// running (it then finishes on its own once what it waits for is released).
fn within<T: Send + 'static>(
    secs: u64,
    f: impl FnOnce() -> T + Send + 'static,
) -> (Option<T>, mpsc::Receiver<T>) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => (Some(v), rx),
        Err(_) => (None, rx),
    }
}

/// A foreground write to a block of the batch the flusher is writing completes while the
/// batch's backing write is stuck (the flusher once held the batch's stripe locks across
/// it), and its newer version is not marked clean by the old batch: it reaches backing
/// at the next FLUSH.
#[test]
fn a_write_to_a_block_being_flushed_completes_while_backing_is_stuck() {
    let (mem, latch, e, v) = stuck_flush(0, &four_blocks());
    // The batch (blocks 0..4) is stuck in its backing write. Rewrite block 1 and write
    // block 2's neighbour in the same chunk.
    let v2 = v.clone();
    let (done, _rx) = within(5, move || v2.write(BS, &[block(21), block(22)].concat(), false));
    let stuck = done.is_none();
    latch.release();
    assert!(
        !stuck,
        "a foreground write to a block of the batch being flushed waited for the batch's \
         backing write"
    );
    done.unwrap().unwrap();
    v.flush().unwrap();
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    let want = volume_with(&[(0, 1), (1, 21), (2, 22), (3, 4)]);
    assert_bytes(&mem.snapshot(), &want, "backing after the FLUSH");
    let mut got = vec![0u8; VOL as usize];
    v.read(0, &mut got).unwrap();
    assert_bytes(&got, &want, "the volume");
}

/// A write that falls back to write-through (max_dirty reached) of a block whose older
/// version the flusher is writing waits for that backing write: the flusher's older copy
/// must not land after it. Under write-back persist, then a power cut of both devices: the
/// recovered volume holds every byte last written.
#[test]
fn a_write_through_fallback_is_not_overtaken_by_the_flushers_older_copy() {
    let cache = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(1 << 20))).unwrap());
    format(cache.as_ref());
    let mem = Arc::new(MemDevice::new(VOL));
    let backing = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    let latch = Arc::new(Hooked::wrap(backing.clone(), Latch::default()));
    let e = open(cache.clone(), latch.clone(), WriteMode::WriteBackPersist, eager(4)).unwrap();
    let v = e.volume("v").unwrap();
    latch.arm();
    v.write(0, &four_blocks(), false).unwrap();
    latch.wait_caught();
    // Four dirty blocks at max_dirty 4: this write goes through to backing.
    let before = e.stats().total.write_through_fallbacks;
    let v2 = v.clone();
    let (done, rx) = within(1, move || v2.write(2 * BS, &block(33), false));
    latch.release();
    finished(done, &rx, "the write never finished").unwrap();
    assert_eq!(e.stats().total.write_through_fallbacks, before + 1, "it was written through");
    // The flusher's batch ends (blocks 0, 1 and 3 flushed, block 2 dropped by the write).
    let t0 = std::time::Instant::now();
    while e.dirty_stats().dirty_blocks > 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "the flusher's batch never ended");
        std::thread::sleep(Duration::from_millis(1));
    }
    let want = volume_with(&[(0, 1), (1, 2), (2, 33), (3, 4)]);
    v.flush().unwrap();
    let mut got = vec![0u8; VOL as usize];
    v.read(0, &mut got).unwrap();
    assert_bytes(&got, &want, "the volume after the FLUSH");
    assert_eq!(
        backing_block(&mem, 2),
        block(33),
        "backing holds the write, not the flusher's copy"
    );
    // The machine dies after the acknowledged FLUSH: recovery from the same cache device.
    cache.power_cut(PowerCut::DROP_ALL);
    backing.power_cut(PowerCut::DROP_ALL);
    drop(e);
    cache.revive();
    backing.revive();
    let e = open(cache.clone(), backing.clone(), WriteMode::WriteBackPersist, eager(4)).unwrap();
    let v = e.volume("v").unwrap();
    v.read(0, &mut got).unwrap();
    assert_bytes(&got, &want, "the volume recovered after the power cut");
    // Nothing was dirty at the cut, so backing alone holds every byte.
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    e.shutdown().unwrap();
    assert_bytes(&mem.snapshot(), &want, "backing after the clean stop");
}

/// WRITE_ZEROES over a block whose dirty version the flusher is writing (and part of the
/// next one) waits for that backing write: the flusher's copy must not land after the zeros.
#[test]
fn write_zeroes_racing_a_flush_of_its_blocks_leaves_zeros_on_backing() {
    let (mem, latch, e, v) = stuck_flush(0, &four_blocks());
    // All of block 2 and the first 1000 bytes of block 3.
    let v2 = v.clone();
    let (done, rx) = within(1, move || v2.write_zeroes(2 * BS, BS + 1000, false, true));
    latch.release();
    finished(done, &rx, "WRITE_ZEROES never finished").unwrap();
    v.flush().unwrap();
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    let mut want = volume_with(&[(0, 1), (1, 2), (3, 4)]);
    want[(3 * BS) as usize..(3 * BS + 1000) as usize].fill(0);
    assert_bytes(&mem.snapshot(), &want, "backing after the FLUSH");
    let mut got = vec![0u8; VOL as usize];
    v.read(0, &mut got).unwrap();
    assert_bytes(&got, &want, "the volume");
}

/// A block rewritten twice in the epoch of the version being flushed: the second rewrite may
/// land in the very cache block the flusher read (released by the first rewrite, and the
/// flusher holds no pin across its backing I/O), so the dirty map names the same (epoch,
/// block, cache block) as the flushed version while holding newer data. The flusher must
/// leave it dirty: after the FLUSH, backing holds the last write.
#[test]
fn a_version_replaced_in_its_own_cache_block_while_in_flight_stays_dirty() {
    let (mem, latch, e, v) = stuck_flush(5 * BS, &block(1));
    // Block 5's version 1 is in flight. Two rewrites in the same epoch (no FLUSH between).
    v.write(5 * BS, &block(2), false).unwrap();
    v.write(5 * BS, &block(3), false).unwrap();
    latch.release();
    v.flush().unwrap();
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    let want = volume_with(&[(5, 3)]);
    assert_bytes(&mem.snapshot(), &want, "backing after the FLUSH");
    let mut got = vec![0u8; VOL as usize];
    v.read(0, &mut got).unwrap();
    assert_bytes(&got, &want, "the volume");
}

/// Backing that records its writes and syncs in order, each write taking a few
/// milliseconds (long enough for a next batch's writes to overlap it, were the flusher to
/// let them).
#[derive(Default)]
struct Recorder {
    log: Mutex<Vec<Option<u64>>>,
}

impl Hooks for Recorder {
    fn describe(&self) -> String {
        "recorder".into()
    }
    fn before_write(&self, offset: u64, _: u64) -> std::io::Result<()> {
        std::thread::sleep(Duration::from_millis(5));
        self.log.lock().push(Some(offset / BS));
        Ok(())
    }
    fn before_sync(&self) -> std::io::Result<()> {
        self.log.lock().push(None);
        Ok(())
    }
    fn identity(&self, _: &dyn Device) -> std::io::Result<Identity> {
        unidentified()
    }
}

/// Background cleaning writes batches one after the other: each batch's backing write (one
/// run of consecutive blocks) comes after the previous batch's sync, and each block is
/// written once, in ascending order. (Batches someone waits for share a sync instead:
/// `sync_group_tests.rs`.)
#[test]
fn background_batches_reach_backing_one_after_the_other_each_after_the_previous_sync() {
    let (cache, mem) = devices();
    let rec = Arc::new(Hooked::wrap(mem.clone(), Recorder::default()));
    let wb = WritebackConfig { batch_blocks: 4, ..eager(200) };
    let e = open(cache, rec.clone(), WriteMode::WriteBackFlush, wb).unwrap();
    let v = e.volume("v").unwrap();
    let data: Vec<u8> = (1..=32u8).flat_map(block).collect();
    v.write(0, &data, false).unwrap();
    // Nobody waits: background cleaning (min dirty 0) writes it all back.
    let t0 = std::time::Instant::now();
    while e.dirty_stats().dirty_blocks > 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "background cleaning stalled");
        std::thread::sleep(Duration::from_millis(5));
    }
    let log = rec.log.lock().clone();
    let writes: Vec<u64> = log.iter().flatten().copied().collect();
    assert!(writes.windows(2).all(|w| w[0] < w[1]), "ascending, each once: {log:?}");
    for w in log.windows(2) {
        assert!(w[0].is_none() || w[1].is_none(), "two batches' writes without a sync: {log:?}");
    }
    let want: Vec<(u64, u8)> = (0..32).map(|b| (b, b as u8 + 1)).collect();
    assert_bytes(&mem.snapshot(), &volume_with(&want), "backing after the FLUSH");
}
