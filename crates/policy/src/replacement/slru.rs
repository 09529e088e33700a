//! SLRU, segmented LRU (Karedla, Love & Wherry, IEEE Computer 1994), as Wong & Wilkes
//! describe it (ATC 2002, section 4): a *probationary* and a *protected* segment, each LRU.
//!
//! New blocks enter at the MRU end of the probationary segment; a hit in the probationary
//! segment moves the block to the MRU end of the protected one; the protected segment's LRU
//! overflow goes back to the MRU end of the probationary segment; blocks are evicted from the
//! probationary LRU end. Generalized to `n` segments (segment 0 probationary, a hit moves a
//! block up one segment, overflow cascades down one segment), as libCacheSim does.
//!
//! Sizes: each of the `n - 1` protected segments holds at most `floor(c / n)` blocks; the
//! probationary segment holds the rest (at least `c - (n-1) * floor(c/n)`, more while the
//! protected segments are not full). The default is the paper's two segments, half and half.
//!
//! **libCacheSim's `SLRU` uses 4 segments by default** (`n-seg=4`, each `c/4`), and places a
//! new block differently: into the *lowest segment with room*, so while the cache warms up,
//! blocks that were never hit land in the protected segments (ember, like the paper, always
//! inserts into the probationary segment). Such blocks stay protected until promotions from
//! below push them down, which may be never: on a loop larger than the cache next to a small
//! hot set, libCacheSim keeps part of the loop pinned and hits it every pass (e.g. 38 754 vs
//! 60 207 misses at c = 1000 on the `hot+scan` sequence of `tests/peer/test_policy_exactness.py`),
//! while on Zipf-like sequences the two differ by well under 1 %.
//! [`Slru::with_insertion`]`(c, 4, `[`SlruInsert::LowestWithRoom`]`)` reproduces libCacheSim's
//! placement, and then miss counts are equal whenever `c` is a multiple of the segment count.
//! When it is not, libCacheSim also caps segment 0 at `floor(c/n)`, so a hit that cascades a
//! block into a full segment 0 evicts at once and its cache runs below `c` blocks; ember gives
//! the remainder to segment 0 instead (and never evicts on a hit, which the [`Replacement`]
//! contract does not allow). And with `c < n` libCacheSim caches nothing (a block must fit
//! segment 0's `floor(c/n) = 0`), where ember caches `c` blocks in segment 0.

use super::params::{Domain, Param};
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::keymap::KeyMap;
use crate::slab::{List, Slab};
use crate::Access;

/// SLRU's parameters: the number of segments and where a new block goes.
pub const PARAMS: &[Param] = &[
    Param {
        name: "segments",
        domain: Domain::Int { min: 1, max: 255 },
        default: 2.0,
        help: "segments, the first probationary (1 is LRU; libCacheSim's SLRU has 4)",
    },
    Param {
        name: "insert",
        domain: Domain::Choice(&["probationary", "lcs"]),
        default: 0.0,
        help: "a new block enters the probationary segment (the paper), or the lowest \
               segment with room (`lcs`, libCacheSim's SLRU)",
    },
];

impl FromSpec for Slru {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        let insert = if spec.value("insert", 0.0) == 1.0 {
            SlruInsert::LowestWithRoom
        } else {
            SlruInsert::Probationary
        };
        Self::with_insertion(capacity, spec.value("segments", 2.0) as usize, insert)
    }
}

/// Where [`Slru`] puts a new block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlruInsert {
    /// At the MRU end of the probationary segment (Karedla et al.; Wong & Wilkes).
    #[default]
    Probationary,
    /// At the MRU end of the lowest segment that is not full, probationary first
    /// (libCacheSim's `SLRU`); segment 0 once all are full.
    LowestWithRoom,
}

/// Segmented LRU with `n` segments.
#[derive(Clone, Debug)]
pub struct Slru {
    map: KeyMap,
    slab: Slab<u8>,
    segments: Vec<List>,
    /// Maximum length of each protected segment (index 0 unused: probationary takes the rest).
    limits: Vec<usize>,
    insert: SlruInsert,
    c: usize,
}

impl Slru {
    /// The paper's SLRU: a probationary and a protected segment, each half the cache.
    pub fn new(capacity: usize) -> Self {
        Self::with_segments(capacity, 2)
    }

    /// SLRU with `segments` segments (1..=255; 1 is plain LRU), each protected segment
    /// `capacity / segments` blocks.
    pub fn with_segments(capacity: usize, segments: usize) -> Self {
        Self::with_insertion(capacity, segments, SlruInsert::Probationary)
    }

    /// SLRU with `segments` segments and the given placement of new blocks.
    pub fn with_insertion(capacity: usize, segments: usize, insert: SlruInsert) -> Self {
        let n = segments.clamp(1, 255);
        let per = capacity / n;
        let mut limits = vec![per; n];
        limits[0] = capacity - per * (n - 1);
        Self {
            map: KeyMap::with_entries(capacity),
            slab: Slab::with_capacity(capacity),
            segments: vec![List::new(); n],
            limits,
            insert,
            c: capacity,
        }
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Keys of each segment (0 = probationary), each from MRU to LRU.
    pub fn segment_keys(&self) -> Vec<Vec<u64>> {
        self.segments.iter().map(|l| l.keys(self.slab.nodes())).collect()
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s))
    }

    #[inline(always)]
    fn move_to(&mut self, i: u32, to: usize) {
        let from = self.slab.node(i).meta as usize;
        self.segments[from].unlink(self.slab.nodes_mut(), i);
        self.slab.node_mut(i).meta = to as u8;
        self.segments[to].push_head(self.slab.nodes_mut(), i);
    }

    #[inline]
    fn hit(&mut self, i: u32) {
        let seg = self.slab.node(i).meta as usize;
        let top = self.segments.len() - 1;
        if seg == top {
            self.segments[top].move_to_head(self.slab.nodes_mut(), i);
            return;
        }
        self.move_to(i, seg + 1);
        // Each segment gained at most one block: cascade one LRU block down per level.
        let mut j = seg + 1;
        while j >= 1 && self.segments[j].len > self.limits[j] {
            let t = self.segments[j].tail;
            self.move_to(t, j - 1);
            j -= 1;
        }
    }

    fn insert_missing(&mut self, key: u64) -> Option<u64> {
        if self.c == 0 {
            return None;
        }
        let mut to = 0;
        if self.insert == SlruInsert::LowestWithRoom {
            if let Some(j) =
                (0..self.segments.len()).find(|&j| self.segments[j].len < self.limits[j])
            {
                to = j;
            }
        }
        let len: usize = self.segments.iter().map(|l| l.len).sum();
        let evicted = if len >= self.c {
            let seg = self.segments.iter().position(|l| !l.is_empty()).unwrap_or(0);
            let t = self.segments[seg].tail;
            let old = self.slab.key(t);
            self.segments[seg].unlink(self.slab.nodes_mut(), t);
            self.map.remove(old, t);
            self.slab.release(t);
            Some(old)
        } else {
            None
        };
        let i = self.slab.alloc(key, to as u8);
        self.segments[to].push_head(self.slab.nodes_mut(), i);
        self.map.insert(key, i);
        evicted
    }
}

impl Replacement for Slru {
    fn name(&self) -> &'static str {
        "slru"
    }

    fn capacity(&self) -> usize {
        self.c
    }

    #[inline]
    fn len(&self) -> usize {
        self.slab.live()
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        match self.find(access.key) {
            Some(i) => {
                self.hit(i);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.lookup(access) {
            return None;
        }
        self.insert_missing(access.key)
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.find(key) {
            Some(i) => {
                let seg = self.slab.node(i).meta as usize;
                self.segments[seg].unlink(self.slab.nodes_mut(), i);
                self.map.remove(key, i);
                self.slab.release(i);
                true
            }
            None => false,
        }
    }

    /// SLRU's eviction order past the blocks the filter refuses: the probationary segment
    /// from its LRU end, then each protected segment from its LRU end, lowest first (where
    /// the cascade would bring their blocks). The refused blocks keep their place. The new
    /// block's segment (`lcs` placement: the lowest with room) is chosen after the eviction.
    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        for seg in 0..self.segments.len() {
            let mut i = self.segments[seg].tail;
            while i != crate::slab::NIL {
                let n = self.slab.node(i);
                let (key, prev) = (n.key, n.prev);
                if ok(key) {
                    self.segments[seg].unlink(self.slab.nodes_mut(), i);
                    self.map.remove(key, i);
                    self.slab.release(i);
                    return Some(Some(key));
                }
                i = prev;
            }
        }
        Some(None)
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        match self.find(access.key) {
            Some(i) => {
                self.hit(i);
                (true, None)
            }
            None => (false, self.insert_missing(access.key)),
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.slab.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::run;

    #[test]
    fn probation_protection_and_demotion() {
        let mut s = Slru::new(4); // probationary ≥ 2, protected ≤ 2
        run(&mut s, &[1, 2, 3, 4]);
        assert_eq!(s.segment_keys(), vec![vec![4, 3, 2, 1], vec![]]);
        run(&mut s, &[1, 2]);
        assert_eq!(s.segment_keys(), vec![vec![4, 3], vec![2, 1]]);
        // 3 promoted: protected overflows, its LRU (1) drops to probationary MRU.
        run(&mut s, &[3]);
        assert_eq!(s.segment_keys(), vec![vec![1, 4], vec![3, 2]]);
        // A new block evicts the probationary LRU (4), not the older protected ones.
        assert_eq!(run(&mut s, &[5]), vec![(false, Some(4))]);
        assert_eq!(s.segment_keys(), vec![vec![5, 1], vec![3, 2]]);
        // A scan of new blocks never touches the protected segment.
        run(&mut s, &[6, 7, 8]);
        assert_eq!(s.segment_keys(), vec![vec![8, 7], vec![3, 2]]);
    }

    #[test]
    fn four_segments_cascade() {
        let mut s = Slru::with_segments(4, 4); // one block per protected segment
        run(&mut s, &[1, 2, 3, 4, 1, 1, 1]);
        assert_eq!(s.segment_keys(), vec![vec![4, 3, 2], vec![], vec![], vec![1]]);
        // 2 climbs to segment 1, then 2; then 2 reaches 3, pushing 1 down to 2.
        run(&mut s, &[2, 2, 2]);
        assert_eq!(s.segment_keys(), vec![vec![4, 3], vec![], vec![1], vec![2]]);
        // 3 to segment 1, 3 to segment 2: 1 cascades to segment 1.
        run(&mut s, &[3, 3]);
        assert_eq!(s.segment_keys(), vec![vec![4], vec![1], vec![3], vec![2]]);
    }

    #[test]
    fn lowest_with_room_fills_protected_segments_first() {
        let mut s = Slru::with_insertion(4, 2, SlruInsert::LowestWithRoom);
        run(&mut s, &[1, 2, 3, 4]);
        assert_eq!(s.segment_keys(), vec![vec![2, 1], vec![4, 3]]);
        // All full: new blocks go to the probationary segment, evicting its LRU.
        assert_eq!(run(&mut s, &[5]), vec![(false, Some(1))]);
        assert_eq!(s.segment_keys(), vec![vec![5, 2], vec![4, 3]]);
        // A hit in the probationary segment swaps with the protected LRU.
        run(&mut s, &[2]);
        assert_eq!(s.segment_keys(), vec![vec![3, 5], vec![2, 4]]);
    }

    #[test]
    fn one_segment_is_lru() {
        let mut s = Slru::with_segments(3, 1);
        assert_eq!(run(&mut s, &[1, 2, 3, 1, 4]).last(), Some(&(false, Some(2))));
    }

    #[test]
    fn remove_and_capacity_one() {
        let mut s = Slru::new(1); // protected limit 0: hits bounce back to probationary
        assert_eq!(run(&mut s, &[1, 1, 2]), vec![(false, None), (true, None), (false, Some(1))]);
        assert_eq!(s.segment_keys(), vec![vec![2], vec![]]);
        assert!(s.remove(2));
        assert!(!s.contains(2));
        assert_eq!(run(&mut s, &[3]), vec![(false, None)]);
    }
}
