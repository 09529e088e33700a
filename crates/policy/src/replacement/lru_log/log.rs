//! The log of one place width behind [`super::LruLog`] (see its module documentation): the
//! keys in the order of their last access, a bit of liveness per place, the victim scan from
//! the tail and the compaction that slides the live places down when the head reaches the
//! end. Index groups are loaded ahead of the scans ([`SCAN_AHEAD`], [`COMPACT_AHEAD`]).

use super::place::Place;
use crate::keymap::{Bucket, KeyMap};

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

/// The log of one place width.
#[derive(Clone, Debug)]
pub(super) struct LogOf<K: Place> {
    pub(super) map: KeyMap,
    /// The log: the key of each place; live places from `tail` to `head` in access order.
    keys: Box<[K]>,
    /// One bit per place of `keys`: set while the place holds its key's latest access.
    live: Box<[u64]>,
    pub(super) capacity: usize,
    pub(super) len: usize,
    tail: usize,
    head: usize,
}

impl<K: Place> LogOf<K> {
    /// An empty log of `capacity` blocks over `map` (empty, or holding exactly the places a
    /// compacted log of this width keeps at its start).
    pub(super) fn new(capacity: usize, map: KeyMap) -> Self {
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
    pub(super) fn keys(&self) -> Vec<u64> {
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
    pub(super) fn contains(&self, key: u64) -> bool {
        K::of(key).is_some() && self.find_fp(key, K::tag(key)).is_ok()
    }

    #[inline]
    pub(super) fn lookup(&mut self, key: u64) -> bool {
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

    pub(super) fn remove(&mut self, key: u64) -> bool {
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
    pub(super) fn prefetch_resident(&self, hint: u32) {
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
    pub(super) fn access_fp(&mut self, key: u64, tag: u32) -> Option<(bool, Option<u64>)> {
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

    pub(super) fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + std::mem::size_of_val(&*self.keys) + self.live.len() * 8
    }
}

impl LogOf<u32> {
    /// This log widened to 8-byte places: compacted, the same keys in the same order at the
    /// same places, indexed anew by their fingerprints.
    #[inline]
    pub(super) fn widened(&mut self) -> LogOf<u64> {
        self.compact();
        let mut wide = LogOf::<u64>::new(self.capacity, KeyMap::with_entries(self.capacity));
        for p in 0..self.head {
            let key = self.keys[p].key();
            wide.keys[p] = key;
            wide.set_live(p);
            wide.map.insert(key, p as u32);
        }
        (wide.len, wide.head) = (self.len, self.head);
        wide
    }
}
