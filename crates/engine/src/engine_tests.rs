//! Engine tests: format/inspect, the read path, write policies, TRIM, FLUSH/FUA, warm restart,
//! crash (cold start), and I/O errors.

use super::*;
use crate::config::{VolumeConfig, VolumeSpec};
use crate::device::fault::PowerCut;
use crate::device::{FaultDevice, IoKind, MemDevice};
use crate::{EngineError, StartKind};
use ember_policy::admission::Aod;
use ember_policy::replacement::Lru;
use ember_policy::{Access, Admission};

const BS: u64 = 4096;
const VOL: u64 = 128 * BS;

/// Admits nothing: every miss is served from backing without allocation.
struct Never;
impl Admission for Never {
    fn name(&self) -> &'static str {
        "never"
    }
    fn observe(&mut self, _a: &Access, _hit: bool) {}
    fn admit(&mut self, _a: &Access) -> bool {
        false
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(31).wrapping_add(seed * 7919) % 251) as u8).collect()
}

struct Rig {
    cache: Arc<dyn Device>,
    backing: Vec<Arc<MemDevice>>,
}

impl Rig {
    /// A cache device of `cache_bytes` (no journal) over two patterned volumes "a" and "b".
    fn new(cache: Arc<dyn Device>) -> Self {
        let backing: Vec<Arc<MemDevice>> =
            (0..2).map(|v| Arc::new(MemDevice::from_bytes(pattern(v + 1, VOL as usize)))).collect();
        let mut spec = FormatSpec::new(vec![
            VolumeSpec { name: "a".into(), size: VOL },
            VolumeSpec { name: "b".into(), size: VOL },
        ]);
        spec.journal_bytes = 0;
        Engine::format(cache.as_ref(), &spec).unwrap();
        Self { cache, backing }
    }

    fn mem(cache_bytes: u64) -> Self {
        Self::new(Arc::new(MemDevice::new(cache_bytes)))
    }

    fn open_with(
        &self,
        mode: WriteMode,
        admission: Box<dyn Admission>,
    ) -> Result<Engine, EngineError> {
        Engine::open(EngineConfig {
            cache: self.cache.clone(),
            volumes: vec![
                VolumeConfig { name: "a".into(), backing: self.backing[0].clone() },
                VolumeConfig { name: "b".into(), backing: self.backing[1].clone() },
            ],
            write_mode: mode,
            replacement: Box::new(|cap| Box::new(Lru::new(cap))),
            admission,
        })
    }

    fn open(&self) -> Engine {
        self.open_with(WriteMode::WriteThrough, Box::new(Aod)).unwrap()
    }
}

fn read(e: &Volume, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    e.read(off, &mut b).unwrap();
    b
}

#[test]
fn format_then_inspect_round_trip() {
    let rig = Rig::mem(1 << 20);
    let r = Engine::inspect(rig.cache.as_ref()).unwrap();
    assert_eq!(r.version, crate::layout::VERSION);
    assert!(r.clean_shutdown);
    assert_eq!(r.last_shutdown, None);
    let occ = r.occupancy.unwrap();
    assert_eq!(occ.resident_blocks, 0);
    assert_eq!(occ.capacity_blocks, r.geometry.data_blocks);
    assert!(occ.capacity_blocks > 200, "1 MiB holds {} blocks", occ.capacity_blocks);
    let names: Vec<_> =
        r.volumes.iter().map(|v| (v.name.as_str(), v.size, v.cached_blocks)).collect();
    assert_eq!(names, vec![("a", VOL, Some(0)), ("b", VOL, Some(0))]);
    let text = r.to_string();
    assert!(text.contains("write-through") && text.contains("never opened since format"), "{text}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["volumes"][1]["name"], "b");
    assert_eq!(json["clean_shutdown"], true);
}

#[test]
fn unformatted_and_corrupted_devices_are_reported_clearly() {
    let blank = MemDevice::new(1 << 20);
    let e = Engine::inspect(&blank).unwrap_err().to_string();
    assert!(e.contains("not an ember cache device") && e.contains("no ember magic"), "{e}");
    let rig = Rig::mem(1 << 20);
    // format writes sequence 2 into slot 0; flip a byte of it.
    let mut b = [0u8; 1];
    rig.cache.read_at(40, &mut b).unwrap();
    rig.cache.write_at(40, &[b[0] ^ 0xff]).unwrap();
    let e = Engine::inspect(rig.cache.as_ref()).unwrap_err().to_string();
    assert!(e.contains("checksum mismatch"), "{e}");
    assert!(rig.open_with(WriteMode::WriteThrough, Box::new(Aod)).is_err());
}

#[test]
fn read_misses_then_hits() {
    let rig = Rig::mem(1 << 20);
    let eng = rig.open();
    assert_eq!(eng.open_report().start, StartKind::Fresh);
    let a = eng.volume("a").unwrap();
    let first = read(&a, 0, 4 * BS as usize);
    assert_eq!(first, pattern(1, VOL as usize)[..4 * BS as usize]);
    let s = eng.stats();
    assert_eq!((s.total.read_hits, s.total.read_misses, s.total.allocation_writes), (0, 4, 4));
    assert_eq!(s.resident_blocks, 4);
    // Unaligned read inside the cached range: all hits, same bytes.
    let again = read(&a, 100, 3 * BS as usize);
    assert_eq!(again, first[100..100 + 3 * BS as usize]);
    let s = eng.stats();
    assert_eq!((s.total.read_hits, s.total.read_misses), (4, 4));
    assert_eq!(s.total.cache_read_bytes, 4 * BS);
    assert_eq!(s.volumes[0].1.read_hits, 4);
    assert_eq!(s.volumes[1].1.read_hits, 0);
    // Volume b's block 0 is a different key from volume a's block 0.
    assert_eq!(read(&eng.volume("b").unwrap(), 0, 10), pattern(2, 10));
    assert_eq!(eng.stats().volumes[1].1.read_misses, 1);
}

#[test]
fn a_refusing_sieve_allocates_nothing() {
    let rig = Rig::mem(1 << 20);
    let eng = rig.open_with(WriteMode::WriteThrough, Box::new(Never)).unwrap();
    let a = eng.volume("a").unwrap();
    for _ in 0..3 {
        assert_eq!(
            read(&a, BS, 2 * BS as usize),
            pattern(1, VOL as usize)[BS as usize..3 * BS as usize]
        );
    }
    a.write(5 * BS, &[7u8; BS as usize], false).unwrap();
    let s = eng.stats();
    assert_eq!((s.total.read_hits, s.total.read_misses), (0, 6));
    assert_eq!(
        (s.total.allocation_writes, s.resident_blocks, s.total.cache_write_bytes),
        (0, 0, 0)
    );
    assert_eq!(read(&a, 5 * BS, 4), vec![7u8; 4]);
}

#[test]
fn sieves_from_the_policy_crate_decide_allocation() {
    use ember_policy::admission::{OcfNhit, OcfNhitConfig, Wmna};
    // WMNA (SieveStore section 1): read misses allocate, write misses do not.
    let rig = Rig::mem(1 << 20);
    let eng = rig.open_with(WriteMode::WriteThrough, Box::new(Wmna)).unwrap();
    let a = eng.volume("a").unwrap();
    a.write(0, &[1u8; 4 * BS as usize], false).unwrap();
    assert_eq!(eng.stats().resident_blocks, 0);
    read(&a, 8 * BS, 2 * BS as usize);
    assert_eq!(eng.stats().resident_blocks, 2);
    assert_eq!(eng.stats().total.allocation_writes, 2);
    // OCF nhit with a trigger of 0 % occupancy: a block is allocated on its 3rd miss.
    let rig = Rig::mem(1 << 20);
    let cfg = OcfNhitConfig { insertion_threshold: 3, trigger_threshold: 0.0, hash_entries: 64 };
    let eng = rig.open_with(WriteMode::WriteThrough, Box::new(OcfNhit::new(cfg).unwrap())).unwrap();
    let a = eng.volume("a").unwrap();
    for expect in [0, 0, 1, 1] {
        read(&a, 3 * BS, BS as usize);
        assert_eq!(eng.stats().resident_blocks, expect);
    }
    let s = eng.stats();
    assert_eq!((s.total.read_misses, s.total.read_hits, s.total.allocation_writes), (3, 1, 1));
    // SieveStore-C with the paper's parameters (section 3.3: t1 = 9, t2 = 4, W = 8 h): an
    // unaliased block is allocated on its 13th miss within the window.
    use ember_policy::admission::{SieveStoreC, SieveStoreCConfig};
    let rig = Rig::mem(1 << 20);
    let sieve = SieveStoreC::new(SieveStoreCConfig::default()).unwrap();
    let eng = rig.open_with(WriteMode::WriteThrough, Box::new(sieve)).unwrap();
    let a = eng.volume("a").unwrap();
    for i in 1..=20u64 {
        read(&a, 7 * BS, BS as usize);
        assert_eq!(eng.stats().resident_blocks, u64::from(i >= 13), "after read {i}");
    }
    let s = eng.stats();
    assert_eq!((s.total.read_misses, s.total.read_hits), (13, 7));
}

/// Under write-back the admission sieve decides write misses too (as in
/// `ember sim` and SieveStore): a refused miss goes around the cache to backing; hits and
/// admitted misses in the same request still become dirty cache blocks.
#[test]
fn write_back_asks_the_sieve_on_write_misses() {
    use ember_policy::admission::Wmna;
    for mode in [WriteMode::WriteBackFlush, WriteMode::WriteBackPersist] {
        let rig = Rig::mem(1 << 20);
        let eng = rig.open_with(mode, Box::new(Wmna)).unwrap();
        let a = eng.volume("a").unwrap();
        let mut want = pattern(1, VOL as usize);
        let write = |off: u64, data: &[u8], want: &mut Vec<u8>| {
            a.write(off, data, false).unwrap();
            want[off as usize..off as usize + data.len()].copy_from_slice(data);
        };
        write(0, &[1u8; 4 * BS as usize], &mut want);
        let s = eng.stats();
        assert_eq!(s.resident_blocks, 0, "{mode:?}: WMNA allocates no write miss");
        assert_eq!((s.total.admission_refusals, s.total.dirty_writes), (4, 0), "{mode:?}");
        let mut on_backing = vec![0u8; 4 * BS as usize];
        rig.backing[0].read_at(0, &mut on_backing).unwrap();
        assert_eq!(on_backing, vec![1u8; 4 * BS as usize], "{mode:?}: written around");
        read(&a, 8 * BS, 2 * BS as usize);
        assert_eq!(eng.stats().resident_blocks, 2, "{mode:?}: read misses allocate");
        // Blocks 7..11: 7 and 10 miss (around), 8 and 9 hit (dirty in the cache).
        write(7 * BS, &[2u8; 4 * BS as usize], &mut want);
        let s = eng.stats();
        assert_eq!((s.total.admission_refusals, s.total.dirty_writes), (6, 2), "{mode:?}");
        assert_eq!(s.total.write_hits, 2, "{mode:?}");
        // Unaligned: a partial miss (6), a whole miss (7) and a partial hit (8).
        write(6 * BS + 100, &vec![3u8; 2 * BS as usize - 50], &mut want);
        let s = eng.stats();
        assert_eq!((s.total.admission_refusals, s.total.dirty_writes), (8, 3), "{mode:?}");
        assert_eq!(read(&a, 0, 16 * BS as usize), want[..16 * BS as usize], "{mode:?}");
        a.flush().unwrap();
        let mut disk = vec![0u8; 16 * BS as usize];
        rig.backing[0].read_at(0, &mut disk).unwrap();
        if mode == WriteMode::WriteBackFlush {
            assert_eq!(disk, want[..16 * BS as usize], "{mode:?}: FLUSH wrote everything");
        }
    }
}

#[test]
fn eviction_under_pressure_keeps_data_correct() {
    let rig = Rig::mem(256 * 1024);
    let eng = rig.open();
    let cap = eng.geometry().data_blocks;
    assert!(cap > 40 && cap < 64, "capacity {cap}");
    let a = eng.volume("a").unwrap();
    let want = pattern(1, VOL as usize);
    for b in 0..100u64 {
        assert_eq!(read(&a, b * BS, BS as usize), want[(b * BS) as usize..((b + 1) * BS) as usize]);
    }
    let s = eng.stats();
    assert_eq!(s.total.evictions, 100 - cap);
    assert_eq!(s.resident_blocks, cap);
    // A loop larger than the cache defeats LRU: the second pass misses everywhere.
    for b in 0..100u64 {
        assert_eq!(read(&a, b * BS, BS as usize), want[(b * BS) as usize..((b + 1) * BS) as usize]);
    }
    let s = eng.stats();
    assert_eq!((s.total.read_hits, s.total.read_misses), (0, 200));
    // The most recent `cap` blocks are resident: re-reading them hits.
    for b in (100 - cap)..100 {
        read(&a, b * BS, BS as usize);
    }
    assert_eq!(eng.stats().total.read_hits, cap);
}

#[test]
fn write_through_allocates_and_write_around_does_not() {
    for (mode, allocates) in [(WriteMode::WriteThrough, true), (WriteMode::WriteAround, false)] {
        let rig = Rig::mem(1 << 20);
        let eng = rig.open_with(mode, Box::new(Aod)).unwrap();
        let a = eng.volume("a").unwrap();
        let data = pattern(99, 2 * BS as usize);
        a.write(2 * BS, &data, false).unwrap();
        let mut on_backing = vec![0u8; data.len()];
        rig.backing[0].read_at(2 * BS, &mut on_backing).unwrap();
        assert_eq!(on_backing, data, "{mode:?}: backing has the write");
        assert_eq!(eng.stats().resident_blocks, if allocates { 2 } else { 0 }, "{mode:?}");
        assert_eq!(read(&a, 2 * BS, data.len()), data);
        assert_eq!(eng.stats().total.read_hits, if allocates { 2 } else { 0 }, "{mode:?}");
        // A cached block is updated by both policies, never left stale.
        let newer = pattern(100, 2 * BS as usize);
        a.write(2 * BS, &newer, false).unwrap();
        assert_eq!(read(&a, 2 * BS, newer.len()), newer, "{mode:?}");
        assert_eq!(eng.stats().total.write_hits, 2, "{mode:?}: the second write hit");
    }
}

#[test]
fn partial_writes_read_modify_write_trim_and_zeroes_invalidate() {
    let rig = Rig::mem(1 << 20);
    let eng = rig.open();
    let a = eng.volume("a").unwrap();
    let mut model = pattern(1, VOL as usize);
    read(&a, 0, 8 * BS as usize);
    assert_eq!(eng.stats().resident_blocks, 8);
    // 100 bytes inside block 1: the cached copy is updated (read-modify-write), as the
    // simulator counts it (a write hit that stays resident); backing has the merge.
    a.write(BS + 10, &[0xAB; 100], false).unwrap();
    model[(BS + 10) as usize..(BS + 110) as usize].fill(0xAB);
    let s = eng.stats();
    assert_eq!((s.total.invalidations, s.total.write_hits, s.resident_blocks), (0, 1, 8));
    assert_eq!(read(&a, 0, 8 * BS as usize), model[..8 * BS as usize]);
    assert_eq!(eng.stats().total.read_hits, 8, "block 1 was read from the cache");
    // 512 bytes across the end of block 20 and the start of block 21 (both missed): each
    // is allocated with backing's other bytes; 700 bytes ending inside block 7 (a hit).
    a.write(21 * BS - 256, &[0xCD; 512], false).unwrap();
    model[(21 * BS - 256) as usize..(21 * BS + 256) as usize].fill(0xCD);
    a.write(7 * BS - 300, &[0xEF; 700], false).unwrap();
    model[(7 * BS - 300) as usize..(7 * BS + 400) as usize].fill(0xEF);
    let s = eng.stats();
    assert_eq!((s.resident_blocks, s.total.allocation_writes), (10, 10));
    assert_eq!(read(&a, 0, 24 * BS as usize), model[..24 * BS as usize]);
    assert_eq!(eng.stats().total.read_hits, 8 + 10, "the merged blocks hit");
    assert_eq!(eng.stats().total.invalidations, 0);
    // TRIM of blocks 2..4 (plus a sliver of 4) and WRITE_ZEROES inside 6.
    a.trim(2 * BS, 2 * BS + 1, false).unwrap();
    model[(2 * BS) as usize..(4 * BS + 1) as usize].fill(0);
    a.write_zeroes(6 * BS + 5, 50, true, true).unwrap();
    model[(6 * BS + 5) as usize..(6 * BS + 55) as usize].fill(0);
    let s = eng.stats();
    assert_eq!(s.total.invalidations, 3 + 1);
    assert_eq!((s.total.trims, s.total.write_zeroes), (1, 1));
    assert_eq!(read(&a, 0, 8 * BS as usize), model[..8 * BS as usize]);
    assert_eq!(rig.backing[0].snapshot(), model);
}

#[test]
fn the_tail_of_an_odd_sized_volume_is_served_but_never_cached() {
    let cache: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20));
    let size = 3 * BS + 100;
    let mut spec = FormatSpec::new(vec![VolumeSpec { name: "odd".into(), size }]);
    spec.journal_bytes = 0;
    Engine::format(cache.as_ref(), &spec).unwrap();
    let backing = Arc::new(MemDevice::from_bytes(pattern(5, size as usize)));
    let eng = Engine::open(EngineConfig {
        cache,
        volumes: vec![VolumeConfig { name: "odd".into(), backing: backing.clone() }],
        write_mode: WriteMode::WriteThrough,
        replacement: Box::new(|cap| Box::new(Lru::new(cap))),
        admission: Box::new(Aod),
    })
    .unwrap();
    let v = eng.volume("odd").unwrap();
    assert_eq!(v.size(), size);
    assert_eq!(read(&v, 0, size as usize), pattern(5, size as usize));
    assert_eq!(eng.stats().resident_blocks, 3);
    v.write(3 * BS, &[9u8; 100], false).unwrap();
    assert_eq!(read(&v, 3 * BS + 90, 10), vec![9u8; 10]);
    assert_eq!(eng.stats().resident_blocks, 3);
    let e = v.read(size - 1, &mut [0u8; 2]).unwrap_err();
    assert!(matches!(e, EngineError::Invalid(_)), "{e}");
}

#[test]
fn clean_shutdown_makes_the_next_start_warm() {
    let rig = Rig::mem(1 << 20);
    let eng = rig.open();
    let a = eng.volume("a").unwrap();
    let b = eng.volume("b").unwrap();
    read(&a, 0, 10 * BS as usize);
    read(&b, 20 * BS, 5 * BS as usize);
    b.write(20 * BS, &[3u8; BS as usize], false).unwrap();
    let rep = eng.shutdown().unwrap();
    assert_eq!(rep.persisted_blocks, 15);
    assert!(matches!(a.read(0, &mut [0u8; 1]), Err(EngineError::ShutDown)));
    assert!(matches!(eng.shutdown(), Err(EngineError::ShutDown)));
    drop(eng);
    let r = Engine::inspect(rig.cache.as_ref()).unwrap();
    assert!(r.clean_shutdown && r.last_shutdown.is_some());
    assert_eq!(r.occupancy.unwrap().resident_blocks, 15);
    assert_eq!(r.volumes[0].cached_blocks, Some(10));
    assert_eq!(r.volumes[1].cached_blocks, Some(5));
    assert_eq!(r.open_count, 1);

    let eng = rig.open();
    assert_eq!(eng.open_report().start, StartKind::Warm);
    assert_eq!(eng.open_report().loaded_blocks, 15);
    let a = eng.volume("a").unwrap();
    let b = eng.volume("b").unwrap();
    assert_eq!(read(&a, 0, 10 * BS as usize), pattern(1, VOL as usize)[..10 * BS as usize]);
    assert_eq!(read(&b, 20 * BS, BS as usize), vec![3u8; BS as usize]);
    let s = eng.stats();
    assert_eq!((s.total.read_hits, s.total.read_misses), (11, 0), "warm: every block hits");
    // While running, the device says "not clean".
    let r = Engine::inspect(rig.cache.as_ref()).unwrap();
    assert!(!r.clean_shutdown && r.occupancy.is_none());
    assert!(r.to_string().contains("NOT clean"));
}

/// A clean stop does not rewrite a map that has not changed since the warm start
/// loaded it (the checkpoint keeps its generation and the next start is warm with the same
/// blocks), and rewrites it after any change: a hit reorders the map, a TRIM unmaps.
#[test]
fn an_unchanged_map_is_not_rewritten_at_stop() {
    let rig = Rig::mem(1 << 20);
    let eng = rig.open();
    read(&eng.volume("a").unwrap(), 0, 8 * BS as usize);
    let first = eng.shutdown().unwrap();
    drop(eng);
    let eng = rig.open();
    assert_eq!(eng.open_report().start, StartKind::Warm);
    let again = eng.shutdown().unwrap();
    drop(eng);
    assert_eq!(again.generation, first.generation, "nothing changed: the checkpoint stays");
    assert_eq!(again.persisted_blocks, 8);
    assert!(again.sequence > first.sequence, "the superblock is written (clean flag)");
    let r = Engine::inspect(rig.cache.as_ref()).unwrap();
    assert!(r.clean_shutdown);
    // Still warm, and a hit changes the order: the stop writes a new checkpoint.
    let eng = rig.open();
    assert_eq!(eng.open_report().loaded_blocks, 8);
    let a = eng.volume("a").unwrap();
    assert_eq!(
        read(&a, 2 * BS, BS as usize),
        pattern(1, VOL as usize)[2 * BS as usize..3 * BS as usize]
    );
    assert_eq!(eng.stats().total.read_hits, 1);
    let hit = eng.shutdown().unwrap();
    drop(eng);
    assert_eq!(hit.generation, first.generation + 1, "a hit reordered the map");
    // A TRIM unmaps: rewritten, and the next start holds 7 blocks, the trimmed one reading
    // as zeroes.
    let eng = rig.open();
    let a = eng.volume("a").unwrap();
    a.trim(5 * BS, BS, false).unwrap();
    let trimmed = eng.shutdown().unwrap();
    drop(eng);
    assert_eq!((trimmed.generation, trimmed.persisted_blocks), (hit.generation + 1, 7));
    let eng = rig.open();
    assert_eq!(eng.open_report().loaded_blocks, 7);
    let a = eng.volume("a").unwrap();
    let mut want = pattern(1, VOL as usize)[..8 * BS as usize].to_vec();
    want[5 * BS as usize..6 * BS as usize].fill(0);
    assert_eq!(read(&a, 0, 8 * BS as usize), want);
}

/// A checkpoint (CRC valid) that names a key or a cache block twice is unusable: the start
/// is cold, says why, and serves backing's data. Loading it would map two keys to one block
/// or put one key in the index twice.
#[test]
fn a_checkpoint_naming_a_key_or_a_block_twice_starts_cold() {
    use crate::layout::{Checkpoint, Superblock};
    for dup_key in [true, false] {
        let rig = Rig::mem(1 << 20);
        let eng = rig.open();
        read(&eng.volume("a").unwrap(), 0, 6 * BS as usize);
        eng.shutdown().unwrap();
        drop(eng);
        let dev = rig.cache.as_ref();
        let mut sb = Superblock::read(dev).unwrap();
        let mut entries = Checkpoint::read_named(dev, &sb).unwrap().entries;
        if dup_key {
            entries[4].key = entries[1].key;
        } else {
            entries[4].cache_block = entries[1].cache_block;
        }
        let (slot, generation) = (sb.checkpoint_slot, sb.checkpoint_generation);
        sb.checkpoint_crc =
            Checkpoint::write(dev, &sb.geometry, slot, generation, &entries).unwrap();
        sb.sequence += 1;
        sb.write(dev).unwrap();
        let eng = rig.open();
        let rep = eng.open_report();
        assert_eq!(rep.start, StartKind::Cold, "duplicate key: {dup_key}");
        assert!(rep.reason.contains("#4: duplicate cache block or key"), "{}", rep.reason);
        let a = eng.volume("a").unwrap();
        assert_eq!(read(&a, 0, 6 * BS as usize), pattern(1, VOL as usize)[..6 * BS as usize]);
        assert_eq!(eng.stats().total.read_hits, 0, "nothing was loaded");
    }
}

#[test]
fn a_volume_changed_while_stopped_is_served_cold() {
    let rig = Rig::mem(1 << 20);
    let eng = rig.open();
    read(&eng.volume("a").unwrap(), 0, 6 * BS as usize);
    read(&eng.volume("b").unwrap(), 0, 4 * BS as usize);
    eng.shutdown().unwrap();
    // Someone makes a new file system on volume a behind ember's back.
    rig.backing[0].write_at(0, &[0xEE; 512]).unwrap();
    rig.backing[0].write_at(3 * BS, &[0xEE; 512]).unwrap();
    let eng = rig.open();
    let r = eng.open_report();
    assert_eq!(r.start, StartKind::Warm);
    assert_eq!((r.loaded_blocks, r.dropped_blocks), (4, 6), "{r:?}");
    assert!(r.reason.contains("volume a changed while ember was stopped"), "{}", r.reason);
    assert_eq!(read(&eng.volume("a").unwrap(), 3 * BS, 4), vec![0xEE; 4], "not the stale copy");
    read(&eng.volume("b").unwrap(), 0, 4 * BS as usize);
    assert_eq!(eng.stats().volumes[1].1.read_hits, 4, "volume b stays warm");
}

#[test]
fn a_crash_comes_back_cold_and_correct() {
    let rig = Rig::mem(1 << 20);
    let eng = rig.open();
    let a = eng.volume("a").unwrap();
    read(&a, 0, 10 * BS as usize);
    eng.shutdown().unwrap();
    drop((a, eng));
    let eng = rig.open();
    let a = eng.volume("a").unwrap();
    a.write(0, &[1u8; BS as usize], false).unwrap();
    drop((a, eng)); // kill -9
    let eng = rig.open();
    assert_eq!(eng.open_report().start, StartKind::Cold);
    assert_eq!(eng.stats().resident_blocks, 0);
    let a = eng.volume("a").unwrap();
    assert_eq!(read(&a, 0, BS as usize), vec![1u8; BS as usize]);
}

#[test]
fn a_served_subset_drops_the_other_volumes_blocks() {
    let rig = Rig::mem(1 << 20);
    let eng = rig.open();
    read(&eng.volume("a").unwrap(), 0, 4 * BS as usize);
    read(&eng.volume("b").unwrap(), 0, 2 * BS as usize);
    eng.shutdown().unwrap();
    let eng = Engine::open(EngineConfig {
        cache: rig.cache.clone(),
        volumes: vec![VolumeConfig { name: "b".into(), backing: rig.backing[1].clone() }],
        write_mode: WriteMode::WriteThrough,
        replacement: Box::new(|cap| Box::new(Lru::new(cap))),
        admission: Box::new(Aod),
    })
    .unwrap();
    let r = eng.open_report();
    assert_eq!((r.loaded_blocks, r.dropped_blocks), (2, 4));
    assert!(eng.volume("a").is_none());
    assert_eq!(eng.volume_names(), vec!["b".to_string()]);
}

#[test]
fn mismatched_volumes_are_refused_with_reasons() {
    let rig = Rig::mem(1 << 20);
    let open = |name: &str, size: u64| {
        Engine::open(EngineConfig {
            cache: rig.cache.clone(),
            volumes: vec![VolumeConfig {
                name: name.into(),
                backing: Arc::new(MemDevice::new(size)),
            }],
            write_mode: WriteMode::WriteThrough,
            replacement: Box::new(|cap| Box::new(Lru::new(cap))),
            admission: Box::new(Aod),
        })
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
    };
    // A volume the device does not record is attached (cold); the recorded ones it does
    // not name stay recorded, unserved.
    let eng = Engine::open(EngineConfig {
        cache: rig.cache.clone(),
        volumes: vec![VolumeConfig { name: "c".into(), backing: Arc::new(MemDevice::new(VOL)) }],
        write_mode: WriteMode::WriteThrough,
        replacement: Box::new(|cap| Box::new(Lru::new(cap))),
        admission: Box::new(Aod),
    })
    .unwrap();
    let r = eng.open_report();
    assert_eq!(r.attached, vec!["c".to_string()]);
    assert_eq!(r.unserved, vec!["a".to_string(), "b".to_string()]);
    drop(eng);
    let names: Vec<String> =
        Engine::inspect(rig.cache.as_ref()).unwrap().volumes.into_iter().map(|v| v.name).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let e = open("a", VOL + BS);
    assert!(e.contains("formatted for 524288 bytes"), "{e}");
    let e = Engine::open(EngineConfig {
        cache: rig.cache.clone(),
        volumes: vec![VolumeConfig { name: "a".into(), backing: rig.backing[0].clone() }],
        write_mode: WriteMode::WriteThrough,
        replacement: Box::new(|cap| {
            ember_policy::replacement::build(ember_policy::replacement::Kind::Opt, cap)
        }),
        admission: Box::new(Aod),
    })
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("opt needs the future"), "{e}");
}

#[test]
fn flush_and_fua_reach_backing_and_cache() {
    let cache_mem = Arc::new(MemDevice::new(1 << 20));
    let cache = Arc::new(FaultDevice::new(cache_mem.clone()).unwrap());
    let rig = Rig::new(cache.clone());
    let back_mem = rig.backing[0].clone();
    let back = Arc::new(FaultDevice::new(back_mem.clone()).unwrap());
    let eng = Engine::open(EngineConfig {
        cache: rig.cache.clone(),
        volumes: vec![VolumeConfig { name: "a".into(), backing: back.clone() }],
        write_mode: WriteMode::WriteThrough,
        replacement: Box::new(|cap| Box::new(Lru::new(cap))),
        admission: Box::new(Aod),
    })
    .unwrap();
    let a = eng.volume("a").unwrap();
    let g = eng.geometry();
    let on = |dev: &MemDevice, off: u64| {
        let mut b = [0u8; 4];
        dev.read_at(off, &mut b).unwrap();
        b
    };
    a.write(0, &[5u8; BS as usize], false).unwrap();
    assert_ne!(on(&back_mem, 0), [5; 4], "not durable before FLUSH");
    assert_ne!(on(&cache_mem, g.data_offset), [5; 4]);
    a.flush().unwrap();
    assert_eq!(on(&back_mem, 0), [5; 4], "FLUSH reached backing");
    assert_eq!(on(&cache_mem, g.data_offset), [5; 4], "FLUSH reached the cache device");
    a.write(BS, &[6u8; BS as usize], true).unwrap();
    assert_eq!(on(&back_mem, BS), [6; 4], "FUA write durable on backing at once");
    assert_eq!(on(&cache_mem, g.data_offset + BS), [6; 4], "and on the cache device");
}

#[test]
fn device_errors_are_reported_and_leave_no_stale_block() {
    let cache = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(1 << 20))).unwrap());
    let rig = Rig::new(cache.clone());
    let eng = rig.open();
    let a = eng.volume("a").unwrap();
    // The allocation-write of a read miss fails under write-through: the client's bytes
    // came from backing, so the read succeeds; nothing is cached and the error is counted.
    let want = read(&a, 0, BS as usize);
    read(&a, 2 * BS, BS as usize);
    assert!(eng.stats().resident_blocks >= 1);
    let a_fresh = eng.volume("a").unwrap();
    cache.fail_nth(1, &[IoKind::Write], false);
    let before = eng.stats().resident_blocks;
    let mut buf = vec![0u8; BS as usize];
    a_fresh.read(3 * BS, &mut buf).unwrap();
    assert_eq!(eng.stats().resident_blocks, before, "the failed allocation is not cached");
    assert_eq!(eng.stats().total.cache_write_errors, 1);
    assert_eq!(read(&a, 0, BS as usize), want);
    // A cached block whose update fails is dropped (backing took the write), so the next
    // read goes to backing and returns the new bytes.
    read(&a, BS, BS as usize);
    let before = eng.stats().resident_blocks;
    cache.fail_nth(1, &[IoKind::Write], false);
    a.write(BS, &[8u8; BS as usize], false).unwrap();
    assert_eq!(eng.stats().resident_blocks, before - 1);
    assert_eq!(eng.stats().total.cache_write_errors, 2);
    assert_eq!(read(&a, BS, BS as usize), vec![8u8; BS as usize]);
    // A failing cache read on a clean hit falls back to backing (the same data), counts
    // the error and drops the cached copy.
    read(&a, BS, BS as usize);
    let before = eng.stats().resident_blocks;
    cache.fail_nth(1, &[IoKind::Read], false);
    assert_eq!(read(&a, BS, 16), vec![8u8; 16]);
    assert_eq!(eng.stats().total.cache_read_errors, 1);
    assert_eq!(eng.stats().resident_blocks, before - 1);
    assert_eq!(eng.health().state, "healthy", "three errors stay under the limit");
    // A failing sync of the cache device gives it up: under write-through FLUSH still
    // succeeds (backing is synced) and every request goes to backing from then on.
    cache.fail_nth(1, &[IoKind::Sync], false);
    a.flush().unwrap();
    assert_eq!(eng.health().state, "degraded");
    a.write(BS, &[9u8; BS as usize], false).unwrap();
    assert_eq!(read(&a, BS, 4), vec![9u8; 4]);
    // A power cut of the given-up device: its shutdown fails, and a restart on the revived
    // device starts cold and reads backing's current bytes.
    cache.power_cut(PowerCut::DROP_ALL);
    assert!(eng.shutdown().is_err());
    cache.revive();
    let eng = rig.open();
    assert_eq!(eng.open_report().start, StartKind::Cold);
    assert_eq!(read(&eng.volume("a").unwrap(), BS, 4), vec![9u8; 4]);
}
