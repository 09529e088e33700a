//! The volume set while serving: attach (recorded, served cold, kept by a restart), uncache
//! under every write policy with a client writing and reading back (never an older byte),
//! recache, remove (requests refused, dirty blocks on backing, the slot freed and reused, a
//! failing backing leaving the volume served), and the restart rule.

use crate::device::{FaultDevice, IoKind, MemDevice};
use crate::layout::{Superblock, VolumeState};
use crate::wb::tests::{block, format, open, BS, VOL};
use crate::{Device, Engine, EngineConfig, EngineError, VolumeConfig, WriteMode, WritebackConfig};
use ember_policy::admission::Aod;
use ember_policy::replacement::Lru;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

const BLOCKS: u64 = VOL / BS;

/// Open `cache` serving `volumes` (name, backing) under `mode`.
fn open_set(
    cache: Arc<dyn Device>,
    volumes: &[(&str, Arc<dyn Device>)],
    mode: WriteMode,
) -> Result<Engine, EngineError> {
    Engine::open_with(
        EngineConfig {
            cache,
            volumes: volumes
                .iter()
                .map(|(n, b)| VolumeConfig { name: n.to_string(), backing: b.clone() })
                .collect(),
            write_mode: mode,
            replacement: Box::new(|cap| Box::new(Lru::new(cap))),
            admission: Box::new(Aod),
        },
        WritebackConfig::default(),
    )
}

fn states(cache: &dyn Device) -> Vec<(String, VolumeState)> {
    Superblock::read(cache).unwrap().volumes.into_iter().map(|v| (v.name, v.state)).collect()
}

fn fill(e: &Engine, name: &str, seed: u8) -> Vec<u8> {
    let v = e.volume(name).unwrap();
    let mut model = vec![0u8; VOL as usize];
    for b in 0..BLOCKS {
        let data = block(seed.wrapping_add(b as u8) | 1);
        v.write(b * BS, &data, false).unwrap();
        model[(b * BS) as usize..((b + 1) * BS) as usize].copy_from_slice(&data);
    }
    model
}

fn read_all(e: &Engine, name: &str) -> Vec<u8> {
    let mut got = vec![0u8; VOL as usize];
    e.volume(name).unwrap().read(0, &mut got).unwrap();
    got
}

#[test]
fn attach_serves_a_new_volume_cold_and_a_restart_keeps_it() {
    let cache = Arc::new(MemDevice::new(2 << 20));
    format(cache.as_ref());
    let v: Arc<dyn Device> = Arc::new(MemDevice::new(VOL));
    let w = Arc::new(MemDevice::new(VOL));
    let e = open(cache.clone(), v.clone(), WriteMode::WriteBackPersist, WritebackConfig::default())
        .unwrap();
    let r = e.attach("w", w.clone(), Default::default()).unwrap();
    assert_eq!(r.slot, 1);
    assert_eq!(e.volume_names(), ["v", "w"]);
    let cached = |n: &str| (n.to_string(), VolumeState::Cached);
    assert_eq!(states(cache.as_ref()), [cached("v"), cached("w")]);
    let e2 =
        e.attach("v", Arc::new(MemDevice::new(VOL)), Default::default()).unwrap_err().to_string();
    assert!(e2.contains("already recorded"), "{e2}");
    let model = fill(&e, "w", 7);
    e.volume("w").unwrap().flush().unwrap();
    assert!(read_all(&e, "w") == model);
    e.shutdown().unwrap();
    drop(e);
    let w_dyn: Arc<dyn Device> = w.clone();
    let e = open_set(cache.clone(), &[("v", v.clone()), ("w", w_dyn)], WriteMode::WriteBackPersist)
        .unwrap();
    assert!(e.open_report().attached.is_empty() && e.open_report().unserved.is_empty());
    assert!(read_all(&e, "w") == model, "the attached volume's bytes after a restart");
}

/// A client writes a block and reads it back, over and over, while `uncache` drops the
/// volume's blocks: every read returns the write just acknowledged, under every policy.
#[test]
fn uncache_never_returns_an_older_byte_under_every_policy() {
    for mode in WriteMode::ALL {
        let cache = Arc::new(MemDevice::new(2 << 20));
        format(cache.as_ref());
        let mem = Arc::new(MemDevice::new(VOL));
        let e =
            Arc::new(open(cache.clone(), mem.clone(), mode, WritebackConfig::default()).unwrap());
        let mut model = fill(&e, "v", 3);
        let stop = Arc::new(AtomicBool::new(false));
        let client = {
            let (e, stop) = (e.clone(), stop.clone());
            std::thread::spawn(move || {
                let v = e.volume("v").unwrap();
                let mut r = rand::rngs::StdRng::seed_from_u64(9);
                let mut got = block(0);
                let mut i = 0;
                while !stop.load(SeqCst) || i < 200 {
                    let b = r.gen_range(0..BLOCKS);
                    let data = block(r.gen_range(1..=255));
                    v.write(b * BS, &data, false).unwrap();
                    model[(b * BS) as usize..((b + 1) * BS) as usize].copy_from_slice(&data);
                    let c = r.gen_range(0..BLOCKS);
                    v.read(c * BS, &mut got).unwrap();
                    assert!(
                        got[..] == model[(c * BS) as usize..((c + 1) * BS) as usize],
                        "{mode}: block {c} read back older than the last write"
                    );
                    if i % 50 == 0 {
                        v.flush().unwrap();
                    }
                    i += 1;
                }
                v.flush().unwrap();
                model
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(2));
        e.uncache("v", &mut |_| {}).unwrap();
        assert_eq!(states(cache.as_ref())[0].1, VolumeState::Uncached, "{mode}");
        stop.store(true, SeqCst);
        let model = client.join().unwrap();
        let s = e.status();
        assert_eq!((s.volumes[0].resident_blocks, s.volumes[0].dirty_blocks), (0, 0), "{mode}");
        assert!(read_all(&e, "v") == model, "{mode}");
        assert_eq!(e.status().resident_blocks, 0, "{mode}: an uncached volume allocates nothing");
        assert!(mem.snapshot() == model, "{mode}: every acknowledged write is on backing");
        // Recache: misses allocate again, cold.
        e.recache("v").unwrap();
        assert_eq!(states(cache.as_ref())[0].1, VolumeState::Cached);
        read_all(&e, "v");
        assert!(e.status().resident_blocks > 0, "{mode}: cached again");
        e.uncache("v", &mut |_| {}).unwrap();
        e.shutdown().unwrap();
        drop(e);
        // A restart keeps it uncached.
        let e = open(cache, mem.clone(), mode, WritebackConfig::default()).unwrap();
        assert_eq!(e.volume_state("v"), Some(VolumeState::Uncached), "{mode}");
        assert!(read_all(&e, "v") == model, "{mode}");
        assert_eq!(e.status().resident_blocks, 0, "{mode}");
    }
}

#[test]
fn remove_writes_back_refuses_requests_and_frees_the_slot_for_the_next_attach() {
    let cache = Arc::new(MemDevice::new(2 << 20));
    format(cache.as_ref());
    let v: Arc<dyn Device> = Arc::new(MemDevice::new(VOL));
    let w = Arc::new(MemDevice::new(VOL));
    let e = open(cache.clone(), v.clone(), WriteMode::WriteBackPersist, WritebackConfig::default())
        .unwrap();
    e.attach("w", w.clone(), Default::default()).unwrap();
    let vm = fill(&e, "v", 1);
    let wm = fill(&e, "w", 2);
    e.volume("w").unwrap().flush().unwrap();
    let handle = e.volume("w").unwrap();
    let share = ember_policy::shares::ShareLimits { min_blocks: 4, max_blocks: 8 };
    e.set_volume_shares("w", Some(share)).unwrap();
    assert!(e.status().volumes[1].dirty_blocks > 0 || w.snapshot() == wm);
    let r = e.remove("w", &mut |_| {}).unwrap();
    assert_eq!(r.slot, 1);
    assert!(w.snapshot() == wm, "every acknowledged byte of the removed volume is on backing");
    assert!(matches!(handle.write(0, &block(9), false), Err(EngineError::ShutDown)));
    assert!(matches!(handle.read(0, &mut block(0)), Err(EngineError::ShutDown)));
    assert!(e.volume("w").is_none());
    assert_eq!(states(cache.as_ref())[1], (String::new(), VolumeState::Free));
    let x = Arc::new(MemDevice::new(VOL));
    assert_eq!(
        e.attach("x", x.clone(), Default::default()).unwrap().slot,
        1,
        "the free slot is reused"
    );
    let x_settings = e.volume_settings("x").unwrap();
    assert_eq!(x_settings.min_share_blocks, None, "the removed volume's share went with it");
    assert_eq!(x_settings.share_occupancy, None, "no share left: the policy runs alone");
    let mut got = vec![0u8; VOL as usize];
    e.volume("x").unwrap().read(0, &mut got).unwrap();
    assert!(got.iter().all(|&b| b == 0), "the new volume sees nothing of the old one");
    drop(e); // a crash: recovery must not meet the removed volume's keys
    let x_dyn: Arc<dyn Device> = x;
    let e = open_set(cache, &[("v", v), ("x", x_dyn)], WriteMode::WriteBackPersist).unwrap();
    assert!(read_all(&e, "v") == vm);
}

#[test]
fn a_remove_whose_write_back_fails_leaves_the_volume_served_as_it_was() {
    let cache = Arc::new(MemDevice::new(2 << 20));
    format(cache.as_ref());
    let mem = Arc::new(MemDevice::new(VOL));
    let fault = Arc::new(FaultDevice::new(mem.clone()).unwrap());
    let e =
        open(cache.clone(), fault.clone(), WriteMode::WriteBackPersist, crate::live::tests::lazy())
            .unwrap();
    let model = fill(&e, "v", 5);
    e.volume("v").unwrap().flush().unwrap();
    fault.fail_nth(1, &[IoKind::Write], true);
    let err = e.remove("v", &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("not removed and is served again"), "{err}");
    assert_eq!(states(cache.as_ref())[0].1, VolumeState::Cached);
    fault.clear_faults();
    assert!(read_all(&e, "v") == model, "served again, every byte");
    e.volume("v").unwrap().write(0, &block(1), false).unwrap();
}

/// The volume records follow the commands: `attach` records its backing and settings with
/// the slot, `record_volumes` changes them (nothing written when nothing changed), `remove`
/// clears them with the slot, and a restart reads what was recorded; a journal too small for
/// the records' area keeps none, and says so.
#[test]
fn the_volume_records_follow_attach_record_and_remove_and_survive_a_restart() {
    use crate::config::{FormatSpec, VolumeSpec};
    use crate::layout::BackingRecord;
    let rec = |b: &str, s: &str| BackingRecord { backing: b.into(), settings: s.into() };
    let cache = Arc::new(MemDevice::new(2 << 20));
    let mut spec = FormatSpec::new(vec![VolumeSpec { name: "v".into(), size: VOL }]);
    spec.journal_bytes = 256 << 10;
    Engine::format(cache.as_ref(), &spec).unwrap();
    let v: Arc<dyn Device> = Arc::new(MemDevice::new(VOL));
    let w: Arc<dyn Device> = Arc::new(MemDevice::new(VOL));
    let e = open_set(cache.clone(), &[("v", v.clone())], WriteMode::WriteBackPersist).unwrap();
    let recorded = |c: &dyn Device| -> Vec<(String, BackingRecord)> {
        Engine::recorded_volumes(c).unwrap().into_iter().map(|r| (r.name, r.recorded)).collect()
    };
    assert!(e.record_volumes(&[("v".into(), rec("/dev/v", ""))]).unwrap());
    e.attach("w", w.clone(), rec("nbd://h/w", "max-share = \"50%\"")).unwrap();
    assert_eq!(
        recorded(cache.as_ref()),
        vec![
            ("v".to_string(), rec("/dev/v", "")),
            ("w".to_string(), rec("nbd://h/w", "max-share = \"50%\""))
        ]
    );
    let seq = Superblock::read(cache.as_ref()).unwrap().sequence;
    assert!(e.record_volumes(&[("v".into(), rec("/dev/v", ""))]).unwrap());
    assert_eq!(Superblock::read(cache.as_ref()).unwrap().sequence, seq, "nothing changed");
    e.record_volumes(&[("v".into(), rec("/dev/v", "write-policy = \"write-through\""))]).unwrap();
    e.remove("w", &mut |_| {}).unwrap();
    drop(e);
    let e = open_set(cache.clone(), &[("v", v)], WriteMode::WriteBackPersist).unwrap();
    assert_eq!(
        recorded(cache.as_ref()),
        vec![("v".to_string(), rec("/dev/v", "write-policy = \"write-through\""))]
    );
    assert!(e.record_volumes(&[("nope".into(), rec("x", ""))]).is_err());
    // The test format's 8-block journal cannot spare the area: nothing is kept.
    let small = Arc::new(MemDevice::new(1 << 20));
    format(small.as_ref());
    let b = Arc::new(MemDevice::new(VOL));
    let e = open(small.clone(), b, WriteMode::WriteThrough, WritebackConfig::default()).unwrap();
    assert!(!e.record_volumes(&[("v".into(), rec("/dev/v", ""))]).unwrap());
    assert_eq!(recorded(small.as_ref())[0].1, BackingRecord::default());
}
