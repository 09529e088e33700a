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
//! Memory: 32 bytes of slab node, 16 bytes of hash index and 20 bytes of bucket pool per
//! block of capacity (68 in all), plus about 24 bytes per distinct count (at most one per
//! resident block).

use super::priority_buckets::{ByPriority, PriorityBuckets};
use super::spec::{FromSpec, Spec};
use crate::keymap::Bucket;

/// Least-frequently-used replacement (in-cache counts, FIFO among equal counts).
#[derive(Clone, Debug)]
pub struct Lfu {
    b: PriorityBuckets,
}

impl Lfu {
    /// An empty LFU cache of `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Self { b: PriorityBuckets::with_capacity(capacity) }
    }
}

impl FromSpec for Lfu {
    fn from_spec(capacity: usize, _spec: &Spec) -> Self {
        Self::new(capacity)
    }
}

impl ByPriority for Lfu {
    const NAME: &'static str = "lfu";

    fn buckets(&self) -> &PriorityBuckets {
        &self.b
    }

    fn buckets_mut(&mut self) -> &mut PriorityBuckets {
        &mut self.b
    }

    fn hit(&mut self, i: u32) {
        let f = self.b.meta(i).priority;
        self.b.detach(i);
        self.b.attach(i, f + 1, 0);
    }

    fn admit(&mut self, at: Bucket, key: u64) {
        self.b.insert(at, key, 1, 0);
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
