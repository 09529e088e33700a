//! FIFO: evict the block inserted longest ago; hits do not change the order.
//!
//! Matches libCacheSim's `FIFO` exactly (`FIFO.c`: insert at head, evict the tail, hits
//! untouched). Memory as [`super::Lru`]: 32 bytes per block of capacity.

use super::queue::Queue;
use super::Replacement;
use crate::keymap::Bucket;
use crate::Access;

/// First-in first-out replacement.
#[derive(Clone, Debug)]
pub struct Fifo {
    q: Queue<()>,
}

impl Fifo {
    /// An empty FIFO cache of `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Self { q: Queue::with_capacity(capacity) }
    }

    /// Resident keys from newest to oldest (O(n); for tests and inspection).
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

impl Replacement for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
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
        self.q.find(access.key).is_some()
    }

    #[inline]
    fn insert(&mut self, access: &Access) -> Option<u64> {
        self.access(access).1
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

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        match self.q.lookup(access.key) {
            Ok(_) => (true, None),
            Err(bucket) => (false, self.insert_absent(bucket, access.key)),
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.q.map.prefetch(key);
    }

    fn memory_bytes(&self) -> usize {
        self.q.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::run;

    #[test]
    fn evicts_first_inserted_despite_hits() {
        // a b c a d, capacity 3: a was hit but is still the oldest, so d evicts a.
        let mut fifo = Fifo::new(3);
        let out = run(&mut fifo, &[1, 2, 3, 1, 4, 1]);
        assert_eq!(
            out,
            vec![
                (false, None),
                (false, None),
                (false, None),
                (true, None),
                (false, Some(1)),
                (false, Some(2))
            ]
        );
        assert_eq!(fifo.keys(), vec![1, 4, 3]);
    }

    #[test]
    fn remove_and_capacity_one() {
        let mut fifo = Fifo::new(1);
        assert_eq!(run(&mut fifo, &[5, 5, 6]), vec![(false, None), (true, None), (false, Some(5))]);
        assert!(fifo.remove(6));
        assert!(fifo.is_empty());
        assert_eq!(run(&mut fifo, &[7]), vec![(false, None)]);
    }
}
