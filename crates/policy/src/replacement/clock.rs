//! CLOCK: FIFO with a second chance (Corbató's clock), with an n-bit access counter.
//!
//! Blocks sit in a circular order; a hit sets (increments, saturating at `2^bits - 1`) the
//! block's counter. To evict, the hand looks at the oldest block: a non-zero counter is
//! decremented and the block passes behind the hand (it becomes the newest); the first block
//! found at zero is evicted. New blocks enter with counter `init_freq`.
//!
//! Defaults match libCacheSim's `Clock` (`Clock.c`: `n-bit-counter=1`, `init-freq=0`), and the
//! order is the same: libCacheSim keeps the clock as a list whose tail is the hand and
//! "passes" a block by moving it to the head, which is exactly what this implementation does,
//! so miss counts are equal for every setting.

use super::params::{Domain, Param};
use super::queue::Queue;
use super::spec::{FromSpec, Spec};
use super::Replacement;
use crate::keymap::Bucket;
use crate::slab::NIL;
use crate::Access;

/// CLOCK's parameters: the counter's width and new blocks' counter (libCacheSim's
/// `n-bit-counter` and `init-freq`).
pub const PARAMS: &[Param] = &[
    Param {
        name: "bits",
        domain: Domain::Int { min: 1, max: 7 },
        default: 1.0,
        help: "bits of the access counter (1: one reference bit)",
    },
    Param {
        name: "init",
        domain: Domain::Int { min: 0, max: 127 },
        default: 0.0,
        help: "counter of a new block (clamped to the counter's maximum)",
    },
];

impl FromSpec for Clock {
    fn from_spec(capacity: usize, spec: &Spec) -> Self {
        Self::with_counter(capacity, spec.value("bits", 1.0) as u32, spec.value("init", 0.0) as u8)
    }
}

/// CLOCK replacement with an n-bit counter per block.
#[derive(Clone, Debug)]
pub struct Clock {
    q: Queue<u8>,
    max_freq: u8,
    init_freq: u8,
}

impl Clock {
    /// CLOCK with one reference bit and new blocks unreferenced (libCacheSim's default).
    pub fn new(capacity: usize) -> Self {
        Self::with_counter(capacity, 1, 0)
    }

    /// CLOCK with a `bits`-bit counter (1..=7) and new blocks entering at `init_freq`
    /// (clamped to the counter's maximum).
    pub fn with_counter(capacity: usize, bits: u32, init_freq: u8) -> Self {
        let bits = bits.clamp(1, 7);
        let max_freq = ((1u32 << bits) - 1) as u8;
        Self { q: Queue::with_capacity(capacity), max_freq, init_freq: init_freq.min(max_freq) }
    }

    /// Resident keys from newest (just behind the hand) to oldest (under the hand).
    pub fn keys(&self) -> Vec<u64> {
        self.q.keys()
    }

    /// The counter of resident `key`, or `None` (for tests and inspection).
    pub fn counter(&self, key: u64) -> Option<u8> {
        self.q.find(key).map(|i| self.q.node(i).meta)
    }

    #[inline(always)]
    fn hit(&mut self, i: u32) {
        let max = self.max_freq;
        let f = &mut self.q.node_mut(i).meta;
        if *f < max {
            *f += 1;
        }
    }

    #[inline]
    fn insert_absent(&mut self, bucket: Bucket, key: u64) -> Option<u64> {
        if !self.q.is_full() {
            self.q.push_new_at(bucket, key, self.init_freq);
            return None;
        }
        if self.q.capacity() == 0 {
            return None;
        }
        loop {
            let hand = self.q.list.tail;
            let f = self.q.node(hand).meta;
            if f == 0 {
                return Some(self.q.replace_at(hand, bucket, key, self.init_freq));
            }
            self.q.node_mut(hand).meta = f - 1;
            self.q.move_to_head(hand);
        }
    }
}

impl Replacement for Clock {
    fn name(&self) -> &'static str {
        "clock"
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
                self.hit(i);
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
                self.q.remove_node(i);
                true
            }
            None => false,
        }
    }

    /// The hand as alone, past the blocks the filter refuses: those keep their place and
    /// their counter (this allocation may not take them, so it does not age them either).
    /// An accepted block with a non-zero counter is decremented and passes behind the hand;
    /// the first accepted block at zero leaves. With every block accepted, the same victim
    /// and the same order as CLOCK alone.
    fn evict_where(&mut self, ok: &mut dyn FnMut(u64) -> bool) -> Option<Option<u64>> {
        let mut i = self.q.list.tail;
        while i != NIL {
            let n = self.q.node(i);
            let (key, f, prev) = (n.key, n.meta, n.prev);
            if !ok(key) {
                i = prev;
                continue;
            }
            if f == 0 {
                return Some(Some(self.q.remove_node(i)));
            }
            self.q.node_mut(i).meta = f - 1;
            self.q.move_to_head(i);
            // Passed behind the hand: the walk goes on towards the head, where the passed
            // blocks now stand; the head itself comes round again.
            i = if prev == NIL { i } else { prev };
        }
        Some(None)
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        match self.q.lookup(access.key) {
            Ok(i) => {
                self.hit(i);
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
    fn referenced_block_gets_a_second_chance() {
        // 1 2 3 fill; 1 is hit; 4 finds 1 referenced under the hand, clears it, moves it
        // behind the hand and evicts 2 instead.
        let mut c = Clock::new(3);
        let out = run(&mut c, &[1, 2, 3, 1, 4]);
        assert_eq!(out[4], (false, Some(2)));
        assert_eq!(c.keys(), vec![4, 1, 3]);
        assert_eq!(c.counter(1), Some(0));
        // 5: hand at 3 (unreferenced) → evict 3.
        assert_eq!(run(&mut c, &[5]), vec![(false, Some(3))]);
    }

    #[test]
    fn all_referenced_degrades_to_fifo() {
        let mut c = Clock::new(2);
        let out = run(&mut c, &[1, 2, 1, 2, 3]);
        // Both referenced: the hand clears both, comes back to 1 and evicts it.
        assert_eq!(out[4], (false, Some(1)));
    }

    #[test]
    fn two_bit_counter_survives_two_sweeps() {
        let mut c = Clock::with_counter(2, 2, 0);
        run(&mut c, &[1, 1, 1, 1, 2]);
        assert_eq!(c.counter(1), Some(3));
        // 3: 1 (3→2) passes, 2 evicted.
        assert_eq!(run(&mut c, &[3]), vec![(false, Some(2))]);
        assert_eq!(c.counter(1), Some(2));
        // 4: 1 (2→1) passes, 3 evicted; 5: 1 (1→0) passes, 4 evicted; 6: 1 evicted.
        assert_eq!(
            run(&mut c, &[4, 5, 6]),
            vec![(false, Some(3)), (false, Some(4)), (false, Some(1))]
        );
    }

    #[test]
    fn remove_and_capacity_one() {
        let mut c = Clock::new(1);
        assert_eq!(
            run(&mut c, &[1, 1, 2, 2, 3]),
            vec![(false, None), (true, None), (false, Some(1)), (true, None), (false, Some(2))]
        );
        assert!(c.remove(3));
        assert!(!c.contains(3));
        assert_eq!(run(&mut c, &[4]), vec![(false, None)]);
    }
}
