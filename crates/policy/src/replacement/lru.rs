//! LRU: evict the least recently used block.
//!
//! The classic recency order (the baseline of every paper ember reproduces; Wong & Wilkes
//! call it NONE-LRU when no demotion is used). A hit moves the block to the head; a miss
//! inserts at the head and, when full, evicts the tail. Matches libCacheSim's `LRU` exactly
//! (`LRU.c`: `move_obj_to_head` on hit, `prepend_obj_to_head` on insert, tail eviction).
//!
//! Memory: 16 bytes of slab node (key + two `u32` links) and 16 bytes of hash index per
//! block of capacity, 32 bytes in all.

use super::queue::Queue;
use super::Replacement;
use crate::keymap::{fingerprint, Bucket};
use crate::slab::NIL;
use crate::Access;

/// Least-recently-used replacement.
#[derive(Clone, Debug)]
pub struct Lru {
    q: Queue<()>,
}

impl Lru {
    /// An empty LRU cache of `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Self { q: Queue::with_capacity(capacity) }
    }

    /// Resident keys from most to least recently used (O(n); for tests and inspection).
    pub fn keys(&self) -> Vec<u64> {
        self.q.keys()
    }

    /// Insert `key`, looked up as absent into `bucket`.
    #[inline(always)]
    fn insert_absent(&mut self, bucket: Bucket, key: u64) -> Option<u64> {
        if self.q.is_full() {
            if self.q.capacity() == 0 {
                return None;
            }
            let victim = self.q.list.tail;
            let old = self.q.replace_at(victim, bucket, key, ());
            self.q.prefetch_tail();
            Some(old)
        } else {
            self.q.push_new_at(bucket, key, ());
            None
        }
    }
}

impl Replacement for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }

    fn capacity(&self) -> usize {
        self.q.capacity()
    }

    #[inline]
    fn len(&self) -> usize {
        self.q.len()
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.q.find(key).is_some()
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        match self.q.find(access.key) {
            Some(i) => {
                self.q.move_to_head(i);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn insert(&mut self, access: &Access) -> Option<u64> {
        self.access(access).1
    }

    fn insert_aged(&mut self, access: &Access, younger: Option<u64>) -> Option<u64> {
        let Some(anchor) = younger.and_then(|k| self.q.find(k)) else {
            return self.insert(access);
        };
        if self.q.capacity() == 0 || self.q.find(access.key).is_some() {
            return None;
        }
        let mut anchor = Some(anchor);
        let mut victim = None;
        if self.q.is_full() {
            // The least recently used leaves. (If that is `younger` itself, strict LRU would
            // evict the new block instead; it keeps the tail, as the oldest, instead.)
            let tail = self.q.list.tail;
            if anchor == Some(tail) {
                anchor = None;
            }
            victim = Some(self.q.remove_node(tail));
        }
        let bucket = match self.q.lookup(access.key) {
            Err(b) => b,
            Ok(_) => return victim,
        };
        let i = self.q.slab.alloc(access.key, ());
        let nodes = self.q.slab.nodes_mut();
        match anchor.or(Some(self.q.list.tail).filter(|&t| t != NIL)) {
            Some(a) => self.q.list.insert_after(nodes, a, i),
            None => self.q.list.push_head(nodes, i),
        }
        self.q.map.insert_at(bucket, i);
        victim
    }

    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        Some(self.q.evict_where(ok))
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

    /// Inlined whole into a caller's loop (as FIFO's): called through a reference, the
    /// access cost a function's prologue and epilogue and the `Access` a trip through memory.
    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.q.map.prefetch_fp(fp);
        fp
    }

    /// Loads the node of the first index entry with the hint's fingerprint.
    #[inline(always)]
    fn prefetch_resident(&self, hint: u32) {
        if !self.q.deep {
            return;
        }
        if let Some(i) = self.q.map.first_match(hint) {
            self.q.slab.prefetch(i);
        }
    }

    /// The hint is the key's index fingerprint ([`Lru::prefetch_hint`]).
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        match self.q.lookup_fp(access.key, hint) {
            Ok(i) => {
                self.q.move_to_head(i);
                (true, None)
            }
            Err(bucket) => (false, self.insert_absent(bucket, access.key)),
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.q.map.prefetch(key);
    }

    fn recency_only(&self) -> bool {
        true
    }

    fn memory_bytes(&self) -> usize {
        self.q.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{check_evicts_least_recently_used, misses, run, skewed_keys};

    #[test]
    fn evicts_least_recently_used() {
        check_evicts_least_recently_used(Lru::new(3), Lru::keys);
    }

    #[test]
    fn remove_frees_a_slot() {
        let mut lru = Lru::new(2);
        run(&mut lru, &[1, 2]);
        assert!(lru.remove(1));
        assert!(!lru.remove(1));
        assert!(!lru.contains(1));
        assert_eq!(lru.len(), 1);
        // Room again: inserting 3 evicts nothing; then 4 evicts 2 (the LRU).
        assert_eq!(run(&mut lru, &[3, 4]), vec![(false, None), (false, Some(2))]);
        assert_eq!(lru.keys(), vec![4, 3]);
    }

    #[test]
    fn capacity_one_and_zero() {
        let mut one = Lru::new(1);
        assert_eq!(
            run(&mut one, &[1, 1, 2, 1]),
            vec![(false, None), (true, None), (false, Some(1)), (false, Some(2))]
        );
        let mut zero = Lru::new(0);
        assert_eq!(run(&mut zero, &[1, 1]), vec![(false, None), (false, None)]);
        assert_eq!(zero.len(), 0);
    }

    #[test]
    fn insert_aged_places_a_block_by_its_last_access() {
        let mut lru = Lru::new(4);
        run(&mut lru, &[1, 2, 3]);
        // Key 9 was last accessed between 1 and 2: it goes just behind 2.
        assert_eq!(lru.insert_aged(&Access::read(9, 0), Some(2)), None);
        assert_eq!(lru.keys(), vec![3, 2, 9, 1]);
        // Full: the oldest (1) leaves, and 8 goes behind 3.
        assert_eq!(lru.insert_aged(&Access::read(8, 0), Some(3)), Some(1));
        assert_eq!(lru.keys(), vec![3, 8, 2, 9]);
        // Older than all (behind the tail, which leaves): it becomes the tail.
        assert_eq!(lru.insert_aged(&Access::read(7, 0), Some(9)), Some(9));
        assert_eq!(lru.keys(), vec![3, 8, 2, 7]);
        // No younger block: the newest.
        assert_eq!(lru.insert_aged(&Access::read(6, 0), None), Some(7));
        assert_eq!(lru.keys(), vec![6, 3, 8, 2]);
        for k in [6, 3, 8, 2] {
            assert!(lru.contains(k));
        }
        assert!(!lru.contains(7) && !lru.contains(9) && !lru.contains(1));
    }

    #[test]
    fn insert_of_resident_key_is_a_hit() {
        let mut lru = Lru::new(2);
        run(&mut lru, &[1, 2]);
        assert_eq!(lru.insert(&Access::read(1, 2)), None);
        assert_eq!(lru.keys(), vec![1, 2]);
    }

    /// The obvious O(n) LRU: a vector ordered from most to least recent.
    fn naive_lru(keys: &[u64], capacity: usize) -> Vec<(bool, Option<u64>)> {
        let mut order: Vec<u64> = Vec::new();
        keys.iter()
            .map(|&k| {
                if let Some(pos) = order.iter().position(|&x| x == k) {
                    order.remove(pos);
                    order.insert(0, k);
                    (true, None)
                } else {
                    let evicted = if order.len() == capacity { order.pop() } else { None };
                    order.insert(0, k);
                    (false, evicted)
                }
            })
            .collect()
    }

    #[test]
    fn randomized_differential_against_naive_lru() {
        for &(capacity, universe) in &[(1usize, 3u64), (7, 20), (64, 100), (200, 1000)] {
            let keys = skewed_keys(20_000, universe, 88172645463325252 ^ capacity as u64);
            let mut lru = Lru::new(capacity);
            let got = run(&mut lru, &keys);
            assert_eq!(got, naive_lru(&keys, capacity), "capacity {capacity}");
            assert!(misses(&got) > 0);
        }
    }

    #[test]
    fn memory_is_thirty_two_bytes_per_block() {
        // 16 bytes of node and 16 of index per block (the index rounds up to whole groups).
        assert_eq!(Lru::new(100_000).memory_bytes(), 1_600_000 + 25_001 * 64);
    }
}
