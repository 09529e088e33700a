//! The array tier through the engine's API, where timing decides: a DEMOTE, or a READ miss,
//! whose victim's cache block a READ miss is still filling (another client's, reading a
//! slow backing) is placed as the DEMOTE scheme says, in that block, once the fill lets it
//! go; the fill's bytes do not overwrite it.

use crate::device::hooked::{Door, Held, Hooked};
use crate::device::MemDevice;
use crate::{
    Engine, EngineConfig, FormatSpec, VolumeConfig, VolumeSpec, WriteMode, WritebackConfig,
};
use ember_policy::admission::Aod;
use ember_policy::demote::{ArrayConfig, ArrayReplacement, Scheme};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

const BS: u64 = 4096;
/// Blocks of the volume: more than the cache holds.
const BLOCKS: u64 = 1024;

/// Backing whose reads wait while the gate is closed (counting the reads that arrived since
/// it closed).
type SlowReads = Hooked<Door>;

/// An array under DEMOTE over a backing of [`BLOCKS`] blocks (block `b` holds bytes `b`)
/// whose reads wait while its gate is closed; its cache full of demoted blocks 2.. (the keep
/// end). Returns the engine, the backing and the cache's blocks.
fn full_array() -> (Engine, Arc<SlowReads>, u64) {
    let cache = Arc::new(MemDevice::new(1 << 20));
    let mut spec = FormatSpec::new(vec![VolumeSpec { name: "v".into(), size: BLOCKS * BS }]);
    spec.journal_bytes = 8 * BS;
    Engine::format(cache.as_ref(), &spec).unwrap();
    let bytes: Vec<u8> = (0..BLOCKS * BS).map(|i| (i / BS) as u8).collect();
    let slow = Door::new(Held::Reads, "slow reads");
    let backing = Arc::new(Hooked::wrap(Arc::new(MemDevice::from_bytes(bytes)), slow));
    let config = EngineConfig {
        cache,
        volumes: vec![VolumeConfig { name: "v".into(), backing: backing.clone() }],
        write_mode: WriteMode::WriteThrough,
        replacement: Box::new(|cap| {
            Box::new(ArrayReplacement::new(ArrayConfig::new(cap, Scheme::Demote)).unwrap())
        }),
        admission: Box::new(Aod),
    };
    let e = Engine::open_with(config, WritebackConfig::default()).unwrap();
    let cap = e.geometry().data_blocks;
    assert!(cap + 2 < BLOCKS, "the volume is larger than the cache ({cap} blocks)");
    let v = e.volume("v").unwrap();
    let fresh = |_: u64| true;
    // The array full of demoted blocks 2.. (the keep end).
    for b in 2..2 + cap {
        v.demote(b * BS, &vec![0xd0; BS as usize], &fresh).unwrap();
    }
    assert_eq!(e.stats().total.demotes_stored, cap);
    (e, backing, cap)
}

/// Read block `b` on another thread; return once the backing has seen `arrived` reads.
fn read_in_flight(
    v: &crate::Volume,
    backing: &SlowReads,
    b: u64,
    arrived: u64,
) -> std::thread::JoinHandle<Vec<u8>> {
    let v = v.clone();
    let t = std::thread::spawn(move || {
        let mut buf = vec![0u8; BS as usize];
        v.read(b * BS, &mut buf).unwrap();
        buf
    });
    while backing.arrived.load(SeqCst) < arrived {
        std::thread::sleep(Duration::from_millis(1));
    }
    t
}

#[test]
fn a_demote_whose_victim_is_being_filled_is_stored_once_the_fill_ends() {
    let (e, backing, cap) = full_array();
    let v = e.volume("v").unwrap();
    let fresh = |_: u64| true;
    // A READ miss of block 0 reads the slow backing; the scheme puts block 0 at the discard
    // end, in the block of the oldest demoted one.
    backing.close();
    let base = backing.arrived.load(SeqCst);
    let reader = read_in_flight(&v, &backing, 0, base + 1);
    // Meanwhile another client demotes block 1: the scheme ejects block 0, the discard end,
    // whose cache block the fill still holds.
    let opener = {
        let backing = backing.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            backing.open();
        })
    };
    v.demote(BS, &vec![0xd1; BS as usize], &fresh).unwrap();
    opener.join().unwrap();
    assert_eq!(reader.join().unwrap(), vec![0u8; BS as usize], "the READ got backing's bytes");
    let s = e.stats().total;
    assert_eq!(s.demotes_stored, cap + 1, "stored, as the scheme says");
    assert_eq!(s.demotes_aborted_no_room, 0);
    let hits = s.read_hits;
    let mut buf = vec![0u8; BS as usize];
    v.read(BS, &mut buf).unwrap();
    assert_eq!(e.stats().total.read_hits, hits + 1, "block 1 is cached");
    assert_eq!(buf, vec![0xd1; BS as usize], "with the demoted bytes, not the fill's");
    e.shutdown().unwrap();
}

/// Two clients' READ misses at once: the first one's block, at the discard end while it is
/// filled, is the second one's victim. The second takes that block once the first fill
/// ends (an allocation-write, as in the simulator), and both read backing's bytes.
#[test]
fn a_read_miss_whose_victim_is_being_filled_takes_its_block_once_the_fill_ends() {
    let (e, backing, _) = full_array();
    let v = e.volume("v").unwrap();
    let before = e.stats().total;
    backing.close();
    let base = backing.arrived.load(SeqCst);
    let first = read_in_flight(&v, &backing, 0, base + 1);
    let second = read_in_flight(&v, &backing, 1, base + 2);
    backing.open();
    assert_eq!(first.join().unwrap(), vec![0u8; BS as usize]);
    assert_eq!(second.join().unwrap(), vec![1u8; BS as usize]);
    let s = e.stats().total;
    assert_eq!(s.allocations_skipped, before.allocations_skipped, "no allocation refused");
    assert_eq!(s.allocation_writes, before.allocation_writes + 2);
    let mut buf = vec![0u8; BS as usize];
    v.read(BS, &mut buf).unwrap();
    assert_eq!(e.stats().total.read_hits, s.read_hits + 1, "block 1 is cached");
    assert_eq!(buf, vec![1u8; BS as usize], "with its own bytes, not block 0's");
    e.shutdown().unwrap();
}
