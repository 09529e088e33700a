//! W-TinyLFU (Einziger, Friedman & Manes, "TinyLFU: a highly efficient cache admission
//! policy", ACM Transactions on Storage 13(4), 2017, section 4): a small *window* LRU in
//! front of a *main* SLRU, and TinyLFU between them. A new block enters the window; the
//! window's LRU overflow is the *candidate*, and once the main cache is full the candidate
//! enters it only if its estimated recent frequency is higher than that of the main cache's
//! victim, which then leaves; otherwise the candidate leaves.
//!
//! - Window: `window=` of the capacity (default 1 %, the paper's and libCacheSim's), at least
//!   one block; the main cache holds the rest.
//! - Main: SLRU, a probationary and a protected segment (`protected=` of the main cache,
//!   default 80 %, the paper's); a candidate enters probation, a hit there moves the block to
//!   protected, whose overflow returns to probation; the victim is probation's LRU block
//!   (protected's when probation is empty).
//! - Frequencies: a count-min sketch ([`CountMin`]) of 4-bit counters sized from the capacity,
//!   counting every access (a hit at its lookup, a miss at its insertion, so the simulator
//!   and the real cache, which looks up only its own index on a miss, count alike), every
//!   counter halved after `sample=` times the capacity accesses
//!   (the paper's reset, default 10). The sketch's hashes come from `seed=` (default 1): the
//!   same seed makes the same decisions in the simulator and in the real cache. The paper's
//!   doorkeeper (a Bloom filter in front of the sketch that saves memory) is left out: it
//!   changes the sketch's size, not what it admits.
//!
//! libCacheSim's `WTinyLFU` (window 1 %, main `SLRU` of segments 1:4) departs from the paper
//! in what it counts (misses, main-cache hits, and each candidate when compared; window hits
//! not), in its sketch (a counting Bloom filter of unbounded counters halved after 32 times
//! the main size main-cache hits) and in its window, which grows to the whole cache while
//! the cache fills: the first eviction moves window candidates into the main cache until it
//! is full, and from then on each insertion makes room with one comparison (a winning
//! candidate swaps with the main victim, a losing one leaves), so exactly one block leaves
//! per insertion, as the real cache needs. `variant=lcs` reproduces these rules (with this
//! sketch's counters saturating at 255); on cloudPhysicsIO the paper's form misses up to
//! about one point less. libCacheSim's takes no seed: the peer tests compare the mean miss ratio of
//! `wtinylfu:lcs` over five seeds with it.
//!
//! Memory: one index and one slab for the three lists (about 48 bytes a block) and the
//! sketch (4 bytes a block).

use super::count_min;
use super::count_min::CountMin;
use super::params::{Domain, Param, SEED, VARIANT};
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::keymap::KeyMap;
use crate::slab::{List, Slab, NIL};
use crate::Access;

/// W-TinyLFU's parameters.
pub const PARAMS: &[Param] = &[
    Param {
        name: "window",
        domain: Domain::Share { min: 0.0, max: 0.99 },
        default: 0.01,
        help: "the window LRU's share of the capacity (at least one block)",
    },
    Param {
        name: "protected",
        domain: Domain::Share { min: 0.0, max: 1.0 },
        default: 0.8,
        help: "the protected segment's share of the main SLRU",
    },
    Param {
        name: "sample",
        domain: Domain::Int { min: 1, max: 1000 },
        default: 10.0,
        help:
            "the reset period W, in multiples of the capacity (the sketch halves after W accesses)",
    },
    SEED,
    VARIANT,
];

/// The lists a block can be on.
const WINDOW: u8 = 0;
const PROBATION: u8 = 1;
const PROTECTED: u8 = 2;

/// W-TinyLFU replacement (see the module documentation).
#[derive(Clone, Debug)]
pub struct WTinyLfu {
    map: KeyMap,
    /// Nodes carry their list (`WINDOW`, `PROBATION`, `PROTECTED`).
    slab: Slab<u8>,
    lists: [List; 3],
    /// Blocks the window and the protected segment hold at most.
    window_max: usize,
    protected_max: usize,
    /// Blocks the main cache holds at most.
    main_max: usize,
    sketch: CountMin,
    /// libCacheSim's rules (`variant=lcs`): main-cache hits since the last halving, and how
    /// many trigger one.
    lcs: bool,
    main_hits: u64,
    lcs_period: u64,
}

impl WTinyLfu {
    /// An empty cache of `capacity` blocks: the window's share, the protected segment's share
    /// of the main cache, the reset period in multiples of the capacity, the sketch's seed.
    pub fn new(capacity: usize, window: f64, protected: f64, sample: u64, seed: u64) -> Self {
        let window_max = ((capacity as f64 * window) as usize).clamp(1, capacity.max(1));
        let main = capacity.saturating_sub(window_max);
        Self {
            map: KeyMap::with_entries(capacity),
            slab: Slab::with_capacity(capacity),
            lists: [List::new(); 3],
            window_max,
            protected_max: (main as f64 * protected) as usize,
            main_max: main,
            sketch: CountMin::new(
                capacity,
                sample.saturating_mul(capacity.max(1) as u64),
                count_min::MAX,
                seed,
            ),
            lcs: false,
            main_hits: 0,
            lcs_period: 1,
        }
    }

    /// [`WTinyLfu::new`] with libCacheSim's rules (see the module documentation).
    pub fn lcs(capacity: usize, window: f64, protected: f64, seed: u64) -> Self {
        let mut p = Self::new(capacity, window, protected, 1, seed);
        p.sketch = CountMin::new(capacity * 2, u64::MAX, u8::MAX, seed);
        p.lcs = true;
        p.lcs_period = 32 * p.main_max.max(1) as u64;
        p
    }

    /// Put absent `key` at the window's head; there must be room.
    fn push_window(&mut self, key: u64) {
        let i = self.slab.alloc(key, WINDOW);
        self.lists[WINDOW as usize].push_head(self.slab.nodes_mut(), i);
        self.map.insert(key, i);
    }

    /// Blocks in the main cache.
    fn main_len(&self) -> usize {
        self.lists[PROBATION as usize].len + self.lists[PROTECTED as usize].len
    }

    /// libCacheSim's room-making: window candidates move into a main cache with room until
    /// it is full; then the window's candidate either wins against the main victim, which
    /// leaves while the candidate takes its place, or loses and leaves itself (or, with the
    /// window empty, the main victim leaves). Exactly one block leaves; returns it.
    fn lcs_make_room(&mut self) -> Option<u64> {
        loop {
            let candidate = self.lists[WINDOW as usize].tail;
            if candidate == NIL {
                let v = self.main_victim()?;
                return Some(self.drop_slot(v));
            }
            let key = self.slab.key(candidate);
            if self.main_len() < self.main_max {
                // libCacheSim's SLRU places a new block in the lowest segment with room.
                let probation_max = self.main_max - self.protected_max;
                let to = if self.lists[PROBATION as usize].len < probation_max {
                    PROBATION
                } else {
                    PROTECTED
                };
                self.move_to(candidate, to);
                self.sketch.add(key);
                continue;
            }
            let Some(v) = self.main_victim() else {
                self.sketch.add(key);
                return Some(self.drop_slot(candidate));
            };
            if self.sketch.estimate(key) > self.sketch.estimate(self.slab.key(v)) {
                // The winner takes the victim's place: one block has left, room is made.
                let left = self.drop_slot(v);
                self.move_to(candidate, PROBATION);
                self.sketch.add(key);
                return Some(left);
            } else {
                self.sketch.add(key);
                return Some(self.drop_slot(candidate));
            }
        }
    }

    /// The keys of the window, probation and protected lists, newest first.
    pub fn list_keys(&self) -> [Vec<u64>; 3] {
        std::array::from_fn(|l| self.lists[l].keys(self.slab.nodes()))
    }

    fn find(&self, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s))
    }

    fn move_to(&mut self, i: u32, to: u8) {
        let from = self.slab.node(i).meta as usize;
        self.lists[from].unlink(self.slab.nodes_mut(), i);
        self.slab.node_mut(i).meta = to;
        self.lists[to as usize].push_head(self.slab.nodes_mut(), i);
    }

    /// Drop resident slot `i`; returns its key.
    fn drop_slot(&mut self, i: u32) -> u64 {
        let list = self.slab.node(i).meta as usize;
        let key = self.slab.key(i);
        self.lists[list].unlink(self.slab.nodes_mut(), i);
        self.map.remove(key, i);
        self.slab.release(i);
        key
    }

    /// The main cache's victim: probation's LRU block, or protected's.
    fn main_victim(&self) -> Option<u32> {
        [PROBATION, PROTECTED].iter().map(|&l| self.lists[l as usize].tail).find(|&t| t != NIL)
    }
}

impl FromSpec for WTinyLfu {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        let (window, protected) = (spec.value("window", 0.01), spec.value("protected", 0.8));
        let seed = spec.value("seed", SEED.default) as u64;
        if spec.value("variant", 0.0) == 1.0 {
            Self::lcs(capacity, window, protected, seed)
        } else {
            Self::new(capacity, window, protected, spec.value("sample", 10.0) as u64, seed)
        }
    }
}

impl Replacement for WTinyLfu {
    fn name(&self) -> &'static str {
        "wtinylfu"
    }

    fn capacity(&self) -> usize {
        self.slab.capacity()
    }

    fn len(&self) -> usize {
        self.slab.live()
    }

    fn contains(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    fn lookup(&mut self, access: &Access) -> bool {
        let Some(i) = self.find(access.key) else {
            return false;
        };
        if !self.lcs {
            self.sketch.increment(access.key);
        }
        if self.lcs && self.slab.node(i).meta != WINDOW {
            // libCacheSim counts main-cache hits only, and halves after a period of them.
            self.sketch.add(access.key);
            self.main_hits += 1;
            if self.main_hits >= self.lcs_period {
                self.main_hits = 0;
                self.sketch.halve();
            }
        }
        match self.slab.node(i).meta {
            PROBATION => {
                self.move_to(i, PROTECTED);
                if self.lists[PROTECTED as usize].len > self.protected_max {
                    let t = self.lists[PROTECTED as usize].tail;
                    self.move_to(t, PROBATION);
                }
            }
            l => self.lists[l as usize].move_to_head(self.slab.nodes_mut(), i),
        }
        true
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.slab.capacity() == 0 {
            return None;
        }
        if self.find(access.key).is_some() {
            debug_assert!(false, "insert of a resident block");
            return None;
        }
        let full = self.slab.live() >= self.slab.capacity();
        let mut left = None;
        if self.lcs {
            if full {
                left = self.lcs_make_room();
            }
            self.push_window(access.key);
            self.sketch.add(access.key);
            return left;
        }
        self.sketch.increment(access.key);
        if full {
            // Room first (the slab holds one node per block of capacity). With the window
            // at its size, its LRU block is the candidate the new block pushes out.
            let candidate = self.lists[WINDOW as usize].tail;
            let victim = self.main_victim();
            left = Some(match victim {
                Some(v) if self.lists[WINDOW as usize].len < self.window_max => self.drop_slot(v),
                Some(v)
                    if self.sketch.estimate(self.slab.key(candidate))
                        > self.sketch.estimate(self.slab.key(v)) =>
                {
                    let key = self.drop_slot(v);
                    self.move_to(candidate, PROBATION);
                    key
                }
                _ => self.drop_slot(candidate),
            });
        }
        self.push_window(access.key);
        if self.lists[WINDOW as usize].len > self.window_max {
            // Not full: the window's overflow moves to the main cache, which has room.
            let t = self.lists[WINDOW as usize].tail;
            self.move_to(t, PROBATION);
        }
        left
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.find(key) {
            Some(i) => {
                self.drop_slot(i);
                true
            }
            None => false,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.slab.memory_bytes() + self.sketch.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{run, skewed_keys};

    #[test]
    fn same_seed_same_decisions() {
        let keys = skewed_keys(30_000, 2000, 5);
        let a = run(&mut WTinyLfu::new(200, 0.01, 0.8, 10, 3), &keys);
        assert_eq!(a, run(&mut WTinyLfu::new(200, 0.01, 0.8, 10, 3), &keys));
    }

    #[test]
    fn a_scan_does_not_displace_a_frequent_set() {
        // 50 hot blocks, then rounds of 100 blocks seen once, each followed by the hot set
        // again: the hot blocks' reuse distance (150) exceeds the capacity, so LRU would
        // miss them all; here the scan's candidates lose to them and leave from the window.
        let mut p = WTinyLfu::new(100, 0.01, 0.8, 10, 1);
        let (mut t, mut hot_hits) = (0u64, 0);
        for round in 0..100u64 {
            for k in (0..50u64).chain((0..100).map(|s| 1_000_000 + round * 100 + s)) {
                let hit = p.access(&Access::read(k, t)).0;
                hot_hits += usize::from(hit && k < 50);
                t += 1;
            }
        }
        assert!((0..50u64).all(|k| p.contains(k)));
        assert!(hot_hits > 95 * 50, "{hot_hits}");
        let [w, _, _] = p.list_keys();
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn hits_in_probation_promote_and_protected_overflow_demotes() {
        // Capacity 10: window 1, main 9, protected at most 7.
        let mut p = WTinyLfu::new(10, 0.01, 0.8, 10, 1);
        let keys: Vec<u64> = (0..10).chain(0..9).collect();
        run(&mut p, &keys);
        let [w, prob, prot] = p.list_keys();
        assert_eq!(w, vec![9]);
        assert_eq!(prot.len(), 7);
        assert_eq!(prob.len(), 2);
    }
}
