//! LRU kept as a log of accesses: the same decisions as [`Lru`](super::Lru), laid out for a
//! state far larger than the processor's caches.
//!
//! A linked recency list finds each victim by following the tail's link, one dependent load
//! an eviction, and a hit relinks two neighbours that lie anywhere in memory. Over a state of
//! tens of megabytes each of those loads waits for memory, and a chain of dependent loads
//! cannot be prefetched further than one link ahead (perf, LRU at 1 M blocks over 100 M
//! Zipf(0.9) requests: a third of the time on the victim-after-next's node).
//!
//! Here the resident keys sit in an array in the order of their last access, oldest first:
//! the log. An access appends its key at the log's head and points the key's index entry at
//! it; a hit also marks the key's old place dead (one bit). The victim is the first live entry
//! from the log's tail, found by a sequential scan whose index groups are prefetched a fixed
//! distance ahead. When the head reaches the end of the array, the live entries are slid
//! down to its start in order (a compaction; their index entries are re-pointed, prefetched
//! ahead the same way), which frees the rest. No load depends on another one's result except
//! through the index, and every index group is loaded ahead of its use.
//!
//! A compaction reads the log once and moves at most `capacity` keys (each re-pointed in the
//! index: a load of its index group, which is most of a compaction's time), so the more
//! places beyond the capacity, the rarer compactions are. Places are as narrow as the keys
//! allow: while every key inserted fits in 32 bits (block numbers of volumes under 16 TiB,
//! the generators' keys) a place is 4 bytes and the log has `3.5 * capacity` places, a
//! compaction every `2.5 * capacity` appends at least; the first wider key widens the log
//! once (compacted into 8-byte places, `2 * capacity - capacity / 16` of them, a compaction
//! every `capacity - capacity / 16` appends). Memory per block of capacity, with the 16-byte
//! index and a bit of liveness per place: 30.4 bytes narrow, 31.7 wide, within the 32 of
//! the linked list either way.
//!
//! A narrow key is also its own index tag: the tag is a bijection of the key ([`narrow_tag`]:
//! a mix of the key plus one, never 0, the empty tag), so a tag match in the index *is* the
//! key and a lookup reads the index group alone ([`KeyMap::find_exact`]); a wide log tags by
//! [`fingerprint`] and confirms a match by reading the key's place, as every other policy
//! does. (perf, LRU at 1M blocks over 100M requests: that confirming load was 8 % of the
//! samples, and its prefetch more.) Widening re-indexes the keys by fingerprint; the hints
//! the simulator takes ahead ([`Replacement::prefetch_hint`]) are tags of the width they
//! were taken at, so a wide log takes each key's fingerprint anew.
//!
//! FIFO's [`KeyRing`](crate::ring::KeyRing) is the same idea for a queue whose hits never
//! reorder it: a hole is rare there (an invalidation), so it marks none (a place is live when
//! the index maps its key to it) and keeps a quarter of slack. Under LRU every hit leaves a
//! hole, so liveness is a bit here (the victim scan needs no index probe for a hole) and the
//! slack is nearly the capacity (a quarter would compact every `capacity / 4` hits). One ring
//! parameterized by its liveness mark and slack could serve both; not done.
//!
//! It cannot place a block by an age in the past ([`Replacement::insert_aged`] falls back to
//! a plain insertion), so only the simulator's monomorphized runs use it, and only where the
//! state outgrows the caches ([`LruLog::preferred`]); every other user of LRU has the list.

use super::Replacement;
use crate::keymap::{fingerprint, narrow_key, narrow_tag, Bucket, KeyMap};
use crate::Access;

/// How far ahead of the scan (in log places) the index group of a live key is loaded, when
/// evicting and when compacting.
const SCAN_AHEAD: usize = 16;

/// How far ahead of a compaction's scan (in live places) the index group of a live key is
/// loaded: further than [`SCAN_AHEAD`], as a compaction's steps are short.
const COMPACT_AHEAD: usize = 32;

/// The live places in `lo..hi` of a liveness bitmap, in order, a word at a time.
struct LivePlaces<'a> {
    live: &'a [u64],
    word: usize,
    bits: u64,
    hi: usize,
}

impl<'a> LivePlaces<'a> {
    fn new(live: &'a [u64], lo: usize, hi: usize) -> Self {
        let word = lo / 64;
        let bits = live.get(word).map_or(0, |&b| b & (u64::MAX << (lo % 64)));
        Self { live, word, bits, hi }
    }
}

impl Iterator for LivePlaces<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.bits == 0 {
            self.word += 1;
            if self.word * 64 >= self.hi {
                return None;
            }
            self.bits = self.live[self.word];
        }
        let p = self.word * 64 + self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        (p < self.hi).then_some(p)
    }
}

/// A log place's width: the key as stored (see the module documentation).
trait Place: Copy + std::fmt::Debug + Send + 'static {
    /// The empty place.
    const ZERO: Self;
    /// `key` as stored, if it fits.
    fn of(key: u64) -> Option<Self>;
    /// The stored key.
    fn key(self) -> u64;
    /// Places of a log of `capacity` blocks (0 or more than `capacity`).
    fn places(capacity: usize) -> usize;
    /// Whether [`Place::tag`] is injective, so a tag match in the index is the key itself.
    const EXACT: bool;
    /// The index tag of `key` (a key that fits, [`Place::of`]): never 0.
    fn tag(key: u64) -> u32;
}

impl Place for u32 {
    const ZERO: Self = 0;
    const EXACT: bool = true;
    /// Keys below `u32::MAX` (whose `+ 1` is a non-zero `u32`).
    #[inline(always)]
    fn of(key: u64) -> Option<Self> {
        narrow_key(key)
    }
    #[inline(always)]
    fn tag(key: u64) -> u32 {
        narrow_tag(key as u32)
    }
    #[inline(always)]
    fn key(self) -> u64 {
        u64::from(self)
    }
    fn places(capacity: usize) -> usize {
        capacity.saturating_mul(3).saturating_add(capacity.div_ceil(2)).max(capacity + 1)
    }
}

impl Place for u64 {
    const ZERO: Self = 0;
    const EXACT: bool = false;
    #[inline(always)]
    fn tag(key: u64) -> u32 {
        fingerprint(key)
    }
    #[inline(always)]
    fn of(key: u64) -> Option<Self> {
        Some(key)
    }
    #[inline(always)]
    fn key(self) -> u64 {
        self
    }
    fn places(capacity: usize) -> usize {
        if capacity == 0 {
            0
        } else {
            2 * capacity - capacity / 16
        }
    }
}

/// Least-recently-used replacement over a log of accesses (see the module documentation):
/// 4-byte places while every key fits, 8-byte ones from the first key that does not.
#[derive(Clone, Debug)]
pub struct LruLog {
    log: Width,
}

/// The log at its current width.
#[derive(Clone, Debug)]
enum Width {
    Narrow(LogOf<u32>),
    Wide(LogOf<u64>),
}

/// Run `$body` on the log, whichever its width, as `$l`.
macro_rules! either {
    ($self:expr, $l:ident => $body:expr) => {
        match $self {
            Width::Narrow($l) => $body,
            Width::Wide($l) => $body,
        }
    };
}

/// The log of one place width.
#[derive(Clone, Debug)]
struct LogOf<K: Place> {
    map: KeyMap,
    /// The log: the key of each place; live places from `tail` to `head` in access order.
    keys: Box<[K]>,
    /// One bit per place of `keys`: set while the place holds its key's latest access.
    live: Box<[u64]>,
    capacity: usize,
    len: usize,
    tail: usize,
    head: usize,
}

impl LruLog {
    /// An empty LRU cache of `capacity` blocks.
    ///
    /// # Panics
    /// If the log's places do not fit in `u32` slots (a capacity over 2^30 blocks).
    pub fn new(capacity: usize) -> Self {
        Self { log: Width::Narrow(LogOf::new(capacity, KeyMap::with_entries(capacity))) }
    }

    /// Resident keys from most to least recently used (O(log length); for tests).
    pub fn keys(&self) -> Vec<u64> {
        either!(&self.log, l => l.keys())
    }

    /// `key`'s index tag at the log's width, 0 for a key too wide for a narrow log.
    #[inline(always)]
    fn tag_of(&self, key: u64) -> u32 {
        match &self.log {
            Width::Narrow(_) => match <u32 as Place>::of(key) {
                Some(_) => <u32 as Place>::tag(key),
                None => 0,
            },
            Width::Wide(_) => fingerprint(key),
        }
    }

    /// Whether the log's places are 8 bytes wide (a key over 32 bits was inserted).
    pub fn is_wide(&self) -> bool {
        matches!(self.log, Width::Wide(_))
    }

    /// True where the log pays for itself: a state (index and log) larger than what stays in
    /// the caches closest to the core, where the linked list's loads wait for memory. Below
    /// that the list takes fewer instructions. Measured by bench/sim-throughput
    /// (docs/benchmarks.md).
    pub fn preferred(capacity: usize) -> bool {
        capacity.saturating_mul(32) > super::queue::DEEP_PREFETCH_BYTES
    }

    /// Widen the log to 8-byte places: compacted, the same keys in the same order at the
    /// same places, indexed anew by their fingerprints (the narrow index's tags are the keys'
    /// own, [`Place::EXACT`]).
    #[cold]
    #[inline(never)]
    fn widen(&mut self) {
        let Width::Narrow(n) = &mut self.log else { return };
        n.compact();
        let mut wide = LogOf::<u64>::new(n.capacity, KeyMap::with_entries(n.capacity));
        for p in 0..n.head {
            let key = n.keys[p].key();
            wide.keys[p] = key;
            wide.set_live(p);
            wide.map.insert(key, p as u32);
        }
        (wide.len, wide.head) = (n.len, n.head);
        self.log = Width::Wide(wide);
    }
}

impl<K: Place> LogOf<K> {
    /// An empty log of `capacity` blocks over `map` (empty, or holding exactly the places a
    /// compacted log of this width keeps at its start).
    fn new(capacity: usize, map: KeyMap) -> Self {
        let places = K::places(capacity);
        assert!(places < u32::MAX as usize, "LRU log of {capacity} blocks is too large");
        Self {
            map,
            keys: crate::huge_pages::filled(places, K::ZERO).into_boxed_slice(),
            live: vec![0u64; places.div_ceil(64)].into_boxed_slice(),
            capacity,
            len: 0,
            tail: 0,
            head: 0,
        }
    }

    /// Resident keys from most to least recently used.
    fn keys(&self) -> Vec<u64> {
        (self.tail..self.head)
            .rev()
            .filter(|&p| self.is_live(p))
            .map(|p| self.keys[p].key())
            .collect()
    }

    #[inline(always)]
    fn is_live(&self, p: usize) -> bool {
        self.live[p / 64] >> (p % 64) & 1 != 0
    }

    #[inline(always)]
    fn set_live(&mut self, p: usize) {
        self.live[p / 64] |= 1 << (p % 64);
    }

    #[inline(always)]
    fn clear_live(&mut self, p: usize) {
        self.live[p / 64] &= !(1 << (p % 64));
    }

    /// Start loading the index group of the key at place `p` if it is live.
    #[inline(always)]
    fn prefetch_place(&self, p: usize) {
        if p < self.head && self.is_live(p) {
            self.map.prefetch_fp(K::tag(self.keys[p].key()));
        }
    }

    /// The place of `key` (one that fits, [`Place::of`]) of tag `tag` ([`Place::tag`]), if
    /// resident, else the index bucket to insert it at. Narrow tags are the keys themselves,
    /// so no place is read to confirm a match.
    #[inline(always)]
    fn find_fp(&self, key: u64, tag: u32) -> Result<u32, Bucket> {
        if K::EXACT {
            self.map.find_exact(tag)
        } else {
            let keys = &self.keys;
            self.map.find_fp(key, tag, |s| keys[s as usize].key())
        }
    }

    /// Append `key` (which fits the width) at the head; its index entry is pointed there by
    /// the caller.
    #[inline(always)]
    fn append(&mut self, key: K) -> usize {
        let p = self.head;
        self.keys[p] = key;
        self.set_live(p);
        self.head += 1;
        p
    }

    /// Remove the least recently used block (the first live place from the tail) from the
    /// log and the index; returns its key. The cache must not be empty.
    #[inline(always)]
    fn evict(&mut self) -> u64 {
        let mut p = self.tail;
        loop {
            self.prefetch_place(p + SCAN_AHEAD);
            if self.is_live(p) {
                break;
            }
            p += 1;
        }
        let key = self.keys[p].key();
        self.clear_live(p);
        self.tail = p + 1;
        self.map.remove_fp(K::tag(key), p as u32);
        self.len -= 1;
        key
    }

    /// Slide the live places down to the start of the log, in order, re-pointing their index
    /// entries; the head then follows the last of them. The live places are found a word of
    /// the liveness bitmap at a time, and a second cursor [`COMPACT_AHEAD`] live places ahead
    /// loads their index groups and hands their fingerprints on.
    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        let Self { map, keys, live, tail, head, len, .. } = self;
        let (lo, hi) = (*tail, *head);
        let mut ahead = LivePlaces::new(live, lo, hi);
        let mut fps = [0u32; COMPACT_AHEAD];
        for (i, r) in ahead.by_ref().take(COMPACT_AHEAD).enumerate() {
            fps[i] = K::tag(keys[r].key());
            map.prefetch_fp(fps[i]);
        }
        let mut w = 0usize;
        for r in LivePlaces::new(live, lo, hi) {
            let i = w % COMPACT_AHEAD;
            let fp = fps[i];
            if let Some(a) = ahead.next() {
                fps[i] = K::tag(keys[a].key());
                map.prefetch_fp(fps[i]);
            }
            if r != w {
                keys[w] = keys[r];
                let moved = map.reslot_fp(fp, r as u32, w as u32);
                debug_assert!(moved, "a live log place without its index entry");
            }
            w += 1;
        }
        debug_assert_eq!(w, *len);
        live.fill(0);
        live[..w / 64].fill(u64::MAX);
        if !w.is_multiple_of(64) {
            live[w / 64] = (1u64 << (w % 64)) - 1;
        }
        *tail = 0;
        *head = w;
    }

    /// Compact when the head has reached the end of the log, so every access finds a place.
    #[inline(always)]
    fn keep_room(&mut self) {
        if self.head == self.keys.len() {
            self.compact();
        }
    }
}

impl<K: Place> LogOf<K> {
    #[inline]
    fn contains(&self, key: u64) -> bool {
        K::of(key).is_some() && self.find_fp(key, K::tag(key)).is_ok()
    }

    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        let Some(stored) = K::of(key) else { return false };
        let tag = K::tag(key);
        match self.find_fp(key, tag) {
            Ok(p) => {
                self.touch(stored, tag, p as usize);
                true
            }
            Err(_) => false,
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        if K::of(key).is_none() {
            return false;
        }
        let tag = K::tag(key);
        match self.find_fp(key, tag) {
            Ok(p) => {
                self.clear_live(p as usize);
                self.map.remove_fp(tag, p);
                self.len -= 1;
                true
            }
            Err(_) => false,
        }
    }

    /// Loads the log place of the first index entry with the hint's fingerprint (nothing
    /// for exact tags: no place is read to confirm them).
    #[inline(always)]
    fn prefetch_resident(&self, hint: u32) {
        if K::EXACT {
            return;
        }
        if let Some(p) = self.map.first_match(hint) {
            if let Some(k) = self.keys.get(p as usize) {
                crate::prefetch::prefetch(k);
            }
        }
    }

    /// An access of `key`, whose tag is `tag` ([`Place::tag`]) if it fits; `None` (nothing
    /// changed) if the key does not fit this width.
    #[inline(always)]
    fn access_fp(&mut self, key: u64, tag: u32) -> Option<(bool, Option<u64>)> {
        let stored = K::of(key)?;
        if self.capacity == 0 {
            return Some((false, None));
        }
        match self.find_fp(key, tag) {
            Ok(p) => {
                self.touch(stored, tag, p as usize);
                Some((true, None))
            }
            Err(bucket) => {
                let victim = (self.len == self.capacity).then(|| self.evict());
                let p = self.append(stored);
                self.map.insert_at(bucket, p as u32);
                self.len += 1;
                self.keep_room();
                Some((false, victim))
            }
        }
    }

    /// A hit on `key` (of tag `fp`) at place `p`: its access moves to the head (nothing to
    /// do if it is there already). A resident key fits the width.
    #[inline(always)]
    fn touch(&mut self, key: K, fp: u32, p: usize) {
        if p + 1 == self.head {
            return;
        }
        self.clear_live(p);
        debug_assert_eq!(self.keys[p].key(), key.key());
        let q = self.append(key);
        let moved = self.map.reslot_fp(fp, p as u32, q as u32);
        debug_assert!(moved, "a hit's index entry vanished");
        self.keep_room();
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + std::mem::size_of_val(&*self.keys) + self.live.len() * 8
    }
}

impl Replacement for LruLog {
    fn name(&self) -> &'static str {
        "lru"
    }

    fn capacity(&self) -> usize {
        either!(&self.log, l => l.capacity)
    }

    #[inline]
    fn len(&self) -> usize {
        either!(&self.log, l => l.len)
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        either!(&self.log, l => l.contains(key))
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        either!(&mut self.log, l => l.lookup(access.key))
    }

    #[inline]
    fn insert(&mut self, access: &Access) -> Option<u64> {
        self.access(access).1
    }

    fn remove(&mut self, key: u64) -> bool {
        either!(&mut self.log, l => l.remove(key))
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, self.tag_of(access.key))
    }

    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let tag = self.tag_of(key);
        if tag != 0 {
            either!(&self.log, l => l.map.prefetch_fp(tag));
        }
        tag
    }

    /// Loads the log place of the first index entry with the hint's fingerprint (where the
    /// lookup confirms the key).
    #[inline(always)]
    fn prefetch_resident(&self, hint: u32) {
        either!(&self.log, l => l.prefetch_resident(hint))
    }

    /// The hint is the key's index tag at the log's width when the hint was taken
    /// ([`LruLog::prefetch_hint`]). A narrow log trusts it; a wide one takes the key's
    /// fingerprint anew, as hints taken before the log widened are narrow tags.
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        let key = access.key;
        if let Width::Narrow(l) = &mut self.log {
            if let Some(outcome) = l.access_fp(key, hint) {
                return outcome;
            }
            self.widen();
        }
        match &mut self.log {
            Width::Wide(l) => l.access_fp(key, fingerprint(key)).unwrap_or((false, None)),
            Width::Narrow(_) => unreachable!("widen leaves a wide log"),
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.prefetch_hint(key);
    }

    fn recency_only(&self) -> bool {
        true
    }

    fn memory_bytes(&self) -> usize {
        either!(&self.log, l => l.memory_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{check_evicts_least_recently_used, misses, run, skewed_keys};
    use crate::replacement::Lru;

    #[test]
    fn evicts_least_recently_used() {
        check_evicts_least_recently_used(LruLog::new(3), LruLog::keys);
    }

    /// The same hits and victims as the linked-list LRU, access by access, over streams long
    /// enough for hundreds of compactions at every capacity (the log of capacity 1 has two
    /// places and compacts at almost every access).
    #[test]
    fn decides_as_the_linked_list_lru_across_many_compactions() {
        for &(capacity, universe) in &[(1usize, 3u64), (2, 5), (7, 20), (64, 100), (1000, 5000)] {
            let keys = skewed_keys(200_000, universe, 88172645463325252 ^ capacity as u64);
            let (mut log, mut list) = (LruLog::new(capacity), Lru::new(capacity));
            let got = run(&mut log, &keys);
            assert_eq!(got, run(&mut list, &keys), "capacity {capacity}");
            assert!(misses(&got) > 0 && misses(&got) < keys.len(), "capacity {capacity}");
            assert_eq!(log.keys(), list.keys(), "capacity {capacity}");
            assert_eq!(log.len(), list.len());
        }
    }

    #[test]
    fn remove_frees_a_place_and_the_rest_keep_their_order() {
        let mut log = LruLog::new(3);
        run(&mut log, &[1, 2, 3]);
        assert!(log.remove(2));
        assert!(!log.remove(2) && !log.contains(2));
        assert_eq!(log.len(), 2);
        // Room again: 4 evicts nothing; then 5 evicts 1, the least recently used.
        assert_eq!(run(&mut log, &[4, 5]), vec![(false, None), (false, Some(1))]);
        assert_eq!(log.keys(), vec![5, 4, 3]);
        // Removals and accesses mixed, against the list, through many compactions.
        let keys = skewed_keys(50_000, 300, 7);
        let (mut log, mut list) = (LruLog::new(100), Lru::new(100));
        for (t, &k) in keys.iter().enumerate() {
            if t % 7 == 3 {
                assert_eq!(log.remove(k), list.remove(k), "remove {k} at {t}");
            } else {
                let a = Access::read(k, t as u64);
                assert_eq!(log.access(&a), list.access(&a), "access {k} at {t}");
            }
        }
        assert_eq!(log.keys(), list.keys());
    }

    #[test]
    fn capacity_zero_keeps_nothing() {
        let mut zero = LruLog::new(0);
        assert_eq!(run(&mut zero, &[1, 1]), vec![(false, None), (false, None)]);
        assert_eq!(zero.len(), 0);
        assert!(!zero.contains(1));
    }

    /// Keys spread over the whole 64-bit range (no two share their low 32 bits).
    fn wide(keys: &[u64]) -> Vec<u64> {
        keys.iter().map(|&k| k << 32 | 0x9E37 ^ k).collect()
    }

    #[test]
    fn wide_keys_decide_as_the_linked_list_lru() {
        for &(capacity, universe) in &[(1usize, 3u64), (7, 20), (1000, 5000)] {
            let keys = wide(&skewed_keys(100_000, universe, 31 ^ capacity as u64));
            let (mut log, mut list) = (LruLog::new(capacity), Lru::new(capacity));
            assert_eq!(run(&mut log, &keys), run(&mut list, &keys), "capacity {capacity}");
            assert!(log.is_wide());
            assert_eq!(log.keys(), list.keys(), "capacity {capacity}");
        }
    }

    /// The first key over 32 bits widens the log in the middle of a stream, at every phase of
    /// its compaction cycle, with hits, evictions and removals before and after.
    #[test]
    fn widening_mid_stream_keeps_every_decision() {
        for &(capacity, universe) in &[(1usize, 3u64), (2, 5), (64, 100), (1000, 5000)] {
            let narrow = skewed_keys(60_000, universe, 5 ^ capacity as u64);
            for widen_at in [0usize, 1, 777, 12_345, 33_333, 59_998] {
                let mut keys = narrow.clone();
                // From widen_at on (an access, not a removal), every third key is the wide
                // twin of a narrow one.
                for (t, k) in keys.iter_mut().enumerate().skip(widen_at) {
                    if (t - widen_at) % 3 == 0 {
                        *k |= 1 << 40;
                    }
                }
                let (mut log, mut list) = (LruLog::new(capacity), Lru::new(capacity));
                let mut accessed_wide = false;
                for (t, &k) in keys.iter().enumerate() {
                    if t % 11 == 5 {
                        assert_eq!(log.remove(k), list.remove(k), "remove {k} at {t}");
                    } else {
                        let a = Access::read(k, t as u64);
                        assert_eq!(log.access(&a), list.access(&a), "access {k} at {t}");
                    }
                    // Widened exactly by the first wide key accessed (a removal inserts none).
                    accessed_wide |= t % 11 != 5 && k >> 32 != 0;
                    assert_eq!(log.is_wide(), accessed_wide, "at {t}");
                }
                assert!(log.is_wide(), "capacity {capacity}, widened at {widen_at}");
                assert_eq!(log.keys(), list.keys(), "capacity {capacity}, widened at {widen_at}");
                assert_eq!(log.len(), list.len());
            }
        }
    }

    /// Driven as `ember sim` drives it: each key's hint taken 16 accesses ahead, so hints
    /// taken while the log was narrow are used after it widened; the edge keys of the narrow
    /// width (0, the largest narrow key, `u32::MAX`, the first wide key) included.
    #[test]
    fn hints_taken_ahead_stay_right_across_widening() {
        const AHEAD: usize = 16;
        for &(capacity, universe) in &[(2usize, 6u64), (64, 100), (1000, 5000)] {
            let mut keys = skewed_keys(80_000, universe, 99 ^ capacity as u64);
            for (t, k) in keys.iter_mut().enumerate() {
                match t % 97 {
                    0 => *k = 0,
                    1 => *k = u64::from(u32::MAX) - 1,
                    2 if t > 40_000 => *k = u64::from(u32::MAX),
                    3 if t > 50_000 => *k = 1 << 32,
                    _ => {}
                }
            }
            let (mut log, mut list) = (LruLog::new(capacity), Lru::new(capacity));
            let mut hints: Vec<u32> =
                keys.iter().take(AHEAD).map(|&k| log.prefetch_hint(k)).collect();
            let mut widened = false;
            for (t, &k) in keys.iter().enumerate() {
                let hint = hints[t % AHEAD];
                if let Some(&next) = keys.get(t + AHEAD) {
                    hints[t % AHEAD] = log.prefetch_hint(next);
                }
                log.prefetch_resident(hint);
                let a = Access::read(k, t as u64);
                assert_eq!(log.access_hinted(&a, hint), list.access(&a), "access {k} at {t}");
                // Widened by the first key that is not below 2^32 - 1.
                widened |= k >= u64::from(u32::MAX);
                assert_eq!(log.is_wide(), widened, "at {t}");
            }
            assert!(log.is_wide());
            assert_eq!(log.keys(), list.keys(), "capacity {capacity}");
        }
    }

    /// The narrow tags are a bijection (a tag match is the key itself): distinct on a million
    /// consecutive keys and on a million spread ones, never 0.
    #[test]
    fn narrow_tags_are_distinct_and_never_zero() {
        for spread in [1u64, 4099] {
            let mut tags: Vec<u32> = (0..1_000_000u64)
                .map(|i| (i * spread) % u64::from(u32::MAX))
                .map(<u32 as Place>::tag)
                .collect();
            assert!(tags.iter().all(|&t| t != 0));
            tags.sort_unstable();
            tags.dedup();
            assert_eq!(tags.len(), 1_000_000, "spread {spread}");
        }
        assert_eq!(<u32 as Place>::of(u64::from(u32::MAX)), None);
        assert_eq!(<u32 as Place>::of(u64::from(u32::MAX) - 1), Some(u32::MAX - 1));
        assert_ne!(<u32 as Place>::tag(u64::from(u32::MAX) - 1), 0);
    }

    #[test]
    fn memory_is_at_most_thirty_two_bytes_per_block_at_either_width() {
        let mut log = LruLog::new(1_000_000);
        let narrow = log.memory_bytes() as f64 / 1e6;
        assert!(narrow <= 32.0, "{narrow} bytes a block (narrow)");
        log.access(&Access::read(1 << 40, 0));
        assert!(log.is_wide());
        let wide = log.memory_bytes() as f64 / 1e6;
        assert!(wide <= 32.0, "{wide} bytes a block (wide)");
        assert!(narrow < wide, "narrow {narrow} wide {wide}");
        assert!(LruLog::preferred(1_000_000) && !LruLog::preferred(100_000));
    }
}
