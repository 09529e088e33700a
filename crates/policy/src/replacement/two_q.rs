//! 2Q (Johnson & Shasha, VLDB 1994), the full version: a FIFO `A1in` for blocks seen once, an
//! LRU `Am` for blocks re-referenced after leaving `A1in`, and a ghost FIFO `A1out` of keys
//! recently evicted from `A1in`.
//!
//! A hit in `A1in` changes nothing (correlated references are not evidence of reuse); a hit in
//! `Am` moves the block to its MRU end. A miss found in `A1out` enters `Am`; any other miss
//! enters `A1in`. To make room: if `|A1in| > Kin` (or `Am` is empty), `A1in`'s oldest block
//! leaves and its key goes to `A1out` (forgetting `A1out`'s oldest beyond `Kout`); otherwise
//! `Am`'s LRU block is evicted.
//!
//! Defaults are the paper's and libCacheSim's (`TwoQ.c`: `Ain-size-ratio=0.25`,
//! `Aout-size-ratio=0.5`): `Kin = floor(0.25 c)`, `Kout = floor(0.5 c)`. Miss counts equal
//! libCacheSim's for `c >= 4`. Differences by design:
//! - libCacheSim refuses to cache anything when `Kin < 1` (`c < 4`: its `can_insert` demands
//!   that a block fit `A1in`); ember still caches, with `A1in` evicted first whenever it holds
//!   a block.
//! - libCacheSim bounds `Am` separately at `c - Kin`; without removals `Am` never exceeds that
//!   bound under the rule above, so only caches thinned by [`Replacement::remove`] could see a
//!   difference (libCacheSim would then evict from `Am` early).
//! - As for ARC, the `A1out` check happens at insertion, so a ghost hit that admission refuses
//!   leaves `A1out` unchanged (libCacheSim drops it during lookup).

use super::params::{Domain, Param};
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::ghost::GhostFifo;
use crate::keymap::KeyMap;
use crate::slab::{List, Slab};
use crate::Access;

/// 2Q's parameters: `Kin` and `Kout` as shares of the cache (the paper's and libCacheSim's
/// `Ain-size-ratio` and `Aout-size-ratio`).
pub const PARAMS: &[Param] = &[
    Param {
        name: "kin",
        domain: Domain::Share { min: 0.0, max: 1.0 },
        default: 0.25,
        help: "Kin, the size of the FIFO A1in",
    },
    Param {
        name: "kout",
        domain: Domain::Share { min: 0.0, max: 10.0 },
        default: 0.5,
        help: "Kout, the keys the ghost A1out remembers",
    },
];

impl FromSpec for TwoQ {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::with_ratios(capacity, spec.value("kin", 0.25), spec.value("kout", 0.5))
    }
}

const AIN: u8 = 0;
const AM: u8 = 1;

/// 2Q replacement (full version with `A1in`, `A1out`, `Am`).
#[derive(Clone, Debug)]
pub struct TwoQ {
    map: KeyMap,
    slab: Slab<u8>,
    ain: List,
    am: List,
    aout: GhostFifo,
    kin: usize,
    c: usize,
}

impl TwoQ {
    /// 2Q with the paper's tuning: `Kin = 25 %`, `Kout = 50 %` of `capacity`.
    pub fn new(capacity: usize) -> Self {
        Self::with_ratios(capacity, 0.25, 0.5)
    }

    /// 2Q with `Kin = floor(kin * capacity)` and `Kout = floor(kout * capacity)`.
    pub fn with_ratios(capacity: usize, kin: f64, kout: f64) -> Self {
        let kin = (capacity as f64 * kin.clamp(0.0, 1.0)) as usize;
        let kout = (capacity as f64 * kout.max(0.0)) as usize;
        Self {
            map: KeyMap::with_entries(capacity),
            slab: Slab::with_capacity(capacity),
            ain: List::new(),
            am: List::new(),
            aout: GhostFifo::new(kout),
            kin,
            c: capacity,
        }
    }

    /// Keys of `A1in` (newest first), `Am` (MRU first) and `A1out` (newest first).
    pub fn queues(&self) -> [Vec<u64>; 3] {
        [self.ain.keys(self.slab.nodes()), self.am.keys(self.slab.nodes()), self.aout.keys()]
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s))
    }

    #[inline(always)]
    fn hit(&mut self, i: u32) {
        if self.slab.node(i).meta == AM {
            self.am.move_to_head(self.slab.nodes_mut(), i);
        }
    }

    /// The paper's `reclaimfor`: free one slot.
    fn reclaim(&mut self) -> u64 {
        let i = if self.ain.len > self.kin || self.am.is_empty() {
            let i = self.ain.tail;
            self.ain.unlink(self.slab.nodes_mut(), i);
            self.aout.push(self.slab.key(i));
            i
        } else {
            let i = self.am.tail;
            self.am.unlink(self.slab.nodes_mut(), i);
            i
        };
        let key = self.slab.key(i);
        self.map.remove(key, i);
        self.slab.release(i);
        key
    }

    fn insert_missing(&mut self, key: u64) -> Option<u64> {
        if self.c == 0 {
            return None;
        }
        let remembered = self.aout.take(key);
        let evicted = (self.ain.len + self.am.len >= self.c).then(|| self.reclaim());
        let to = if remembered { AM } else { AIN };
        let i = self.slab.alloc(key, to);
        if remembered {
            self.am.push_head(self.slab.nodes_mut(), i);
        } else {
            self.ain.push_head(self.slab.nodes_mut(), i);
        }
        self.map.insert(key, i);
        evicted
    }
}

impl Replacement for TwoQ {
    fn name(&self) -> &'static str {
        "2q"
    }

    fn capacity(&self) -> usize {
        self.c
    }

    #[inline]
    fn len(&self) -> usize {
        self.ain.len + self.am.len
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
                if self.slab.node(i).meta == AM {
                    self.am.unlink(self.slab.nodes_mut(), i);
                } else {
                    self.ain.unlink(self.slab.nodes_mut(), i);
                }
                self.map.remove(key, i);
                self.slab.release(i);
                true
            }
            None => false,
        }
    }

    /// `reclaimfor` past the blocks the filter refuses: the queue it would reclaim from
    /// first, from its oldest (`A1in`) or LRU (`Am`) end, then the other queue the same way.
    /// A block taken from `A1in` leaves its key in `A1out`, as alone. The refused blocks
    /// keep their place. The new block's `A1out` check comes after the eviction, so a key
    /// that the eviction's own push drops from a full `A1out` (its oldest) enters `A1in`.
    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        let ain_first = self.ain.len > self.kin || self.am.is_empty();
        for from_ain in [ain_first, !ain_first] {
            let mut i = if from_ain { self.ain.tail } else { self.am.tail };
            while i != crate::slab::NIL {
                let n = self.slab.node(i);
                let (key, prev) = (n.key, n.prev);
                if ok(key) {
                    if from_ain {
                        self.ain.unlink(self.slab.nodes_mut(), i);
                        self.aout.push(key);
                    } else {
                        self.am.unlink(self.slab.nodes_mut(), i);
                    }
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
        self.map.memory_bytes() + self.slab.memory_bytes() + self.aout.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::run;

    #[test]
    fn re_reference_after_a1in_enters_am() {
        let mut q = TwoQ::new(4); // Kin = 1, Kout = 2
        run(&mut q, &[1, 2, 3, 4]);
        // Hits in A1in change nothing.
        run(&mut q, &[1]);
        assert_eq!(q.queues(), [vec![4, 3, 2, 1], vec![], vec![]]);
        // 5: |A1in| = 4 > Kin → 1 leaves to A1out.
        assert_eq!(run(&mut q, &[5]), vec![(false, Some(1))]);
        assert_eq!(q.queues(), [vec![5, 4, 3, 2], vec![], vec![1]]);
        // 1 again: found in A1out → enters Am; A1in's oldest (2) goes to A1out.
        assert_eq!(run(&mut q, &[1]), vec![(false, Some(2))]);
        assert_eq!(q.queues(), [vec![5, 4, 3], vec![1], vec![2]]);
        // 6, 7: A1in (above Kin) sheds its oldest; A1out keeps its Kout = 2 newest keys.
        assert_eq!(run(&mut q, &[6, 7]), vec![(false, Some(3)), (false, Some(4))]);
        assert_eq!(q.queues(), [vec![7, 6, 5], vec![1], vec![4, 3]]);
    }

    #[test]
    fn am_lru_evicted_once_a1in_is_at_kin() {
        let mut q = TwoQ::new(4); // Kin = 1, Kout = 2
                                  // 1, 2 and 3 each leave A1in, are re-referenced from A1out and enter Am.
        run(&mut q, &[1, 2, 3, 4, 5, 1, 2, 3]);
        assert_eq!(q.queues(), [vec![5], vec![3, 2, 1], vec![4]]);
        // An Am hit reorders Am; with |A1in| = Kin a new block evicts Am's LRU (2).
        run(&mut q, &[1]);
        assert_eq!(run(&mut q, &[8]), vec![(false, Some(2))]);
        // Now |A1in| = 2 > Kin: the next one evicts A1in's oldest (5) into A1out.
        assert_eq!(run(&mut q, &[9]), vec![(false, Some(5))]);
        assert_eq!(q.queues(), [vec![9, 8], vec![1, 3], vec![5, 4]]);
    }

    #[test]
    fn remove_and_small_capacities() {
        let mut q = TwoQ::new(1); // Kin = 0, Kout = 0
        assert_eq!(
            run(&mut q, &[1, 1, 2, 1]),
            vec![(false, None), (true, None), (false, Some(1)), (false, Some(2))]
        );
        assert!(q.remove(1));
        assert!(q.is_empty());
        assert!(!q.remove(1));
    }
}
