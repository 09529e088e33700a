//! Random replacement: a full cache evicts a resident block drawn uniformly at random, the
//! baseline of the replacement literature (Belady, IBM Systems Journal 1966, section 3, calls
//! it RAND) and libCacheSim's `Random`.
//!
//! Blocks live in a preallocated slab; a full cache has every slot of the slab in use, so a
//! uniform slot number is a uniform resident block and needs no separate sample array (nor
//! any order: the slab's nodes are linked into no list; the draw is Hyperbolic's and LHD's,
//! `sampled.rs`). The draws come from a xoshiro256++ generator seeded with `seed=` (default
//! 1): two runs with the same seed make the same decisions, in the simulator and in the real
//! cache.
//!
//! libCacheSim's `Random` takes no seed; the peer tests compare ember's mean miss ratio over
//! five seeds with libCacheSim's.
//!
//! Memory: 16 bytes of slab node and about 16 bytes of hash index per block of capacity.

use super::params::{Param, SEED};
use super::sampled;
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::keymap::{fingerprint, Bucket, KeyMap};
use crate::slab::{Slab, NIL};
use crate::Access;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Random's parameters: the seed.
pub const PARAMS: &[Param] = &[SEED];

/// Random replacement (see the module documentation).
#[derive(Clone, Debug)]
pub struct Random {
    map: KeyMap,
    slab: Slab<()>,
    rng: Xoshiro256PlusPlus,
}

impl Random {
    /// An empty cache of `capacity` blocks whose victims are drawn with `seed`.
    pub fn new(capacity: usize, seed: u64) -> Self {
        Self {
            map: KeyMap::with_entries(capacity),
            slab: Slab::with_capacity(capacity),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The slot of `key` if resident, else the index bucket to insert it at.
    #[inline(always)]
    fn lookup_fp(&self, key: u64, fp: u32) -> Result<u32, Bucket> {
        let slab = &self.slab;
        self.map.find_fp(key, fp, |s| slab.key(s))
    }

    /// Make absent `key`, looked up into `at`, resident; returns the evicted block.
    #[inline(always)]
    fn insert_absent(&mut self, at: Bucket, key: u64) -> Option<u64> {
        let capacity = self.slab.capacity();
        if capacity == 0 {
            return None;
        }
        if self.slab.live() >= capacity {
            // Every slot is in use: a uniform slot is a uniform resident block. The new
            // index entry goes in first, so the bucket is not probed for again.
            let victim = sampled::draw(&mut self.rng, capacity);
            let old = self.slab.key(victim);
            self.map.insert_at(at, victim);
            self.map.remove(old, victim);
            self.slab.node_mut(victim).key = key;
            Some(old)
        } else {
            let i = self.slab.alloc(key, ());
            debug_assert!(i != NIL, "a slab with room gave no slot");
            self.map.insert_at(at, i);
            None
        }
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
        self.slab.capacity()
    }

    fn len(&self) -> usize {
        self.slab.live()
    }

    fn contains(&self, key: u64) -> bool {
        self.lookup_fp(key, fingerprint(key)).is_ok()
    }

    fn lookup(&mut self, access: &Access) -> bool {
        self.contains(access.key)
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        match self.lookup_fp(access.key, fingerprint(access.key)) {
            Err(at) => self.insert_absent(at, access.key),
            Ok(_) => {
                debug_assert!(false, "insert of a resident block");
                None
            }
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.lookup_fp(key, fingerprint(key)) {
            Ok(i) => {
                self.map.remove(key, i);
                self.slab.release(i);
                true
            }
            Err(_) => false,
        }
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline(always)]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.map.prefetch_fp(fp);
        fp
    }

    /// The hint is the key's index fingerprint ([`Random::prefetch_hint`]).
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        match self.lookup_fp(access.key, hint) {
            Ok(_) => (true, None),
            Err(at) => (false, self.insert_absent(at, access.key)),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.slab.memory_bytes()
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
