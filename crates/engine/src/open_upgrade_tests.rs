//! The upgrade of a version-1 cache at its first open, under power cuts at every I/O of that
//! open: the cut image opens again (upgrading if the cut came first) and serves every flushed
//! byte, at version 1 or 2 after the cut and version 2 after the next open.

use crate::config::{FormatSpec, VolumeSpec};
use crate::device::fault::PowerCut;
use crate::device::{FaultDevice, MemDevice};
use crate::layout::Superblock;
use crate::wb::tests::{block, open, BS, VOL};
use crate::{Engine, WriteMode, WritebackConfig};
use std::sync::Arc;

/// A cache as version 1 left it: write-back persist killed with every block of its volume
/// dirty and flushed (the journal and checkpoint hold them), its superblock version 1 with
/// no records area. Returns its bytes, the backing (every open shares it: it only ever
/// receives the volume's own bytes) and the volume's content.
fn version_one_image() -> (Vec<u8>, Arc<MemDevice>, Vec<u8>) {
    let cache = Arc::new(MemDevice::new(4 << 20));
    let mut spec = FormatSpec::new(vec![VolumeSpec { name: "v".into(), size: VOL }]);
    spec.journal_bytes = 1 << 20;
    Engine::format(cache.as_ref(), &spec).unwrap();
    let backing = Arc::new(MemDevice::new(VOL));
    let wb = WritebackConfig::default();
    let e = open(cache.clone(), backing.clone(), WriteMode::WriteBackPersist, wb).unwrap();
    let v = e.volume("v").unwrap();
    let mut model = vec![0u8; VOL as usize];
    for b in 0..VOL / BS {
        let data = block(b as u8 | 0x80);
        v.write(b * BS, &data, false).unwrap();
        model[(b * BS) as usize..((b + 1) * BS) as usize].copy_from_slice(&data);
        if b % 8 == 7 {
            v.flush().unwrap();
        }
    }
    v.flush().unwrap();
    drop(v);
    drop(e); // a crash: the dirty map is in the checkpoint and the journal
    let mut sb = Superblock::read(cache.as_ref()).unwrap();
    sb.version = 1;
    sb.geometry = sb.geometry.without_records();
    sb.records = Default::default();
    sb.sequence += 1;
    sb.write(cache.as_ref()).unwrap();
    assert_eq!(Superblock::read(cache.as_ref()).unwrap().version, 1);
    (cache.snapshot(), backing, model)
}

fn read_all(e: &Engine) -> Vec<u8> {
    let mut got = vec![0u8; VOL as usize];
    e.volume("v").unwrap().read(0, &mut got).unwrap();
    got
}

#[test]
fn a_version_one_cache_is_upgraded_at_open_and_a_power_cut_at_any_io_of_it_loses_nothing() {
    let (image, backing, model) = version_one_image();
    // Uncut: how many I/Os the first open makes, and what it leaves.
    let whole = Arc::new(FaultDevice::new(Arc::new(MemDevice::from_bytes(image.clone()))).unwrap());
    let wb = WritebackConfig::default;
    let e = open(whole.clone(), backing.clone(), WriteMode::WriteBackPersist, wb()).unwrap();
    let ios = whole.io_count();
    assert!(e.open_report().upgraded.as_deref().unwrap_or("").contains("upgraded in place"));
    assert!(read_all(&e) == model);
    drop(e);
    let sb = Superblock::read(whole.as_ref()).unwrap();
    assert_eq!((sb.version, sb.geometry.records_len), (2, 128 << 10));
    let (mut left_v1, mut left_v2) = (0, 0);
    for n in 1..=ios + 2 {
        let mem = Arc::new(MemDevice::from_bytes(image.clone()));
        let cut = Arc::new(FaultDevice::new(mem.clone()).unwrap());
        cut.cut_power_at(n, PowerCut { survive: 0.5, seed: n });
        let b = backing.clone();
        drop(open(cut, b.clone(), WriteMode::WriteBackPersist, wb()));
        match Superblock::read(mem.as_ref()).unwrap().version {
            1 => left_v1 += 1,
            2 => left_v2 += 1,
            v => panic!("cut at I/O {n} left version {v}"),
        }
        let e = open(mem.clone(), b, WriteMode::WriteBackPersist, wb()).unwrap();
        assert!(read_all(&e) == model, "cut at I/O {n} of {ios}: a flushed byte is wrong");
        drop(e);
        assert_eq!(Superblock::read(mem.as_ref()).unwrap().version, 2, "cut at I/O {n}");
    }
    assert!(left_v1 > 0 && left_v2 > 0, "cuts before and after the commit: {left_v1} {left_v2}");
}
