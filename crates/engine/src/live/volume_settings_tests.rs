//! A volume's own settings: a write-through volume under a write-back persist cache (its
//! writes on backing when acknowledged, its blocks dirty from before never replayed over
//! them after a crash), the refusals, a sieve and a cutoff of its own, and shares.

use crate::device::MemDevice;
use crate::live::tests::lazy;
use crate::wb::tests::{block, BS, VOL};
use crate::{Device, Engine, EngineConfig, FormatSpec, VolumeConfig, VolumeSpec, WriteMode};
use ember_policy::admission::{Aod, Sieve, Wmna};
use ember_policy::replacement::{build, Kind, WithShares};
use ember_policy::shares::{ShareLimits, Shares};
use std::sync::Arc;

fn format_two(cache: &dyn Device) {
    let v = |n: &str| VolumeSpec { name: n.into(), size: VOL };
    let mut spec = FormatSpec::new(vec![v("a"), v("b")]);
    spec.journal_bytes = 8 * BS;
    Engine::format(cache, &spec).unwrap();
}

fn open_two(
    cache: &Arc<MemDevice>,
    a: &Arc<MemDevice>,
    b: &Arc<MemDevice>,
    mode: WriteMode,
    shares: bool,
) -> Engine {
    open_two_under(cache, a, b, mode, Kind::Lru, shares)
}

/// [`open_two`] with replacement policy `kind`.
fn open_two_under(
    cache: &Arc<MemDevice>,
    a: &Arc<MemDevice>,
    b: &Arc<MemDevice>,
    mode: WriteMode,
    kind: Kind,
    shares: bool,
) -> Engine {
    let volumes = [("a", a), ("b", b)]
        .into_iter()
        .map(|(n, d)| VolumeConfig { name: n.into(), backing: d.clone() })
        .collect();
    Engine::open_with(
        EngineConfig {
            cache: cache.clone(),
            volumes,
            write_mode: mode,
            replacement: Box::new(move |cap| {
                let policy = build(kind, cap);
                if shares {
                    Box::new(WithShares::new(policy, Shares::new(cap)).ok().unwrap())
                } else {
                    policy
                }
            }),
            admission: Box::new(Aod),
        },
        lazy(),
    )
    .unwrap()
}

fn on(dev: &MemDevice, b: u64) -> Vec<u8> {
    dev.snapshot()[(b * BS) as usize..((b + 1) * BS) as usize].to_vec()
}

fn read(e: &Engine, vol: &str, b: u64) -> Vec<u8> {
    let mut got = block(0);
    e.volume(vol).unwrap().read(b * BS, &mut got).unwrap();
    got
}

#[test]
fn a_write_through_volume_under_write_back_persist_is_crash_safe() {
    let cache = Arc::new(MemDevice::new(2 << 20));
    format_two(cache.as_ref());
    let (a, b) = (Arc::new(MemDevice::new(VOL)), Arc::new(MemDevice::new(VOL)));
    let e = open_two(&cache, &a, &b, WriteMode::WriteBackPersist, false);
    // b's blocks 0..8 dirty and committed under write-back persist.
    for i in 0..8 {
        e.volume("b").unwrap().write(i * BS, &block(10 + i as u8), false).unwrap();
    }
    e.volume("b").unwrap().flush().unwrap();
    assert_eq!(on(&b, 0), block(0), "dirty, not on backing");
    assert_eq!(e.set_volume_write_mode("b", Some(WriteMode::WriteThrough)).unwrap(), None);
    assert_eq!(e.volume_settings("b").unwrap().write_policy, Some(WriteMode::WriteThrough));
    // b's rewrites of 0..4 reach backing when acknowledged; a's writes stay dirty.
    for i in 0..4 {
        e.volume("b").unwrap().write(i * BS, &block(50 + i as u8), false).unwrap();
        assert_eq!(on(&b, i), block(50 + i as u8), "write-through: on backing");
        e.volume("a").unwrap().write(i * BS, &block(90 + i as u8), false).unwrap();
    }
    assert_eq!(on(&a, 0), block(0), "a stays write-back");
    e.volume("b").unwrap().flush().unwrap();
    e.volume("a").unwrap().flush().unwrap();
    for i in 0..4 {
        assert_eq!(read(&e, "b", i), block(50 + i as u8));
    }
    // The cache-wide policy cannot switch while b has its own.
    let refused = e.set_write_mode(WriteMode::WriteThrough, &mut |_| {}).unwrap_err();
    assert!(refused.to_string().contains("of its own"), "{refused}");
    drop(e); // crash
    let e = open_two(&cache, &a, &b, WriteMode::WriteBackPersist, false);
    for i in 0..4 {
        assert_eq!(read(&e, "b", i), block(50 + i as u8), "never the older dirty version");
        assert_eq!(read(&e, "a", i), block(90 + i as u8), "a's committed writes recovered");
    }
    for i in 4..8 {
        assert_eq!(read(&e, "b", i), block(10 + i as u8), "b's untouched dirty blocks kept");
    }
    e.shutdown().unwrap();
}

#[test]
fn what_a_volume_cannot_hold_of_its_own_is_refused() {
    let cache = Arc::new(MemDevice::new(2 << 20));
    format_two(cache.as_ref());
    let (a, b) = (Arc::new(MemDevice::new(VOL)), Arc::new(MemDevice::new(VOL)));
    let e = open_two(&cache, &a, &b, WriteMode::WriteBackFlush, false);
    let wb = e.set_volume_write_mode("a", Some(WriteMode::WriteBackPersist)).unwrap_err();
    assert!(wb.to_string().contains("cache's"), "{wb}");
    assert!(e.set_volume_write_mode("c", Some(WriteMode::WriteThrough)).is_err());
    // The cache-wide policy named: nothing of its own.
    e.set_volume_write_mode("a", Some(WriteMode::WriteBackFlush)).unwrap();
    assert_eq!(e.volume_settings("a").unwrap().write_policy, None);
    // Shares that do not fit: a min above its max, minimums that would fill the cache.
    let l = |min, max| Some(ShareLimits { min_blocks: min, max_blocks: max });
    let over = e.set_volume_shares("a", l(5, 4)).unwrap_err().to_string();
    assert!(over.contains("above max share"), "{over}");
    let cap = e.stats().capacity_blocks;
    e.set_volume_shares("a", l(cap / 2, cap)).unwrap();
    let full = e.set_volume_shares("b", l(cap - cap / 2, cap)).unwrap_err().to_string();
    assert!(full.contains("min shares add up to") && full.contains("volume b"), "{full}");
    assert_eq!(e.volume_settings("b").unwrap().min_share_blocks, None, "nothing changed");
    e.shutdown().unwrap();
    // A policy that cannot walk its order under a filter takes no share, by name.
    let cache = Arc::new(MemDevice::new(2 << 20));
    format_two(cache.as_ref());
    let e = open_two_under(&cache, &a, &b, WriteMode::WriteThrough, Kind::Arc, false);
    let arc = e.set_volume_shares("a", l(0, 4)).unwrap_err().to_string();
    assert!(arc.contains("arc cannot take shares") && arc.contains("sieve"), "{arc}");
    assert_eq!(e.volume_settings("a").unwrap().share_occupancy, None, "still alone");
    e.shutdown().unwrap();
}

/// A share set while serving, on a cache started without any (LRU over the recency list,
/// and FIFO): the policy is put under shares with the cached blocks counted, nothing is
/// evicted, the next allocations respect the share; clearing the last share puts the
/// policy back alone, with its blocks.
#[test]
fn a_share_set_while_serving_puts_the_policy_under_shares() {
    for kind in [Kind::Lru, Kind::Fifo] {
        let cache = Arc::new(MemDevice::new(2 << 20));
        format_two(cache.as_ref());
        let (a, b) = (Arc::new(MemDevice::new(VOL)), Arc::new(MemDevice::new(VOL)));
        let e = open_two_under(&cache, &a, &b, WriteMode::WriteThrough, kind, false);
        assert_eq!(e.inner.state.lock().recency_policy(), kind == Kind::Lru);
        for i in 0..8 {
            read(&e, "a", i);
            read(&e, "b", i);
        }
        let l = |min, max| Some(ShareLimits { min_blocks: min, max_blocks: max });
        e.set_volume_shares("b", l(0, 4)).unwrap();
        let s = e.volume_settings("b").unwrap();
        assert_eq!((s.max_share_blocks, s.share_occupancy), (Some(4), Some(8)), "{kind}");
        assert_eq!(e.volume_settings("a").unwrap().share_occupancy, Some(8), "{kind}");
        assert_eq!(e.volume_occupancy("b"), Some((8, 0)), "{kind}: nothing evicted");
        // Above its max, b's allocations evict its own oldest blocks.
        for i in 8..12 {
            read(&e, "b", i);
        }
        assert_eq!(e.volume_occupancy("b"), Some((8, 0)), "{kind}");
        assert_eq!(e.volume_occupancy("a"), Some((8, 0)), "{kind}");
        let b_id = e.inner.volumes.by_name("b").unwrap().id;
        let st = e.inner.state.lock();
        let held: Vec<bool> =
            (0..12).map(|i| st.get(crate::layout::block_key(b_id, i)).is_some()).collect();
        drop(st);
        assert_eq!(held, [[false; 4], [true; 4], [true; 4]].concat(), "{kind}");
        // The last share cleared: the policy runs alone again, keeping its blocks.
        e.set_volume_shares("b", None).unwrap();
        assert_eq!(e.volume_settings("b").unwrap().share_occupancy, None, "{kind}");
        assert_eq!(e.inner.state.lock().recency_policy(), kind == Kind::Lru, "{kind}");
        assert_eq!(e.volume_occupancy("b"), Some((8, 0)), "{kind}");
        for i in 8..12 {
            read(&e, "b", i);
        }
        assert_eq!(e.stats().total.read_hits, 4, "{kind}: its blocks stayed cached");
        e.shutdown().unwrap();
    }
}

#[test]
fn a_sieve_a_cutoff_and_a_share_of_its_own_decide_for_one_volume() {
    let cache = Arc::new(MemDevice::new(2 << 20));
    format_two(cache.as_ref());
    let (a, b) = (Arc::new(MemDevice::new(VOL)), Arc::new(MemDevice::new(VOL)));
    let e = open_two(&cache, &a, &b, WriteMode::WriteThrough, true);
    // b: WMNA (its write misses not allocated) and at most 4 blocks.
    e.set_volume_admission("b", Some(Sieve::Continuous(Box::new(Wmna)))).unwrap();
    e.set_volume_shares("b", Some(ShareLimits { min_blocks: 0, max_blocks: 4 })).unwrap();
    for i in 0..8 {
        e.volume("a").unwrap().write(i * BS, &block(1), false).unwrap();
        e.volume("b").unwrap().write(i * BS, &block(2), false).unwrap();
    }
    assert_eq!(e.volume_occupancy("a"), Some((8, 0)));
    assert_eq!(e.volume_occupancy("b"), Some((0, 0)), "WMNA: no write allocated");
    for i in 0..8 {
        assert_eq!(read(&e, "b", i), block(2));
    }
    assert_eq!(e.volume_occupancy("b"), Some((4, 0)), "its reads allocate, up to its share");
    let s = e.volume_settings("b").unwrap();
    assert_eq!(
        (s.admission.as_deref(), s.max_share_blocks, s.share_occupancy),
        (Some("wmna"), Some(4), Some(4))
    );
    assert_eq!(e.volume_settings("a").unwrap().admission, None);
    // a's own cutoff: a read stream past 2 blocks is not allocated; b's is.
    let cut = crate::SeqCutoffSettings {
        policy: ember_policy::seq_cutoff::CutoffPolicy::Always,
        read_bytes: 2 * BS,
        write_bytes: 0,
        streams: 8,
    };
    e.set_volume_seq_cutoff("a", Some(cut)).unwrap();
    for i in 40..50 {
        read(&e, "a", i);
    }
    assert_eq!(e.volume_occupancy("a"), Some((8 + 2, 0)));
    assert_eq!(e.stats().total.seq_cutoff_bypasses, 8);
    e.shutdown().unwrap();
}
