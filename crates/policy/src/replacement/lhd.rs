//! LHD, least hit density (Beckmann, Chen & Cidon, "LHD: improving cache hit rate by
//! maximizing hit density", NSDI 2018): a full cache evicts the block that is expected to
//! give the fewest hits per unit of cache space and time it will still occupy (section 3),
//! estimated from the ages at which blocks of its class were hit or evicted (section 4).
//!
//! - **Ages and classes** (sections 4.1-4.2): a block's age is the number of accesses since
//!   its last one, coarsened by a shift (`age >> shift`, at most `MAX_AGE`); blocks fall into
//!   16 classes by the sum of their last two hit ages (a log scale, recent reuse in the top
//!   class). Each class counts hits and evictions by age.
//! - **Hit density** (section 3, eq. 3): for a block of age `a` in class `c`, the hits
//!   expected at ages above `a` over the lifetime expected beyond `a`, computed for all ages
//!   in one backward pass; every 2^20 accesses the counts decay by 0.9 and the densities are
//!   recomputed (section 4.3), and twice near the start the coarsening shift is set from the
//!   number of resident blocks so ages rarely overflow. A block whose age overflows has the
//!   lowest density. Until the first recomputation a class's density at age `a` is
//!   `(17 + c) / (a + 1)` (the authors' start, as in their code).
//! - **Sampled eviction** (section 5): the densities change with age, so a full cache ranks
//!   `samples=` resident blocks drawn uniformly (default 32; 8 until the 50th recomputation,
//!   which shortens the warm-up) together with the last `admissions=` (default 8) blocks that
//!   entered looking like victims (a density below the running mean of the victims'); the
//!   lowest density leaves, the first drawn among equals (the sampling is Hyperbolic's and
//!   Random's too, `sampled.rs`).
//! - **Explorers** (section 5): with probability 1/32 an access makes its block an explorer
//!   (its density raised by 1, so it stays and teaches the model about long ages), within a
//!   budget of 1 % of the capacity, and only during the first 50 recomputations.
//!
//! This is the authors' code as libCacheSim runs it (`LHD/lhd.cpp`: the constants above, a
//! single application class), for blocks of one size. The draws come from a xoshiro256++
//! generator seeded with `seed=` (default 1); libCacheSim's `LHD` takes no seed, and the peer
//! tests compare ember's mean miss ratio over five seeds with libCacheSim's.
//!
//! Memory: the [`Queue`] layout with a 24-byte tag (about 56 bytes per block of capacity),
//! plus the per-class tables, fixed at 16 classes × 20,000 ages × 3 counters of 4 bytes
//! (3.84 MB) whatever the capacity.

use super::params::{Domain, Param, SEED};
use super::queue::Queue;
use super::sampled;
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::keymap::{fingerprint, Bucket};
use crate::slab::NIL;
use crate::Access;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// LHD's parameters: the sample size, the recent admissions ranked, the seed.
pub const PARAMS: &[Param] = &[
    Param {
        name: "samples",
        domain: Domain::Int { min: 1, max: 1024 },
        default: 32.0,
        help: "resident blocks sampled per eviction once the model has settled (the paper's 32)",
    },
    Param {
        name: "admissions",
        domain: Domain::Int { min: 0, max: 64 },
        default: 8.0,
        help: "recently admitted blocks that looked like victims, ranked at every eviction",
    },
    SEED,
];

/// Hit-age classes.
const CLASSES: usize = 16;
/// Ages counted per class (coarsened ages beyond it overflow).
const MAX_AGE: usize = 20_000;
/// Accesses between two recomputations of the densities.
const RECONFIGURE_EVERY: u64 = 1 << 20;
/// Decay of the counts at each recomputation.
const EWMA_DECAY: f32 = 0.9;
/// Samples per eviction before the model has settled.
const EARLY_SAMPLES: usize = 8;
/// Recomputations after which the model counts as settled (full sampling, no explorers).
const SETTLED: u32 = 50;
/// One access in this many makes its block an explorer.
const EXPLORE_ONE_IN: u32 = 32;
/// The class index offset of the authors' default application (the initial densities).
const APP_OFFSET: f32 = CLASSES as f32;

/// What LHD keeps per resident block.
#[derive(Clone, Copy, Debug)]
struct Tag {
    /// The access counter at its last access.
    timestamp: u64,
    /// Its last two hit ages (coarsened).
    last_hit_age: u32,
    last_last_hit_age: u32,
    /// Where its class's row starts in the per-class tables (`class * MAX_AGE`), set with
    /// the hit ages it follows from ([`Tag::set_hit_ages`]): a ranking reads it for every
    /// block it draws.
    row: u32,
    explorer: bool,
}

impl Tag {
    /// Set the last two hit ages, and the class row they give.
    #[inline]
    fn set_hit_ages(&mut self, last: u32, last_last: u32) {
        self.last_hit_age = last;
        self.last_last_hit_age = last_last;
        self.row = (hit_age_class(u64::from(last) + u64::from(last_last)) * MAX_AGE) as u32;
    }
}

impl Default for Tag {
    /// Stamped 0, no hit ages (the top class), no explorer.
    #[inline]
    fn default() -> Self {
        let mut tag =
            Tag { timestamp: 0, last_hit_age: 0, last_last_hit_age: 0, row: 0, explorer: false };
        tag.set_hit_ages(0, 0);
        tag
    }
}

/// LHD replacement (see the module documentation).
#[derive(Clone, Debug)]
pub struct Lhd {
    q: Queue<Tag>,
    /// Per class and age: hits, evictions, hit density (`class * MAX_AGE + age`).
    hits: Vec<f32>,
    evictions: Vec<f32>,
    densities: Vec<f32>,
    samples: usize,
    /// Blocks that entered looking like victims, a ring: each key with its slot while it is
    /// resident, [`NIL`] while it is not (kept up to date as blocks come and go, so the
    /// ranking needs no index lookup).
    recent: Vec<Option<(u64, u32)>>,
    recent_head: usize,
    ewma_victim_density: f32,
    explorer_budget: i64,
    shift: u32,
    ewma_objects: f64,
    ewma_mass: f64,
    /// Accesses so far (hits and insertions), and to the next recomputation.
    now: u64,
    to_reconfigure: u64,
    reconfigurations: u32,
    rng: Xoshiro256PlusPlus,
}

impl Lhd {
    /// An empty cache of `capacity` blocks ranking `samples` drawn blocks and the last
    /// `admissions` victim-like ones per eviction, drawing with `seed`.
    pub fn new(capacity: usize, samples: usize, admissions: usize, seed: u64) -> Self {
        let mut densities = vec![0.0f32; CLASSES * MAX_AGE];
        for (c, row) in densities.chunks_mut(MAX_AGE).enumerate() {
            for (a, d) in row.iter_mut().enumerate() {
                *d = (APP_OFFSET + c as f32 + 1.0) / (a as f32 + 1.0);
            }
        }
        Self {
            q: Queue::with_capacity(capacity),
            hits: vec![0.0; CLASSES * MAX_AGE],
            evictions: vec![0.0; CLASSES * MAX_AGE],
            densities,
            samples: samples.max(1),
            recent: vec![None; admissions],
            recent_head: 0,
            ewma_victim_density: 0.0,
            explorer_budget: (capacity as f64 * 0.01) as i64,
            shift: 10,
            ewma_objects: 0.0,
            ewma_mass: 0.0,
            now: 0,
            to_reconfigure: RECONFIGURE_EVERY,
            reconfigurations: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The coarsened age of `tag`, at most `MAX_AGE - 1` (an overflow).
    fn age(&self, tag: &Tag) -> usize {
        coarse_age(self.now, self.shift, tag)
    }

    /// The table row of `tag`'s class.
    #[inline(always)]
    fn class(tag: &Tag) -> usize {
        tag.row as usize
    }

    fn density(&self, tag: &Tag) -> f32 {
        density(&self.densities, self.now, self.shift, tag)
    }

    /// The end of an access to the block whose tag is `tag`: stamp it, maybe make it an
    /// explorer; returns whether the draw said explore.
    #[inline]
    fn touch(&mut self, tag: &mut Tag) -> bool {
        tag.timestamp = self.now;
        let explore = self.rng.gen_range(0..EXPLORE_ONE_IN) == 0;
        tag.explorer = explore && self.explorer_budget > 0 && self.reconfigurations < SETTLED;
        if tag.explorer {
            self.explorer_budget -= 1;
        }
        explore
    }

    /// One access counted: recompute the model every [`RECONFIGURE_EVERY`].
    #[inline]
    fn tick(&mut self) {
        self.now += 1;
        self.to_reconfigure -= 1;
        if self.to_reconfigure == 0 {
            self.reconfigure();
            self.to_reconfigure = RECONFIGURE_EVERY;
            self.reconfigurations += 1;
        }
    }

    /// The victim: the lowest density among the drawn and the recently admitted blocks.
    fn rank(&mut self) -> u32 {
        let capacity = self.q.capacity() as u32;
        let draws = if self.reconfigurations > SETTLED {
            self.samples
        } else {
            EARLY_SAMPLES.min(self.samples)
        };
        let (q, densities, now, shift) = (&self.q, &self.densities, self.now, self.shift);
        let drawn = sampled::draws(&mut self.rng, capacity, draws);
        let recent = self.recent.iter().flatten().map(|&(_, i)| i).filter(|&i| i != NIL);
        let (victim, best) = sampled::first_lowest(drawn.chain(recent), f32::MAX, |i| {
            density(densities, now, shift, &q.node(i).meta)
        });
        self.ewma_victim_density =
            EWMA_DECAY * self.ewma_victim_density + (1.0 - EWMA_DECAY) * best;
        // Every density is finite, so a draw was taken; slot 0 only guards the contract.
        victim.unwrap_or(0)
    }

    /// `key` is now resident in `slot` ([`NIL`]: no longer resident): the recent admissions
    /// that name it follow.
    #[inline]
    fn recent_moved(&mut self, key: u64, slot: u32) {
        for e in self.recent.iter_mut().flatten() {
            if e.0 == key {
                e.1 = slot;
            }
        }
    }

    /// A hit on resident slot `i`.
    #[inline]
    fn hit(&mut self, i: u32) {
        let mut tag = self.q.node(i).meta;
        let age = self.age(&tag);
        self.hits[Self::class(&tag) + age] += 1.0;
        if tag.explorer {
            self.explorer_budget += 1;
        }
        tag.set_hit_ages(age as u32, tag.last_hit_age);
        self.touch(&mut tag);
        self.q.node_mut(i).meta = tag;
        self.tick();
    }

    /// Make absent `key`, looked up into `at`, resident; returns the evicted block.
    #[inline]
    fn insert_absent(&mut self, at: Bucket, key: u64) -> Option<u64> {
        if self.q.capacity() == 0 {
            return None;
        }
        let (slot, evicted) = if self.q.is_full() {
            let victim = self.rank();
            self.replaced(victim);
            // The lookup's bucket stays valid: `replace_at` inserts before it removes.
            let old = self.q.replace_at(victim, at, key, Tag::default());
            self.recent_moved(old, NIL);
            (victim, Some(old))
        } else {
            (self.q.push_new_at(at, key, Tag::default()), None)
        };
        self.recent_moved(key, slot);
        let mut tag = Tag::default();
        tag.set_hit_ages(0, MAX_AGE as u32);
        let explore = self.touch(&mut tag);
        self.q.node_mut(slot).meta = tag;
        if !explore && !self.recent.is_empty() && self.density(&tag) < self.ewma_victim_density {
            let n = self.recent.len();
            self.recent[self.recent_head % n] = Some((key, slot));
            self.recent_head = (self.recent_head + 1) % n;
        }
        self.tick();
        evicted
    }

    /// Count the eviction of slot `i` in its class and give back its explorer budget.
    #[inline]
    fn replaced(&mut self, i: u32) {
        let tag = self.q.node(i).meta;
        let at = Self::class(&tag) + self.age(&tag);
        self.evictions[at] += 1.0;
        if tag.explorer {
            self.explorer_budget += 1;
        }
    }

    /// Section 4.3: decay the counts, settle the age coarsening, recompute the densities.
    #[cold]
    fn reconfigure(&mut self) {
        for v in self.hits.iter_mut().chain(self.evictions.iter_mut()) {
            *v *= EWMA_DECAY;
        }
        self.adapt_coarsening();
        for c in 0..CLASSES {
            let row = c * MAX_AGE;
            let (hits, evictions) = (&self.hits[row..row + MAX_AGE], &self.evictions[row..]);
            let mut events = hits[MAX_AGE - 1] + evictions[MAX_AGE - 1];
            let mut total_hits = hits[MAX_AGE - 1];
            let mut lifetime = events;
            for a in (0..MAX_AGE - 1).rev() {
                total_hits += hits[a];
                events += hits[a] + evictions[a];
                lifetime += events;
                self.densities[row + a] = if events > 1e-5 { total_hits / lifetime } else { 0.0 };
            }
        }
    }

    /// At the 5th and 25th recomputation, set the coarsening shift so the resident blocks'
    /// ages span about 1 % of `MAX_AGE` each, and rescale the counts to it.
    fn adapt_coarsening(&mut self) {
        self.ewma_objects = self.ewma_objects * f64::from(EWMA_DECAY) + self.q.len() as f64;
        self.ewma_mass = self.ewma_mass * f64::from(EWMA_DECAY) + 1.0;
        if self.reconfigurations != 5 && self.reconfigurations != 25 {
            return;
        }
        let optimal = self.ewma_objects / self.ewma_mass / (0.01 * MAX_AGE as f64);
        let mut log2 = 1u32;
        while f64::from(1u32 << log2.min(31)) < optimal && log2 < 31 {
            log2 += 1;
        }
        let delta = i64::from(log2) - i64::from(self.shift);
        self.shift = log2;
        self.ewma_objects *= 8.0;
        self.ewma_mass *= 8.0;
        for table in [&mut self.hits, &mut self.evictions] {
            for row in table.chunks_mut(MAX_AGE) {
                rescale(row, delta);
            }
        }
    }
}

/// A class's counts by age moved to a coarsening shift `delta` steps coarser (positive:
/// ages merge) or finer (negative: ages spread).
fn rescale(row: &mut [f32], delta: i64) {
    let d = delta.unsigned_abs().min(30) as u32;
    if delta < 0 {
        let spill: f32 = row[(MAX_AGE >> d)..MAX_AGE - 1].iter().sum();
        row[MAX_AGE - 1] += spill;
        for a in (0..MAX_AGE - 1).rev() {
            row[a] = row[a >> d] / (1u32 << d) as f32;
        }
    } else if delta > 0 {
        for a in 0..(MAX_AGE >> d) {
            row[a] = (0..1usize << d).map(|i| row[(a << d) + i]).sum();
        }
        for v in &mut row[(MAX_AGE >> d)..MAX_AGE - 1] {
            *v = 0.0;
        }
    }
}

/// The coarsened age of `tag` at access count `now` with coarsening `shift`, at most
/// `MAX_AGE - 1` (an overflow).
#[inline]
fn coarse_age(now: u64, shift: u32, tag: &Tag) -> usize {
    (((now - tag.timestamp) >> shift) as usize).min(MAX_AGE - 1)
}

/// The hit density of the block whose tag is `tag` in the table `densities` (per class and
/// age), at access count `now` with coarsening `shift`: the lowest for an overflowed age,
/// one more for an explorer.
#[inline]
fn density(densities: &[f32], now: u64, shift: u32, tag: &Tag) -> f32 {
    let age = coarse_age(now, shift, tag);
    if age == MAX_AGE - 1 {
        return f32::MIN;
    }
    let d = densities[Lhd::class(tag) + age];
    if tag.explorer {
        d + 1.0
    } else {
        d
    }
}

/// The class of a block whose last two hit ages sum to `age`: about `log2(MAX_AGE / age)`,
/// the top class for 0.
/// (The number of doublings that take `age` to at least `MAX_AGE`, at most `CLASSES - 1`.)
#[inline]
fn hit_age_class(age: u64) -> usize {
    const MAX: u64 = MAX_AGE as u64;
    if age == 0 {
        return CLASSES - 1;
    }
    if age >= MAX {
        return 0;
    }
    // Shifted left by the difference of their bit lengths, `age` has `MAX_AGE`'s length:
    // one doubling more if it is still below.
    let shift = age.leading_zeros() - MAX.leading_zeros();
    let log = shift + u32::from(age << shift < MAX);
    (log as usize).min(CLASSES - 1)
}

impl FromSpec for Lhd {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::new(
            capacity,
            spec.value("samples", 32.0) as usize,
            spec.value("admissions", 8.0) as usize,
            spec.value("seed", SEED.default) as u64,
        )
    }
}

impl Replacement for Lhd {
    fn name(&self) -> &'static str {
        "lhd"
    }

    fn capacity(&self) -> usize {
        self.q.capacity()
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn contains(&self, key: u64) -> bool {
        self.q.find(key).is_some()
    }

    fn lookup(&mut self, access: &Access) -> bool {
        match self.q.find(access.key) {
            Some(i) => {
                self.hit(i);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        match self.q.lookup(access.key) {
            Err(at) => self.insert_absent(at, access.key),
            Ok(_) => {
                debug_assert!(false, "insert of a resident block");
                None
            }
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.q.find(key) {
            Some(i) => {
                if self.q.node(i).meta.explorer {
                    self.explorer_budget += 1;
                }
                self.q.remove_node(i);
                self.recent_moved(key, NIL);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.q.map.prefetch(key);
    }

    #[inline]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.q.map.prefetch_fp(fp);
        fp
    }

    /// The hint is the key's index fingerprint ([`Lhd::prefetch_hint`]).
    #[inline]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        match self.q.lookup_fp(access.key, hint) {
            Ok(i) => {
                self.hit(i);
                (true, None)
            }
            Err(at) => (false, self.insert_absent(at, access.key)),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.q.memory_bytes()
            + 4 * (self.hits.len() + self.evictions.len() + self.densities.len())
            + std::mem::size_of_val(&*self.recent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{misses, run, skewed_keys};

    #[test]
    fn same_seed_same_decisions_other_seed_other_ones() {
        let keys = skewed_keys(30_000, 400, 5);
        let a = run(&mut Lhd::new(50, 32, 8, 3), &keys);
        assert_eq!(a, run(&mut Lhd::new(50, 32, 8, 3), &keys));
        assert_ne!(a, run(&mut Lhd::new(50, 32, 8, 4), &keys));
    }

    #[test]
    fn hit_age_class_counts_the_doublings_to_max_age() {
        // The definition, doubling by doubling.
        fn doublings(mut age: u64) -> usize {
            if age == 0 {
                return CLASSES - 1;
            }
            let mut log = 0;
            while age < MAX_AGE as u64 && log < CLASSES - 1 {
                age <<= 1;
                log += 1;
            }
            log
        }
        for age in (0..3 * MAX_AGE as u64).chain([u64::from(u32::MAX) * 2, u64::MAX >> 1]) {
            assert_eq!(hit_age_class(age), doublings(age), "age {age}");
        }
    }

    #[test]
    fn each_tag_s_class_row_follows_its_hit_ages() {
        let mut p = Lhd::new(300, 32, 8, 1);
        run(&mut p, &skewed_keys(50_000, 2000, 3));
        assert_eq!(Tag::default().row as usize, (CLASSES - 1) * MAX_AGE);
        let mut rows = std::collections::HashSet::new();
        for i in 0..p.q.capacity() as u32 {
            let t = p.q.node(i).meta;
            let sum = u64::from(t.last_hit_age) + u64::from(t.last_last_hit_age);
            assert_eq!(t.row as usize, hit_age_class(sum) * MAX_AGE, "slot {i}");
            rows.insert(t.row);
        }
        assert!(rows.len() >= 2, "{rows:?}");
        assert_eq!(std::mem::size_of::<Tag>(), 24);
    }

    #[test]
    fn hit_age_classes_are_a_log_scale() {
        assert_eq!(hit_age_class(0), CLASSES - 1);
        assert_eq!(hit_age_class(MAX_AGE as u64), 0);
        assert_eq!(hit_age_class(MAX_AGE as u64 / 2), 1);
        assert_eq!(hit_age_class(1), CLASSES - 1);
    }

    #[test]
    fn reused_blocks_outlive_blocks_never_hit() {
        // A hot set hit again and again among a stream of one-time blocks: the hot blocks
        // move to the top class, whose density is higher, so they mostly stay.
        let mut keys = Vec::new();
        for round in 0..3000u64 {
            keys.extend(0..10u64);
            keys.extend((0..10).map(|s| 1_000_000 + round * 10 + s));
        }
        let out = run(&mut Lhd::new(40, 32, 8, 1), &keys);
        let hot_misses = keys.iter().zip(&out).filter(|(&k, (hit, _))| k < 10 && !hit).count();
        assert!(hot_misses < 3000, "{hot_misses} misses of the hot set in 30,000 accesses");
        assert!(misses(&out) >= 30_000);
    }

    #[test]
    fn the_model_is_recomputed_and_ages_rescaled() {
        // Past the fifth recomputation: the densities are the model's, the shift is set.
        let keys = skewed_keys(6 * RECONFIGURE_EVERY as usize, 2000, 9);
        let mut p = Lhd::new(500, 32, 8, 1);
        run(&mut p, &keys);
        assert_eq!(p.reconfigurations, 6);
        assert!(p.shift < 10, "shift {}", p.shift);
        assert!(p.densities.iter().all(|d| d.is_finite() && *d >= 0.0));
    }

    #[test]
    fn rescaling_keeps_the_counts() {
        let mut row: Vec<f32> = (0..MAX_AGE).map(|a| if a < 100 { 1.0 } else { 0.0 }).collect();
        rescale(&mut row, 2);
        assert_eq!(row.iter().sum::<f32>(), 100.0);
        assert_eq!(row[0], 4.0);
    }
}
