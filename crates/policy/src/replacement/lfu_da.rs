//! LFU-DA: LFU with dynamic aging (Arlitt, Cherkasova, Dilley, Friedrich & Jin, "Evaluating
//! content management techniques for Web proxy caches", Performance Evaluation Review 27(4),
//! 2000, section 3; the uniform-size form, cost 1 per block).
//!
//! Each block has a key `K = F + L`: `F` its reference count since it entered the cache (1
//! on insertion, +1 on each hit, recomputed with the current `L` on each hit), `L` the cache's
//! age, set to the key of each evicted block. The block of the lowest key leaves; among equal
//! keys the one that reached the key first. Aging lets blocks that were popular once fall
//! behind newer ones, which plain [LFU](super::Lfu) never does. Non-resident blocks keep
//! nothing, so memory is bounded by the capacity.
//!
//! libCacheSim's `LFUDA` (`LFUDA.c`) departs from the paper, and `variant=lcs` reproduces it:
//! there the age `L` is the lowest key it tracks (raised whenever the lowest bucket empties,
//! on a hit as well as an eviction, to the next non-empty key up to the largest key a hit
//! produced), a hit adds `L` to the key (`K += L`, not `K = F + L`), and a new block gets
//! `L + 1`. Eviction takes the bucket of key `L` (key 1 while `L` is 0 or 1); where that
//! bucket is empty libCacheSim would dereference a null object, and ember takes the lowest
//! key instead. The peer tests compare `lfuda:lcs` with libCacheSim's `LFUDA` (equal miss
//! counts); the paper's form is ember's default.
//!
//! Memory: 68 bytes per block of capacity (32 of slab node, 16 of hash index, 20 of bucket
//! pool) and about 24 per distinct key.

use super::params::{Param, VARIANT};
use super::priority_buckets::{ByPriority, PriorityBuckets};
use super::spec::{FromSpec, Spec};
use crate::keymap::Bucket;

/// LFU-DA's parameters: the paper's form or libCacheSim's.
pub const PARAMS: &[Param] = &[VARIANT];

/// LFU with dynamic aging (see the module documentation).
#[derive(Clone, Debug)]
pub struct LfuDa {
    b: PriorityBuckets,
    /// The age `L`.
    age: u64,
    /// libCacheSim's form (`variant=lcs`).
    lcs: bool,
    /// libCacheSim's form: the largest key a hit produced (its scan for the next lowest key
    /// stops there).
    max_hit_key: u64,
}

impl LfuDa {
    /// An empty LFU-DA cache of `capacity` blocks, the paper's form.
    pub fn new(capacity: usize) -> Self {
        Self::with_variant(capacity, false)
    }

    /// An empty LFU-DA cache of `capacity` blocks; `lcs` selects libCacheSim's form.
    pub fn with_variant(capacity: usize, lcs: bool) -> Self {
        Self { b: PriorityBuckets::with_capacity(capacity), age: 0, lcs, max_hit_key: 0 }
    }

    /// libCacheSim's form: the bucket of key `L` emptied; `L` moves to the next non-empty
    /// key up to the largest key a hit produced (unchanged if there is none).
    fn lcs_raise_age(&mut self) {
        if let Some(next) = self.b.next_priority(self.age, self.max_hit_key) {
            self.age = next;
        }
    }

    /// The key whose bucket the next eviction takes.
    fn victim_key(&self) -> Option<u64> {
        if self.lcs {
            let k = self.age.max(1);
            if self.b.has_priority(k) {
                return Some(k);
            }
        }
        self.b.min_priority()
    }
}

impl FromSpec for LfuDa {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::with_variant(capacity, spec.value("variant", 0.0) == 1.0)
    }
}

impl ByPriority for LfuDa {
    const NAME: &'static str = "lfuda";

    fn buckets(&self) -> &PriorityBuckets {
        &self.b
    }

    fn buckets_mut(&mut self) -> &mut PriorityBuckets {
        &mut self.b
    }

    fn hit(&mut self, i: u32) {
        let m = self.b.meta(i);
        self.b.detach(i);
        if self.lcs {
            let key = m.priority + self.age;
            self.max_hit_key = self.max_hit_key.max(key);
            if m.priority == self.age && !self.b.has_priority(m.priority) {
                self.lcs_raise_age();
            }
            self.b.attach(i, key, 0);
        } else {
            let count = m.count.saturating_add(1);
            self.b.attach(i, u64::from(count) + self.age, count);
        }
    }

    fn admit(&mut self, at: Bucket, key: u64) {
        self.b.insert(at, key, self.age + 1, 1);
    }

    /// The oldest block of the victim key leaves, and `L` becomes that key.
    fn evict(&mut self) -> Option<u64> {
        let k = self.victim_key()?;
        let i = self.b.oldest(k)?;
        let victim = self.b.remove(i);
        self.age = k;
        if self.lcs && !self.b.has_priority(k) {
            self.lcs_raise_age();
        }
        Some(victim)
    }

    fn removed(&mut self, k: u64) {
        if self.lcs && k == self.age && !self.b.has_priority(k) {
            self.lcs_raise_age();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::Replacement;
    use crate::Access;

    fn run(p: &mut LfuDa, keys: &[u64]) -> Vec<(bool, Option<u64>)> {
        keys.iter().enumerate().map(|(t, &k)| p.access(&Access::read(k, t as u64))).collect()
    }

    #[test]
    fn the_age_lets_new_blocks_overtake_old_favourites() {
        let mut p = LfuDa::new(2);
        // 1 reaches count 3 (key 3); 2 at key 1 leaves for 3 (L = 1), 3 enters at key 2.
        let r = run(&mut p, &[1, 1, 1, 2, 3]);
        assert_eq!(r[4], (false, Some(2)));
        // 3 leaves for 4 (L = 2, 4 at key 3), then 4's hit makes its key 2 + 2 = 4 > 1's 3:
        // 5 evicts 1, which plain LFU would have kept (count 3 against 2).
        let r = run(&mut p, &[4, 4, 5]);
        assert_eq!(r[0], (false, Some(3)));
        assert_eq!(r[2], (false, Some(1)));
        assert!(p.contains(4) && p.contains(5));
    }

    #[test]
    fn lcs_variant_adds_the_age_on_a_hit() {
        let mut p = LfuDa::with_variant(2, true);
        // Before any eviction L = 0: hits leave keys at 1 (FIFO among them, newest last).
        let r = run(&mut p, &[1, 2, 1, 3]);
        assert_eq!(r[3], (false, Some(2)));
        assert_eq!(p.age, 1);
    }
}
