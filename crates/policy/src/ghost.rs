//! A ghost FIFO: keys of recently evicted blocks, without data, for policies that learn from
//! re-references to blocks they just let go (2Q's A1out, S3-FIFO's ghost queue).
//!
//! Bounded to a fixed number of keys; inserting into a full ghost forgets the oldest key.
//! A key found again is removed ([`GhostFifo::take`]), as both 2Q and S3-FIFO do.
//!
//! The keys live in ring positions, oldest at `tail`, and the index maps a key to its
//! position: forgetting the oldest reads the next position in memory (never a node reached
//! through a link, which a list would need), and a key taken from the middle leaves a *hole*,
//! a position whose bit in `live` is clear, that the oldest end skips when it reaches it.
//! Takes are frequent (S3-FIFO takes a key at every ghost hit), so the ring has twice as many
//! positions as keys; when a push finds every position taken (more holes than keys in the
//! span), the live keys are packed together in order. Memory: two positions a key, each 8
//! bytes of key and a bit, and 16 bytes of index a key: 32 bytes a key, as the list node
//! (key and two links) and index it replaced.

use crate::keymap::{fingerprint, KeyMap};

/// A bounded FIFO set of block keys.
#[derive(Clone, Debug)]
pub struct GhostFifo {
    map: KeyMap,
    /// The ring: a key at every live position from `tail` for `span` positions.
    keys: Box<[u64]>,
    /// Bit p set: position p holds a remembered key (clear: a hole or unused).
    live: Box<[u64]>,
    /// Position of the oldest remembered key (live whenever `len > 0`).
    tail: usize,
    /// Positions in use from `tail`, holes included.
    span: usize,
    len: usize,
    capacity: usize,
}

impl GhostFifo {
    /// A ghost remembering at most `capacity` keys (0: remembers nothing).
    pub fn new(capacity: usize) -> Self {
        let positions = if capacity == 0 { 0 } else { 2 * capacity };
        assert!(positions < u32::MAX as usize, "ghost capacity {capacity} exceeds u32 positions");
        Self {
            map: KeyMap::with_entries(capacity),
            keys: vec![0u64; positions].into_boxed_slice(),
            live: vec![0u64; positions.div_ceil(64)].into_boxed_slice(),
            tail: 0,
            span: 0,
            len: 0,
            capacity,
        }
    }

    /// Number of keys remembered.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no key is remembered.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum number of keys.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline(always)]
    fn wrap(&self, p: usize) -> usize {
        if p >= self.keys.len() {
            p - self.keys.len()
        } else {
            p
        }
    }

    #[inline(always)]
    fn is_live(&self, p: usize) -> bool {
        self.live[p / 64] >> (p % 64) & 1 != 0
    }

    #[inline(always)]
    fn set_live(&mut self, p: usize, on: bool) {
        let bit = 1u64 << (p % 64);
        if on {
            self.live[p / 64] |= bit;
        } else {
            self.live[p / 64] &= !bit;
        }
    }

    /// The position of `key` (whose fingerprint is `fp`), if remembered.
    #[inline(always)]
    fn find_fp(&self, key: u64, fp: u32) -> Option<u32> {
        let keys = &self.keys;
        self.map.find_fp(key, fp, |p| keys[p as usize]).ok()
    }

    /// True if `key` is remembered.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        self.find_fp(key, fingerprint(key)).is_some()
    }

    /// Move `tail` past the holes at the old end.
    #[inline(always)]
    fn skip_holes(&mut self) {
        while self.span > self.len && !self.is_live(self.tail) {
            self.tail = self.wrap(self.tail + 1);
            self.span -= 1;
        }
    }

    /// Remember `key` (which must not be remembered already) as the newest, forgetting the
    /// oldest if full. Returns the forgotten key.
    #[inline]
    pub fn push(&mut self, key: u64) -> Option<u64> {
        if self.capacity == 0 {
            return None;
        }
        let mut forgotten = None;
        if self.len >= self.capacity {
            let t = self.tail;
            let old = self.keys[t];
            self.map.remove(old, t as u32);
            self.set_live(t, false);
            self.len -= 1;
            self.tail = self.wrap(t + 1);
            self.span -= 1;
            self.skip_holes();
            // The next key to forget: its index group, for the push after this one.
            if self.len > 0 {
                self.map.prefetch(self.keys[self.tail]);
            }
            forgotten = Some(old);
        }
        if self.span == self.keys.len() {
            self.pack();
        }
        let p = self.wrap(self.tail + self.span);
        self.keys[p] = key;
        self.set_live(p, true);
        self.map.insert(key, p as u32);
        self.span += 1;
        self.len += 1;
        forgotten
    }

    /// Pack the live keys together from `tail`, in order, moving their index entries'
    /// positions. Runs when a push finds every position taken, which takes more holes than
    /// remembered keys in the span.
    #[cold]
    fn pack(&mut self) {
        let (mut r, mut w) = (self.tail, self.tail);
        for _ in 0..self.span {
            if self.is_live(r) {
                if r != w {
                    let k = self.keys[r];
                    self.keys[w] = k;
                    self.set_live(r, false);
                    self.set_live(w, true);
                    let moved = self.map.reslot(k, r as u32, w as u32);
                    debug_assert!(moved, "ghost key {k} not in the index");
                }
                w = self.wrap(w + 1);
            }
            r = self.wrap(r + 1);
        }
        self.span = self.len;
    }

    /// Start loading the position of the first remembered key whose [`fingerprint`] is
    /// `fp`, for a [`GhostFifo::take_fp`] to come that will compare its key (once `fp`'s
    /// index group, [`GhostFifo::prefetch_fp`], has been loaded).
    #[inline(always)]
    pub fn prefetch_resident(&self, fp: u32) {
        if let Some(p) = self.map.first_match(fp) {
            if let Some(k) = self.keys.get(p as usize) {
                crate::prefetch::prefetch(k);
            }
        }
    }

    /// Start loading the index group of the key whose [`fingerprint`] is `fp`.
    #[inline(always)]
    pub fn prefetch_fp(&self, fp: u32) {
        self.map.prefetch_fp(fp);
    }

    /// Start loading the index group of `key`, for a [`GhostFifo::push`] of `key` to come
    /// (the oldest key's, which a full ghost forgets, was loaded by the push before).
    #[inline(always)]
    pub fn prefetch_push(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// Forget `key` if remembered; returns whether it was.
    #[inline]
    pub fn take(&mut self, key: u64) -> bool {
        self.take_fp(key, fingerprint(key))
    }

    /// [`GhostFifo::take`] of `key`, whose [`fingerprint`] is `fp` (not hashed again).
    #[inline]
    pub fn take_fp(&mut self, key: u64, fp: u32) -> bool {
        match self.find_fp(key, fp) {
            Some(p) => {
                self.map.remove_fp(fp, p);
                self.set_live(p as usize, false);
                self.len -= 1;
                if self.len == 0 {
                    (self.tail, self.span) = (0, 0);
                } else {
                    self.skip_holes();
                }
                true
            }
            None => false,
        }
    }

    /// Keys from newest to oldest (O(positions); for tests and inspection).
    pub fn keys(&self) -> Vec<u64> {
        (0..self.span)
            .rev()
            .map(|i| self.wrap(self.tail + i))
            .filter(|&p| self.is_live(p))
            .map(|p| self.keys[p])
            .collect()
    }

    /// Bytes reserved for the index, the positions and their bits.
    pub fn memory_bytes(&self) -> usize {
        self.map.memory_bytes()
            + std::mem::size_of_val(&*self.keys)
            + std::mem::size_of_val(&*self.live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_oldest_when_full_and_take_removes() {
        let mut g = GhostFifo::new(2);
        assert_eq!(g.push(1), None);
        assert_eq!(g.push(2), None);
        assert_eq!(g.push(3), Some(1));
        assert!(!g.contains(1));
        assert!(g.take(2));
        assert!(!g.take(2));
        assert_eq!(g.keys(), vec![3]);
        assert_eq!(g.push(4), None);
        assert_eq!(g.push(5), Some(3));
        assert_eq!(g.keys(), vec![5, 4]);
    }

    /// Pushes and takes (most of them from the middle, leaving holes; enough of them that
    /// pushes pack) against a `VecDeque`, newest first: forgotten keys, takes, order.
    #[test]
    fn same_as_a_deque_with_holes_and_packs() {
        use std::collections::VecDeque;
        for cap in [1usize, 3, 50, 257] {
            let mut g = GhostFifo::new(cap);
            let mut model: VecDeque<u64> = VecDeque::new();
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ cap as u64;
            let mut next_key = 0u64;
            for step in 0..40_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x.is_multiple_of(3) && !model.is_empty() {
                    // Take a remembered key (or, one time in four, one never pushed).
                    let k = if x.is_multiple_of(4) {
                        u64::MAX - step
                    } else {
                        model[(x >> 8) as usize % model.len()]
                    };
                    let want = match model.iter().position(|&m| m == k) {
                        Some(at) => model.remove(at).is_some(),
                        None => false,
                    };
                    assert_eq!(g.take(k), want, "cap {cap} step {step}: take {k}");
                } else {
                    let k = next_key;
                    next_key += 1;
                    model.push_front(k);
                    let want = (model.len() > cap).then(|| model.pop_back()).flatten();
                    assert_eq!(g.push(k), want, "cap {cap} step {step}: push {k}");
                }
                assert_eq!(g.len(), model.len());
                if step % 97 == 0 {
                    assert_eq!(g.keys(), Vec::from(model.clone()), "cap {cap} step {step}");
                    for &k in model.iter().take(5) {
                        assert!(g.contains(k));
                    }
                }
            }
        }
    }

    #[test]
    fn zero_capacity_remembers_nothing() {
        let mut g = GhostFifo::new(0);
        assert_eq!(g.push(1), None);
        assert!(!g.contains(1));
        assert!(g.is_empty());
    }
}
