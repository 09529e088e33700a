//! Resident blocks ordered by access count, first in first out among equal counts, in
//! constant time per operation: the O(1) LFU of Shah, Mitra & Matani ("An O(1) algorithm for
//! implementing the LFU cache eviction scheme", 2010), the state of LFU and of LeCaR's LFU
//! expert.
//!
//! Each block is a slab node indexed by a [`KeyMap`]; the nodes of one count form a
//! *frequency bucket*, a [`List`] whose tail is the block that reached the count first. The
//! non-empty buckets form a doubly-linked list of their own in increasing count. A count only
//! ever grows by one (a hit) or starts at one (an insertion), so the bucket a block moves to
//! is its own bucket's successor or a new bucket linked right after it, and a new block's is
//! the lowest bucket or a new one before it: no search, no allocation after construction
//! (the bucket pool has a bucket per block of capacity, and one more for the moment a hit
//! opens its new bucket before its old one empties).

use crate::keymap::{Bucket, KeyMap};
use crate::slab::{List, Slab, NIL};

/// One frequency bucket: the blocks of one count, and its neighbours in count order.
#[derive(Clone, Copy, Debug)]
struct Freq {
    count: u64,
    blocks: List,
    /// The bucket of the next lower count, or [`NIL`].
    lower: u32,
    /// The bucket of the next higher count, or [`NIL`].
    higher: u32,
}

const UNUSED: Freq = Freq { count: 0, blocks: List::new(), lower: NIL, higher: NIL };

/// Resident blocks in frequency buckets (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct FrequencyBuckets {
    map: KeyMap,
    /// Each node's metadata is its bucket's slot in `buckets`.
    slab: Slab<u32>,
    buckets: Vec<Freq>,
    /// Slots of unused buckets.
    free: Vec<u32>,
    /// The bucket of the lowest count, or [`NIL`] when empty.
    lowest: u32,
}

impl FrequencyBuckets {
    /// Room for `capacity` blocks.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let buckets = capacity + 1;
        Self {
            map: KeyMap::with_entries(capacity),
            slab: Slab::with_capacity(capacity),
            buckets: vec![UNUSED; buckets],
            free: (0..buckets as u32).rev().collect(),
            lowest: NIL,
        }
    }

    /// Blocks it holds at most.
    #[inline(always)]
    pub(crate) fn capacity(&self) -> usize {
        self.slab.capacity()
    }

    /// Blocks it holds.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.slab.live()
    }

    /// True if it holds `capacity` blocks.
    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.slab.live() >= self.slab.capacity()
    }

    /// The slot of `key` if resident, else the index bucket to insert it at; `fp` is the
    /// key's [`fingerprint`](crate::keymap::fingerprint).
    #[inline(always)]
    pub(crate) fn lookup_fp(&self, key: u64, fp: u32) -> Result<u32, Bucket> {
        let slab = &self.slab;
        self.map.find_fp(key, fp, |s| slab.key(s))
    }

    /// Start loading the index group of the key whose fingerprint is `fp`.
    #[inline(always)]
    pub(crate) fn prefetch_fp(&self, fp: u32) {
        self.map.prefetch_fp(fp);
    }

    /// The access count of resident slot `i`.
    #[inline(always)]
    pub(crate) fn count(&self, i: u32) -> u64 {
        self.buckets[self.slab.node(i).meta as usize].count
    }

    /// A bucket of `count`, linked between `lower` and `higher` (either [`NIL`]).
    #[inline(always)]
    fn open(&mut self, count: u64, lower: u32, higher: u32) -> u32 {
        // A bucket per resident block, and one more: the pool cannot run out.
        let b = self.free.pop().unwrap_or(NIL);
        debug_assert!(b != NIL, "bucket pool exhausted");
        self.buckets[b as usize] = Freq { count, blocks: List::new(), lower, higher };
        if lower == NIL {
            self.lowest = b;
        } else {
            self.buckets[lower as usize].higher = b;
        }
        if higher != NIL {
            self.buckets[higher as usize].lower = b;
        }
        b
    }

    /// Take slot `i` out of its bucket, closing the bucket if it empties.
    #[inline(always)]
    fn detach(&mut self, i: u32) {
        let b = self.slab.node(i).meta;
        let f = &mut self.buckets[b as usize];
        f.blocks.unlink(self.slab.nodes_mut(), i);
        if f.blocks.is_empty() {
            let (lower, higher) = (f.lower, f.higher);
            if lower == NIL {
                self.lowest = higher;
            } else {
                self.buckets[lower as usize].higher = higher;
            }
            if higher != NIL {
                self.buckets[higher as usize].lower = lower;
            }
            self.free.push(b);
        }
    }

    /// Put detached slot `i` at the newest end of bucket `b`.
    #[inline(always)]
    fn attach(&mut self, i: u32, b: u32) {
        self.buckets[b as usize].blocks.push_head(self.slab.nodes_mut(), i);
        self.slab.node_mut(i).meta = b;
    }

    /// A hit on resident slot `i`: its count grows by one, and it joins the newest end of
    /// the bucket of its new count.
    #[inline(always)]
    pub(crate) fn bump(&mut self, i: u32) {
        let b = self.slab.node(i).meta;
        let Freq { count, higher, .. } = self.buckets[b as usize];
        let up = if higher != NIL && self.buckets[higher as usize].count == count + 1 {
            higher
        } else {
            self.open(count + 1, b, higher)
        };
        self.detach(i);
        self.attach(i, up);
    }

    /// Move resident slot `i` to the newest end of its own bucket (its count unchanged).
    pub(crate) fn renew(&mut self, i: u32) {
        let b = self.slab.node(i).meta;
        self.buckets[b as usize].blocks.move_to_head(self.slab.nodes_mut(), i);
    }

    /// Insert absent `key` (looked up into `at`) with count 1; there must be room. Returns
    /// its slot.
    #[inline(always)]
    pub(crate) fn insert(&mut self, at: Bucket, key: u64) -> u32 {
        let i = self.slab.alloc(key, NIL);
        debug_assert!(i != NIL, "insert into a full FrequencyBuckets");
        self.map.insert_at(at, i);
        let low = self.lowest;
        let b = if low != NIL && self.buckets[low as usize].count == 1 {
            low
        } else {
            self.open(1, NIL, low)
        };
        self.attach(i, b);
        i
    }

    /// The slot of the block that reached the lowest count first.
    #[inline(always)]
    pub(crate) fn lowest_oldest(&self) -> Option<u32> {
        let low = self.lowest;
        (low != NIL).then(|| self.buckets[low as usize].blocks.tail)
    }

    /// The slot of the first block in [`FrequencyBuckets::lowest_oldest`]'s order (lowest
    /// count, then the one that reached it first) that `ok` accepts. O(blocks passed).
    pub(crate) fn lowest_oldest_where(&self, ok: &mut dyn FnMut(u64) -> bool) -> Option<u32> {
        let mut b = self.lowest;
        while b != NIL {
            let bucket = &self.buckets[b as usize];
            let mut i = bucket.blocks.tail;
            while i != NIL {
                let n = self.slab.node(i);
                if ok(n.key) {
                    return Some(i);
                }
                i = n.prev;
            }
            b = bucket.higher;
        }
        None
    }

    /// Remove resident slot `i`; returns its key.
    #[inline(always)]
    pub(crate) fn remove(&mut self, i: u32) -> u64 {
        self.detach(i);
        let key = self.slab.key(i);
        self.map.remove(key, i);
        self.slab.release(i);
        key
    }

    /// Bytes of the index, the nodes and the bucket pool.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.map.memory_bytes()
            + self.slab.memory_bytes()
            + self.buckets.len() * (std::mem::size_of::<Freq>() + 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keymap::fingerprint;

    fn insert(b: &mut FrequencyBuckets, key: u64) -> u32 {
        match b.lookup_fp(key, fingerprint(key)) {
            Err(at) => b.insert(at, key),
            Ok(i) => panic!("{key} already resident at {i}"),
        }
    }

    /// Against a model: (count, order of reaching it) per key; the victim is the lowest
    /// count, the earliest among equals.
    #[test]
    fn the_victim_is_the_lowest_count_reached_first() {
        let cap = 40;
        let mut b = FrequencyBuckets::with_capacity(cap);
        let mut model: Vec<(u64, u64, u64)> = Vec::new(); // (key, count, stamp)
        let mut stamp = 0u64;
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = if x & 1 == 0 { (x >> 8) % 30 } else { (x >> 8) % 200 };
            stamp += 1;
            match b.lookup_fp(key, fingerprint(key)) {
                Ok(i) => {
                    b.bump(i);
                    let m = model.iter_mut().find(|m| m.0 == key).map(|m| {
                        m.1 += 1;
                        m.2 = stamp;
                        m.1
                    });
                    assert_eq!(Some(b.count(i)), m);
                }
                Err(_) => {
                    if b.is_full() {
                        let v = b.lowest_oldest().map(|i| b.remove(i));
                        let (at, _) = model
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, m)| (m.1, m.2))
                            .map(|(at, m)| (at, m.0))
                            .unwrap_or((0, 0));
                        assert_eq!(v, Some(model.remove(at).0));
                    }
                    insert(&mut b, key);
                    model.push((key, 1, stamp));
                }
            }
            assert_eq!(b.len(), model.len());
        }
        // Every bucket went back to the pool or holds a block.
        assert!(b.free.len() + model.len() > cap);
    }
}
