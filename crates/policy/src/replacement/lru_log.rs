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
//! The log has `2 * capacity - capacity / 16` places (at least `capacity + 1`): a compaction
//! every `capacity - capacity / 16` appends at least, which reads the log once and moves at
//! most `capacity` keys. Memory per block of capacity: 8 bytes of key per place, one bit of
//! liveness per place and the 16-byte index, 31.7 bytes in all, within the 32 of the linked
//! list.
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
use crate::keymap::{fingerprint, Bucket, KeyMap};
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

/// Least-recently-used replacement over a log of accesses (see the module documentation).
#[derive(Clone, Debug)]
pub struct LruLog {
    map: KeyMap,
    /// The log: the key of each place; live places from `tail` to `head` in access order.
    keys: Box<[u64]>,
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
    /// If the log's places do not fit in `u32` slots (a capacity over 2^31 blocks).
    pub fn new(capacity: usize) -> Self {
        let places = if capacity == 0 { 0 } else { 2 * capacity - capacity / 16 };
        assert!(places < u32::MAX as usize, "LRU log of {capacity} blocks is too large");
        Self {
            map: KeyMap::with_entries(capacity),
            keys: crate::huge_pages::filled(places, 0u64).into_boxed_slice(),
            live: vec![0u64; places.div_ceil(64)].into_boxed_slice(),
            capacity,
            len: 0,
            tail: 0,
            head: 0,
        }
    }

    /// True where the log pays for itself: a state (index and log) larger than what stays in
    /// the caches closest to the core, where the linked list's loads wait for memory. Below
    /// that the list takes fewer instructions. Measured: see docs/sim.md, "Speed and scale".
    pub fn preferred(capacity: usize) -> bool {
        capacity.saturating_mul(32) > super::queue::DEEP_PREFETCH_BYTES
    }

    /// Resident keys from most to least recently used (O(log length); for tests).
    pub fn keys(&self) -> Vec<u64> {
        (self.tail..self.head).rev().filter(|&p| self.is_live(p)).map(|p| self.keys[p]).collect()
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
            self.map.prefetch(self.keys[p]);
        }
    }

    /// The place of `key`, if resident, else the index bucket to insert it at.
    #[inline(always)]
    fn find_fp(&self, key: u64, fp: u32) -> Result<u32, Bucket> {
        let keys = &self.keys;
        self.map.find_fp(key, fp, |s| keys[s as usize])
    }

    /// Append `key` at the head; its index entry is pointed there by the caller.
    #[inline(always)]
    fn append(&mut self, key: u64) -> usize {
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
        let key = self.keys[p];
        self.clear_live(p);
        self.tail = p + 1;
        self.map.remove(key, p as u32);
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
            fps[i] = fingerprint(keys[r]);
            map.prefetch_fp(fps[i]);
        }
        let mut w = 0usize;
        for r in LivePlaces::new(live, lo, hi) {
            let i = w % COMPACT_AHEAD;
            let fp = fps[i];
            if let Some(a) = ahead.next() {
                fps[i] = fingerprint(keys[a]);
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

impl Replacement for LruLog {
    fn name(&self) -> &'static str {
        "lru"
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.find_fp(key, fingerprint(key)).is_ok()
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        let fp = fingerprint(access.key);
        match self.find_fp(access.key, fp) {
            Ok(p) => {
                self.touch(access.key, fp, p as usize);
                true
            }
            Err(_) => false,
        }
    }

    #[inline]
    fn insert(&mut self, access: &Access) -> Option<u64> {
        self.access(access).1
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.find_fp(key, fingerprint(key)) {
            Ok(p) => {
                self.clear_live(p as usize);
                self.map.remove(key, p);
                self.len -= 1;
                true
            }
            Err(_) => false,
        }
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.map.prefetch_fp(fp);
        fp
    }

    /// Loads the log place of the first index entry with the hint's fingerprint (where the
    /// lookup confirms the key).
    #[inline(always)]
    fn prefetch_resident(&self, hint: u32) {
        if let Some(p) = self.map.first_match(hint) {
            if let Some(k) = self.keys.get(p as usize) {
                crate::prefetch::prefetch(k);
            }
        }
    }

    /// The hint is the key's index fingerprint ([`LruLog::prefetch_hint`]).
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        if self.capacity == 0 {
            return (false, None);
        }
        match self.find_fp(access.key, hint) {
            Ok(p) => {
                self.touch(access.key, hint, p as usize);
                (true, None)
            }
            Err(bucket) => {
                let victim = (self.len == self.capacity).then(|| self.evict());
                let p = self.append(access.key);
                self.map.insert_at(bucket, p as u32);
                self.len += 1;
                self.keep_room();
                (false, victim)
            }
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    fn recency_only(&self) -> bool {
        true
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.keys.len() * 8 + self.live.len() * 8
    }
}

impl LruLog {
    /// A hit on `key` (of fingerprint `fp`) at place `p`: its access moves to the head
    /// (nothing to do if it is there already).
    #[inline(always)]
    fn touch(&mut self, key: u64, fp: u32, p: usize) {
        if p + 1 == self.head {
            return;
        }
        self.clear_live(p);
        let q = self.append(key);
        let moved = self.map.reslot_fp(fp, p as u32, q as u32);
        debug_assert!(moved, "a hit's index entry vanished");
        self.keep_room();
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

    #[test]
    fn memory_is_at_most_thirty_two_bytes_per_block() {
        let log = LruLog::new(1_000_000);
        let per_block = log.memory_bytes() as f64 / 1e6;
        assert!(per_block <= 32.0, "{per_block} bytes a block");
        assert!(LruLog::preferred(1_000_000) && !LruLog::preferred(100_000));
    }
}
