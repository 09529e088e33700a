//! ARC, the Adaptive Replacement Cache (Megiddo & Modha, FAST 2003).
//!
//! Resident blocks are split into T1 (seen once recently) and T2 (seen at least twice); the
//! ghost lists B1 and B2 remember keys recently evicted from each. A miss that hits B1 grows
//! the target size `p` of T1 by `max(|B2|/|B1|, 1)`; one that hits B2 shrinks it by
//! `max(|B1|/|B2|, 1)`; such a block comes back into T2. REPLACE evicts from T1 (into B1)
//! when `|T1| > p`, or `|T1| == p` and the block was found in B2, and otherwise from T2 (into
//! B2). A miss in all four lists trims the directory to `|T1|+|B1| <= c` and
//! `|T1|+|T2|+|B1|+|B2| <= 2c` exactly as the paper's case IV.
//!
//! This follows libCacheSim's `ARC.c` decision for decision: `p` is a `f64` starting at 0
//! and capped at `c`, the deltas are computed with the ghost sizes before the hit ghost is
//! removed, REPLACE also falls back to T1 when T2 is empty, and a case-IV miss with
//! `|T1|+|B1| = c` and an empty B1 deletes T1's LRU without a ghost. With every miss
//! inserted, miss counts are equal.
//!
//! One difference by design, visible only with admission control: libCacheSim adapts `p`
//! and drops the ghost entry during the lookup, so a ghost hit that is then not admitted
//! still moves `p`; ember's lookups change nothing and ARC learns from a ghost hit in
//! [`Replacement::insert`], i.e. only for blocks actually allocated. [`Replacement::remove`]
//! drops a resident block without leaving a ghost (libCacheSim's `ARC_remove` does the same
//! for resident blocks); ghosts are kept, since an invalidation says nothing about reuse.

use super::Replacement;
use crate::keymap::{fingerprint, KeyMap};
use crate::slab::{List, Slab, NIL};
use crate::Access;

const T1: u8 = 0;
const T2: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 3;

/// Adaptive Replacement Cache.
#[derive(Clone, Debug)]
pub struct Arc {
    map: KeyMap,
    slab: Slab<u8>,
    lists: [List; 4],
    p: f64,
    c: usize,
}

impl Arc {
    /// An empty ARC cache of `capacity` blocks (plus up to `capacity` ghost keys).
    pub fn new(capacity: usize) -> Self {
        let entries = capacity * 2 + 1;
        Self {
            map: KeyMap::with_entries(entries),
            slab: Slab::with_capacity(entries),
            lists: [List::new(); 4],
            p: 0.0,
            c: capacity,
        }
    }

    /// The current target size of T1.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// Keys of T1, T2, B1 and B2, each from MRU to LRU (for tests and inspection).
    pub fn lists(&self) -> [Vec<u64>; 4] {
        let n = self.slab.nodes();
        [self.lists[0].keys(n), self.lists[1].keys(n), self.lists[2].keys(n), self.lists[3].keys(n)]
    }

    #[inline(always)]
    fn find(&self, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s))
    }

    #[inline(always)]
    fn len_of(&self, l: u8) -> usize {
        self.lists[l as usize].len
    }

    /// Start loading what the next misses touch: the node that becomes T1's and T2's tail
    /// once the tail is demoted, and B1's and B2's tail with its index group (a ghost's
    /// deletion edits both) and the node after it. Each tail was loaded the same way when it
    /// was the next-to-tail, so reading its links here does not wait.
    #[inline(always)]
    fn prefetch_victims(&self) {
        for l in [T1, T2] {
            let t = self.lists[l as usize].tail;
            if t != NIL {
                self.slab.prefetch(self.slab.node(t).prev);
            }
        }
        for l in [B1, B2] {
            let t = self.lists[l as usize].tail;
            if t != NIL {
                let n = self.slab.node(t);
                self.map.prefetch(n.key);
                self.slab.prefetch(n.prev);
            }
        }
    }

    /// Move node `i` from its list to the head of list `to`.
    #[inline(always)]
    fn move_to(&mut self, i: u32, to: u8) {
        let from = self.slab.node(i).meta;
        self.lists[from as usize].unlink(self.slab.nodes_mut(), i);
        self.slab.node_mut(i).meta = to;
        self.lists[to as usize].push_head(self.slab.nodes_mut(), i);
    }

    /// Unlink node `i` from its list, drop it from the index and free it. Returns its key.
    #[inline(always)]
    fn delete(&mut self, i: u32) -> u64 {
        let from = self.slab.node(i).meta;
        let key = self.slab.key(i);
        self.lists[from as usize].unlink(self.slab.nodes_mut(), i);
        self.map.remove(key, i);
        self.slab.release(i);
        key
    }

    /// The paper's REPLACE: demote T1's or T2's LRU block to its ghost list.
    fn replace(&mut self, in_b2: bool) -> u64 {
        let t1 = self.len_of(T1);
        let t1f = t1 as f64;
        let from_t1 =
            (t1 > 0 && (t1f > self.p || (t1f == self.p && in_b2))) || self.len_of(T2) == 0;
        let (from, to) = if from_t1 { (T1, B1) } else { (T2, B2) };
        let i = self.lists[from as usize].tail;
        self.move_to(i, to);
        self.slab.key(i)
    }

    /// Room for a block found in no list (case IV).
    fn evict_for_new(&mut self) -> u64 {
        let (t1, t2, b1, b2) = (self.len_of(T1), self.len_of(T2), self.len_of(B1), self.len_of(B2));
        if t1 + b1 + 1 > self.c {
            if b1 > 0 {
                let g = self.lists[B1 as usize].tail;
                self.delete(g);
                self.replace(false)
            } else {
                let i = self.lists[T1 as usize].tail;
                self.delete(i)
            }
        } else {
            if t1 + t2 + b1 + b2 >= 2 * self.c && b2 > 0 {
                let g = self.lists[B2 as usize].tail;
                self.delete(g);
            }
            self.replace(false)
        }
    }

    #[inline(always)]
    fn hit(&mut self, i: u32) {
        if self.slab.node(i).meta == T1 {
            self.move_to(i, T2);
        } else {
            self.lists[T2 as usize].move_to_head(self.slab.nodes_mut(), i);
        }
    }

    /// Insert `key`, which is not resident; `found` is its ghost node, if any.
    fn insert_missing(&mut self, key: u64, found: Option<u32>) -> Option<u64> {
        if self.c == 0 {
            return None;
        }
        let mut ghost = None;
        if let Some(i) = found {
            let (b1, b2) = (self.len_of(B1) as f64, self.len_of(B2) as f64);
            let which = self.slab.node(i).meta;
            if which == B1 {
                self.p = (self.p + (b2 / b1).max(1.0)).min(self.c as f64);
            } else {
                self.p = (self.p - (b1 / b2).max(1.0)).max(0.0);
            }
            self.delete(i);
            ghost = Some(which);
        }
        let evicted = if self.len_of(T1) + self.len_of(T2) >= self.c {
            Some(match ghost {
                Some(which) => self.replace(which == B2),
                None => self.evict_for_new(),
            })
        } else {
            None
        };
        let to = if ghost.is_some() { T2 } else { T1 };
        let mut i = self.slab.alloc(key, to);
        if i == NIL {
            // The directory holds at most 2c keys (see the module doc), so this is
            // unreachable; forgetting the oldest ghost keeps the cache correct regardless.
            let g = if self.lists[B2 as usize].tail != NIL {
                self.lists[B2 as usize].tail
            } else {
                self.lists[B1 as usize].tail
            };
            self.delete(g);
            i = self.slab.alloc(key, to);
        }
        self.lists[to as usize].push_head(self.slab.nodes_mut(), i);
        self.map.insert(key, i);
        evicted
    }
}

impl Replacement for Arc {
    fn name(&self) -> &'static str {
        "arc"
    }

    fn capacity(&self) -> usize {
        self.c
    }

    #[inline]
    fn len(&self) -> usize {
        self.len_of(T1) + self.len_of(T2)
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.find(key).is_some_and(|i| self.slab.node(i).meta <= T2)
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        match self.find(access.key) {
            Some(i) if self.slab.node(i).meta <= T2 => {
                self.hit(i);
                true
            }
            _ => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        match self.find(access.key) {
            Some(i) if self.slab.node(i).meta <= T2 => {
                self.hit(i);
                None
            }
            found => self.insert_missing(access.key, found),
        }
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.find(key) {
            Some(i) if self.slab.node(i).meta <= T2 => {
                self.delete(i);
                true
            }
            _ => false,
        }
    }

    #[inline(always)]
    fn access(&mut self, access: &Access) -> (bool, Option<u64>) {
        self.access_hinted(access, fingerprint(access.key))
    }

    /// The hint is the key's index fingerprint ([`Arc::prefetch_hint`]).
    #[inline(always)]
    fn access_hinted(&mut self, access: &Access, hint: u32) -> (bool, Option<u64>) {
        let slab = &self.slab;
        let found = self.map.find_fp(access.key, hint, |s| slab.key(s)).ok();
        match found {
            Some(i) if self.slab.node(i).meta <= T2 => {
                self.hit(i);
                (true, None)
            }
            found => {
                let evicted = self.insert_missing(access.key, found);
                self.prefetch_victims();
                (false, evicted)
            }
        }
    }

    #[inline]
    fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    #[inline(always)]
    fn prefetch_hint(&self, key: u64) -> u32 {
        let fp = fingerprint(key);
        self.map.prefetch_fp(fp);
        fp
    }

    /// Loads the node of the first index entry with the hint's fingerprint (resident or
    /// ghost: a lookup reads either's list tag).
    #[inline(always)]
    fn prefetch_resident(&self, hint: u32) {
        if let Some(i) = self.map.first_match(hint) {
            self.slab.prefetch(i);
        }
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.slab.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::testing::run;

    #[test]
    fn second_access_promotes_to_t2() {
        let mut a = Arc::new(4);
        run(&mut a, &[1, 2, 3, 1]);
        assert_eq!(a.lists(), [vec![3, 2], vec![1], vec![], vec![]]);
    }

    #[test]
    fn ghost_hits_adapt_p() {
        let mut a = Arc::new(2);
        // 1 2 fill T1; 3: |T1|+|B1| = 2 = c and B1 empty → 1 deleted without a ghost.
        assert_eq!(run(&mut a, &[1, 2, 3]), vec![(false, None), (false, None), (false, Some(1))]);
        assert_eq!(a.lists(), [vec![3, 2], vec![], vec![], vec![]]);
        // 3 hit → T2. 4: |T1|+|B1| = 1 < 2: REPLACE with p = 0: |T1| = 1 > 0 → 2 to B1.
        assert_eq!(run(&mut a, &[3, 4]), vec![(true, None), (false, Some(2))]);
        assert_eq!(a.lists(), [vec![4], vec![3], vec![2], vec![]]);
        // 2 hits B1: p += max(|B2|/|B1|, 1) = 1; REPLACE: |T1| = 1 == p, not from B2 → T2's
        // LRU 3 goes to B2; 2 enters T2.
        assert_eq!(run(&mut a, &[2]), vec![(false, Some(3))]);
        assert_eq!(a.p(), 1.0);
        assert_eq!(a.lists(), [vec![4], vec![2], vec![], vec![3]]);
        // 3 hits B2: p -= max(|B1|/|B2|, 1) = 1 → 0; REPLACE: |T1| = 1 > 0 → 4 to B1.
        assert_eq!(run(&mut a, &[3]), vec![(false, Some(4))]);
        assert_eq!(a.p(), 0.0);
        assert_eq!(a.lists(), [vec![], vec![3, 2], vec![4], vec![]]);
    }

    #[test]
    fn p_moves_by_ghost_ratio() {
        let mut a = Arc::new(3);
        // 1 2 3 twice → T2 = [3 2 1]; 4: T1 empty → 1 to B2; 5, 6: |T1| = 1 > p = 0 → 4, 5
        // to B1.
        run(&mut a, &[1, 2, 3, 1, 2, 3, 4, 5, 6]);
        assert_eq!(a.lists(), [vec![6], vec![3, 2], vec![5, 4], vec![1]]);
        // 4 hits B1: p += max(1/2, 1) = 1; REPLACE: |T1| = 1 == p, not from B2 → 2 to B2.
        assert_eq!(run(&mut a, &[4]), vec![(false, Some(2))]);
        assert_eq!(a.p(), 1.0);
        // 5 hits B1 with |B2|/|B1| = 2/1: p = 1 + 2 = 3 (the cap); 3 goes to B2.
        assert_eq!(run(&mut a, &[5]), vec![(false, Some(3))]);
        assert_eq!(a.p(), 3.0);
        // 1 hits B2 with |B1| = 0: p -= 1 → 2; REPLACE from T2 (|T1| = 1 < p) → 4 to B2.
        assert_eq!(run(&mut a, &[1]), vec![(false, Some(4))]);
        assert_eq!(a.p(), 2.0);
        assert_eq!(a.lists(), [vec![6], vec![1, 5], vec![], vec![4, 3, 2]]);
    }

    #[test]
    fn directory_never_exceeds_two_c() {
        let mut a = Arc::new(8);
        let mut x: u64 = 0x9E37_79B9;
        for t in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = if x & 3 == 0 { x % 5 } else { x % 40 };
            a.access(&Access::read(k, t));
            let l = a.lists();
            assert!(l[0].len() + l[1].len() <= 8);
            assert!(l[0].len() + l[2].len() <= 8 + 1);
            assert!(l.iter().map(Vec::len).sum::<usize>() <= 16);
            assert!(a.p() >= 0.0 && a.p() <= 8.0);
        }
    }

    #[test]
    fn remove_and_capacity_one() {
        let mut a = Arc::new(1);
        assert_eq!(
            run(&mut a, &[1, 1, 2, 2, 1]),
            vec![(false, None), (true, None), (false, Some(1)), (true, None), (false, Some(2))]
        );
        assert!(a.remove(1));
        assert!(!a.remove(1));
        assert!(a.is_empty());
        assert_eq!(run(&mut a, &[3]), vec![(false, None)]);
    }
}
