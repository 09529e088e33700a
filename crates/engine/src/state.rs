//! The in-memory cache state under the engine's one global lock (thesis 5.2 uses one global
//! lock too; here no I/O is done while holding it): the block map (volume block → cache
//! block), per-cache-block pins, the free list, and the replacement and admission policies.
//!
//! A cache block is *mapped* (the map points at it) or not, and *pinned* by every request
//! doing I/O on it (thesis 5.1's block reference count). It returns to the free list only when
//! neither, so eviction racing with a read hit never lets the block be reused under the reader.

use crate::layout::MapEntry;
use ember_policy::{Access, Admission, Replacement, NEVER};
use ember_trace::Op;
use std::collections::HashMap;

/// One map entry in memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    /// Cache block holding the data.
    pub cache_block: u32,
    /// Virtual time of the last access (orders checkpoint entries, coldest first).
    pub last: u64,
}

/// The map, the allocator and the policies.
pub(crate) struct CacheState {
    map: HashMap<u64, Slot>,
    pins: Vec<u32>,
    mapped: Vec<bool>,
    free: Vec<u32>,
    /// The replacement order; holds exactly the keys of the map.
    pub replacement: Box<dyn Replacement>,
    /// The admission sieve.
    pub admission: Box<dyn Admission>,
    vtime: u64,
}

/// Outcome of an allocation.
pub(crate) struct Allocation {
    /// The cache block, pinned and mapped, or None if no block could be freed.
    pub cache_block: Option<u32>,
    /// Keys evicted to make room.
    pub evicted: Option<u64>,
}

impl CacheState {
    /// An empty cache of `blocks` cache blocks.
    pub fn new(
        blocks: u32,
        replacement: Box<dyn Replacement>,
        admission: Box<dyn Admission>,
    ) -> Self {
        let n = blocks as usize;
        Self {
            map: HashMap::new(),
            pins: vec![0; n],
            mapped: vec![false; n],
            free: (0..blocks).rev().collect(),
            replacement,
            admission,
            vtime: 0,
        }
    }

    /// Load checkpoint entries (coldest first), already validated. Rebuilds the free list.
    pub fn load(&mut self, entries: &[MapEntry], time_ns: u64) {
        for e in entries {
            let acc = self.access(e.key, Op::Read, time_ns);
            if let Some(victim) = self.replacement.insert(&acc) {
                // Only if the policy holds fewer blocks than the device: drop the victim.
                if let Some(s) = self.map.remove(&victim) {
                    self.mapped[s.cache_block as usize] = false;
                }
            }
            self.map.insert(e.key, Slot { cache_block: e.cache_block, last: acc.vtime });
            self.mapped[e.cache_block as usize] = true;
        }
        let mapped = &self.mapped;
        self.free = (0..mapped.len() as u32).rev().filter(|&c| !mapped[c as usize]).collect();
    }

    /// The next access record (advances virtual time).
    pub fn access(&mut self, key: u64, op: Op, time_ns: u64) -> Access {
        let vtime = self.vtime;
        self.vtime += 1;
        Access { key, time_ns, op, vtime, next_vtime: NEVER }
    }

    /// Resident blocks.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Cache block of `key`, if resident (no side effects).
    pub fn get(&self, key: u64) -> Option<u32> {
        self.map.get(&key).map(|s| s.cache_block)
    }

    /// On a miss: ask the admission sieve, telling it the occupancy first (OCF's nhit
    /// promotes everything below its trigger occupancy).
    pub fn admit(&mut self, acc: &Access) -> bool {
        self.admission.set_occupancy(self.map.len(), self.pins.len());
        self.admission.admit(acc)
    }

    /// A hit: tell the replacement policy, pin and return the cache block.
    pub fn hit_pin(&mut self, acc: &Access) -> Option<u32> {
        let slot = self.map.get_mut(&acc.key)?;
        slot.last = acc.vtime;
        let c = slot.cache_block;
        self.replacement.lookup(acc);
        self.pins[c as usize] += 1;
        Some(c)
    }

    /// Allocate a cache block for the missed `acc.key`, evicting if the policy says so. The
    /// block comes back mapped and pinned; its content is written by the caller before it
    /// releases the block's stripe lock.
    pub fn allocate(&mut self, acc: &Access) -> Allocation {
        let evicted = self.replacement.insert(acc);
        if let Some(v) = evicted {
            self.unmap(v);
        }
        match self.free.pop() {
            Some(c) => {
                self.map.insert(acc.key, Slot { cache_block: c, last: acc.vtime });
                self.mapped[c as usize] = true;
                self.pins[c as usize] = 1;
                Allocation { cache_block: Some(c), evicted }
            }
            None => {
                // Every free block is still pinned by readers of evicted keys.
                self.replacement.remove(acc.key);
                Allocation { cache_block: None, evicted }
            }
        }
    }

    fn unmap(&mut self, key: u64) -> bool {
        match self.map.remove(&key) {
            Some(s) => {
                let c = s.cache_block as usize;
                self.mapped[c] = false;
                if self.pins[c] == 0 {
                    self.free.push(s.cache_block);
                }
                true
            }
            None => false,
        }
    }

    /// Drop `key` from the map and the policy (TRIM, partial overwrite, failed I/O).
    pub fn invalidate(&mut self, key: u64) -> bool {
        if self.unmap(key) {
            self.replacement.remove(key);
            true
        } else {
            false
        }
    }

    /// Invalidate every resident key for which `pred` holds; returns how many.
    pub fn invalidate_where(&mut self, pred: impl Fn(u64) -> bool) -> u64 {
        let keys: Vec<u64> = self.map.keys().copied().filter(|&k| pred(k)).collect();
        keys.iter().filter(|&&k| self.invalidate(k)).count() as u64
    }

    /// Invalidate `key` only if it still maps to `cache_block` (it may have been evicted).
    pub fn invalidate_if(&mut self, key: u64, cache_block: u32) -> bool {
        if self.get(key) == Some(cache_block) {
            self.invalidate(key)
        } else {
            false
        }
    }

    /// Release one pin; the block is freed if it is no longer mapped.
    pub fn unpin(&mut self, cache_block: u32) {
        let c = cache_block as usize;
        self.pins[c] -= 1;
        if self.pins[c] == 0 && !self.mapped[c] {
            self.free.push(cache_block);
        }
    }

    /// The whole map as checkpoint entries, coldest first.
    pub fn entries(&self) -> Vec<MapEntry> {
        let mut v: Vec<(u64, MapEntry)> = self
            .map
            .iter()
            .map(|(&key, s)| (s.last, MapEntry { key, cache_block: s.cache_block, flags: 0 }))
            .collect();
        v.sort_unstable_by_key(|&(last, e)| (last, e.key));
        v.into_iter().map(|(_, e)| e).collect()
    }

    /// Free cache blocks (for tests and invariants).
    #[cfg(test)]
    pub fn free_len(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_policy::admission::Aod;
    use ember_policy::replacement::Lru;

    fn state(n: u32) -> CacheState {
        CacheState::new(n, Box::new(Lru::new(n as usize)), Box::new(Aod))
    }

    #[test]
    fn eviction_of_a_pinned_block_defers_its_reuse() {
        let mut st = state(2);
        let a = st.access(1, Op::Read, 0);
        let ca = st.allocate(&a).cache_block.unwrap();
        st.unpin(ca);
        let b = st.access(2, Op::Read, 0);
        let cb = st.allocate(&b).cache_block.unwrap();
        st.unpin(cb);
        // A reader pins key 1's block; then key 3 evicts key 1 (LRU).
        let r = st.access(2, Op::Read, 0);
        st.hit_pin(&r).unwrap(); // key 2 becomes most recent, pinned
        let r1 = st.access(1, Op::Read, 0);
        let pinned = st.hit_pin(&r1).unwrap();
        assert_eq!(pinned, ca);
        let c = st.access(3, Op::Read, 0);
        let alloc = st.allocate(&c);
        assert_eq!(alloc.evicted, Some(2), "LRU victim is key 2 (key 1 was touched after it)");
        // Key 2's block is pinned too, so nothing is free: the allocation is refused.
        assert_eq!(alloc.cache_block, None);
        assert!(!st.replacement.contains(3));
        assert_eq!(st.free_len(), 0);
        st.unpin(cb); // the key-2 reader finishes: its block is free now
        assert_eq!(st.free_len(), 1);
        let c = st.access(3, Op::Read, 0);
        let alloc = st.allocate(&c);
        assert_eq!(alloc.evicted, None, "key 2's eviction already made room in the policy");
        assert_eq!(alloc.cache_block, Some(cb), "the freed block, not key 1's pinned one");
        st.unpin(cb);
        st.unpin(pinned);
        assert_eq!(st.free_len(), 0, "key 1 is still mapped, so its block stays in use");
        assert_eq!(st.len(), 2);
        let d = st.access(4, Op::Read, 0);
        let alloc = st.allocate(&d);
        assert_eq!(alloc.evicted, Some(1));
        assert_eq!(alloc.cache_block, Some(ca), "key 1's block, unpinned now, is reused");
    }

    #[test]
    fn entries_are_coldest_first_and_load_round_trips() {
        let mut st = state(4);
        for k in [10u64, 20, 30] {
            let a = st.access(k, Op::Read, 0);
            let c = st.allocate(&a).cache_block.unwrap();
            st.unpin(c);
        }
        let a = st.access(10, Op::Read, 0);
        let c = st.hit_pin(&a).unwrap();
        st.unpin(c);
        let e = st.entries();
        assert_eq!(e.iter().map(|e| e.key).collect::<Vec<_>>(), vec![20, 30, 10]);
        let mut st2 = state(4);
        st2.load(&e, 0);
        assert_eq!(st2.len(), 3);
        assert_eq!(st2.free_len(), 1);
        assert_eq!(st2.get(10), st.get(10));
        // LRU order survived: the next eviction takes key 20.
        let a = st2.access(40, Op::Read, 0);
        let c = st2.allocate(&a).cache_block.unwrap();
        st2.unpin(c);
        let a = st2.access(50, Op::Read, 0);
        assert_eq!(st2.allocate(&a).evicted, Some(20));
    }
}
