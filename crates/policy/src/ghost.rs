//! A ghost FIFO: keys of recently evicted blocks, without data, for policies that learn from
//! re-references to blocks they just let go (2Q's A1out, S3-FIFO's ghost queue).
//!
//! Bounded to a fixed number of keys; inserting into a full ghost forgets the oldest key.
//! A key found again is removed ([`GhostFifo::take`]), as both 2Q and S3-FIFO do.

use crate::keymap::{fingerprint, KeyMap};
use crate::slab::{List, Slab};

/// A bounded FIFO set of block keys.
#[derive(Clone, Debug)]
pub struct GhostFifo {
    map: KeyMap,
    slab: Slab<()>,
    list: List,
}

impl GhostFifo {
    /// A ghost remembering at most `capacity` keys (0: remembers nothing).
    pub fn new(capacity: usize) -> Self {
        Self {
            map: KeyMap::with_entries(capacity),
            slab: Slab::with_capacity(capacity),
            list: List::new(),
        }
    }

    /// Number of keys remembered.
    #[inline]
    pub fn len(&self) -> usize {
        self.list.len
    }

    /// True if no key is remembered.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.len == 0
    }

    /// Maximum number of keys.
    pub fn capacity(&self) -> usize {
        self.slab.capacity()
    }

    /// True if `key` is remembered.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s)).is_some()
    }

    /// Remember `key` (which must not be remembered already) as the newest, forgetting the
    /// oldest if full. Returns the forgotten key.
    #[inline]
    pub fn push(&mut self, key: u64) -> Option<u64> {
        if self.slab.capacity() == 0 {
            return None;
        }
        let mut forgotten = None;
        if self.list.len >= self.slab.capacity() {
            if let Some(t) = self.list.pop_tail(self.slab.nodes_mut()) {
                let old = self.slab.key(t);
                self.map.remove(old, t);
                self.slab.release(t);
                forgotten = Some(old);
            }
        }
        let i = self.slab.alloc(key, ());
        self.list.push_head(self.slab.nodes_mut(), i);
        self.map.insert(key, i);
        if forgotten.is_some() {
            // The list's order is a chain of links: start loading the node after the new
            // oldest, whose key the push after next forgets ([`GhostFifo::prefetch_push`]
            // reads the oldest's key one push ahead).
            let t = self.list.tail;
            if t != crate::slab::NIL {
                let next = self.slab.node(t).prev;
                if next != crate::slab::NIL {
                    self.slab.prefetch(next);
                }
            }
        }
        forgotten
    }

    /// Start loading the node of the first remembered key whose [`fingerprint`] is `fp`, for
    /// a [`GhostFifo::take_fp`] to come that will compare its key (once `fp`'s index group,
    /// [`GhostFifo::prefetch_fp`], has been loaded).
    #[inline(always)]
    pub fn prefetch_resident(&self, fp: u32) {
        if let Some(i) = self.map.first_match(fp) {
            self.slab.prefetch(i);
        }
    }

    /// Start loading the index group of the key whose [`fingerprint`] is `fp`.
    #[inline(always)]
    pub fn prefetch_fp(&self, fp: u32) {
        self.map.prefetch_fp(fp);
    }

    /// Start loading the index group of `key`, and that of the oldest key (the next to be
    /// forgotten when full), for a [`GhostFifo::push`] of `key` to come.
    #[inline(always)]
    pub fn prefetch_push(&self, key: u64) {
        self.map.prefetch(key);
        let t = self.list.tail;
        if t != crate::slab::NIL && self.list.len >= self.slab.capacity() {
            self.map.prefetch(self.slab.key(t));
        }
    }

    /// Forget `key` if remembered; returns whether it was.
    #[inline]
    pub fn take(&mut self, key: u64) -> bool {
        self.take_fp(key, fingerprint(key))
    }

    /// [`GhostFifo::take`] of `key`, whose [`fingerprint`] is `fp` (not hashed again).
    #[inline]
    pub fn take_fp(&mut self, key: u64, fp: u32) -> bool {
        let slab = &self.slab;
        match self.map.find_fp(key, fp, |s| slab.key(s)) {
            Ok(i) => {
                self.list.unlink(self.slab.nodes_mut(), i);
                self.map.remove_fp(fp, i);
                self.slab.release(i);
                true
            }
            Err(_) => false,
        }
    }

    /// Keys from newest to oldest.
    pub fn keys(&self) -> Vec<u64> {
        self.list.keys(self.slab.nodes())
    }

    /// Bytes reserved for the index and nodes.
    pub fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.slab.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_oldest_when_full_and_take_removes() {
        let mut g = GhostFifo::new(2);
        assert_eq!(g.push(1), None);
        assert_eq!(g.push(2), None);
        assert_eq!(g.push(3), Some(1));
        assert!(!g.contains(1));
        assert!(g.take(2));
        assert!(!g.take(2));
        assert_eq!(g.keys(), vec![3]);
        assert_eq!(g.push(4), None);
        assert_eq!(g.push(5), Some(3));
        assert_eq!(g.keys(), vec![5, 4]);
    }

    #[test]
    fn zero_capacity_remembers_nothing() {
        let mut g = GhostFifo::new(0);
        assert_eq!(g.push(1), None);
        assert!(!g.contains(1));
        assert!(g.is_empty());
    }
}
