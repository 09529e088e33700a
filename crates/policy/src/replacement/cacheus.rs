//! CACHEUS (Rodriguez, Yusuf, Lyons, Paz, Rangaswami, Liu, Zhao & Narasimhan, "Learning
//! cache replacement with CACHEUS", FAST 2021): LeCaR's regret-weighted choice between two
//! experts, with the experts replaced by scan- and churn-resistant ones and the learning rate
//! adapted to the workload (sections 4 and 5).
//!
//! - **SR-LRU** (section 5.1) splits the cache into SR, where new blocks enter, and R, where
//!   blocks go once reused. A hit in SR moves the block to R's newest end; R holds at most
//!   `capacity − |SR target|` blocks and its oldest is *demoted* to SR's newest end. SR-LRU
//!   names SR's oldest block (R's when SR is empty). A history H of `capacity` blocks keeps
//!   the evicted ones; a miss on a block in H enters R directly. The SR target adapts: a
//!   miss on a block evicted from SR without reuse grows it by `max(1, demoted / new)`, a hit
//!   on a demoted block in SR shrinks it by `max(1, new / demoted)`, where `new` counts such
//!   blocks in H and `demoted` the demoted blocks in SR.
//! - **CR-LFU** (section 5.2) counts accesses and names, among the blocks of the lowest
//!   count, the one that reached it last (churn resistance: the older ones stay). A block
//!   returning from H resumes its count plus one.
//! - **Learning** (section 4): a full cache follows SR-LRU with probability `w_LRU` and
//!   CR-LFU otherwise; when both name the same block it leaves without regret. Each expert
//!   has a history of `capacity / 2` blocks evicted on its advice; a miss on one of them
//!   multiplies that expert's weight by `e^(−λ)` and normalizes (the draw and the
//!   histories are LeCaR's, `experts.rs`). Every `capacity` accesses the learning rate λ
//!   moves by gradient on the hit rate (`λ ± |λ · Δλ|`, the sign of `Δhit rate / Δλ`);
//!   after ten windows without improvement it restarts at a random value in `[0.001, 1)`,
//!   as it starts.
//!
//! libCacheSim's `Cacheus` (`Cacheus.c`, `SR_LRU.c`, `CR_LFU.c`) departs from the paper and
//! `variant=lcs` reproduces it: its SR-LRU tests the adaptation flags on a fresh copy of the
//! block, so the SR target stays at `capacity / 2`, and SR is bounded by it too (an insertion
//! that overflows SR evicts SR's oldest block, without regret); its hit rate is an integer
//! division (0 until every access of a window hits), and a restart of λ needs a window that
//! improved. This file evicts at most one block per insertion: where libCacheSim evicts
//! twice (a full cache whose CR-LFU victim was in R, then SR's overflow), SR stays one over
//! its target until the next insertion. The draws come from a xoshiro256++ generator seeded
//! with `seed=` (default 1), the first being λ's; libCacheSim's `Cacheus` takes no seed, and
//! the peer tests compare ember's mean miss ratio over five seeds with libCacheSim's.
//!
//! Memory: the [LFU](super::Lfu) layout (68 bytes per block plus about 24 per distinct
//! count), 24 bytes of SR/R links per block, H (`capacity` entries) and the two expert
//! histories (`capacity / 2` entries each), all reserved at construction.

use super::experts::{Expert, Experts};
use super::params::{Param, SEED, VARIANT};
use super::priority_buckets::PriorityBuckets;
use super::queue::Queue;
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::slab::{List, Node, NIL};
use crate::Access;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// CACHEUS's parameters: the variant and the seed.
pub const PARAMS: &[Param] = &[VARIANT, SEED];

/// Windows without improvement before λ restarts (section 4).
const UNLEARN_LIMIT: u32 = 10;

/// Where a resident block sits in SR-LRU, and its adaptation flags.
#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    /// In R (else in SR).
    r: bool,
    /// Entered SR as new and not reused since.
    new: bool,
    /// Demoted from R to SR and not hit since.
    demoted: bool,
}

/// What H remembers of an evicted block.
#[derive(Clone, Copy, Debug, Default)]
struct Hist {
    /// CR-LFU's count when it left.
    count: u32,
    /// It left SR as new, never reused.
    new: bool,
}

/// CACHEUS replacement (see the module documentation).
#[derive(Clone, Debug)]
pub struct Cacheus {
    /// Resident blocks by CR-LFU count, and the index.
    b: PriorityBuckets,
    /// SR-LRU's links over the slots of `b`.
    nodes: Vec<Node<Seg>>,
    sr: List,
    r: List,
    /// SR's target size; R holds at most `capacity − sr_target`.
    sr_target: usize,
    /// SR-LRU's history H.
    history: Queue<Hist>,
    /// The weights of SR-LRU and CR-LFU and the blocks evicted on each one's advice.
    experts: Experts<()>,
    /// Blocks in H flagged new, demoted blocks in SR.
    c_new: u64,
    c_demoted: u64,
    lr: f64,
    lr_prev: f64,
    hit_rate_prev: f64,
    unlearn: u32,
    /// Hits in the current window, and accesses so far (hits and insertions).
    hits: u64,
    now: u64,
    lcs: bool,
    rng: Xoshiro256PlusPlus,
}

impl Cacheus {
    /// An empty cache of `capacity` blocks, the paper's form or libCacheSim's (`lcs`),
    /// drawing with `seed`.
    pub fn new(capacity: usize, lcs: bool, seed: u64) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let lr = random_rate(&mut rng);
        Self {
            b: PriorityBuckets::with_capacity(capacity),
            nodes: vec![Node { key: 0, prev: NIL, next: NIL, meta: Seg::default() }; capacity],
            sr: List::new(),
            r: List::new(),
            sr_target: (capacity / 2).max(1),
            history: Queue::with_capacity(capacity),
            experts: Experts::new(capacity / 2),
            c_new: 0,
            c_demoted: 0,
            lr,
            lr_prev: 0.0,
            hit_rate_prev: 0.0,
            unlearn: 0,
            hits: 0,
            now: 0,
            lcs,
            rng,
        }
    }

    /// The probability of following SR-LRU.
    pub fn lru_weight(&self) -> f64 {
        self.experts.w_lru
    }

    /// SR's target size.
    pub fn sr_target(&self) -> usize {
        self.sr_target
    }

    /// The learning rate λ.
    pub fn learning_rate(&self) -> f64 {
        self.lr
    }

    fn r_target(&self) -> usize {
        self.b.capacity().saturating_sub(self.sr_target)
    }

    /// One access done: every `capacity` accesses, adapt λ.
    fn tick(&mut self) {
        self.now += 1;
        let window = self.b.capacity() as u64;
        if window > 0 && self.now.is_multiple_of(window) {
            self.update_rate(window);
        }
    }

    /// Section 4: λ follows the gradient of the hit rate over the last window.
    fn update_rate(&mut self, window: u64) {
        let hit_rate =
            if self.lcs { (self.hits / window) as f64 } else { self.hits as f64 / window as f64 };
        let d_hit = hit_rate - self.hit_rate_prev;
        let d_lr = self.lr - self.lr_prev;
        self.lr_prev = self.lr;
        self.hit_rate_prev = hit_rate;
        if d_lr != 0.0 {
            let sign = if d_hit / d_lr > 0.0 { 1.0 } else { -1.0 };
            let next = self.lr + sign * (self.lr * d_lr).abs();
            self.lr = if next > 0.001 { next } else { 0.0001 };
            self.unlearn = 0;
        } else {
            let worse = hit_rate == 0.0 || d_hit <= 0.0;
            if worse {
                self.unlearn += 1;
            }
            let restart = if self.lcs { !worse } else { true };
            if restart && self.unlearn >= UNLEARN_LIMIT {
                self.unlearn = 0;
                self.lr = random_rate(&mut self.rng);
            }
        }
        self.hits = 0;
    }

    /// A miss on `key`: the expert whose history holds it loses weight; the entry leaves.
    fn learn(&mut self, key: u64) {
        let Some((expert, ())) = self.experts.regret(key) else { return };
        let (mut w_lru, mut w_lfu) = (self.experts.w_lru, 1.0 - self.experts.w_lru);
        match expert {
            Expert::Lru => w_lru *= (-self.lr).exp(),
            Expert::Lfu => w_lfu *= (-self.lr).exp(),
        }
        self.experts.w_lru = w_lru / (w_lru + w_lfu);
    }

    /// Move R's oldest blocks to SR's newest end until R fits its target.
    fn fit_r(&mut self) {
        while self.r.len > self.r_target() {
            let Some(i) = self.r.pop_tail(&mut self.nodes) else { break };
            self.sr.push_head(&mut self.nodes, i);
            let m = &mut self.nodes[i as usize].meta;
            *m = Seg { r: false, new: false, demoted: true };
            self.c_demoted += 1;
        }
    }

    /// Remove resident slot `i` from SR-LRU and CR-LFU; returns its key and what H keeps.
    fn take(&mut self, i: u32) -> (u64, Hist) {
        let seg = self.nodes[i as usize].meta;
        if seg.r {
            self.r.unlink(&mut self.nodes, i);
        } else {
            self.sr.unlink(&mut self.nodes, i);
        }
        if seg.demoted {
            self.c_demoted -= 1;
        }
        let count = self.b.meta(i).count;
        (self.b.remove(i), Hist { count, new: seg.new })
    }

    /// An evicted block enters H (its oldest entry leaves if H is full).
    fn remember(&mut self, key: u64, h: Hist) {
        let (dropped, pushed) = self.history.push_bounded(key, h);
        if dropped.is_some_and(|old| old.new) {
            self.c_new -= 1;
        }
        if h.new && pushed {
            self.c_new += 1;
        }
    }

    /// Evict `i` (on `expert`'s advice, or both agreeing); returns its key.
    fn evict_slot(&mut self, i: u32, expert: Option<Expert>) -> u64 {
        let (key, h) = self.take(i);
        self.remember(key, h);
        if let Some(e) = expert {
            self.experts.remember(e, key, ());
        }
        key
    }

    /// A full cache: follow an expert drawn by the weights.
    fn evict(&mut self) -> Option<u64> {
        let by_lru = if self.sr.is_empty() { self.r.tail } else { self.sr.tail };
        let by_lfu = self.b.min_priority().and_then(|p| self.b.newest(p))?;
        let (victim, expert) = self.experts.choose(by_lru, by_lfu, &mut self.rng);
        Some(self.evict_slot(victim, expert))
    }
}

/// A learning rate drawn as the paper starts and restarts it: uniform in `[0.001, 1)` in
/// steps of 0.001.
fn random_rate(rng: &mut Xoshiro256PlusPlus) -> f64 {
    0.001 + f64::from(rng.gen_range(0..1000u32)) / 1000.0
}

impl FromSpec for Cacheus {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        let lcs = spec.value("variant", 0.0) == 1.0;
        Self::new(capacity, lcs, spec.value("seed", SEED.default) as u64)
    }
}

impl Replacement for Cacheus {
    fn name(&self) -> &'static str {
        "cacheus"
    }

    fn capacity(&self) -> usize {
        self.b.capacity()
    }

    fn len(&self) -> usize {
        self.b.len()
    }

    fn contains(&self, key: u64) -> bool {
        self.b.find(key).is_some()
    }

    fn lookup(&mut self, access: &Access) -> bool {
        let Some(i) = self.b.find(access.key) else {
            return false;
        };
        self.hits += 1;
        let count = self.b.meta(i).count.saturating_add(1);
        self.b.detach(i);
        self.b.attach(i, u64::from(count), count);
        let seg = self.nodes[i as usize].meta;
        if seg.r {
            self.r.move_to_head(&mut self.nodes, i);
        } else {
            self.sr.unlink(&mut self.nodes, i);
            self.nodes[i as usize].meta = Seg { r: true, new: false, demoted: false };
            self.r.push_head(&mut self.nodes, i);
            if seg.demoted {
                // R was too small: a block it demoted came back while in SR.
                if !self.lcs {
                    let delta = (self.c_new / self.c_demoted.max(1)).max(1) as usize;
                    self.sr_target = self.sr_target.saturating_sub(delta).max(1);
                }
                self.c_demoted -= 1;
            }
            self.fit_r();
        }
        self.tick();
        true
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        let capacity = self.b.capacity();
        if capacity == 0 {
            return None;
        }
        let key = access.key;
        self.learn(key);
        let hist = self.history.find(key).map(|i| {
            let h = self.history.node(i).meta;
            self.history.remove_node(i);
            if h.new {
                self.c_new -= 1;
            }
            h
        });
        let victim = if self.b.is_full() {
            self.evict()
        } else if self.lcs && self.sr.len >= self.sr_target && !self.sr.is_empty() {
            // libCacheSim bounds SR by its target: the newcomer (or R's demoted block)
            // pushes SR's oldest out, without regret.
            let r_full = self.r.len >= self.r_target();
            if hist.is_none() || r_full {
                let tail = self.sr.tail;
                Some(self.evict_slot(tail, None))
            } else {
                None
            }
        } else {
            None
        };
        let count = hist.map_or(1, |h| h.count.saturating_add(1));
        let Err(at) = self.b.lookup(key) else {
            debug_assert!(false, "insert of a resident block");
            return victim;
        };
        let i = self.b.insert(at, key, u64::from(count), count);
        match hist {
            Some(h) => {
                self.nodes[i as usize].meta = Seg { r: true, new: false, demoted: false };
                self.r.push_head(&mut self.nodes, i);
                if h.new && !self.lcs {
                    // SR was too small: a new block left it before its reuse.
                    let delta = (self.c_demoted / (self.c_new + 1)).max(1) as usize;
                    self.sr_target =
                        (self.sr_target + delta).min(capacity.saturating_sub(1).max(1));
                }
                self.fit_r();
            }
            None => {
                self.nodes[i as usize].meta = Seg { r: false, new: true, demoted: false };
                self.sr.push_head(&mut self.nodes, i);
            }
        }
        self.tick();
        victim
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.b.find(key) {
            Some(i) => {
                self.take(i);
                true
            }
            None => false,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.b.memory_bytes()
            + std::mem::size_of_val(&*self.nodes)
            + self.history.memory_bytes()
            + self.experts.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{misses, run, skewed_keys};

    #[test]
    fn same_seed_same_decisions_other_seed_other_ones() {
        let keys = skewed_keys(30_000, 400, 5);
        for lcs in [false, true] {
            let a = run(&mut Cacheus::new(50, lcs, 3), &keys);
            assert_eq!(a, run(&mut Cacheus::new(50, lcs, 3), &keys));
            assert_ne!(a, run(&mut Cacheus::new(50, lcs, 4), &keys));
        }
    }

    #[test]
    fn a_scan_does_not_flush_the_reused_blocks() {
        // 20 hot blocks read over and over, then a scan of 10,000 new blocks interleaved:
        // the hot blocks live in R, the scan passes through SR, and the hot set keeps
        // hitting (an LRU of 100 blocks would lose it to every 80 scan blocks).
        for lcs in [false, true] {
            let mut keys = Vec::new();
            for round in 0..500u64 {
                keys.extend(0..20u64);
                keys.extend((0..20).map(|s| 1_000_000 + round * 20 + s));
            }
            let out = run(&mut Cacheus::new(100, lcs, 1), &keys);
            let hot_misses = keys.iter().zip(&out).filter(|(&k, (hit, _))| k < 20 && !hit).count();
            assert!(hot_misses < 200, "lcs {lcs}: {hot_misses} misses of the hot set");
            assert!(misses(&out) >= 10_000);
        }
    }

    #[test]
    fn the_sr_target_adapts_in_the_paper_form_only() {
        // A loop larger than the cache: new blocks leave SR before their reuse and come back
        // through H, so SR grows.
        let keys: Vec<u64> = (0..20_000u64).map(|t| t % 120).collect();
        let mut paper = Cacheus::new(100, false, 1);
        run(&mut paper, &keys);
        assert!(paper.sr_target() != 50, "{}", paper.sr_target());
        let mut lcs = Cacheus::new(100, true, 1);
        run(&mut lcs, &keys);
        assert_eq!(lcs.sr_target(), 50);
    }

    #[test]
    fn learning_rate_starts_in_its_range() {
        for seed in 0..50 {
            let lr = Cacheus::new(10, false, seed).learning_rate();
            assert!((0.001..1.001).contains(&lr), "{lr}");
        }
    }
}
