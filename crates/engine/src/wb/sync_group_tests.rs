//! Sync groups (`sync_group.rs`): the batches someone waits for share one backing sync; a
//! power cut between their writes and that sync leaves every one of them dirty (the engine's
//! power-cut harness, `FaultDevice`, drops the unsynced writes), and ordered write-back still
//! puts no version of an epoch on backing before the older epoch was synced. A full group's
//! sync runs while the next group is written, and when it fails, both groups stay dirty.

use super::sync_group::GROUP_BYTES;
use super::tests::{backing_block, block, devices, open, BS};
use crate::config::{FormatSpec, VolumeSpec};
use crate::device::fault::PowerCut;
use crate::device::hooked::{unidentified, Hooked, Hooks, Trap};
use crate::device::{FaultDevice, Identity, IoKind, MemDevice};
use crate::{Device, DirtyLimit, Engine, WriteMode, WritebackConfig};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Backing that records its writes and counts its syncs; once armed, holds the next sync
/// until it is released.
#[derive(Default)]
pub(super) struct SyncGate {
    writes: Mutex<Vec<u64>>,
    syncs: AtomicU64,
    trap: Trap,
}

impl SyncGate {
    /// `inner` behind a sync gate, not armed.
    pub(super) fn new(inner: Arc<dyn Device>) -> Hooked<SyncGate> {
        Hooked::wrap(inner, SyncGate::default())
    }
    pub(super) fn arm(&self) {
        self.trap.arm();
    }
    pub(super) fn release(&self) {
        self.trap.release();
    }
    /// Let the caught sync go and hold the next one.
    pub(super) fn release_and_arm(&self) {
        self.trap.release_and_arm();
    }
    /// Wait until the armed sync arrived, at most 10 s.
    pub(super) fn wait_caught(&self) {
        self.trap.wait_caught("the flusher never synced backing");
    }
    /// The blocks written so far (first block of each write), and forget them.
    fn take_writes(&self) -> Vec<u64> {
        let mut w = std::mem::take(&mut *self.writes.lock());
        w.sort_unstable();
        w
    }
}

impl Hooks for SyncGate {
    fn describe(&self) -> String {
        "sync gate".into()
    }
    fn before_write(&self, offset: u64, _: u64) -> std::io::Result<()> {
        self.writes.lock().push(offset / BS);
        Ok(())
    }
    fn before_sync(&self) -> std::io::Result<()> {
        self.syncs.fetch_add(1, SeqCst);
        self.trap.pass();
        Ok(())
    }
    fn identity(&self, _: &dyn Device) -> std::io::Result<Identity> {
        unidentified()
    }
}

/// The flusher idles until someone waits for it; batches of 4 blocks.
pub(super) fn grouped() -> WritebackConfig {
    WritebackConfig {
        max_dirty: Some(DirtyLimit::Blocks(200)),
        min_dirty: Some(DirtyLimit::Blocks(100)),
        max_epochs: 4,
        batch_blocks: 4,
        lru_flush_order: false,
    }
}

#[test]
fn a_power_cut_between_a_groups_writes_and_its_sync_leaves_every_block_dirty() {
    let (cache, mem) = devices();
    let fault = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    let gate = Arc::new(SyncGate::new(fault.clone()));
    let e = open(cache, gate.clone(), WriteMode::WriteBackFlush, grouped()).unwrap();
    let v = e.volume("v").unwrap();
    for b in 0..20u64 {
        v.write(b * BS, &block(30 + b as u8), false).unwrap();
    }
    gate.take_writes();
    gate.arm();
    let v2 = v.clone();
    let flush = std::thread::spawn(move || v2.flush());
    gate.wait_caught();
    // The five batches were written before one sync, and none is marked clean yet.
    assert_eq!(gate.take_writes(), vec![0, 4, 8, 12, 16], "one write a batch, all before the sync");
    assert_eq!(e.dirty_stats().dirty_blocks, 20, "nothing is clean before the sync returned");
    // The power goes between the writes and the sync: the writes are lost, the sync fails.
    fault.power_cut(PowerCut::DROP_ALL);
    gate.release();
    let err = flush.join().unwrap().unwrap_err();
    assert!(err.to_string().contains("power") || err.to_string().contains("injected"), "{err}");
    assert_eq!(e.dirty_stats().dirty_blocks, 20, "every block of the group stays dirty");
    for b in 0..20u64 {
        assert_eq!(backing_block(&mem, b), block(0), "block {b}: the cut dropped its write");
    }
    // Power back: the flusher writes the group again, and the data reaches backing.
    fault.revive();
    let syncs0 = gate.syncs.load(SeqCst);
    v.flush().unwrap();
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    for b in 0..20u64 {
        assert_eq!(backing_block(&mem, b), block(30 + b as u8), "block {b}");
    }
    let syncs = gate.syncs.load(SeqCst) - syncs0;
    assert!(syncs < 5, "{syncs} backing syncs for 5 batches: they share one");
}

#[test]
fn ordered_write_back_syncs_each_epoch_before_the_next_is_written() {
    let (cache, mem) = devices();
    let gate = Arc::new(SyncGate::new(mem.clone()));
    let e = open(cache, gate.clone(), WriteMode::OrderedWriteBack, grouped()).unwrap();
    let v = e.volume("v").unwrap();
    for b in 0..8u64 {
        v.write(b * BS, &block(1 + b as u8), false).unwrap();
    }
    v.flush().unwrap(); // ordered: closes epoch 1, writes nothing back
    for b in 4..12u64 {
        v.write(b * BS, &block(50 + b as u8), false).unwrap();
    }
    assert_eq!(gate.take_writes(), Vec::<u64>::new());
    gate.arm();
    std::thread::scope(|s| {
        let flush = s.spawn(|| e.flush_all(&mut |_| {}));
        gate.wait_caught();
        // At the first sync, only epoch 1's two batches reached backing.
        assert_eq!(gate.take_writes(), vec![0, 4], "epoch 2 written before epoch 1 was synced");
        gate.release();
        flush.join().unwrap().unwrap();
    });
    assert_eq!(gate.take_writes(), vec![4, 8], "then epoch 2, in its own group");
    for b in 0..12u64 {
        let want = if b < 4 { 1 + b as u8 } else { 50 + b as u8 };
        assert_eq!(backing_block(&mem, b), block(want), "block {b}");
    }
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
}

/// Blocks of a sync group.
const GROUP_BLOCKS: u64 = GROUP_BYTES / BS;

/// Blocks the overlap tests write: two full groups and a quarter of one.
const BIG_BLOCKS: u64 = GROUP_BLOCKS * 2 + GROUP_BLOCKS / 4;

/// Blocks of a batch in the overlap tests (1 MiB: one backing write a batch).
const BIG_BATCH: u64 = 256;

/// The byte block `b` holds in the overlap tests.
fn big_byte(b: u64) -> u8 {
    (b % 251) as u8 + 1
}

/// A memory cache of twice [`BIG_BLOCKS`] and 16 MiB more in front of volume `v` of
/// [`BIG_BLOCKS`] (a memory medium behind a fault device and a sync gate), every block
/// written dirty under write-back flush, the flusher idle until someone waits for it;
/// batches of [`BIG_BATCH`] blocks.
fn big() -> (Engine, Arc<Hooked<SyncGate>>, Arc<FaultDevice>, Arc<MemDevice>) {
    let cache = Arc::new(MemDevice::new(2 * BIG_BLOCKS * BS + (16 << 20)));
    let mut spec = FormatSpec::new(vec![VolumeSpec { name: "v".into(), size: BIG_BLOCKS * BS }]);
    spec.journal_bytes = 8 * BS;
    Engine::format(cache.as_ref(), &spec).unwrap();
    let mem = Arc::new(MemDevice::new(BIG_BLOCKS * BS));
    let fault = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    let gate = Arc::new(SyncGate::new(fault.clone()));
    let wb = WritebackConfig {
        // min_dirty counts up to half of max_dirty.
        max_dirty: Some(DirtyLimit::Blocks(2 * BIG_BLOCKS + 400)),
        min_dirty: Some(DirtyLimit::Blocks(BIG_BLOCKS + 100)),
        max_epochs: 4,
        batch_blocks: BIG_BATCH as usize,
        lru_flush_order: false,
    };
    let e = open(cache, gate.clone(), WriteMode::WriteBackFlush, wb).unwrap();
    let v = e.volume("v").unwrap();
    for first in (0..BIG_BLOCKS).step_by(BIG_BATCH as usize) {
        let data: Vec<u8> = (first..first + BIG_BATCH)
            .flat_map(|b| std::iter::repeat_n(big_byte(b), BS as usize))
            .collect();
        v.write(first * BS, &data, false).unwrap();
    }
    assert_eq!(e.dirty_stats().dirty_blocks, BIG_BLOCKS);
    gate.take_writes();
    (e, gate, fault, mem)
}

/// Wait until the gate saw `n` backing writes, at most 10 s.
fn wait_writes(gate: &SyncGate, n: usize) {
    let t0 = Instant::now();
    while gate.writes.lock().len() < n {
        assert!(t0.elapsed() < Duration::from_secs(10), "the flusher stopped writing");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Every block of the volume on the medium holds what was written to it.
fn assert_big_on_backing(mem: &MemDevice) {
    let all = mem.snapshot();
    for b in 0..BIG_BLOCKS {
        let got = &all[(b * BS) as usize..((b + 1) * BS) as usize];
        assert!(got.iter().all(|&x| x == big_byte(b)), "block {b} on backing");
    }
}

#[test]
fn a_full_groups_sync_runs_while_the_next_group_is_written() {
    let (e, gate, _fault, mem) = big();
    gate.arm();
    std::thread::scope(|s| {
        let flush = s.spawn(|| e.flush_all(&mut |_| {}));
        gate.wait_caught();
        // The first group's sync is held; the second group is read and written meanwhile,
        // and the flusher waits for that sync only once the second group is full too.
        let per_group = (GROUP_BLOCKS / BIG_BATCH) as usize;
        wait_writes(&gate, 2 * per_group);
        std::thread::sleep(Duration::from_millis(50));
        let want: Vec<u64> = (0..2 * GROUP_BLOCKS).step_by(BIG_BATCH as usize).collect();
        assert_eq!(gate.take_writes(), want, "two groups written, nothing after them");
        assert_eq!(e.dirty_stats().dirty_blocks, BIG_BLOCKS, "nothing clean before its sync");
        gate.release();
        flush.join().unwrap().unwrap();
    });
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    assert_big_on_backing(&mem);
}

#[test]
fn a_failed_sync_while_the_next_group_is_written_leaves_both_groups_dirty() {
    let (e, gate, fault, mem) = big();
    gate.arm();
    std::thread::scope(|s| {
        let flush = s.spawn(|| e.flush_all(&mut |_| {}));
        gate.wait_caught();
        wait_writes(&gate, 2 * (GROUP_BLOCKS / BIG_BATCH) as usize);
        // The held sync (the first group's) fails; every later one succeeds.
        fault.fail_nth(1, &[IoKind::Sync], false);
        // Hold the next sync (the flusher's retry, after a backoff), so nothing is marked
        // clean before the check, however late this thread runs.
        gate.release_and_arm();
        let err = flush.join().unwrap().unwrap_err();
        assert!(err.to_string().contains("injected"), "{err}");
        assert_eq!(
            e.dirty_stats().dirty_blocks,
            BIG_BLOCKS,
            "the second group, written after the first one's writes, stays dirty with it"
        );
        gate.release();
    });
    // The retry puts everything on backing.
    e.flush_all(&mut |_| {}).unwrap();
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    assert_big_on_backing(&mem);
}
