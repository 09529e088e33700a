//! A first-in first-out set of block keys kept in ring positions: the order of FIFO
//! replacement (and of any queue whose hits never reorder it), without list links.
//!
//! The keys live in an array of positions used as a ring; the oldest key is at `tail`, the
//! next insertion goes right after the newest. The hash index maps a key to its position, so
//! a hit reads one index group and one 8-byte key, and an eviction reads the key at `tail`,
//! which is the next position in memory, never a node found through a link.
//!
//! A key removed from the middle ([`KeyRing::remove`], an invalidation) leaves a *hole*: its
//! position stays in the ring until the tail passes it. A position is live when the index maps
//! its key to it, so holes need no mark of their own. The ring has a quarter more positions
//! than keys; when inserting finds every position taken (holes among them, the set not full),
//! the live keys are packed together in order, which happens at most once per quarter of the
//! capacity of insertions, so insertion stays O(1) amortized. A trace simulation never removes
//! and never packs.
//!
//! Memory: 12 bytes a position (the key and its index fingerprint; 1.25 positions a key) and
//! 16 bytes of index a key: 31 bytes a key.

use crate::keymap::{Bucket, KeyMap};

/// A bounded FIFO set of `u64` keys.
#[derive(Clone, Debug)]
pub struct KeyRing {
    map: KeyMap,
    /// The ring: a key at every position from `tail` for `span` positions (holes included).
    keys: Box<[u64]>,
    /// The index fingerprint of each position's key, so that evicting it and prefetching
    /// the next victim's index group need no hashing.
    fps: Box<[u32]>,
    /// Position of the oldest key (live whenever `len > 0`).
    tail: usize,
    /// Positions in use from `tail`, holes included.
    span: usize,
    len: usize,
    capacity: usize,
}

impl KeyRing {
    /// An empty ring for at most `capacity` keys.
    ///
    /// # Panics
    /// If its positions (a quarter more than `capacity`) do not fit a `u32`.
    pub fn with_capacity(capacity: usize) -> Self {
        let positions = if capacity == 0 { 0 } else { capacity + (capacity / 4).max(1) };
        assert!(positions < u32::MAX as usize, "ring capacity {capacity} exceeds u32 positions");
        Self {
            map: KeyMap::with_entries(capacity),
            keys: vec![0u64; positions].into_boxed_slice(),
            fps: vec![0u32; positions].into_boxed_slice(),
            tail: 0,
            span: 0,
            len: 0,
            capacity,
        }
    }

    /// Maximum number of keys.
    #[inline(always)]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of keys held.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no key is held.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if the ring holds `capacity` keys.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Bytes of memory the positions and the index occupy.
    pub fn memory_bytes(&self) -> usize {
        self.map.memory_bytes()
            + std::mem::size_of_val(&*self.keys)
            + std::mem::size_of_val(&*self.fps)
    }

    /// The position of `key` if held, else the bucket to insert it at (see
    /// [`KeyMap::find`]): one probe serves both outcomes.
    #[inline(always)]
    pub fn lookup(&self, key: u64) -> Result<u32, Bucket> {
        let keys = &self.keys;
        self.map.find(key, |p| keys[p as usize])
    }

    /// [`KeyRing::lookup`] with `key`'s index fingerprint already computed
    /// ([`crate::keymap::fingerprint`]).
    #[inline(always)]
    pub fn lookup_fp(&self, key: u64, fp: u32) -> Result<u32, Bucket> {
        let keys = &self.keys;
        self.map.find_fp(key, fp, |p| keys[p as usize])
    }

    /// True if `key` is held.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        self.lookup(key).is_ok()
    }

    /// Start loading the index group of `key` (see [`KeyMap::prefetch`]).
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// [`KeyRing::prefetch`] of the key whose index fingerprint is `fp`.
    #[inline(always)]
    pub fn prefetch_fp(&self, fp: u32) {
        self.map.prefetch_fp(fp);
    }

    #[inline(always)]
    fn wrap(&self, p: usize) -> usize {
        if p >= self.keys.len() {
            p - self.keys.len()
        } else {
            p
        }
    }

    /// True if position `p` (in the span) holds a live key, not a hole.
    #[inline]
    fn is_live(&self, p: usize) -> bool {
        self.lookup(self.keys[p]) == Ok(p as u32)
    }

    /// Move `tail` past the holes at the old end (none unless keys were removed).
    #[inline(always)]
    fn skip_holes(&mut self) {
        while self.span > self.len && !self.is_live(self.tail) {
            self.tail = self.wrap(self.tail + 1);
            self.span -= 1;
        }
    }

    /// Put `key` at the new end, into index `bucket`. A position must be free.
    #[inline(always)]
    fn put(&mut self, bucket: Bucket, key: u64) {
        let p = self.wrap(self.tail + self.span);
        self.keys[p] = key;
        self.fps[p] = bucket.fingerprint();
        self.map.insert_at(bucket, p as u32);
        self.span += 1;
        self.len += 1;
    }

    /// Insert `key`, looked up as absent into `bucket`, as the newest; the ring must not be
    /// full.
    #[inline(always)]
    pub fn push_new_at(&mut self, bucket: Bucket, key: u64) {
        debug_assert!(self.len < self.capacity, "push_new_at on a full ring");
        if self.span == self.keys.len() {
            self.pack();
        }
        self.put(bucket, key);
    }

    /// Evict the oldest key and insert `key` (looked up as absent into `bucket`) as the
    /// newest; the ring must be full and not of capacity 0. Returns the evicted key. The
    /// bucket stays valid across the eviction: index entries never move.
    #[inline(always)]
    pub fn replace_oldest_at(&mut self, bucket: Bucket, key: u64) -> u64 {
        debug_assert!(self.len == self.capacity && self.capacity > 0);
        let t = self.tail;
        let old = self.keys[t];
        self.map.remove_fp(self.fps[t], t as u32);
        // The new key goes right after the newest (the victim's own position if the span
        // covers every position), then the tail moves on: the number of keys and the span
        // stay what they were, so neither is written (writing both and reading them back
        // together stalls on store forwarding).
        let p = self.wrap(t + self.span);
        self.keys[p] = key;
        self.fps[p] = bucket.fingerprint();
        self.map.insert_at(bucket, p as u32);
        self.tail = self.wrap(t + 1);
        self.skip_holes();
        // The next victim's index group, so that its removal does not wait for memory.
        self.map.prefetch_fp(self.fps[self.tail]);
        old
    }

    /// Remove `key` if held; returns whether it was.
    pub fn remove(&mut self, key: u64) -> bool {
        let Ok(p) = self.lookup(key) else { return false };
        self.map.remove(key, p);
        self.len -= 1;
        if self.len == 0 {
            (self.tail, self.span) = (0, 0);
        } else {
            self.skip_holes();
        }
        true
    }

    /// Pack the live keys together from `tail`, in order, moving their index entries'
    /// positions (never the entries themselves, so buckets stay valid).
    #[cold]
    fn pack(&mut self) {
        let (mut r, mut w) = (self.tail, self.tail);
        for _ in 0..self.span {
            if self.is_live(r) {
                if r != w {
                    let k = self.keys[r];
                    self.keys[w] = k;
                    self.fps[w] = self.fps[r];
                    let moved = self.map.reslot(k, r as u32, w as u32);
                    debug_assert!(moved, "live key {k} not in the index");
                }
                w = self.wrap(w + 1);
            }
            r = self.wrap(r + 1);
        }
        self.span = self.len;
    }

    /// The oldest key `ok` accepts, if any (O(span)). Changes nothing.
    pub fn oldest_where(&self, ok: &mut dyn FnMut(u64) -> bool) -> Option<u64> {
        (0..self.span)
            .map(|i| self.wrap(self.tail + i))
            .filter(|&p| self.is_live(p))
            .map(|p| self.keys[p])
            .find(|&k| ok(k))
    }

    /// Keys from newest to oldest (O(capacity); for tests and inspection).
    pub fn keys(&self) -> Vec<u64> {
        (0..self.span)
            .rev()
            .map(|i| self.wrap(self.tail + i))
            .filter(|&p| self.is_live(p))
            .map(|p| self.keys[p])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Insert `key` (absent) as FIFO does: evict the oldest when full.
    fn push(r: &mut KeyRing, key: u64) -> Option<u64> {
        match r.lookup(key) {
            Ok(_) => panic!("{key} already held"),
            Err(b) if r.is_full() => Some(r.replace_oldest_at(b, key)),
            Err(b) => {
                r.push_new_at(b, key);
                None
            }
        }
    }

    #[test]
    fn evicts_oldest_and_wraps_around() {
        let mut r = KeyRing::with_capacity(4);
        assert_eq!(r.keys.len(), 5);
        for k in 1..=4 {
            assert_eq!(push(&mut r, k), None);
        }
        // Past the end of the positions several times.
        for k in 5..=20 {
            assert_eq!(push(&mut r, k), Some(k - 4));
            assert_eq!(r.keys(), vec![k, k - 1, k - 2, k - 3]);
        }
        assert!(r.contains(17) && !r.contains(16));
        assert_eq!(r.memory_bytes(), 5 * 12 + 2 * 64);
    }

    #[test]
    fn holes_are_skipped_and_packed() {
        let mut r = KeyRing::with_capacity(8);
        for k in 1..=8 {
            push(&mut r, k);
        }
        // Holes in the middle and at the old end.
        for k in [1, 4, 5, 7] {
            assert!(r.remove(k));
            assert!(!r.remove(k));
        }
        assert_eq!(r.keys(), vec![8, 6, 3, 2]);
        assert_eq!((r.len(), r.tail), (4, 1));
        // Four inserts fit without eviction; the positions run out on the way, so the live
        // keys are packed and every one stays reachable at its new position.
        for k in 9..=12 {
            assert_eq!(push(&mut r, k), None);
        }
        assert_eq!(r.keys(), vec![12, 11, 10, 9, 8, 6, 3, 2]);
        assert_eq!(r.span, 8);
        for k in [12, 11, 10, 9, 8, 6, 3, 2] {
            assert!(r.contains(k), "{k}");
        }
        // Full again: the oldest go first, in order.
        assert_eq!(push(&mut r, 13), Some(2));
        assert_eq!(push(&mut r, 14), Some(3));
        assert_eq!(push(&mut r, 15), Some(6));
        // Emptied completely, then reused.
        for k in r.keys() {
            assert!(r.remove(k));
        }
        assert!(r.is_empty() && r.keys().is_empty());
        assert_eq!(push(&mut r, 99), None);
        assert_eq!(r.keys(), vec![99]);
    }

    #[test]
    fn zero_and_one() {
        let z = KeyRing::with_capacity(0);
        assert!(z.is_full() && z.lookup(5).is_err() && z.keys().is_empty());
        let mut one = KeyRing::with_capacity(1);
        assert_eq!(push(&mut one, 5), None);
        assert_eq!(push(&mut one, 6), Some(5));
        assert!(one.remove(6));
        assert_eq!(push(&mut one, 7), None);
        assert_eq!(one.keys(), vec![7]);
    }

    /// Against a plain vector FIFO, with random removals (the engine's invalidations).
    #[test]
    fn randomized_against_a_vector() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for cap in [1usize, 3, 16, 100] {
            let mut r = KeyRing::with_capacity(cap);
            let mut v: std::collections::VecDeque<u64> = Default::default();
            let mut packed = 0;
            for _ in 0..40_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = (x >> 8) % (cap as u64 * 3);
                let held = v.contains(&key);
                assert_eq!(r.contains(key), held, "cap {cap} key {key}");
                if x.is_multiple_of(3) {
                    assert_eq!(r.remove(key), held);
                    v.retain(|&k| k != key);
                } else if !held {
                    let span = r.span;
                    let want = if v.len() == cap { v.pop_front() } else { None };
                    v.push_back(key);
                    assert_eq!(push(&mut r, key), want);
                    // An insertion without eviction grows the span by one unless it packed.
                    packed += usize::from(want.is_none() && r.span != span + 1);
                }
                assert_eq!(r.len(), v.len());
            }
            assert_eq!(r.keys(), v.iter().rev().copied().collect::<Vec<_>>());
            // One key leaves no hole behind (an emptied ring starts over); more keys do.
            assert!(cap == 1 || packed > 0, "cap {cap}: never packed");
        }
    }
}
