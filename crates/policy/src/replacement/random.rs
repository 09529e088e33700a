//! Random replacement: a full cache evicts a resident block drawn uniformly at random, the
//! baseline of the replacement literature (Belady, IBM Systems Journal 1966, section 3, calls
//! it RAND) and libCacheSim's `Random`.
//!
//! Blocks live in a preallocated slab; a full cache has every slot of the slab in use, so a
//! uniform slot number is a uniform resident block and needs no separate sample array. The
//! draws come from a xoshiro256++ generator seeded with `seed=` (default 1): two runs with
//! the same seed make the same decisions, in the simulator and in the real cache.
//!
//! libCacheSim's `Random` takes no seed; the peer tests compare ember's mean miss ratio over
//! five seeds with libCacheSim's.
//!
//! Memory: the [`Queue`] layout, 32 bytes of slab node and about 16 bytes of hash index per
//! block of capacity.

use super::params::{Param, SEED};
use super::queue::Queue;
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::Access;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Random's parameters: the seed.
pub const PARAMS: &[Param] = &[SEED];

/// Random replacement (see the module documentation).
#[derive(Clone, Debug)]
pub struct Random {
    q: Queue<()>,
    rng: Xoshiro256PlusPlus,
}

impl Random {
    /// An empty cache of `capacity` blocks whose victims are drawn with `seed`.
    pub fn new(capacity: usize, seed: u64) -> Self {
        Self { q: Queue::with_capacity(capacity), rng: Xoshiro256PlusPlus::seed_from_u64(seed) }
    }
}

impl FromSpec for Random {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::new(capacity, spec.value("seed", SEED.default) as u64)
    }
}

impl Replacement for Random {
    fn name(&self) -> &'static str {
        "random"
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
        self.q.find(access.key).is_some()
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        let capacity = self.q.capacity();
        if capacity == 0 {
            return None;
        }
        let Err(at) = self.q.lookup(access.key) else {
            debug_assert!(false, "insert of a resident block");
            return None;
        };
        if self.q.is_full() {
            // Every slot is in use: a uniform slot is a uniform resident block.
            let victim = self.rng.gen_range(0..capacity) as u32;
            Some(self.q.replace_at(victim, at, access.key, ()))
        } else {
            self.q.push_new_at(at, access.key, ());
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
    use crate::replacement::testing::{misses, run, skewed_keys};

    #[test]
    fn same_seed_same_decisions_other_seed_other_ones() {
        let keys = skewed_keys(20_000, 400, 7);
        let a = run(&mut Random::new(50, 3), &keys);
        let b = run(&mut Random::new(50, 3), &keys);
        let c = run(&mut Random::new(50, 4), &keys);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn victims_spread_over_the_whole_cache() {
        // Ten blocks, then a stream of new ones: each of the first ten leaves at some point,
        // and the first evictions are not in insertion order.
        let mut p = Random::new(10, 1);
        let keys: Vec<u64> = (0..200).collect();
        let out = run(&mut p, &keys);
        let evicted: Vec<u64> = out.iter().filter_map(|&(_, e)| e).collect();
        assert_eq!(evicted.len(), 190);
        assert!((0..10).all(|k| evicted.contains(&k)));
        assert_ne!(&evicted[..10], &(0..10).collect::<Vec<u64>>()[..]);
        assert_eq!(misses(&out), 200);
    }
}
