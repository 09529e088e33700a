//! SIEVE (Zhang et al., NSDI 2024): a FIFO queue with a visited bit and a hand that moves
//! from the oldest block towards the newest, keeping visited blocks in place.
//!
//! A hit sets the block's visited bit. To evict, the hand (starting where it stopped last
//! time, or at the tail) clears visited bits while moving towards the head, wrapping to the
//! tail, and evicts the first unvisited block; it then rests on that block's newer neighbour.
//! New blocks enter at the head unvisited. Unlike CLOCK, survivors are not moved, so new
//! blocks and old survivors stay apart.
//!
//! Matches libCacheSim's `Sieve` exactly (`Sieve.c`: `freq` set to 1 on hit, hand kept in
//! `pointer`, reset to the victim's `prev`; removal of the block under the hand moves the
//! hand to its newer neighbour).

use super::queue::Queue;
use super::Replacement;
use crate::keymap::Bucket;
use crate::slab::NIL;
use crate::Access;

/// SIEVE replacement.
#[derive(Clone, Debug)]
pub struct Sieve {
    q: Queue<bool>,
    /// The node the hand rests on, or NIL for "start at the tail".
    hand: u32,
}

impl Sieve {
    /// An empty SIEVE cache of `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Self { q: Queue::with_capacity(capacity), hand: NIL }
    }

    /// Resident keys from newest to oldest.
    pub fn keys(&self) -> Vec<u64> {
        self.q.keys()
    }

    /// The key under the hand, if it rests on one (None: it will start at the tail).
    pub fn hand(&self) -> Option<u64> {
        (self.hand != NIL).then(|| self.q.node(self.hand).key)
    }

    /// Whether resident `key` is marked visited.
    pub fn visited(&self, key: u64) -> Option<bool> {
        self.q.find(key).map(|i| self.q.node(i).meta)
    }

    #[inline]
    fn insert_absent(&mut self, bucket: Bucket, key: u64) -> Option<u64> {
        if !self.q.is_full() {
            self.q.push_new_at(bucket, key, false);
            return None;
        }
        if self.q.capacity() == 0 {
            return None;
        }
        let mut i = if self.hand == NIL { self.q.list.tail } else { self.hand };
        loop {
            let n = self.q.node_mut(i);
            if !n.meta {
                break;
            }
            n.meta = false;
            i = if n.prev == NIL { self.q.list.tail } else { n.prev };
        }
        self.hand = self.q.node(i).prev;
        Some(self.q.replace_at(i, bucket, key, false))
    }
}

impl Replacement for Sieve {
    fn name(&self) -> &'static str {
        "sieve"
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
                self.q.node_mut(i).meta = true;
                true
            }
            None => false,
        }
    }

    #[inline]
    fn insert(&mut self, access: &Access) -> Option<u64> {
        self.access(access).1
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.q.find(key) {
            Some(i) => {
                if i == self.hand {
                    self.hand = self.q.node(i).prev;
                }
                self.q.remove_node(i);
                true
            }
            None => false,
        }
    }

    /// The hand as alone, past the blocks the filter refuses: those keep their visited bit
    /// (this allocation may not take them, so it does not clear it). An accepted visited
    /// block has its bit cleared; the first accepted unvisited block leaves, and the hand
    /// rests on its newer neighbour. With every block accepted, the same victim and hand as
    /// SIEVE alone.
    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        let len = self.q.len();
        if len == 0 {
            return Some(None);
        }
        let mut i = if self.hand == NIL { self.q.list.tail } else { self.hand };
        let (mut accepted, mut steps) = (false, 0usize);
        loop {
            let n = self.q.node(i);
            let (key, visited, prev) = (n.key, n.meta, n.prev);
            if ok(key) {
                if !visited {
                    break;
                }
                accepted = true;
                self.q.node_mut(i).meta = false;
            }
            steps += 1;
            if steps >= len && !accepted {
                // A whole round and the filter accepted nothing: nothing changed.
                return Some(None);
            }
            i = if prev == NIL { self.q.list.tail } else { prev };
        }
        self.hand = self.q.node(i).prev;
        Some(Some(self.q.remove_node(i)))
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        match self.q.lookup(access.key) {
            Ok(i) => {
                self.q.node_mut(i).meta = true;
                (true, None)
            }
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
    fn hand_skips_visited_and_keeps_position() {
        // Fill 1 2 3 4 (tail 1 .. head 4); visit 1 and 3.
        let mut s = Sieve::new(4);
        run(&mut s, &[1, 2, 3, 4, 1, 3]);
        // 5: hand starts at the tail: 1 visited → cleared, move to 2: unvisited → evict 2.
        // Survivor 1 stays at the tail (not moved, unlike CLOCK); hand rests on 3.
        assert_eq!(run(&mut s, &[5]), vec![(false, Some(2))]);
        assert_eq!(s.keys(), vec![5, 4, 3, 1]);
        assert_eq!(s.visited(1), Some(false));
        assert_eq!(s.hand(), Some(3));
        // 6: hand at 3 (visited) → clear, move to 4: evict 4; hand rests on 5.
        assert_eq!(run(&mut s, &[6]), vec![(false, Some(4))]);
        assert_eq!(s.hand(), Some(5));
        // 7: 5 unvisited → evicted; hand rests on 6.
        assert_eq!(run(&mut s, &[7]), vec![(false, Some(5))]);
        assert_eq!(s.hand(), Some(6));
        // 8: 6 unvisited → evicted; the hand rests on 7.
        assert_eq!(run(&mut s, &[8]), vec![(false, Some(6))]);
        assert_eq!(s.hand(), Some(7));
        assert_eq!(s.keys(), vec![8, 7, 3, 1]);
    }

    #[test]
    fn hand_wraps_when_everything_is_visited() {
        let mut s = Sieve::new(3);
        run(&mut s, &[1, 2, 3, 1, 2, 3]);
        // All visited: the hand clears 1, 2, 3, wraps to the tail and evicts 1.
        assert_eq!(run(&mut s, &[4]), vec![(false, Some(1))]);
        assert_eq!(s.visited(2), Some(false));
        assert_eq!(s.hand(), Some(2));
    }

    #[test]
    fn removing_the_block_under_the_hand_moves_the_hand() {
        let mut s = Sieve::new(3);
        run(&mut s, &[1, 2, 3, 1, 4]); // evicts 2, hand on 3
        assert_eq!(s.hand(), Some(3));
        assert!(s.remove(3));
        assert_eq!(s.hand(), Some(4));
        assert!(!s.remove(3));
        assert_eq!(run(&mut s, &[5, 6]), vec![(false, None), (false, Some(4))]);
    }

    #[test]
    fn capacity_one() {
        let mut s = Sieve::new(1);
        assert_eq!(
            run(&mut s, &[1, 1, 2, 3]),
            vec![(false, None), (true, None), (false, Some(1)), (false, Some(2))]
        );
    }
}
