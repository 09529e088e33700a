//! Belady's OPT (Belady, IBM Systems Journal 1966; MIN): evict the resident block whose next
//! access lies furthest in the future. An oracle policy for simulation: it reads
//! [`Access::next_vtime`], which the simulator fills from the whole trace.
//!
//! Blocks never accessed again ([`crate::NEVER`]) are evicted first; ties among them are
//! broken arbitrarily, which cannot change the miss count (none of them is ever hit again),
//! and no two resident blocks share a finite next access. Like libCacheSim's `Belady`
//! (`Belady.c`: a max-priority queue on `next_access_vtime`, the requested object always
//! inserted), every miss is inserted, even one never accessed again, so miss counts equal
//! libCacheSim's exactly.
//!
//! Structure: an indexed binary max-heap over the resident slots, keyed by next access; a
//! hit raises its block's key (the next access moves later), so it sifts towards the root.

use super::Replacement;
use crate::keymap::KeyMap;
use crate::slab::NIL;
use crate::Access;

/// Belady's optimal replacement (needs `next_vtime` in every access).
#[derive(Clone, Debug)]
pub struct Opt {
    map: KeyMap,
    keys: Vec<u64>,
    next: Vec<u64>,
    /// Heap position of each slot.
    pos: Vec<u32>,
    /// Slots, as a max-heap on `next`.
    heap: Vec<u32>,
    /// Freed slots.
    free: Vec<u32>,
    c: usize,
}

impl Opt {
    /// An empty OPT cache of `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Self {
            map: KeyMap::with_entries(capacity),
            keys: Vec::with_capacity(capacity),
            next: Vec::with_capacity(capacity),
            pos: Vec::with_capacity(capacity),
            heap: Vec::with_capacity(capacity),
            free: Vec::new(),
            c: capacity,
        }
    }

    /// The next access of resident `key`, as last reported.
    pub fn next_access(&self, key: u64) -> Option<u64> {
        self.find(key).map(|i| self.next[i as usize])
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<u32> {
        let keys = &self.keys;
        self.map.get(key, |s| keys[s as usize])
    }

    #[inline(always)]
    fn prio(&self, h: usize) -> u64 {
        self.next[self.heap[h] as usize]
    }

    #[inline(always)]
    fn set(&mut self, h: usize, slot: u32) {
        self.heap[h] = slot;
        self.pos[slot as usize] = h as u32;
    }

    fn sift_up(&mut self, mut h: usize) {
        let slot = self.heap[h];
        let p = self.next[slot as usize];
        while h > 0 {
            let parent = (h - 1) / 2;
            if self.prio(parent) >= p {
                break;
            }
            let ps = self.heap[parent];
            self.set(h, ps);
            h = parent;
        }
        self.set(h, slot);
    }

    fn sift_down(&mut self, mut h: usize) {
        let n = self.heap.len();
        let slot = self.heap[h];
        let p = self.next[slot as usize];
        loop {
            let l = 2 * h + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.prio(r) > self.prio(l) { r } else { l };
            if self.prio(c) <= p {
                break;
            }
            let cs = self.heap[c];
            self.set(h, cs);
            h = c;
        }
        self.set(h, slot);
    }

    /// Remove the heap entry at position `h`.
    fn heap_remove(&mut self, h: usize) {
        let last = self.heap.len() - 1;
        let moved = self.heap[last];
        self.heap.pop();
        if h < last {
            self.set(h, moved);
            self.sift_down(h);
            self.sift_up(self.pos[moved as usize] as usize);
        }
    }

    #[inline]
    fn hit(&mut self, i: u32, next: u64) {
        let old = self.next[i as usize];
        self.next[i as usize] = next;
        let h = self.pos[i as usize] as usize;
        if next >= old {
            self.sift_up(h);
        } else {
            self.sift_down(h);
        }
    }

    fn insert_missing(&mut self, access: &Access) -> Option<u64> {
        if self.c == 0 {
            return None;
        }
        let (slot, evicted) = if self.heap.len() >= self.c {
            let victim = self.heap[0];
            let old = self.keys[victim as usize];
            self.map.remove(old, victim);
            self.heap_remove(0);
            (victim, Some(old))
        } else if let Some(s) = self.free.pop() {
            (s, None)
        } else {
            self.keys.push(0);
            self.next.push(0);
            self.pos.push(NIL);
            ((self.keys.len() - 1) as u32, None)
        };
        self.keys[slot as usize] = access.key;
        self.next[slot as usize] = access.next_vtime;
        self.map.insert(access.key, slot);
        self.heap.push(slot);
        let h = self.heap.len() - 1;
        self.pos[slot as usize] = h as u32;
        self.sift_up(h);
        evicted
    }
}

impl Replacement for Opt {
    fn name(&self) -> &'static str {
        "opt"
    }

    fn capacity(&self) -> usize {
        self.c
    }

    #[inline]
    fn len(&self) -> usize {
        self.heap.len()
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        match self.find(access.key) {
            Some(i) => {
                self.hit(i, access.next_vtime);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.lookup(access) {
            return None;
        }
        self.insert_missing(access)
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.find(key) {
            Some(i) => {
                self.map.remove(key, i);
                let h = self.pos[i as usize] as usize;
                self.heap_remove(h);
                self.free.push(i);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        match self.find(access.key) {
            Some(i) => {
                self.hit(i, access.next_vtime);
                (true, None)
            }
            None => (false, self.insert_missing(access)),
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.c * (8 + 8 + 4 + 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::{misses, run_with_oracle};

    #[test]
    fn textbook_reference_string() {
        // Silberschatz et al., Operating System Concepts, the reference string
        // 7 0 1 2 0 3 0 4 2 3 0 3 2 1 2 0 1 7 0 1 with 3 frames: OPT has 9 page faults.
        let refs = [7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1];
        let mut opt = Opt::new(3);
        let out = run_with_oracle(&mut opt, &refs);
        assert_eq!(misses(&out), 9);
        // The fourth reference (2) evicts 7, whose next use is furthest (position 17).
        assert_eq!(out[3], (false, Some(7)));
    }

    #[test]
    fn never_accessed_again_goes_first() {
        let mut opt = Opt::new(2);
        let out = run_with_oracle(&mut opt, &[1, 2, 3, 1]);
        // At 3: 1 is used again at 3, 2 never → 2 evicted.
        assert_eq!(out[2], (false, Some(2)));
        assert_eq!(out[3], (true, None));
    }

    #[test]
    fn opt_never_loses_to_lru() {
        let mut x: u64 = 12345;
        let keys: Vec<u64> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % 60
            })
            .collect();
        for c in [1, 5, 20, 59] {
            let o = misses(&run_with_oracle(&mut Opt::new(c), &keys));
            let l = misses(&run_with_oracle(&mut crate::replacement::Lru::new(c), &keys));
            assert!(o <= l, "capacity {c}: opt {o} > lru {l}");
            assert!(o >= 60, "every key's first access is a miss");
        }
    }

    #[test]
    fn remove_keeps_the_heap_consistent() {
        let refs = [1, 2, 3, 4, 1, 2, 3, 4];
        let next = crate::replacement::next_vtimes(&refs);
        let mut opt = Opt::new(4);
        for t in 0..4 {
            let mut a = Access::read(refs[t], t as u64);
            a.next_vtime = next[t];
            opt.access(&a);
        }
        assert!(opt.remove(4));
        assert!(!opt.remove(4));
        assert_eq!(opt.len(), 3);
        // Room for 9 (never again); then 10 evicts 9, the block with no future.
        let mut a = Access::read(9, 4);
        assert_eq!(opt.access(&a), (false, None));
        a = Access::read(10, 5);
        assert_eq!(opt.access(&a), (false, Some(9)));
        assert_eq!(opt.next_access(1), Some(4));
    }

    #[test]
    fn capacity_one() {
        let out = run_with_oracle(&mut Opt::new(1), &[1, 2, 1]);
        assert_eq!(out, vec![(false, None), (false, Some(1)), (false, Some(2))]);
    }
}
