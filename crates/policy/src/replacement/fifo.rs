//! FIFO: evict the block inserted longest ago; hits do not change the order.
//!
//! Matches libCacheSim's `FIFO` exactly (`FIFO.c`: insert at head, evict the tail, hits
//! untouched). The order is a [`KeyRing`]: keys in ring positions, no list links, so a hit
//! is one index probe and one key read, and an eviction reads the next position. Memory:
//! 31 bytes per block of capacity (16 of index, 15 of positions).

use super::Replacement;
use crate::keymap::fingerprint;
use crate::ring::KeyRing;
use crate::Access;

/// First-in first-out replacement.
#[derive(Clone, Debug)]
pub struct Fifo {
    ring: KeyRing,
}

impl Fifo {
    /// An empty FIFO cache of `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Self { ring: KeyRing::with_capacity(capacity) }
    }

    /// Resident keys from newest to oldest (O(n); for tests and inspection).
    pub fn keys(&self) -> Vec<u64> {
        self.ring.keys()
    }
}

impl Replacement for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    #[inline]
    fn len(&self) -> usize {
        self.ring.len()
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.ring.contains(key)
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        self.ring.contains(access.key)
    }

    #[inline]
    fn insert(&mut self, access: &Access) -> Option<u64> {
        self.access(access).1
    }

    fn remove(&mut self, key: u64) -> bool {
        self.ring.remove(key)
    }

    /// The oldest block the filter accepts; the blocks it refuses keep their place.
    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        let victim = self.ring.oldest_where(ok);
        if let Some(k) = victim {
            self.ring.remove(k);
        }
        Some(victim)
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.ring.prefetch_fp(fp);
        fp
    }

    /// The hint is the key's index fingerprint ([`Fifo::prefetch_hint`]).
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        match self.ring.lookup_fp(access.key, hint) {
            Ok(_) => (true, None),
            Err(_) if self.ring.capacity() == 0 => (false, None),
            Err(bucket) if self.ring.is_full() => {
                (false, Some(self.ring.replace_oldest_at(bucket, access.key)))
            }
            Err(bucket) => {
                self.ring.push_new_at(bucket, access.key);
                (false, None)
            }
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.ring.prefetch(key);
    }

    fn memory_bytes(&self) -> usize {
        self.ring.memory_bytes()
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
