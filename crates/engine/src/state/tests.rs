//! Unit tests of the cache state.

use super::*;
use ember_policy::admission::Aod;
use ember_policy::replacement::Lru;
use ember_policy::Access;
use ember_trace::Op;

fn state(n: u32) -> CacheState {
    let st = CacheState::new(n, Box::new(Lru::new(n as usize)), Box::new(Aod));
    assert!(st.recency_policy(), "LRU over every cache block is the recency list");
    st
}

/// The simulator's LRU, hiding that it is recency-only: the state keeps it as its own policy
/// and asks it at every hit, allocation and flush, as before the recency list took its place.
/// The test keeps a handle to read the LRU's order.
struct OwnLru(std::sync::Arc<std::sync::Mutex<Lru>>);

impl OwnLru {
    fn lru(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Replacement for OwnLru {
    fn name(&self) -> &'static str {
        "lru"
    }
    fn capacity(&self) -> usize {
        self.lru().capacity()
    }
    fn len(&self) -> usize {
        self.lru().len()
    }
    fn contains(&self, key: u64) -> bool {
        self.lru().contains(key)
    }
    fn lookup(&mut self, access: &Access) -> bool {
        self.lru().lookup(access)
    }
    fn insert(&mut self, access: &Access) -> Option<u64> {
        self.lru().insert(access)
    }
    fn remove(&mut self, key: u64) -> bool {
        self.lru().remove(key)
    }
    fn insert_aged(&mut self, access: &Access, younger: Option<u64>) -> Option<u64> {
        self.lru().insert_aged(access, younger)
    }
}

#[test]
fn eviction_of_a_pinned_block_defers_its_reuse() {
    let mut st = state(2);
    let a = st.access(1, Op::Read, 0);
    let ca = st.allocate(&a).cache_block.unwrap();
    st.unpin(ca);
    let b = st.access(2, Op::Read, 0);
    let cb = st.allocate(&b).cache_block.unwrap();
    st.unpin(cb);
    // A reader pins key 1's block; then key 3 evicts key 1 (LRU).
    let r = st.access(2, Op::Read, 0);
    st.hit_pin(&r).unwrap(); // key 2 becomes most recent, pinned
    let r1 = st.access(1, Op::Read, 0);
    let pinned = st.hit_pin(&r1).unwrap();
    assert_eq!(pinned, ca);
    let c = st.access(3, Op::Read, 0);
    let alloc = st.allocate(&c);
    assert_eq!(alloc.evicted, Some(2), "LRU victim is key 2 (key 1 was touched after it)");
    // Key 2's block is pinned too, so nothing is free: the allocation is refused.
    assert_eq!(alloc.cache_block, None);
    assert!(st.get(3).is_none() && !st.is_clean(3), "key 3 is not cached");
    assert_eq!(st.free_len(), 0);
    st.unpin(cb); // the key-2 reader finishes: its block is free now
    assert_eq!(st.free_len(), 1);
    let c = st.access(3, Op::Read, 0);
    let alloc = st.allocate(&c);
    assert_eq!(alloc.evicted, None, "key 2's eviction already made room in the policy");
    assert_eq!(alloc.cache_block, Some(cb), "the freed block, not key 1's pinned one");
    st.unpin(cb);
    st.unpin(pinned);
    assert_eq!(st.free_len(), 0, "key 1 is still mapped, so its block stays in use");
    assert_eq!(st.len(), 2);
    let d = st.access(4, Op::Read, 0);
    let alloc = st.allocate(&d);
    assert_eq!(alloc.evicted, Some(1));
    assert_eq!(alloc.cache_block, Some(ca), "key 1's block, unpinned now, is reused");
}

#[test]
fn entries_are_coldest_first_and_load_round_trips() {
    let mut st = state(4);
    for k in [10u64, 20, 30] {
        let a = st.access(k, Op::Read, 0);
        let c = st.allocate(&a).cache_block.unwrap();
        st.unpin(c);
    }
    let a = st.access(10, Op::Read, 0);
    let c = st.hit_pin(&a).unwrap();
    st.unpin(c);
    let e = st.entries();
    assert_eq!(e.iter().map(|e| e.key).collect::<Vec<_>>(), vec![20, 30, 10]);
    let mut st2 = state(4);
    st2.load(&e, 0, false);
    assert_eq!(st2.len(), 3);
    assert_eq!(st2.free_len(), 1);
    assert_eq!(st2.get(10), st.get(10));
    // LRU order survived: the next eviction takes key 20.
    let a = st2.access(40, Op::Read, 0);
    let c = st2.allocate(&a).cache_block.unwrap();
    st2.unpin(c);
    let a = st2.access(50, Op::Read, 0);
    assert_eq!(st2.allocate(&a).evicted, Some(20));
}

#[test]
fn a_rewrite_after_its_epoch_closed_keeps_the_old_version_for_the_flusher() {
    let mut st = state(8);
    let c1 = st.reserve().unwrap();
    st.commit_dirty(5, c1, 0, true);
    st.current_epoch += 1; // a FLUSH closed epoch 1
    let c2 = st.reserve().unwrap();
    st.commit_dirty(5, c2, 0, true);
    assert_eq!(st.get(5), Some(c2), "reads see the newest version");
    assert_eq!(st.dirty_len(), 2, "epoch 1's version still has to reach backing");
    assert_eq!(st.flush_batch(10, false), vec![(1, 5, c1)], "oldest epoch first");
    st.pin(c1);
    st.flushed(1, 5, c1, 0);
    st.unpin(c1);
    assert_eq!(st.dirty_len(), 1);
    assert_eq!(st.get(5), Some(c2), "still dirty in epoch 2");
    assert_eq!(st.free_len(), 7, "the old version's block is free again");
    // Within one epoch (or under persist) a rewrite replaces the version.
    let c3 = st.reserve().unwrap();
    st.commit_dirty(5, c3, 0, true);
    assert_eq!(st.dirty_len(), 1);
    assert_eq!(st.free_len(), 7);
    st.pin(c3);
    st.flushed(2, 5, c3, 0);
    st.unpin(c3);
    assert_eq!(st.dirty_len(), 0);
    assert!(st.is_clean(5), "a flushed newest version is clean");
}

#[test]
fn flush_order_is_ascending_or_lru() {
    let mut st = state(8);
    for k in [30u64, 10, 20] {
        let c = st.reserve().unwrap();
        st.commit_dirty(k, c, 0, true);
    }
    let keys = |b: Vec<(u64, u64, u32)>| b.into_iter().map(|v| v.1).collect::<Vec<_>>();
    assert_eq!(keys(st.flush_batch(2, false)), vec![10, 20], "ascending: lowest blocks");
    // LRU (thesis 4.4.1): the two least recently written, 30 and 10, sent in block order.
    assert_eq!(keys(st.flush_batch(2, true)), vec![10, 30]);
}

#[test]
fn the_persist_bitmap_keeps_a_persisted_block_from_reuse() {
    let mut st = state(3);
    st.persist_tracking = true;
    let c1 = st.reserve().unwrap();
    st.commit_dirty(7, c1, 0, false);
    let (changes, release) = st.persist_snapshot();
    assert_eq!(changes, vec![(7, Some(Persisted { cache_block: c1, epoch: 1 }))]);
    st.persist_done(&release);
    // Rewritten: the persisted map still names c1, so c1 is not reused...
    let c2 = st.reserve().unwrap();
    st.commit_dirty(7, c2, 0, false);
    assert_eq!(st.free_len(), 1);
    let c3 = st.reserve().unwrap();
    assert_ne!(c3, c1);
    st.unpin(c3);
    // ...until the next persist no longer names it.
    let (changes, release) = st.persist_snapshot();
    assert_eq!(changes, vec![(7, Some(Persisted { cache_block: c2, epoch: 1 }))]);
    assert_eq!(st.free_len(), 1);
    st.persist_done(&release);
    assert_eq!(st.free_len(), 2, "c1 is free once the new map is durable");
    // Flushed and persisted again: the entry is deleted, c2 stays clean and mapped.
    st.pin(c2);
    st.flushed(1, 7, c2, 0);
    st.unpin(c2);
    let (changes, release) = st.persist_snapshot();
    assert_eq!(changes, vec![(7, None)]);
    st.persist_done(&release);
    assert_eq!(st.persisted_len(), 0);
    assert_eq!(st.free_len(), 2);
    assert_eq!(st.get(7), Some(c2));
}

#[test]
fn only_clean_blocks_are_evicted() {
    let mut st = state(2);
    let c1 = st.reserve().unwrap();
    st.commit_dirty(1, c1, 0, true);
    let a = st.access(2, Op::Read, 0);
    let c2 = st.allocate(&a).cache_block.unwrap();
    st.unpin(c2);
    let b = st.access(3, Op::Read, 0);
    let got = st.allocate(&b).cache_block;
    assert_eq!(got, Some(c2), "clean key 2 evicted, dirty key 1 kept");
    assert_eq!(st.get(1), Some(c1));
    assert_eq!(st.get(2), None);
    st.unpin(c2);
    // Nothing clean and unpinned left but key 3: a reserve evicts it.
    assert_eq!(st.reserve(), Some(c2));
    assert_eq!(st.reserve(), None, "a dirty block is never evicted");
}

/// The key index of the dirty map (TRIM looks up a range through it) stays equal to the
/// dirty map itself through writes, epoch changes, flushes and drops.
#[test]
fn the_dirty_key_index_follows_the_dirty_map() {
    let mut st = state(64);
    let brute = |st: &CacheState, r: std::ops::Range<u64>| {
        let mut v: Vec<u64> = st.dirty.keys().map(|&(_, k)| k).filter(|k| r.contains(k)).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    for k in [5u64, 9, 10, 11, 40] {
        let c = st.reserve().unwrap();
        st.commit_dirty(k, c, 0, true);
    }
    st.current_epoch += 1;
    for k in [10u64, 12] {
        let c = st.reserve().unwrap();
        st.commit_dirty(k, c, 0, true); // 10 now has versions in epochs 1 and 2
    }
    assert_eq!(st.dirty_keys_in(9..13), vec![9, 10, 11, 12]);
    assert_eq!(st.dirty_keys_in(0..100), brute(&st, 0..100));
    assert_eq!(st.dirty_len(), 7);
    // Flush epoch 1's version of 10: the key stays (epoch 2's version).
    let (_, _, c10) = st.flush_batch(64, false).into_iter().find(|v| v.1 == 10).unwrap();
    st.pin(c10);
    st.flushed(1, 10, c10, 0);
    st.unpin(c10);
    assert_eq!(st.dirty_keys_in(10..11), vec![10]);
    // The newest version counts twice: its map entry and its dirty-map version.
    assert_eq!(st.drop_all_versions(10), 2);
    assert_eq!(st.drop_all_versions(11), 2);
    assert_eq!(st.dirty_keys_in(9..13), vec![9, 12]);
    assert_eq!(st.dirty_keys_in(0..100), brute(&st, 0..100));
    assert_eq!(st.dirty_keys_in(41..100), Vec::<u64>::new());
}

#[test]
fn fences_cover_their_key_range_until_lowered() {
    let mut st = state(4);
    let a = st.raise_fence(10..20, None);
    let b = st.raise_fence(15..30, None);
    assert!(st.fenced(10) && st.fenced(19) && st.fenced(29));
    assert!(!st.fenced(9) && !st.fenced(30));
    st.lower_fence(a);
    assert!(!st.fenced(10) && st.fenced(15));
    st.lower_fence(b);
    assert!(!st.fenced(15));
}

/// Under a write-back policy a dirty block holds part of the cache, so the policy is not full
/// when no block is free: a read miss then takes the block of the oldest clean block, and the
/// allocation names that key as its victim (the client tier demotes it, Wong & Wilkes 1.1),
/// with every policy.
#[test]
fn a_miss_beside_dirty_blocks_names_the_clean_block_it_reclaimed() {
    let lru = || state(3);
    let fifo = || {
        let fifo = ember_policy::replacement::build(ember_policy::Kind::Fifo, 3);
        CacheState::new(3, fifo, Box::new(Aod))
    };
    for mut st in [lru(), fifo()] {
        let w = st.access(1, Op::Write, 0);
        let c1 = st.reserve().unwrap();
        st.commit_dirty(w.key, c1, 0, false);
        let mut blocks = Vec::new();
        for k in [2, 3] {
            let r = st.access(k, Op::Read, 0);
            let a = st.allocate(&r);
            assert_eq!((a.evicted, a.reclaimed), (None, None), "a free block for key {k}");
            blocks.push(a.cache_block.unwrap());
            st.unpin(a.cache_block.unwrap());
        }
        let r = st.access(4, Op::Read, 0);
        let a = st.allocate(&r);
        assert_eq!(a.evicted, None, "the policy holds two clean keys of three: not full");
        assert_eq!(a.reclaimed, Some(2), "the oldest clean key left for the read miss");
        assert_eq!((a.cache_block, a.victim_block), (Some(blocks[0]), Some(blocks[0])));
        assert_eq!(st.take_evicted(), vec![2], "counted once, as a fallback eviction");
        st.unpin(blocks[0]);
        // A dirty write's block comes from the same fallback, and names no victim.
        assert!(st.reserve().is_some());
        assert_eq!(st.take_evicted(), vec![3]);
    }
}

/// Thesis 4.4.1 and 5.1: the clean and dirty lists act as one global LRU, so a block that
/// was written long ago and then flushed is next in line for eviction, not the newest.
#[test]
fn a_flushed_block_keeps_its_last_access_time() {
    // Key 1 written dirty, then keys `reads` read (each allocated and unpinned), then key 1
    // flushed: its last access is still before the reads.
    let flushed_after_reads = |capacity: u32, reads: &[u64]| {
        let mut st = state(capacity);
        let w = st.access(1, Op::Write, 0);
        let c1 = st.reserve().unwrap();
        st.commit_dirty(w.key, c1, 0, false);
        for &k in reads {
            let r = st.access(k, Op::Read, 0);
            let c = st.allocate(&r).cache_block.unwrap();
            st.unpin(c);
        }
        let epoch = st.current_epoch;
        st.pin(c1);
        st.flushed(epoch, 1, c1, 0);
        st.unpin(c1);
        st
    };
    let mut st = flushed_after_reads(3, &[2, 3]);
    let r = st.access(4, Op::Read, 0);
    let a = st.allocate(&r);
    assert_eq!(a.evicted, Some(1), "key 1 was accessed before keys 2 and 3");
    // The fallback path (no free block) evicts in the same order.
    let mut st = flushed_after_reads(2, &[2]);
    assert_eq!(st.evict_clean(1), 1);
    assert!(st.get(1).is_none() && st.get(2).is_some(), "the oldest access leaves first");
}

/// The recency list as LRU policy evicts exactly what the simulator's LRU, asked as its own
/// policy, evicts: the same blocks allocated, the same victims, the same checkpoint order,
/// through random reads (some left pinned), dirty writes over closing epochs, flushes in both
/// orders, invalidations, drops and fallback evictions. The LRU's own order must also equal
/// the clean blocks of the recency list, oldest first (thesis 4.4.1: one global LRU).
#[test]
fn the_recency_list_evicts_as_the_simulators_lru() {
    // The last case renumbers the recency stamps every thousand accesses or so.
    for &(blocks, universe, stamps) in
        &[(8u32, 24u64, u32::MAX), (64, 200, u32::MAX), (300, 2000, 1000)]
    {
        let mut a = state(blocks);
        a.set_stamp_limit(stamps);
        let own = OwnLru(std::sync::Arc::new(std::sync::Mutex::new(Lru::new(blocks as usize))));
        let handle = OwnLru(own.0.clone());
        let mut b = CacheState::new(blocks, Box::new(own), Box::new(Aod));
        b.set_stamp_limit(stamps);
        assert!(!b.recency_policy());
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ u64::from(blocks);
        let mut rand = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut pinned: Vec<u32> = Vec::new();
        let (mut evictions, mut fallback, mut flushes) = (0, 0, 0);
        for step in 0..30_000 {
            let key = if rand(2) == 0 { rand(universe / 4 + 1) } else { rand(universe) };
            // Phases without writes let the flusher clean every block: then the policy's own
            // eviction (all blocks clean) runs, not only the fallback.
            let op = match rand(20) {
                10..=13 if (step / 2000) % 2 == 0 => 0,
                op => op,
            };
            match op {
                0..=9 => {
                    let (ra, rb) = (a.access(key, Op::Read, 0), b.access(key, Op::Read, 0));
                    let (ha, hb) = (a.hit_pin(&ra), b.hit_pin(&rb));
                    assert_eq!(ha, hb, "step {step}: hit on {key}");
                    let c = match ha {
                        Some(c) => Some(c),
                        None if a.fenced(key) => None,
                        None => {
                            let (la, lb) = (a.allocate(&ra), b.allocate(&rb));
                            assert_eq!(
                                (la.cache_block, la.evicted, la.victim_block, la.reclaimed),
                                (lb.cache_block, lb.evicted, lb.victim_block, lb.reclaimed),
                                "step {step}: allocation of {key}"
                            );
                            evictions += usize::from(la.evicted.is_some());
                            la.cache_block
                        }
                    };
                    if let Some(c) = c {
                        if rand(32) == 0 {
                            pinned.push(c);
                        } else {
                            a.unpin(c);
                            b.unpin(c);
                        }
                    }
                }
                10..=13 => {
                    let (ca, cb) = (a.reserve(), b.reserve());
                    assert_eq!(ca, cb, "step {step}: reserve");
                    if let Some(c) = ca {
                        let keep = rand(2) == 0;
                        a.commit_dirty(key, c, 0, keep);
                        b.commit_dirty(key, c, 0, keep);
                    }
                }
                14 | 15 => {
                    let lru = rand(2) == 0;
                    let batch = a.flush_batch(1 + rand(6) as usize, lru);
                    assert_eq!(batch, b.flush_batch(batch.len().max(1), lru), "step {step}");
                    for (e, k, c) in batch {
                        for st in [&mut a, &mut b] {
                            st.pin(c);
                            st.flushed(e, k, c, 0);
                            st.unpin(c);
                        }
                        flushes += 1;
                    }
                }
                16 => {
                    a.current_epoch += 1;
                    b.current_epoch += 1;
                }
                17 => assert_eq!(a.invalidate(key), b.invalidate(key), "step {step}"),
                18 => {
                    if rand(4) == 0 {
                        assert_eq!(a.drop_all_versions(key), b.drop_all_versions(key));
                    }
                    for c in pinned.drain(..) {
                        a.unpin(c);
                        b.unpin(c);
                    }
                }
                _ => {
                    let tries = 1 + rand(3) as usize;
                    assert_eq!(a.evict_clean(tries), b.evict_clean(tries), "step {step}");
                }
            }
            let log = a.take_evicted();
            fallback += log.len();
            assert_eq!(log, b.take_evicted(), "step {step}: evicted");
            assert_eq!(a.len(), b.len());
            assert_eq!(a.free_len(), b.free_len(), "step {step}: free blocks");
            if step % 97 == 0 {
                let entries = a.entries();
                assert_eq!(entries, b.entries(), "step {step}: checkpoint order");
                let clean: Vec<u64> =
                    entries.iter().filter(|e| e.flags == 0).map(|e| e.key).collect();
                let mut lru = handle.lru().keys();
                lru.reverse();
                assert_eq!(clean, lru, "step {step}: the LRU order is the clean recency order");
            }
        }
        assert!(
            evictions > 10 && fallback > 100 && flushes > 100,
            "{evictions} policy evictions, {fallback} fallback evictions, {flushes} flushes"
        );
    }
}

/// The engine's state per cache block, index and policy included, is at most 48
/// bytes under LRU (43: 16 of index, 8 of key, 12 of lists and stamp, 3 of flags and
/// counts, 4 of pins; it was 169 to 175 in RSS before the recency list replaced the hash
/// map, the clean LRU tree and the policy's own index).
#[test]
fn lru_state_is_at_most_48_bytes_a_block() {
    let st = state(1 << 20);
    let b = st.bytes_per_block();
    assert!(b <= 48.0, "{b} bytes per block");
    assert!(b >= 43.0, "{b}: the arrays and the index are all counted");
}

/// A request that hit a block (pinned) and then allocates for another key, where the policy
/// (FIFO: a hit does not move a block) evicts that very block: the block goes to the new key
/// at once (`allocate_within` with the request's own hits), as `ember sim` reuses a victim's
/// room; plain `allocate` has to refuse (no free block) and leaves the new key uncached.
#[test]
fn a_requests_own_hit_block_is_reused_for_its_next_miss() {
    use ember_policy::replacement::{build, Kind};
    for own in [false, true] {
        let mut st = CacheState::new(2, build(Kind::Fifo, 2), Box::new(Aod));
        assert!(!st.recency_policy());
        for key in [1, 2] {
            let a = st.access(key, Op::Write, 0);
            let c = st.allocate(&a).cache_block.unwrap();
            st.unpin(c);
        }
        // One request: key 1 hits (pinned), then key 3 misses; FIFO's victim is key 1.
        let h = st.access(1, Op::Write, 0);
        let c1 = st.hit_pin(&h).unwrap();
        let m = st.access(3, Op::Write, 0);
        let mine = [c1];
        let alloc = st.allocate_within(&m, if own { &mine } else { &[] });
        assert_eq!(alloc.evicted, Some(1), "FIFO evicts the oldest, key 1");
        if own {
            assert_eq!(alloc.cache_block, Some(c1), "key 1's block goes to key 3 at once");
            assert_eq!(st.get(3), Some(c1));
            assert!(st.get(1).is_none());
            st.unpin(c1); // the request ends: one pin, now key 3's
            assert_eq!(st.len(), 2);
            assert_eq!(st.free_len(), 0);
            // The next miss evicts key 2 (FIFO order: 2, then 3) and gets its block.
            let n = st.access(4, Op::Write, 0);
            let a4 = st.allocate(&n);
            assert_eq!(a4.evicted, Some(2));
            assert!(a4.cache_block.is_some() && a4.cache_block != Some(c1));
        } else {
            assert_eq!(alloc.cache_block, None, "no free block: refused");
            assert!(st.get(3).is_none());
            st.unpin(c1);
            assert_eq!(st.free_len(), 1, "key 1's block is free once the request ends");
        }
    }
}

/// A sieved array tier (`--demote-admission sieve`, the default): a DEMOTE of a block the
/// cache does not hold is offered to the sieve, which refuses it at the exact doorkeeper's
/// first miss and admits it at the second; a DEMOTE of a held block is aborted without
/// asking; under `all` the scheme stores a first DEMOTE unasked.
#[test]
fn the_sieve_decides_on_demotes_of_absent_blocks() {
    use ember_policy::admission::Doorkeeper;
    use ember_policy::demote::{ArrayConfig, ArrayReplacement, DemoteAdmission, Scheme};
    let array = |rule| {
        let demote = ArrayReplacement::new(ArrayConfig::new(4, Scheme::Demote)).unwrap();
        let sieve = Doorkeeper::new(0, 0.0).unwrap();
        let mut st = CacheState::new(4, Box::new(demote), Box::new(sieve));
        st.demote_admission = rule;
        st
    };
    let mut st = array(DemoteAdmission::Sieve);
    let a = st.access(7, Op::Read, 0);
    assert!(matches!(st.demote_install(&a).0, DemoteStep::Refused));
    let DemoteStep::Stored(c) = st.demote_install(&a).0 else { panic!("the second is stored") };
    st.unpin(c);
    assert!(matches!(st.demote_install(&a).0, DemoteStep::Cached));
    let mut all = array(DemoteAdmission::All);
    let b = all.access(9, Op::Read, 0);
    assert!(matches!(all.demote_install(&b).0, DemoteStep::Stored(_)));
}

#[test]
fn the_next_batch_starts_above_the_highest_block_in_flight_then_wraps() {
    let mut st = state(16);
    for k in [1u64, 2, 3, 4, 5, 6, 7, 8] {
        let c = st.reserve().unwrap();
        st.commit_dirty(k, c, 0, true);
    }
    let keys = |b: Vec<(u64, u64, u32)>| b.into_iter().map(|v| v.1).collect::<Vec<_>>();
    assert_eq!(keys(st.flush_batch(3, false)), vec![1, 2, 3], "nothing in flight: the lowest");
    // A group in flight (keys 2, 3, 5); key 1 was left behind (a fence, say).
    for k in [2u64, 3, 5] {
        st.mark_flushing(k, 1);
    }
    assert_eq!(keys(st.flush_batch(2, false)), vec![6, 7], "above the highest in flight");
    assert_eq!(
        keys(st.flush_batch(5, false)),
        vec![1, 4, 6, 7, 8],
        "then from the start, ascending, never a key in flight"
    );
    for k in [6u64, 7, 8] {
        st.mark_flushing(k, 1);
    }
    assert_eq!(keys(st.flush_batch(8, false)), vec![1, 4], "only the keys below are left");
    for k in [1u64, 4] {
        st.mark_flushing(k, 1);
    }
    assert!(st.flush_batch(8, false).is_empty(), "every version in flight");
}

/// A write-back write's new block in a full cache (no-overwrite): a written clean block
/// becomes the newest, so a write hit frees the oldest other clean block's block, returned
/// with its key for the client tier's DEMOTE; once the new version is committed the old
/// version's block is free, and the next allocation evicts nothing. A write miss takes the
/// oldest clean block's.
#[test]
fn a_write_hits_new_block_ejects_another_clean_block_and_frees_its_own() {
    let mut st = state(3);
    let mut blocks = Vec::new();
    for k in 1..=3 {
        let a = st.access(k, Op::Read, 0);
        let c = st.allocate(&a).cache_block.unwrap();
        st.unpin(c);
        blocks.push(c);
    }
    // Key 1 is the oldest: its write hit takes key 2's block, not its own.
    let (c, ejected) = st.reserve_for_write(1).unwrap();
    assert_eq!((c, ejected), (blocks[1], Some(2)));
    st.commit_dirty(1, c, 0, false);
    assert_eq!(st.free_len(), 1, "the old version's block");
    let a = st.access(4, Op::Read, 0);
    let got = st.allocate(&a);
    assert_eq!((got.cache_block, got.evicted, got.reclaimed), (Some(blocks[0]), None, None));
    st.unpin(blocks[0]);
    let (c, ejected) = st.reserve_for_write(5).unwrap();
    assert_eq!((c, ejected), (blocks[2], Some(3)), "a write miss: the oldest clean block");
}
