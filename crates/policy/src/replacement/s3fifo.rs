//! S3-FIFO (Yang et al., SOSP 2023): a small FIFO `S` that filters one-hit wonders, a main
//! FIFO `M` with reinsertion, and a ghost FIFO `G` of keys recently dropped from `S`.
//!
//! Each block has a 2-bit access counter (hits increment, saturating). New blocks enter `S`,
//! or `M` if their key is in `G`. To evict: when `M` holds more than its share, or `S` is
//! empty, `M`'s oldest block is evicted if its counter is 0, otherwise reinserted at `M`'s
//! head with the counter decremented (the paper's "FIFO-reinsertion"); else `S`'s oldest block
//! moves to `M` (counter reset) if its counter reached the move-to-main threshold, otherwise it
//! is evicted and its key remembered in `G`.
//!
//! Defaults are libCacheSim's (`S3FIFO.c`: `small-size-ratio=0.10`, `ghost-size-ratio=0.90`,
//! `move-to-main-threshold=2`, i.e. two hits while in `S`; the paper's text says one): `|S| =
//! floor(0.1 c)`, `|M| = c - |S|`, `|G| = floor(0.9 c)` keys. Also as libCacheSim: until the
//! first eviction, new blocks go to `M` once `S` is full; blocks moved from `S` start in `M`
//! at counter 0; `M` reinserts with `min(counter, 3) - 1`. Miss counts equal libCacheSim's
//! for `c >= 20`. Differences by design:
//! - libCacheSim admits nothing but ghost hits when `floor(0.1 c) < 2` (its `S3FIFO_insert`
//!   refuses a block not strictly smaller than `S`) and errors when `|S| = 0`; ember uses
//!   `|S| = max(1, floor(0.1 c))` and caches normally at any capacity.
//! - As for ARC, the ghost is consulted at insertion, so a ghost hit that admission refuses
//!   stays in `G` (libCacheSim drops it during lookup).

use super::params::{Domain, Param};
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::ghost::GhostFifo;
use crate::keymap::{fingerprint, Bucket, KeyMap};
use crate::node_ring::NodeRing;
use crate::slab::{Slab, NIL};
use crate::Access;

/// S3-FIFO's parameters (libCacheSim's `small-size-ratio`, `ghost-size-ratio` and
/// `move-to-main-threshold`).
pub const PARAMS: &[Param] = &[
    Param {
        name: "small",
        domain: Domain::Share { min: 0.0, max: 1.0 },
        default: 0.10,
        help: "size of the small FIFO S",
    },
    Param {
        name: "ghost",
        domain: Domain::Share { min: 0.0, max: 10.0 },
        default: 0.90,
        help: "keys the ghost FIFO G remembers",
    },
    Param {
        name: "threshold",
        domain: Domain::Int { min: 1, max: 127 },
        default: 2.0,
        help: "hits in S that move a block to M when it leaves S",
    },
];

impl FromSpec for S3Fifo {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::with_params(
            capacity,
            spec.value("small", 0.10),
            spec.value("ghost", 0.90),
            spec.value("threshold", 2.0) as u8,
        )
    }
}

/// Metadata bit marking a block in `M` (clear: in `S`).
const IN_MAIN: u8 = 0x80;
/// Metadata bits holding the access counter.
const FREQ: u8 = 0x7f;
/// How many places ahead of `M`'s oldest an eviction loads nodes; the node half as far
/// ahead has its index group loaded too (a node with counter 0 there is the likely victim,
/// whose index entry the eviction removes).
const MAIN_AHEAD: usize = 8;
/// How many places ahead of `S`'s oldest a miss loads a node (an eviction from `S` walks its
/// oldest nodes in order, moving those with enough hits to `M`).
const SMALL_AHEAD: usize = 4;

/// S3-FIFO replacement.
#[derive(Clone, Debug)]
pub struct S3Fifo {
    map: KeyMap,
    slab: Slab<u8>,
    /// `S` in ring positions, so that the nodes an eviction from `S` will walk are known
    /// (and loaded, [`SMALL_AHEAD`]) before it.
    small: NodeRing,
    /// `M` in ring positions: an eviction that reinserts walks its oldest nodes in order,
    /// and they are loaded ahead ([`MAIN_AHEAD`]).
    main: NodeRing,
    ghost: GhostFifo,
    small_cap: usize,
    main_cap: usize,
    threshold: u8,
    max_freq: u8,
    has_evicted: bool,
    c: usize,
    /// Large enough for the second stage of a prefetch (see `queue::DEEP_PREFETCH_BYTES`).
    deep: bool,
}

impl S3Fifo {
    /// S3-FIFO with libCacheSim's defaults: `S` 10 %, ghost 90 %, move to main at 2 hits.
    pub fn new(capacity: usize) -> Self {
        Self::with_params(capacity, 0.10, 0.90, 2)
    }

    /// S3-FIFO with `S = floor(small * capacity)` (at least 1), a ghost of
    /// `floor(ghost * capacity)` keys, and blocks leaving `S` with at least `threshold` hits
    /// (1..=127) moved to `M`.
    pub fn with_params(capacity: usize, small: f64, ghost: f64, threshold: u8) -> Self {
        let small_cap = ((capacity as f64 * small.clamp(0.0, 1.0)) as usize).max(1).min(capacity);
        let ghost_cap = (capacity as f64 * ghost.max(0.0)) as usize;
        let threshold = threshold.clamp(1, FREQ);
        let mut s = Self {
            map: KeyMap::with_entries(capacity),
            // One node more than the capacity: a miss takes its node (and index entry)
            // before the eviction frees one (see `insert_absent`).
            slab: Slab::with_capacity(capacity + 1),
            small: NodeRing::with_capacity(capacity),
            main: NodeRing::with_capacity(capacity),
            ghost: GhostFifo::new(ghost_cap),
            small_cap,
            main_cap: capacity - small_cap,
            threshold,
            max_freq: threshold.max(3),
            has_evicted: false,
            c: capacity,
            deep: false,
        };
        s.deep = s.memory_bytes() > super::queue::DEEP_PREFETCH_BYTES;
        s
    }

    /// Keys of `S`, `M` and `G`, each newest first.
    pub fn queues(&self) -> [Vec<u64>; 3] {
        [self.small.keys(self.slab.nodes()), self.main.keys(self.slab.nodes()), self.ghost.keys()]
    }

    /// The access counter of resident `key`.
    pub fn counter(&self, key: u64) -> Option<u8> {
        self.find(key).map(|i| self.slab.node(i).meta & FREQ)
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s))
    }

    #[inline(always)]
    fn hit(&mut self, i: u32) {
        let max = self.max_freq;
        let m = &mut self.slab.node_mut(i).meta;
        if *m & FREQ < max {
            *m += 1;
        }
    }

    #[inline]
    fn drop_node(&mut self, i: u32) -> u64 {
        let key = self.slab.key(i);
        self.map.remove(key, i);
        self.slab.release(i);
        key
    }

    /// One round of eviction from `S`: move blocks with enough hits to `M` until one is
    /// evicted (returned) or `S` is empty (None).
    fn evict_small(&mut self) -> Option<u64> {
        while let Some(t) = self.small.pop_tail() {
            if self.slab.node(t).meta & FREQ >= self.threshold {
                self.slab.node_mut(t).meta = IN_MAIN;
                self.main.push_head(self.slab.nodes_mut(), t);
            } else {
                let key = self.drop_node(t);
                self.ghost.push(key);
                return Some(key);
            }
        }
        None
    }

    /// Evict from `M`: reinsert blocks with a non-zero counter (decremented) until one with
    /// counter 0 comes up.
    fn evict_main(&mut self) -> u64 {
        loop {
            let Some(t) = self.main.pop_tail() else {
                // Cannot happen: `evict` comes here only with blocks cached, and `S` empty
                // or `M` over its share.
                unreachable!("S3-FIFO: eviction from an empty main queue");
            };
            self.load_main_ahead();
            let f = self.slab.node(t).meta & FREQ;
            if f == 0 {
                return self.drop_node(t);
            }
            self.slab.node_mut(t).meta = IN_MAIN | (f.min(3) - 1);
            self.main.push_head(self.slab.nodes_mut(), t);
        }
    }

    /// Start loading the nodes of `M` an eviction will walk next: the node [`MAIN_AHEAD`]
    /// places from the oldest, and the index group of the one half as far (its node was
    /// loaded that many steps ago). Prefetches only: nothing observable changes.
    #[inline(always)]
    fn load_main_ahead(&self) {
        if !self.deep {
            return;
        }
        let far = self.main.ahead(MAIN_AHEAD);
        if far != NIL {
            self.slab.prefetch(far);
        }
        let near = self.main.ahead(MAIN_AHEAD / 2);
        if near != NIL {
            let n = self.slab.node(near);
            if n.meta & FREQ == 0 {
                self.map.prefetch(n.key);
            }
        }
    }

    fn evict(&mut self) -> u64 {
        self.has_evicted = true;
        loop {
            if self.main.len > self.main_cap || self.small.is_empty() {
                return self.evict_main();
            }
            if let Some(k) = self.evict_small() {
                return k;
            }
        }
    }

    /// One index probe for `key`: its node if resident, else the way to insert it at.
    #[inline(always)]
    fn probe(&self, key: u64) -> Result<u32, Bucket> {
        let slab = &self.slab;
        self.map.find(key, |s| slab.key(s))
    }

    /// Insert `key`, absent, whose index way [`KeyMap::find`] returned as `bucket`. The new
    /// node and its index entry are made first, at that way (the index probe is not
    /// repeated), and the eviction runs after: the new node is in no queue yet, so the
    /// eviction never sees it, and the decisions are those of evicting first.
    #[inline]
    fn insert_absent(&mut self, bucket: Bucket, key: u64) -> Option<u64> {
        if self.c == 0 {
            return None;
        }
        let remembered = self.ghost.take_fp(key, bucket.fingerprint());
        let i = self.slab.alloc(key, 0);
        self.map.insert_at(bucket, i);
        let evicted = (self.small.len + self.main.len >= self.c).then(|| self.evict());
        let to_main = remembered || (!self.has_evicted && self.small.len >= self.small_cap);
        if to_main {
            self.slab.node_mut(i).meta = IN_MAIN;
            self.main.push_head(self.slab.nodes_mut(), i);
        } else {
            self.small.push_head(self.slab.nodes_mut(), i);
        }
        // The next eviction's likely victim, S's oldest: start loading its index group and
        // the ghost's group its push will touch; the node SMALL_AHEAD places behind it, and
        // M's oldest node, which the next eviction from M reads first.
        let t = self.small.ahead(0);
        if t != NIL {
            let n = self.slab.node(t);
            self.map.prefetch(n.key);
            self.ghost.prefetch_push(n.key);
        }
        if self.deep {
            let far = self.small.ahead(SMALL_AHEAD);
            if far != NIL {
                self.slab.prefetch(far);
            }
            let t = self.main.ahead(0);
            if t != NIL {
                self.slab.prefetch(t);
            }
        }
        evicted
    }
}

impl Replacement for S3Fifo {
    fn name(&self) -> &'static str {
        "s3fifo"
    }

    fn capacity(&self) -> usize {
        self.c
    }

    #[inline]
    fn len(&self) -> usize {
        self.small.len + self.main.len
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
        match self.probe(access.key) {
            Ok(i) => {
                self.hit(i);
                None
            }
            Err(bucket) => self.insert_absent(bucket, access.key),
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.find(key) {
            Some(i) => {
                if self.slab.node(i).meta & IN_MAIN != 0 {
                    self.main.unlink(self.slab.nodes(), i);
                } else {
                    self.small.unlink(self.slab.nodes(), i);
                }
                self.drop_node(i);
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        match self.probe(access.key) {
            Ok(i) => {
                self.hit(i);
                (true, None)
            }
            Err(bucket) => (false, self.insert_absent(bucket, access.key)),
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// Prefetches the key's index group and returns its fingerprint, which
    /// [`S3Fifo::access_hinted`] takes so the key is hashed once.
    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.map.prefetch_fp(fp);
        // A miss consults the ghost: its group too.
        self.ghost.prefetch_fp(fp);
        fp
    }

    /// Loads the node of the first index entry with the hint's fingerprint.
    #[inline(always)]
    fn prefetch_resident(&self, hint: u32) {
        if !self.deep {
            return;
        }
        match self.map.first_match(hint) {
            Some(i) => self.slab.prefetch(i),
            // Not resident by its fingerprint: a miss, whose insertion looks in the ghost.
            None => self.ghost.prefetch_resident(hint),
        }
    }

    /// The hint is the key's index fingerprint ([`S3Fifo::prefetch_hint`]).
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        let slab = &self.slab;
        match self.map.find_fp(access.key, hint, |s| slab.key(s)) {
            Ok(i) => {
                self.hit(i);
                (true, None)
            }
            Err(bucket) => (false, self.insert_absent(bucket, access.key)),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes()
            + self.slab.memory_bytes()
            + self.main.memory_bytes()
            + self.ghost.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::run;
    use std::collections::{HashMap, VecDeque};

    #[test]
    fn one_hit_wonders_leave_through_small_into_ghost() {
        let mut s = S3Fifo::new(10); // S = 1, M = 9, G = 9
                                     // 1 fills S; before the first eviction, 2..10 go straight to M (S is full).
        run(&mut s, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(s.queues()[0], vec![1]);
        assert_eq!(s.queues()[1].len(), 9);
        // 11: full; M not over its share → evict from S: 1 (no hits) to the ghost.
        assert_eq!(run(&mut s, &[11]), vec![(false, Some(1))]);
        assert_eq!(s.queues()[0], vec![11]);
        assert_eq!(s.queues()[2], vec![1]);
        // 1 again: ghost hit. Room first: M is not over its share, so S's 11 (no hits) is
        // evicted into the ghost; then 1 joins M.
        assert_eq!(run(&mut s, &[1]), vec![(false, Some(11))]);
        assert_eq!(s.queues()[1][0], 1);
        assert_eq!(s.queues()[2], vec![11]);
    }

    #[test]
    fn two_hits_in_small_move_to_main_and_main_reinserts() {
        let mut s = S3Fifo::new(20); // S = 2, M = 18
        let fill: Vec<u64> = (1..=20).collect();
        run(&mut s, &fill);
        assert_eq!(s.queues()[0], vec![2, 1]);
        // 1 hit twice: counter 2 = threshold. 21: evict from S: 1 moves to M (counter 0),
        // 2 (no hits) is evicted.
        run(&mut s, &[1, 1]);
        assert_eq!(s.counter(1), Some(2));
        assert_eq!(run(&mut s, &[21]), vec![(false, Some(2))]);
        assert_eq!(s.counter(1), Some(0));
        assert_eq!(s.queues()[1][0], 1);
        // M now holds 19 > 18: the next eviction comes from M: its oldest, 3, was hit once
        // → reinserted with counter 0; 4 (no hits) is evicted.
        run(&mut s, &[3]);
        assert_eq!(run(&mut s, &[22]), vec![(false, Some(4))]);
        assert_eq!(s.queues()[1][0], 3);
        assert_eq!(s.counter(3), Some(0));
    }

    /// S3-FIFO as the module's doc states it, over `VecDeque`s (newest at the front).
    struct Naive {
        c: usize,
        small_cap: usize,
        main_cap: usize,
        ghost_cap: usize,
        small: VecDeque<u64>,
        main: VecDeque<u64>,
        ghost: VecDeque<u64>,
        freq: HashMap<u64, u8>,
        has_evicted: bool,
    }

    impl Naive {
        fn new(c: usize) -> Self {
            let small_cap = ((c as f64 * 0.1) as usize).max(1).min(c);
            Naive {
                c,
                small_cap,
                main_cap: c - small_cap,
                ghost_cap: (c as f64 * 0.9) as usize,
                small: VecDeque::new(),
                main: VecDeque::new(),
                ghost: VecDeque::new(),
                freq: HashMap::new(),
                has_evicted: false,
            }
        }

        fn access(&mut self, key: u64) -> (bool, Option<u64>) {
            if let Some(f) = self.freq.get_mut(&key) {
                *f = (*f + 1).min(3);
                return (true, None);
            }
            let remembered = match self.ghost.iter().position(|&k| k == key) {
                Some(at) => {
                    self.ghost.remove(at);
                    true
                }
                None => false,
            };
            let evicted = (self.small.len() + self.main.len() >= self.c).then(|| self.evict());
            let to_main = remembered || (!self.has_evicted && self.small.len() >= self.small_cap);
            self.freq.insert(key, 0);
            if to_main {
                self.main.push_front(key);
            } else {
                self.small.push_front(key);
            }
            (false, evicted)
        }

        fn evict(&mut self) -> u64 {
            self.has_evicted = true;
            loop {
                if self.main.len() > self.main_cap || self.small.is_empty() {
                    loop {
                        let t = self.main.pop_back().unwrap();
                        let f = self.freq[&t];
                        if f == 0 {
                            self.freq.remove(&t);
                            return t;
                        }
                        self.freq.insert(t, f.min(3) - 1);
                        self.main.push_front(t);
                    }
                }
                while let Some(t) = self.small.pop_back() {
                    if self.freq[&t] >= 2 {
                        self.freq.insert(t, 0);
                        self.main.push_front(t);
                    } else {
                        self.freq.remove(&t);
                        if self.ghost_cap > 0 {
                            self.ghost.push_front(t);
                            if self.ghost.len() > self.ghost_cap {
                                self.ghost.pop_back();
                            }
                        }
                        return t;
                    }
                }
            }
        }

        fn remove(&mut self, key: u64) -> bool {
            if self.freq.remove(&key).is_none() {
                return false;
            }
            self.small.retain(|&k| k != key);
            self.main.retain(|&k| k != key);
            true
        }
    }

    /// Hits, victims, removals and the three queues' order equal the naive model's over a
    /// skewed stream with removals from the middle of both queues (`M`'s ring leaves holes
    /// there and packs them away).
    #[test]
    fn same_decisions_as_the_naive_model_with_removals() {
        for c in [20usize, 64, 300] {
            let mut s = S3Fifo::new(c);
            let mut naive = Naive::new(c);
            let keys = crate::replacement::testing::skewed_keys(60_000, c as u64 * 4, 7 + c as u64);
            for (t, &k) in keys.iter().enumerate() {
                if t % 5 == 4 {
                    // Remove a key drawn from the same stream (resident or not).
                    let r = keys[(t * 7919) % keys.len()];
                    assert_eq!(s.remove(r), naive.remove(r), "c {c} step {t}: remove {r}");
                    continue;
                }
                let got = s.access(&Access::read(k, t as u64));
                assert_eq!(got, naive.access(k), "c {c} step {t}: key {k}");
                if t % 101 == 0 {
                    let q = s.queues();
                    assert_eq!(q[0], Vec::from(naive.small.clone()), "c {c} step {t}: S");
                    assert_eq!(q[1], Vec::from(naive.main.clone()), "c {c} step {t}: M");
                    assert_eq!(q[2], Vec::from(naive.ghost.clone()), "c {c} step {t}: G");
                }
            }
        }
    }

    #[test]
    fn counter_saturates_at_three() {
        let mut s = S3Fifo::new(20);
        run(&mut s, &[1, 1, 1, 1, 1, 1]);
        assert_eq!(s.counter(1), Some(3));
    }

    #[test]
    fn remove_and_capacity_one() {
        let mut s = S3Fifo::new(1); // S = 1, M = 0
        assert_eq!(
            run(&mut s, &[1, 1, 2, 3]),
            vec![(false, None), (true, None), (false, Some(1)), (false, Some(2))]
        );
        assert!(s.remove(3));
        assert!(!s.remove(3));
        assert!(s.is_empty());
        assert_eq!(run(&mut s, &[4]), vec![(false, None)]);
    }
}
