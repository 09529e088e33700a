//! The two ghost lists of a [`SegmentedQueue`] ([`SegmentedQueue::with_ghosts`]): LRU lists
//! of keys (the read ghost and the demoted ghost of Wong and Wilkes section 5.1) threaded
//! through the queue's own nodes, so that one index lookup serves the queue and both ghosts.
//! A node stays while the queue or a ghost holds its key.

use super::{Entry, SegmentedQueue, NIL};

/// Which ghost list ([`SegmentedQueue::with_ghosts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ghost {
    /// Keys of blocks READ by clients (the read ghost of section 5.1).
    Read = 0,
    /// Keys of demoted blocks (the demoted ghost).
    Demoted = 1,
}

impl Ghost {
    #[inline(always)]
    pub(super) fn flag(self) -> u8 {
        2 << self as u8
    }
}

/// An LRU list of keys threaded through the nodes (a ghost cache).
#[derive(Clone, Copy, Debug)]
pub(super) struct GhostList {
    /// Most recently used.
    head: u32,
    /// Least recently used.
    tail: u32,
    len: usize,
    /// Keys remembered at most.
    pub(super) cap: usize,
}

impl GhostList {
    /// An empty list of at most `cap` keys.
    pub(super) fn new(cap: usize) -> Self {
        Self { head: NIL, tail: NIL, len: 0, cap }
    }
}

impl SegmentedQueue {
    #[inline]
    fn ghost_unlink(&mut self, g: usize, i: u32) {
        let [p, n] = [self.glinks[i as usize][g], self.glinks[i as usize][2 + g]];
        if p != NIL {
            self.glinks[p as usize][2 + g] = n;
        } else {
            self.ghosts[g].head = n;
        }
        if n != NIL {
            self.glinks[n as usize][g] = p;
        } else {
            self.ghosts[g].tail = p;
        }
        self.ghosts[g].len -= 1;
    }

    #[inline]
    fn ghost_push_head(&mut self, g: usize, i: u32) {
        let h = self.ghosts[g].head;
        self.glinks[i as usize][g] = NIL;
        self.glinks[i as usize][2 + g] = h;
        if h != NIL {
            self.glinks[h as usize][g] = i;
        } else {
            self.ghosts[g].tail = i;
        }
        self.ghosts[g].head = i;
        self.ghosts[g].len += 1;
    }

    /// Reference the entry's key in ghost `ghost`: returns true (and moves it to the most
    /// recently used end) if the ghost remembers it; otherwise, if `insert`, remembers it as
    /// the most recent key, forgetting the least recent one if full. A ghost of capacity 0
    /// remembers nothing.
    #[inline]
    pub fn ghost_touch(&mut self, e: &mut Entry, ghost: Ghost, insert: bool) -> bool {
        let g = ghost as usize;
        let flag = ghost.flag();
        if e.slot != NIL && self.nodes[e.slot as usize].flags & flag != 0 {
            if self.ghosts[g].head != e.slot {
                self.ghost_unlink(g, e.slot);
                self.ghost_push_head(g, e.slot);
            }
            return true;
        }
        if !insert || self.ghosts[g].cap == 0 {
            return false;
        }
        if self.ghosts[g].len >= self.ghosts[g].cap {
            let t = self.ghosts[g].tail;
            self.ghost_unlink(g, t);
            self.nodes[t as usize].flags &= !flag;
            self.release_if_unused(t);
            self.prefetch_node(self.ghosts[g].tail);
        }
        if e.slot == NIL {
            e.slot = self.alloc(e.key);
        }
        self.nodes[e.slot as usize].flags |= flag;
        self.ghost_push_head(g, e.slot);
        false
    }

    /// True if ghost `ghost` remembers `key`.
    pub fn ghost_contains(&self, ghost: Ghost, key: u64) -> bool {
        self.find(key).is_some_and(|i| self.nodes[i as usize].flags & ghost.flag() != 0)
    }

    /// Keys of ghost `ghost`, most recent first (O(n); for tests).
    pub fn ghost_keys(&self, ghost: Ghost) -> Vec<u64> {
        let g = ghost as usize;
        let mut out = Vec::new();
        let mut i = self.ghosts[g].head;
        while i != NIL {
            out.push(self.nodes[i as usize].key);
            i = self.glinks[i as usize][2 + g];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::Position;
    use super::*;

    #[test]
    fn ghosts_share_nodes_with_the_queue() {
        let mut q = SegmentedQueue::with_ghosts(2, &[2], 2);
        let mut e = q.entry(1);
        assert!(!q.ghost_touch(&mut e, Ghost::Read, true));
        assert!(!q.queued(&e));
        assert_eq!(q.place(&mut e, Position::Keep(0)), None);
        assert!(q.ghost_touch(&mut e, Ghost::Read, true));
        assert!(!q.ghost_touch(&mut e, Ghost::Demoted, false));
        assert!(!q.ghost_contains(Ghost::Demoted, 1));
        // Ghost LRU: 2, 3 push 1 out of the read ghost; 1 stays queued.
        for k in [2, 3] {
            let mut e = q.entry(k);
            q.ghost_touch(&mut e, Ghost::Read, true);
        }
        assert_eq!(q.ghost_keys(Ghost::Read), vec![3, 2]);
        assert!(q.contains(1));
        // 2 and 3 are ghost-only: queue them, ejecting 1, whose node is then freed.
        assert_eq!(q.insert(2, Position::Keep(0)), None);
        assert_eq!(q.insert(3, Position::Keep(0)), Some(1));
        assert!(!q.contains(1) && !q.ghost_contains(Ghost::Read, 1));
        assert_eq!(q.entry(1).slot, NIL);
        // A ghost hit moves the key to the most recent end.
        let mut e = q.entry(2);
        assert!(q.ghost_touch(&mut e, Ghost::Read, true));
        assert_eq!(q.ghost_keys(Ghost::Read), vec![2, 3]);
        // Remove from the queue keeps the ghost entry.
        assert!(q.remove(2));
        assert!(q.ghost_contains(Ghost::Read, 2) && !q.contains(2));
    }

    #[test]
    fn ghosts_match_lru_sets_under_random_use() {
        use crate::replacement::{Lru, Replacement};
        use crate::Access;
        let mut q = SegmentedQueue::with_ghosts(8, &[4, 4], 5);
        let mut read = Lru::new(5);
        let mut dem = Lru::new(5);
        let mut queue_model = Lru::new(8);
        let mut x: u64 = 0x1234_5678_9ABC_DEF1;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = x % 24;
            let mut e = q.entry(key);
            let a = Access::read(key, 0);
            match (x >> 20) % 3 {
                0 => {
                    let hit = q.ghost_touch(&mut e, Ghost::Read, true);
                    assert_eq!(hit, read.access(&a).0, "step {step}");
                }
                1 => {
                    let insert = (x >> 30) & 1 == 0;
                    let hit = q.ghost_touch(&mut e, Ghost::Demoted, insert);
                    let want = if insert { dem.access(&a).0 } else { dem.lookup(&a) };
                    assert_eq!(hit, want, "step {step}");
                }
                _ => {
                    let ejected = q.place(&mut e, Position::Keep(1));
                    let (_, want) = queue_model.access(&a);
                    assert_eq!(ejected, want, "step {step}");
                }
            }
        }
        assert_eq!(q.ghost_keys(Ghost::Read), read.keys());
        assert_eq!(q.ghost_keys(Ghost::Demoted), dem.keys());
        assert_eq!(q.keys(), queue_model.keys());
        assert!(q.nodes.len() <= 8 + 10);
    }
}
