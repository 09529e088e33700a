//! LFU: evict the least frequently used block.
//!
//! The classic frequency order, in its in-cache form: a block's count starts at 1 when it
//! is inserted and grows by 1 on each hit; a block that leaves forgets its count (no
//! history, so memory is bounded by the capacity). Among blocks of the lowest count the one
//! that reached that count first leaves (FIFO within a count), the order of the O(1) LFU of
//! Shah, Mitra & Matani (2010).
//!
//! Matches libCacheSim's `LFU` (`LFU.c`: frequency buckets of FIFO lists, a new object at
//! frequency 1, eviction from the head of the lowest non-empty bucket) exactly: the peer
//! tests compare miss counts on synthetic sequences and on cloudPhysicsIO.
//!
//! The buckets are the O(1) LFU's ([`FrequencyBuckets`]): a hit or an insertion moves a
//! block between neighbouring buckets, with no search.
//!
//! Memory: 24 bytes of slab node, 16 bytes of hash index and 36 bytes of bucket pool per
//! block of capacity (76 in all).

use super::frequency_buckets::FrequencyBuckets;
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::keymap::{fingerprint, Bucket};
use crate::Access;

/// Least-frequently-used replacement (in-cache counts, FIFO among equal counts).
#[derive(Clone, Debug)]
pub struct Lfu {
    b: FrequencyBuckets,
}

impl Lfu {
    /// An empty LFU cache of `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Self { b: FrequencyBuckets::with_capacity(capacity) }
    }

    /// Make absent `key`, looked up into `at`, resident; returns the evicted block. The
    /// eviction leaves `at` valid (index entries never move).
    #[inline(always)]
    fn insert_absent(&mut self, at: Bucket, key: u64) -> Option<u64> {
        if self.b.capacity() == 0 {
            return None;
        }
        let victim =
            if self.b.is_full() { self.b.lowest_oldest().map(|i| self.b.remove(i)) } else { None };
        self.b.insert(at, key);
        victim
    }
}

impl FromSpec for Lfu {
    fn from_spec(capacity: usize, _spec: &Spec) -> Self {
        Self::new(capacity)
    }
}

impl Replacement for Lfu {
    fn name(&self) -> &'static str {
        "lfu"
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
                self.b.bump(i);
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
                self.b.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// LFU's order past the blocks the filter refuses: the lowest count first, the block
    /// that reached it first among equals. The refused blocks keep their count and place.
    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        Some(self.b.lowest_oldest_where(ok).map(|i| self.b.remove(i)))
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline(always)]
    fn prefetch(&self, key: u64) {
        self.b.prefetch_fp(fingerprint(key));
    }

    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.b.prefetch_fp(fp);
        fp
    }

    /// The hint is the key's index fingerprint ([`Lfu::prefetch_hint`]).
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        match self.b.lookup_fp(access.key, hint) {
            Ok(i) => {
                self.b.bump(i);
                (true, None)
            }
            Err(at) => (false, self.insert_absent(at, access.key)),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.b.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::Replacement;
    use crate::Access;

    fn run(p: &mut Lfu, keys: &[u64]) -> Vec<(bool, Option<u64>)> {
        keys.iter().enumerate().map(|(t, &k)| p.access(&Access::read(k, t as u64))).collect()
    }

    #[test]
    fn evicts_the_lowest_count_oldest_first() {
        let mut p = Lfu::new(3);
        // 1 twice, 2 and 3 once: 2 reached count 1 first, so it leaves for 4.
        let r = run(&mut p, &[1, 2, 3, 1, 4]);
        assert_eq!(r[4], (false, Some(2)));
        // 3 and 4 at count 1: 3 is older.
        assert_eq!(run(&mut p, &[5])[0], (false, Some(3)));
        // 4 hit (count 2), so 5 (count 1) leaves; 1 (count 2) stays.
        let r = run(&mut p, &[4, 6]);
        assert_eq!(r[1], (false, Some(5)));
        assert!(p.contains(1) && p.contains(4) && p.contains(6));
    }

    #[test]
    fn ties_among_higher_counts_go_by_time_of_reaching_the_count() {
        let mut p = Lfu::new(2);
        run(&mut p, &[1, 2, 2, 1]);
        // Both at count 2; 2 reached it first: a new block at count 1 leaves first, then 2.
        assert_eq!(run(&mut p, &[3])[0], (false, Some(2)));
        assert_eq!(run(&mut p, &[4])[0], (false, Some(3)));
    }
}
