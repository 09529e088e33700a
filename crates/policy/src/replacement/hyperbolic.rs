//! Hyperbolic caching (Blankstein, Sen & Freedman, "Hyperbolic caching: flexible caching for
//! web applications", USENIX ATC 2017): a block's priority is its hit count divided by its
//! time in the cache, `n / t`, and a full cache evicts the block of the lowest priority among
//! a random sample of resident blocks (section 3; section 4.1 samples 64).
//!
//! `n` counts the block's accesses since it entered (1 on entry, so a block never hit
//! decays as `1 / t`); `t` counts the accesses (every lookup, hit or miss) since it entered.
//! Priorities change with time and cannot be kept in an order, hence the sample: `samples=`
//! draws (default 64, the paper's and libCacheSim's), uniform and with replacement, the first
//! of the lowest priorities leaving. A full cache has every slot of its slab in use, so a
//! uniform slot is a uniform resident block (the sampling is LHD's and Random's too,
//! `sampled.rs`). The draws come from a xoshiro256++ generator
//! seeded with `seed=` (default 1): the same seed makes the same decisions in the simulator
//! and in the real cache.
//!
//! libCacheSim's `Hyperbolic` scores `1e8 · n / t` over 64 draws as here, and takes no seed:
//! the peer tests compare ember's mean miss ratio over five seeds with libCacheSim's.
//!
//! Memory: the [`Queue`] layout (about 48 bytes per block of capacity with its 16-byte
//! count and entry time).

use super::params::{Domain, Param, SEED};
use super::queue::Queue;
use super::sampled;
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::Access;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Hyperbolic's parameters: the sample size and the seed.
pub const PARAMS: &[Param] = &[
    Param {
        name: "samples",
        domain: Domain::Int { min: 1, max: 1024 },
        default: 64.0,
        help: "resident blocks sampled per eviction (the paper's 64)",
    },
    SEED,
];

/// A block's hit count and the time it entered.
#[derive(Clone, Copy, Debug, Default)]
struct Meta {
    /// Accesses since it entered, 1 on entry.
    n: u64,
    /// The access counter when it entered.
    entered: u64,
}

/// Hyperbolic caching (see the module documentation).
#[derive(Clone, Debug)]
pub struct Hyperbolic {
    q: Queue<Meta>,
    samples: usize,
    rng: Xoshiro256PlusPlus,
    /// Accesses so far (hits and insertions).
    now: u64,
}

impl Hyperbolic {
    /// An empty cache of `capacity` blocks sampling `samples` blocks per eviction with `seed`.
    pub fn new(capacity: usize, samples: usize, seed: u64) -> Self {
        Self {
            q: Queue::with_capacity(capacity),
            samples: samples.max(1),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            now: 0,
        }
    }

    /// The slot of the lowest `n / t` among `samples` uniform draws (the first on ties).
    fn victim(&mut self) -> u32 {
        let (q, now) = (&self.q, self.now);
        let drawn = sampled::draws(&mut self.rng, q.capacity(), self.samples);
        let (victim, _) = sampled::first_lowest(drawn, f64::INFINITY, |i| {
            let m = q.node(i).meta;
            let age = now.saturating_sub(m.entered).max(1);
            m.n as f64 / age as f64
        });
        victim.unwrap_or(0)
    }
}

impl FromSpec for Hyperbolic {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::new(
            capacity,
            spec.value("samples", 64.0) as usize,
            spec.value("seed", SEED.default) as u64,
        )
    }
}

impl Replacement for Hyperbolic {
    fn name(&self) -> &'static str {
        "hyperbolic"
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
                self.now += 1;
                self.q.node_mut(i).meta.n += 1;
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.q.capacity() == 0 {
            return None;
        }
        let Err(at) = self.q.lookup(access.key) else {
            debug_assert!(false, "insert of a resident block");
            return None;
        };
        self.now += 1;
        let meta = Meta { n: 1, entered: self.now };
        if self.q.is_full() {
            let victim = self.victim();
            Some(self.q.replace_at(victim, at, access.key, meta))
        } else {
            self.q.push_new_at(at, access.key, meta);
            None
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.q.find(key) {
            Some(i) => {
                self.q.remove_node(i);
                true
            }
            None => false,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.q.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{run, skewed_keys};

    #[test]
    fn same_seed_same_decisions() {
        let keys = skewed_keys(20_000, 400, 11);
        let a = run(&mut Hyperbolic::new(50, 64, 3), &keys);
        assert_eq!(a, run(&mut Hyperbolic::new(50, 64, 3), &keys));
        assert_ne!(a, run(&mut Hyperbolic::new(50, 64, 4), &keys));
    }

    #[test]
    fn a_frequently_hit_block_outlives_blocks_seen_once() {
        // Block 0 is hit every other access; the others are a scan. With a sample of the
        // whole cache (many draws), 0 always has the highest n / t and never leaves.
        let mut p = Hyperbolic::new(8, 256, 1);
        for t in 0..2000u64 {
            let key = if t % 2 == 0 { 0 } else { 1 + t };
            p.access(&Access::read(key, t));
            assert!(t < 2 || p.contains(0), "t={t}");
        }
    }
}
