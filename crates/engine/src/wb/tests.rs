//! Write-back tests: epochs (writes during a FLUSH are not held behind it, and the closed
//! epoch's version still reaches backing), backing errors during flushing (FLUSH fails with
//! EIO, the data stays dirty and is retried), write-back persist's crash recovery and
//! `inspect` output, clean stops, fallbacks, error paths, and ordered write-back's barrier
//! and epoch order.

use crate::config::{EngineConfig, FormatSpec, VolumeConfig, VolumeSpec};
use crate::device::fault::PowerCut;
use crate::device::hooked::{unidentified, Door, Held, Hooked, Hooks};
use crate::device::{FaultDevice, Identity, IoKind, MemDevice};
use crate::{Device, DirtyLimit, Engine, EngineError, StartKind, WriteMode, WritebackConfig};
use ember_policy::admission::Aod;
use ember_policy::replacement::Lru;
use parking_lot::Mutex;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

pub(crate) const BS: u64 = 4096;
pub(crate) const VOL: u64 = 64 * BS;

/// Backing whose writes wait while the gate is closed (counting the writes that arrived since
/// it closed).
pub(crate) type Gated = Hooked<Door>;

impl Gated {
    /// `inner` behind an open gate.
    pub(crate) fn new(inner: Arc<dyn Device>) -> Self {
        Hooked::wrap(inner, Door::new(Held::Writes, "gated"))
    }
}

pub(crate) fn format(cache: &dyn Device) {
    let mut spec = FormatSpec::new(vec![VolumeSpec { name: "v".into(), size: VOL }]);
    spec.journal_bytes = 8 * BS;
    Engine::format(cache, &spec).unwrap();
}

/// A formatted 1 MiB memory cache ([`format`]) and a memory backing of [`VOL`] bytes.
pub(super) fn devices() -> (Arc<MemDevice>, Arc<MemDevice>) {
    let cache = Arc::new(MemDevice::new(1 << 20));
    format(cache.as_ref());
    (cache, Arc::new(MemDevice::new(VOL)))
}

pub(crate) fn open(
    cache: Arc<dyn Device>,
    backing: Arc<dyn Device>,
    mode: WriteMode,
    wb: WritebackConfig,
) -> Result<Engine, crate::EngineError> {
    Engine::open_with(
        EngineConfig {
            cache,
            volumes: vec![VolumeConfig { name: "v".into(), backing }],
            write_mode: mode,
            replacement: Box::new(|cap| Box::new(Lru::new(cap))),
            admission: Box::new(Aod),
        },
        wb,
    )
}

/// The flusher idles until a FLUSH (min_dirty above anything these tests write).
fn lazy() -> WritebackConfig {
    WritebackConfig {
        max_dirty: Some(DirtyLimit::Blocks(200)),
        min_dirty: Some(DirtyLimit::Blocks(100)),
        max_epochs: 4,
        batch_blocks: 1,
        lru_flush_order: false,
    }
}

pub(crate) fn block(v: u8) -> Vec<u8> {
    vec![v; BS as usize]
}

pub(super) fn backing_block(mem: &MemDevice, b: u64) -> Vec<u8> {
    mem.snapshot()[(b * BS) as usize..((b + 1) * BS) as usize].to_vec()
}

#[test]
fn write_policy_names_parse() {
    for m in WriteMode::ALL {
        assert_eq!(m.name().parse::<WriteMode>(), Ok(m));
    }
    let e = "write-back".parse::<WriteMode>().unwrap_err();
    assert!(e.contains("unsafe-write-back") && e.contains("write-back-persist"), "{e}");
}

#[test]
fn a_write_during_a_flush_is_not_held_and_the_closed_epoch_still_reaches_backing() {
    // Thesis 4.4.2: a FLUSH closes its epoch; a write issued meanwhile goes to the next epoch
    // at once, and the closed epoch's older version of the same block is still flushed.
    let (cache, mem) = devices();
    let gated = Arc::new(Gated::new(mem.clone()));
    let e = open(cache, gated.clone(), WriteMode::WriteBackFlush, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    v.write(0, &block(1), false).unwrap();
    v.write(5 * BS, &block(2), false).unwrap();
    assert_eq!(backing_block(&mem, 5), block(0), "write-back: nothing on backing yet");
    gated.close();
    let flusher_busy = gated.arrived.load(SeqCst);
    let v2 = v.clone();
    let flush = std::thread::spawn(move || v2.flush());
    // The flusher is stuck writing block 0 (ascending order, batches of one block).
    while gated.arrived.load(SeqCst) == flusher_busy {
        std::thread::yield_now();
    }
    // A write to block 5 completes while the FLUSH is in progress...
    v.write(5 * BS, &block(3), false).unwrap();
    assert_eq!(e.dirty_stats().dirty_epochs.len(), 2, "{:?}", e.dirty_stats().dirty_epochs);
    gated.open();
    flush.join().unwrap().unwrap();
    // ...and the FLUSH made the version acknowledged before it durable.
    assert_eq!(backing_block(&mem, 0), block(1));
    assert_eq!(backing_block(&mem, 5), block(2), "the closed epoch's version was flushed");
    let mut got = block(0);
    v.read(5 * BS, &mut got).unwrap();
    assert_eq!(got, block(3), "reads see the newest version");
    v.flush().unwrap();
    assert_eq!(backing_block(&mem, 5), block(3));
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
}

/// Ordered write-back (Koller et al.; thesis table 3.1): a FLUSH closes the epoch and returns
/// without waiting for backing, FUA is not durable, and a TRIM of the next epoch reaches
/// backing only after the closed epoch's blocks did, even when the flusher idles at
/// min_dirty (the TRIM asks for them) and backing is slow.
#[test]
fn ordered_flush_returns_at_once_and_a_later_trim_waits_for_the_older_epoch() {
    let (cache, mem) = devices();
    mem.write_at(3 * BS, &block(9)).unwrap();
    let gated = Arc::new(Gated::new(mem.clone()));
    let e = open(cache, gated.clone(), WriteMode::OrderedWriteBack, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    v.write(0, &block(1), false).unwrap();
    v.write(BS, &block(2), true).unwrap();
    gated.close();
    // Nothing reaches backing while the gate is closed; a FLUSH that waited would hang.
    v.flush().unwrap();
    assert_eq!(e.dirty_stats().dirty_blocks, 2, "FLUSH wrote nothing back");
    assert!(backing_block(&mem, 1) == block(0), "FUA is not durable under ordered write-back");
    let v2 = v.clone();
    let trim = std::thread::spawn(move || v2.trim(3 * BS, BS, false));
    // The TRIM asks the idle flusher for epoch 1, whose first block now waits at the gate.
    let t0 = std::time::Instant::now();
    while gated.arrived.load(SeqCst) == 0
        && !trim.is_finished()
        && t0.elapsed() < std::time::Duration::from_secs(5)
    {
        std::thread::yield_now();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(backing_block(&mem, 3) == block(9), "the TRIM of epoch 2 overtook epoch 1");
    gated.open();
    trim.join().unwrap().unwrap();
    assert!(backing_block(&mem, 0) == block(1));
    assert!(backing_block(&mem, 1) == block(2));
    assert!(backing_block(&mem, 3) == block(0), "the TRIM reached backing");
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
}

#[test]
fn a_backing_error_while_flushing_fails_the_flush_keeps_the_data_and_is_retried() {
    let (cache, mem) = devices();
    let backing = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    let e = open(cache, backing.clone(), WriteMode::WriteBackFlush, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    for b in 0..4u64 {
        v.write(b * BS, &block(10 + b as u8), false).unwrap();
    }
    backing.fail_nth(1, &[IoKind::Write], true);
    let err = v.flush().unwrap_err();
    assert!(matches!(err, EngineError::Io(_)), "{err}");
    assert!(err.to_string().contains("injected"), "{err}");
    let s = e.stats();
    assert!(s.total.flush_errors >= 1, "{:?}", s.total);
    assert_eq!(e.dirty_stats().dirty_blocks, 4, "the dirty blocks are kept");
    let mut got = block(0);
    v.read(2 * BS, &mut got).unwrap();
    assert_eq!(got, block(12), "and still served");
    // The backing device recovers: the flusher's retry succeeds, and so does a FLUSH.
    backing.clear_faults();
    v.flush().unwrap();
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    for b in 0..4u64 {
        assert_eq!(backing_block(&mem, b), block(10 + b as u8));
    }
}

#[test]
fn write_back_persist_recovers_after_a_crash_and_inspect_shows_epochs_and_generations() {
    let cache_mem = Arc::new(MemDevice::new(1 << 20));
    let cache = Arc::new(FaultDevice::new(cache_mem).unwrap());
    format(cache.as_ref());
    let mem = Arc::new(MemDevice::new(VOL));
    let backing = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    let e = open(cache.clone(), backing.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    for b in 0..6u64 {
        v.write(b * BS, &block(20 + b as u8), false).unwrap();
    }
    v.flush().unwrap(); // epoch 1: 6 blocks, journal commit
    v.write(BS, &block(99), false).unwrap();
    v.write(7 * BS, &block(77), false).unwrap();
    v.flush().unwrap(); // epoch 2: blocks 1 and 7
    v.write(2 * BS, &block(55), false).unwrap(); // never flushed
    assert_eq!(e.stats().total.journal_commits, 2);
    // The machine dies: unsynced writes on both devices are lost.
    cache.power_cut(PowerCut::DROP_ALL);
    backing.power_cut(PowerCut::DROP_ALL);
    drop(e);
    cache.revive();
    backing.revive();
    assert_eq!(backing_block(&mem, 0), block(0), "nothing was flushed to backing");
    let r = Engine::inspect(cache.as_ref()).unwrap();
    assert!(!r.clean_shutdown);
    assert_eq!(r.journal_commits, 2);
    assert_eq!(r.last_generation, r.checkpoint_generation + 2);
    // Block 1 was rewritten in epoch 2, so epoch 1 keeps 5 of its 6 blocks.
    let epochs: Vec<u64> = r.dirty_epochs.iter().map(|x| x.1).collect();
    assert_eq!(epochs, vec![5, 2], "{:?}", r.dirty_epochs);
    let text = r.to_string();
    assert!(text.contains("dirty blocks   7 (epoch"), "{text}");
    assert!(text.contains("2 journal commits"), "{text}");
    // Recovery from the same cache device.
    let e = open(cache.clone(), backing.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
    assert_eq!(e.open_report().start, StartKind::Cold);
    assert_eq!(e.open_report().loaded_blocks, 7, "{}", e.open_report().reason);
    let v = e.volume("v").unwrap();
    let want: Vec<(u64, u8)> =
        vec![(0, 20), (1, 99), (2, 22), (3, 23), (4, 24), (5, 25), (7, 77), (6, 0)];
    for &(b, x) in &want {
        let mut got = block(1);
        v.read(b * BS, &mut got).unwrap();
        assert_eq!(got, block(x), "block {b}");
    }
    // A clean stop keeps the dirty blocks (persist), and the next open resumes them; a
    // write-through open writes them to backing before serving.
    let sd = e.shutdown().unwrap();
    assert!(sd.persisted_blocks >= 7);
    drop(e);
    let r = Engine::inspect(cache.as_ref()).unwrap();
    assert!(r.clean_shutdown);
    assert_eq!(r.occupancy.map(|o| o.dirty_blocks), Some(7));
    let e = open(cache.clone(), backing.clone(), WriteMode::WriteThrough, lazy()).unwrap();
    assert_eq!(e.open_report().start, StartKind::Warm);
    for &(b, x) in &want {
        assert_eq!(backing_block(&mem, b), block(x), "block {b} on backing");
    }
}

#[test]
fn a_clean_stop_under_write_back_flush_writes_everything_to_backing() {
    let (cache, mem) = devices();
    let e = open(cache.clone(), mem.clone(), WriteMode::WriteBackFlush, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    for b in 0..10u64 {
        v.write(b * BS, &block(40 + b as u8), false).unwrap();
    }
    assert_eq!(e.dirty_stats().dirty_blocks, 10);
    e.shutdown().unwrap();
    for b in 0..10u64 {
        assert_eq!(backing_block(&mem, b), block(40 + b as u8));
    }
    let r = Engine::inspect(cache.as_ref()).unwrap();
    assert_eq!(r.occupancy.map(|o| (o.resident_blocks, o.dirty_blocks)), Some((10, 0)));
    let e = open(cache, mem, WriteMode::WriteBackFlush, lazy()).unwrap();
    assert_eq!(e.open_report().start, StartKind::Warm);
}

/// A FUA write longer than one chunk (64 blocks) under write-back flush: every chunk, not
/// only the last, is on backing durably when the write is acknowledged.
#[test]
fn a_fua_write_of_many_chunks_is_durable_under_write_back_flush() {
    const BIG: u64 = 256 * BS;
    let cache = Arc::new(MemDevice::new(4 << 20));
    let mut spec = FormatSpec::new(vec![VolumeSpec { name: "v".into(), size: BIG }]);
    spec.journal_bytes = 8 * BS;
    Engine::format(cache.as_ref(), &spec).unwrap();
    let mem = Arc::new(MemDevice::new(BIG));
    let backing = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    let e = open(cache, backing.clone(), WriteMode::WriteBackFlush, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    // 150 blocks: three chunks.
    let len = 150 * BS as usize + 10;
    v.write(0, &vec![8u8; len], true).unwrap();
    backing.power_cut(PowerCut::DROP_ALL);
    let img = mem.snapshot();
    let bad: Vec<usize> = (0..len).filter(|&i| img[i] != 8).collect();
    assert!(bad.is_empty(), "{} bytes not durable, first at {:?}", bad.len(), bad.first());
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
}

#[test]
fn over_max_dirty_writes_fall_through_and_fua_is_durable() {
    let (cache, mem) = devices();
    let backing = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    let wb = WritebackConfig {
        max_dirty: Some(DirtyLimit::Blocks(8)),
        min_dirty: Some(DirtyLimit::Blocks(4)),
        ..lazy()
    };
    let e = open(cache, backing.clone(), WriteMode::WriteBackFlush, wb).unwrap();
    let v = e.volume("v").unwrap();
    // 16 blocks at once exceed max_dirty = 8: written through.
    v.write(0, &vec![3u8; 16 * BS as usize], false).unwrap();
    assert_eq!(e.stats().total.write_through_fallbacks, 16);
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    // Under write-back flush, FUA writes through and syncs backing.
    v.write(20 * BS, &block(4), true).unwrap();
    backing.power_cut(PowerCut::DROP_ALL);
    assert_eq!(backing_block(&mem, 20), block(4), "the FUA write is on the durable medium");
}

#[test]
fn a_partial_write_merges_with_the_dirty_version() {
    let (cache, mem) = devices();
    for mode in [WriteMode::WriteBackFlush, WriteMode::WriteBackPersist] {
        let e = open(cache.clone(), mem.clone(), mode, lazy()).unwrap();
        let v = e.volume("v").unwrap();
        v.write(3 * BS, &block(6), false).unwrap();
        v.write(3 * BS + 100, &[7u8; 50], false).unwrap();
        // A TRIM of part of a dirty block keeps the rest.
        v.write_zeroes(3 * BS + 1000, 24, false, false).unwrap();
        let mut want = block(6);
        want[100..150].fill(7);
        want[1000..1024].fill(0);
        let mut got = block(0);
        v.read(3 * BS, &mut got).unwrap();
        assert_eq!(got, want, "{mode}");
        v.flush().unwrap();
        e.shutdown().unwrap();
        drop(e);
        let e = open(cache.clone(), mem.clone(), WriteMode::WriteThrough, lazy()).unwrap();
        drop(e);
        assert_eq!(backing_block(&mem, 3), want, "{mode}");
    }
}

#[test]
fn a_cache_read_error_on_a_dirty_block_reaches_the_client() {
    let cache = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(1 << 20))).unwrap());
    format(cache.as_ref());
    let mem = Arc::new(MemDevice::new(VOL));
    let e = open(cache.clone(), mem, WriteMode::WriteBackPersist, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    v.write(0, &block(9), false).unwrap();
    cache.fail_nth(1, &[IoKind::Read], false);
    let err = v.read(0, &mut block(0)).unwrap_err();
    assert!(matches!(err, EngineError::Io(_)), "{err}");
    let mut got = block(0);
    v.read(0, &mut got).unwrap();
    assert_eq!(got, block(9), "the dirty block is still there");
}

#[test]
fn dirty_blocks_of_a_volume_not_served_refuse_the_open() {
    let cache = Arc::new(MemDevice::new(1 << 20));
    let mut spec = FormatSpec::new(vec![
        VolumeSpec { name: "v".into(), size: VOL },
        VolumeSpec { name: "w".into(), size: VOL },
    ]);
    spec.journal_bytes = 8 * BS;
    Engine::format(cache.as_ref(), &spec).unwrap();
    let (mv, mw) = (Arc::new(MemDevice::new(VOL)), Arc::new(MemDevice::new(VOL)));
    let both = |mode| {
        Engine::open_with(
            EngineConfig {
                cache: cache.clone(),
                volumes: vec![
                    VolumeConfig { name: "v".into(), backing: mv.clone() },
                    VolumeConfig { name: "w".into(), backing: mw.clone() },
                ],
                write_mode: mode,
                replacement: Box::new(|cap| Box::new(Lru::new(cap))),
                admission: Box::new(Aod),
            },
            lazy(),
        )
    };
    let e = both(WriteMode::WriteBackPersist).unwrap();
    e.volume("w").unwrap().write(0, &block(5), false).unwrap();
    e.volume("w").unwrap().flush().unwrap();
    drop(e); // crash
    let Err(err) = open(cache.clone(), mv.clone(), WriteMode::WriteBackPersist, lazy()) else {
        panic!("opened without volume w, whose dirty block would be lost");
    };
    assert!(err.to_string().contains("dirty blocks of volume(s) w"), "{err}");
    let e = both(WriteMode::WriteBackPersist).unwrap();
    assert_eq!(e.open_report().loaded_blocks, 1);
}

/// A backing that records the block number of every write, in order.
#[derive(Default)]
struct Recorder {
    writes: Mutex<Vec<u64>>,
}

impl Hooks for Recorder {
    fn describe(&self) -> String {
        "recorder".into()
    }
    fn before_write(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.writes.lock().extend((offset / BS)..(offset + len).div_ceil(BS));
        Ok(())
    }
    fn identity(&self, _: &dyn Device) -> std::io::Result<Identity> {
        unidentified()
    }
}

/// Reopen a crashed write-back-persist cache under write-back flush, which writes the
/// recovered dirty blocks to backing at open, oldest epoch first (one block per batch, so in
/// order); the backing blocks written, in order.
fn recovered_flush_order(cache: Arc<dyn Device>, mem: Arc<MemDevice>) -> Vec<u64> {
    let rec = Arc::new(Hooked::wrap(mem, Recorder::default()));
    let e = open(cache, rec.clone(), WriteMode::WriteBackFlush, lazy()).unwrap();
    assert_eq!(e.open_report().loaded_blocks, 2, "{}", e.open_report().reason);
    let order = rec.writes.lock().clone();
    e.shutdown().unwrap();
    order
}

#[test]
fn epochs_past_the_16_bit_wrap_are_recovered_oldest_first() {
    // Epochs are persisted in 16 bits (checkpoint flags, journal entries),
    // so they wrap after 65,536 barriers. Block 9 is written in epoch 65,531, block 2 in
    // epoch 65,542 (6 in 16 bits); after a crash, block 9 must still be the older one.
    let (cache, mem) = devices();
    let e = open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    for _ in 0..65_530 {
        v.flush().unwrap();
    }
    v.write(9 * BS, &block(9), false).unwrap();
    v.flush().unwrap();
    for _ in 0..10 {
        v.flush().unwrap();
    }
    v.write(2 * BS, &block(2), false).unwrap();
    v.flush().unwrap();
    drop(e); // a crash: the persisted dirty map holds both blocks
    let r = Engine::inspect(cache.as_ref()).unwrap();
    let epochs: Vec<u64> = r.dirty_epochs.iter().map(|x| x.0).collect();
    assert_eq!(recovered_flush_order(cache, mem.clone()), vec![9, 2], "oldest epoch first");
    assert_eq!(epochs, vec![65_531, 65_542], "inspect lists epochs oldest first");
    assert_eq!(backing_block(&mem, 9), block(9));
    assert_eq!(backing_block(&mem, 2), block(2));
}

#[test]
fn a_dirty_block_older_than_half_the_epoch_space_keeps_recovery_ordered() {
    // A block that stays dirty (its backing writes fail) while 40,000 barriers pass: more
    // than half of the 16-bit epoch space, where wrap-aware ordering alone would call it the
    // newer one. The engine keeps every persisted dirty epoch within a window of the current
    // one, so recovery still orders it first.
    let (cache, mem) = devices();
    let backing = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    backing.fail_nth(1, &[IoKind::Write], true);
    let e = open(cache.clone(), backing.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    v.write(9 * BS, &block(9), false).unwrap();
    for _ in 0..40_000 {
        v.flush().unwrap();
    }
    v.write(2 * BS, &block(2), false).unwrap();
    v.flush().unwrap();
    drop(e);
    drop(v);
    let order = recovered_flush_order(cache, mem.clone());
    assert_eq!(order, vec![9, 2], "the old dirty block first");
    assert_eq!(backing_block(&mem, 9), block(9));
}

#[test]
fn the_flusher_writes_back_a_block_half_a_window_old() {
    // The flusher idles below min_dirty, but a dirty block whose epoch falls half the epoch
    // window behind the current one is flushed anyway (so its stored 16-bit epoch stays
    // ordered); nothing else asks for it here.
    let (cache, mem) = devices();
    let e = open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    v.write(9 * BS, &block(9), false).unwrap();
    for _ in 0..100 {
        v.flush().unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(e.dirty_stats().dirty_blocks, 1, "young: the flusher idles");
    for _ in 0..(crate::layout::epoch::WINDOW / 2) {
        v.flush().unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while e.dirty_stats().dirty_blocks > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(e.dirty_stats().dirty_blocks, 0, "old: flushed");
    assert_eq!(backing_block(&mem, 9), block(9));
    e.shutdown().unwrap();
}

#[test]
fn dirty_blocks_over_a_backing_modified_while_stopped_refuse_the_start() {
    // A clean shutdown under write-back persist keeps dirty blocks in the
    // checkpoint; if the backing is written behind ember's back meanwhile, they must not be
    // mixed with it.
    let (cache, mem) = devices();
    let e = open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
    e.volume("v").unwrap().write(5 * BS, &block(5), false).unwrap();
    e.volume("v").unwrap().flush().unwrap();
    e.shutdown().unwrap();
    assert_eq!(Engine::inspect(cache.as_ref()).unwrap().occupancy.unwrap().dirty_blocks, 1);
    mem.write_at(9 * BS, &block(7)).unwrap(); // someone else writes the backing
    let err = open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy())
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(msg.contains("was modified") && msg.contains("1 dirty blocks"), "{msg}");
    assert!(msg.contains("refusing to start"), "{msg}");
    // Nothing was lost: the dirty block is still on the cache device.
    let r = Engine::inspect(cache.as_ref()).unwrap();
    assert!(r.clean_shutdown);
    assert_eq!(r.occupancy.unwrap().dirty_blocks, 1);
    assert_eq!(backing_block(&mem, 5), block(0), "never written over the changed backing");
}

#[test]
fn dirty_blocks_recovered_after_a_crash_refuse_another_backing() {
    let (cache, mem) = devices();
    let e = open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
    e.volume("v").unwrap().write(5 * BS, &block(5), false).unwrap();
    e.volume("v").unwrap().flush().unwrap();
    drop(e); // crash
             // Another device with the same bytes is not the backing the dirty blocks belong to.
    let other = Arc::new(MemDevice::from_bytes(mem.snapshot()));
    let err =
        open(cache.clone(), other, WriteMode::WriteBackPersist, lazy()).err().expect("refused");
    assert!(err.to_string().contains("another file or device"), "{err}");
    // The right one recovers the block.
    let e = open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
    assert_eq!(e.open_report().loaded_blocks, 1, "{}", e.open_report().reason);
    let mut got = block(0);
    e.volume("v").unwrap().read(5 * BS, &mut got).unwrap();
    assert_eq!(got, block(5));
    e.shutdown().unwrap();
}

/// A backing that cannot be identified (the `Device` default), like an NBD export.
struct Anonymous;

impl Hooks for Anonymous {
    fn describe(&self) -> String {
        "anonymous".into()
    }
    fn identity(&self, _: &dyn Device) -> std::io::Result<Identity> {
        unidentified()
    }
}

#[test]
fn an_unidentifiable_backing_starts_cold_but_keeps_its_dirty_blocks() {
    let (cache, mem) = devices();
    let anon = || Arc::new(Hooked::wrap(mem.clone(), Anonymous)) as Arc<dyn Device>;
    let e = open(cache.clone(), anon(), WriteMode::WriteBackPersist, lazy()).unwrap();
    let v = e.volume("v").unwrap();
    v.read(0, &mut block(0)).unwrap(); // block 0 cached clean
    v.write(5 * BS, &block(5), false).unwrap(); // block 5 dirty
    v.flush().unwrap();
    e.shutdown().unwrap();
    let e = open(cache.clone(), anon(), WriteMode::WriteBackPersist, lazy()).unwrap();
    let r = e.open_report().clone();
    assert_eq!(r.start, StartKind::Cold, "{}", r.reason);
    assert_eq!((r.loaded_blocks, r.dropped_blocks), (1, 1), "{}", r.reason);
    assert!(r.reason.contains("cannot be checked"), "{}", r.reason);
    let mut got = block(0);
    e.volume("v").unwrap().read(5 * BS, &mut got).unwrap();
    assert_eq!(got, block(5), "the dirty block is kept");
    e.shutdown().unwrap();
}

/// A crashed write-back-persist cache whose checkpoint (CRC valid) names a key twice, or
/// carries unknown flags, is refused, as the same checkpoint is at a warm start
/// (`open::validate`): recovery used to keep the last of two entries for one key, so block 1
/// read block 4's data.
#[test]
fn a_persisted_dirty_map_naming_a_key_twice_or_unknown_flags_is_refused() {
    use crate::layout::{Checkpoint, Superblock};
    for case in ["duplicate key", "unknown flags"] {
        let (cache, mem) = devices();
        let e = open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
        let v = e.volume("v").unwrap();
        for b in 0..6u64 {
            v.write(b * BS, &block(20 + b as u8), false).unwrap();
        }
        v.flush().unwrap();
        // A clean stop puts the dirty blocks in the checkpoint; the next start names the
        // same entries in its fresh checkpoint, then crashes.
        e.shutdown().unwrap();
        drop(e);
        let e = open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy()).unwrap();
        drop(e); // crash
        let dev = cache.as_ref();
        let mut sb = Superblock::read(dev).unwrap();
        assert!(!sb.is_clean());
        let mut entries = Checkpoint::read_named(dev, &sb).unwrap().entries;
        assert_eq!(entries.len(), 6);
        let (one, four) = (
            entries.iter().position(|x| crate::layout::key_block(x.key) == 1).unwrap(),
            entries.iter().position(|x| crate::layout::key_block(x.key) == 4).unwrap(),
        );
        if case == "duplicate key" {
            entries[four].key = entries[one].key;
        } else {
            entries[four].flags |= 0x4;
        }
        let (slot, generation) = (sb.checkpoint_slot, sb.checkpoint_generation);
        sb.checkpoint_crc =
            Checkpoint::write(dev, &sb.geometry, slot, generation, &entries).unwrap();
        sb.sequence += 1;
        sb.write(dev).unwrap();
        match open(cache.clone(), mem.clone(), WriteMode::WriteBackPersist, lazy()) {
            Ok(e) => {
                let mut got = block(0);
                e.volume("v").unwrap().read(BS, &mut got).unwrap();
                panic!(
                    "{case}: opened, {} blocks loaded, block 1 reads {} (wrote 21)",
                    e.open_report().loaded_blocks,
                    got[0]
                );
            }
            Err(err) => {
                let want = if case == "duplicate key" {
                    "duplicate cache block or key"
                } else {
                    "unknown flags"
                };
                assert!(err.to_string().contains(want), "{case}: {err}");
            }
        }
    }
}
