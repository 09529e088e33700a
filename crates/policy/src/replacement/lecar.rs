//! LeCaR, learning cache replacement (Vietri, Rodriguez, Martinez, Lyons, Liu, Rangaswami,
//! Zhao & Narasimhan, "Driving cache replacement with ML-based LeCaR", HotStorage 2018): two
//! experts, LRU and LFU, each proposes a victim, and the cache follows one at random with
//! probabilities `w_LRU` and `w_LFU` that it learns by regret (section 3, Algorithm 1).
//!
//! Each expert has a history of the blocks evicted on its advice (a FIFO of `capacity / 2`
//! blocks with their eviction times). A miss on a block in LRU's history means LRU was wrong:
//! `w_LRU ← w_LRU · e^(−λ · d^t)`, then both weights are normalized (and the same for LFU),
//! where `t` is the time since the eviction, the learning rate `λ = 0.45` and the discount
//! `d = 0.005^(1 / capacity)`. When both experts name the same block it leaves without
//! entering either history. The draw and the histories are CACHEUS's too
//! (`experts.rs`); the weight update is LeCaR's own.
//!
//! The LFU expert counts accesses while a block is resident (a block returning from a
//! history starts again at 1) and among equal counts names the block that reached its count
//! first; the LRU expert names the least recently used block. This is libCacheSim's `LeCaR`
//! (`LeCaR.c`, its defaults: `λ = 0.45`, `d = 0.005^(1/c)`, both weights 0.5 at the start,
//! histories of `c / 2` blocks each, the draw `(rand() % 100) / 100 < w_LRU`). The draws come
//! from a xoshiro256++ generator seeded with `seed=` (default 1): the same seed makes the same
//! decisions in the simulator and in the real cache. libCacheSim's `LeCaR` takes no seed; the
//! peer tests compare ember's mean miss ratio over five seeds with libCacheSim's.
//!
//! Memory: the [LFU](super::Lfu) layout (76 bytes per block),
//! 16 bytes of LRU links per block and two histories of `capacity / 2` entries (about 56
//! bytes each).

use super::experts::{Expert, Experts};
use super::frequency_buckets::FrequencyBuckets;
use super::params::{Param, SEED};
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::keymap::{fingerprint, Bucket};
use crate::slab::{List, Node, NIL};
use crate::Access;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// LeCaR's parameters: the seed.
pub const PARAMS: &[Param] = &[SEED];

/// The learning rate λ of the paper and of libCacheSim.
const LEARNING_RATE: f64 = 0.45;

/// LeCaR replacement (see the module documentation).
#[derive(Clone, Debug)]
pub struct LeCaR {
    /// Resident blocks by access count (the LFU expert) and the index.
    b: FrequencyBuckets,
    /// The LRU expert's order over the slots of `b`.
    lru: List,
    lru_nodes: Vec<Node<()>>,
    /// The experts' weights and the blocks each evicted, with their eviction times.
    experts: Experts<u64>,
    /// The discount `d` of the regret.
    discount: f64,
    rng: Xoshiro256PlusPlus,
    /// Accesses so far (hits and insertions: a miss reaches the policy when it is inserted,
    /// in the simulator as in the real cache).
    now: u64,
}

impl LeCaR {
    /// An empty cache of `capacity` blocks drawing with `seed`.
    pub fn new(capacity: usize, seed: u64) -> Self {
        Self {
            b: FrequencyBuckets::with_capacity(capacity),
            lru: List::new(),
            lru_nodes: vec![Node { key: 0, prev: NIL, next: NIL, meta: () }; capacity],
            experts: Experts::new(capacity / 2),
            discount: 0.005f64.powf(1.0 / capacity.max(1) as f64),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            now: 0,
        }
    }

    /// The probability of following the LRU expert.
    pub fn lru_weight(&self) -> f64 {
        self.experts.w_lru
    }

    /// A miss on `key`: if an expert's history holds it, that expert is penalized and the
    /// entry leaves the history.
    fn learn(&mut self, key: u64) {
        let Some((expert, evicted)) = self.experts.regret(key) else { return };
        let t = self.now.saturating_sub(evicted);
        let r = self.discount.powf(t as f64);
        let w_lru = self.experts.w_lru;
        let (mut wrong, right) = match expert {
            Expert::Lru => (w_lru, 1.0 - w_lru),
            Expert::Lfu => (1.0 - w_lru, w_lru),
        };
        wrong = wrong * (-LEARNING_RATE * r).exp() + 1e-10;
        let s = wrong + right + 2e-10;
        self.experts.w_lru = match expert {
            Expert::Lru => wrong / s,
            Expert::Lfu => (right + 1e-10) / s,
        };
    }

    /// Evict one resident block as the drawn expert says; returns its key.
    fn evict(&mut self) -> Option<u64> {
        let by_lru = self.lru.tail;
        let by_lfu = self.b.lowest_oldest()?;
        let (victim, expert) = self.experts.choose(by_lru, by_lfu, &mut self.rng);
        self.lru.unlink(&mut self.lru_nodes, victim);
        let key = self.b.remove(victim);
        if let Some(e) = expert {
            self.experts.remember(e, key, self.now);
        }
        Some(key)
    }
}

impl LeCaR {
    /// A hit on resident slot `i`: the LRU expert's newest, one more access for the LFU
    /// expert (a count that reached `u32::MAX` stays there, its block the newest of it).
    #[inline]
    fn hit(&mut self, i: u32) {
        self.now += 1;
        self.lru.move_to_head(&mut self.lru_nodes, i);
        if self.b.count(i) >= u64::from(u32::MAX) {
            self.b.renew(i);
        } else {
            self.b.bump(i);
        }
    }

    /// Make absent `key`, looked up into `at`, resident; returns the evicted block. The
    /// eviction leaves `at` valid (index entries never move).
    #[inline]
    fn insert_absent(&mut self, at: Bucket, key: u64) -> Option<u64> {
        if self.b.capacity() == 0 {
            return None;
        }
        self.now += 1;
        self.learn(key);
        let victim = if self.b.is_full() { self.evict() } else { None };
        let i = self.b.insert(at, key);
        self.lru.push_head(&mut self.lru_nodes, i);
        victim
    }
}

impl FromSpec for LeCaR {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::new(capacity, spec.value("seed", SEED.default) as u64)
    }
}

impl Replacement for LeCaR {
    fn name(&self) -> &'static str {
        "lecar"
    }

    fn capacity(&self) -> usize {
        self.b.capacity()
    }

    fn len(&self) -> usize {
        self.b.len()
    }

    fn contains(&self, key: u64) -> bool {
        self.b.lookup_fp(key, fingerprint(key)).is_ok()
    }

    fn lookup(&mut self, access: &Access) -> bool {
        match self.b.lookup_fp(access.key, fingerprint(access.key)) {
            Ok(i) => {
                self.hit(i);
                true
            }
            Err(_) => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        match self.b.lookup_fp(access.key, fingerprint(access.key)) {
            Err(at) => self.insert_absent(at, access.key),
            Ok(_) => {
                debug_assert!(false, "insert of a resident block");
                None
            }
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.b.lookup_fp(key, fingerprint(key)) {
            Ok(i) => {
                self.lru.unlink(&mut self.lru_nodes, i);
                self.b.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    #[inline]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.b.prefetch_fp(fingerprint(key));
    }

    #[inline]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.b.prefetch_fp(fp);
        fp
    }

    /// The hint is the key's index fingerprint ([`LeCaR::prefetch_hint`]).
    #[inline]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        match self.b.lookup_fp(access.key, hint) {
            Ok(i) => {
                self.hit(i);
                (true, None)
            }
            Err(at) => (false, self.insert_absent(at, access.key)),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.b.memory_bytes()
            + std::mem::size_of_val(&*self.lru_nodes)
            + self.experts.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{run, skewed_keys};

    #[test]
    fn same_seed_same_decisions() {
        let keys = skewed_keys(20_000, 400, 5);
        let a = run(&mut LeCaR::new(50, 3), &keys);
        assert_eq!(a, run(&mut LeCaR::new(50, 3), &keys));
        assert_ne!(a, run(&mut LeCaR::new(50, 4), &keys));
    }

    #[test]
    fn a_scan_over_a_hot_set_teaches_it_lfu() {
        // 20 hot blocks read three times a round, then 100 new blocks: the LRU expert names
        // hot blocks, which come back, so its weight falls; the LFU expert names scan blocks,
        // which never do.
        let mut p = LeCaR::new(100, 1);
        let mut t = 0u64;
        for round in 0..200u64 {
            let hot = (0..3).flat_map(|_| 0..20u64);
            for k in hot.chain((0..100).map(|s| 1_000_000 + round * 100 + s)) {
                p.access(&Access::read(k, t));
                t += 1;
            }
        }
        assert!(p.lru_weight() < 0.1, "w_lru {}", p.lru_weight());
    }

    #[test]
    fn agreeing_experts_leave_no_history() {
        // Capacity 2, 1 then 2: LRU and LFU both name 1 (count 1, oldest).
        let mut p = LeCaR::new(2, 1);
        run(&mut p, &[1, 2, 3]);
        assert!(!p.contains(1));
        assert!(!p.experts.remembers(Expert::Lru, 1) && !p.experts.remembers(Expert::Lfu, 1));
    }
}
