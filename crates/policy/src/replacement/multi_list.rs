//! Nodes that belong to several lists at once: LIRS keeps one block in its stack S and its
//! queue Q together, and its non-resident blocks on a third list. A [`MultiList`] owns a
//! fixed pool of nodes, each with `L` pairs of links, and the key index over them; list `l`
//! of a node is threaded through its `l`-th pair. Head is the most recent end, tail the
//! next to leave (as in [`Slab`](crate::slab::Slab)'s lists).

use crate::keymap::KeyMap;
use crate::slab::NIL;

/// One block: its key, per-list links and membership, and per-policy state `M`.
#[derive(Clone, Copy, Debug)]
struct Node<M, const L: usize> {
    key: u64,
    /// `(prev, next)` per list: towards the head, towards the tail.
    links: [(u32, u32); L],
    /// Bit `l` set if the node is on list `l`.
    member: u8,
    meta: M,
}

/// Head, tail and length of one list.
#[derive(Clone, Copy, Debug)]
struct Ends {
    head: u32,
    tail: u32,
    len: usize,
}

/// A fixed pool of keyed nodes on up to `L` lists each (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct MultiList<M, const L: usize> {
    map: KeyMap,
    nodes: Vec<Node<M, L>>,
    free: u32,
    capacity: usize,
    ends: [Ends; L],
}

impl<M: Copy + Default, const L: usize> MultiList<M, L> {
    /// A pool of `capacity` nodes, reserved now.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            map: KeyMap::with_entries(capacity),
            nodes: Vec::with_capacity(capacity),
            free: NIL,
            capacity,
            ends: [Ends { head: NIL, tail: NIL, len: 0 }; L],
        }
    }

    /// True if no node is free.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.map.len() >= self.capacity
    }

    /// The node of `key`, if any.
    #[inline]
    pub(crate) fn find(&self, key: u64) -> Option<u32> {
        let nodes = &self.nodes;
        self.map.get(key, |s| nodes[s as usize].key)
    }

    /// A new node for `key` (absent), on no list. The caller keeps the pool from filling
    /// ([`MultiList::is_full`]).
    #[inline]
    pub(crate) fn alloc(&mut self, key: u64, meta: M) -> u32 {
        let node = Node { key, links: [(NIL, NIL); L], member: 0, meta };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].links[0].1;
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        self.map.insert(key, i);
        i
    }

    /// Return node `i`, on no list any more, to the pool.
    #[inline]
    pub(crate) fn release(&mut self, i: u32) {
        debug_assert_eq!(self.nodes[i as usize].member, 0, "release of a listed node");
        let key = self.nodes[i as usize].key;
        self.map.remove(key, i);
        self.nodes[i as usize].links[0].1 = self.free;
        self.free = i;
    }

    /// The key of node `i`.
    #[inline]
    pub(crate) fn key(&self, i: u32) -> u64 {
        self.nodes[i as usize].key
    }

    /// The state of node `i`.
    #[inline]
    pub(crate) fn meta(&self, i: u32) -> M {
        self.nodes[i as usize].meta
    }

    /// The state of node `i`, to change.
    #[inline]
    pub(crate) fn meta_mut(&mut self, i: u32) -> &mut M {
        &mut self.nodes[i as usize].meta
    }

    /// True if node `i` is on list `l`.
    #[inline]
    pub(crate) fn on(&self, l: usize, i: u32) -> bool {
        self.nodes[i as usize].member & (1 << l) != 0
    }

    /// True if node `i` is on no list.
    #[inline]
    pub(crate) fn on_none(&self, i: u32) -> bool {
        self.nodes[i as usize].member == 0
    }

    /// Length of list `l`.
    #[inline]
    pub(crate) fn len(&self, l: usize) -> usize {
        self.ends[l].len
    }

    /// The tail (oldest) of list `l`.
    #[inline]
    pub(crate) fn tail(&self, l: usize) -> Option<u32> {
        let t = self.ends[l].tail;
        (t != NIL).then_some(t)
    }

    /// The head (newest) of list `l`.
    #[inline]
    pub(crate) fn head(&self, l: usize) -> Option<u32> {
        let h = self.ends[l].head;
        (h != NIL).then_some(h)
    }

    /// Put node `i`, not on list `l`, at its head.
    #[inline(always)]
    pub(crate) fn push_head(&mut self, l: usize, i: u32) {
        debug_assert!(!self.on(l, i));
        let head = self.ends[l].head;
        let n = &mut self.nodes[i as usize];
        n.links[l] = (NIL, head);
        n.member |= 1 << l;
        if head != NIL {
            self.nodes[head as usize].links[l].0 = i;
        } else {
            self.ends[l].tail = i;
        }
        self.ends[l].head = i;
        self.ends[l].len += 1;
    }

    /// Take node `i` off list `l` (a no-op if it is not on it).
    #[inline(always)]
    pub(crate) fn unlink(&mut self, l: usize, i: u32) {
        if !self.on(l, i) {
            return;
        }
        let (prev, next) = self.nodes[i as usize].links[l];
        if prev != NIL {
            self.nodes[prev as usize].links[l].1 = next;
        } else {
            self.ends[l].head = next;
        }
        if next != NIL {
            self.nodes[next as usize].links[l].0 = prev;
        } else {
            self.ends[l].tail = prev;
        }
        let n = &mut self.nodes[i as usize];
        n.links[l] = (NIL, NIL);
        n.member &= !(1 << l);
        self.ends[l].len -= 1;
    }

    /// Put node `i` at the head of list `l`, taking it off first if it is on it.
    #[inline(always)]
    pub(crate) fn move_to_head(&mut self, l: usize, i: u32) {
        self.unlink(l, i);
        self.push_head(l, i);
    }

    /// Start loading the index group of `key` (see [`KeyMap::prefetch`]).
    #[inline(always)]
    pub(crate) fn prefetch(&self, key: u64) {
        self.map.prefetch(key);
    }

    /// Bytes reserved: the index and the node pool.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.capacity * std::mem::size_of::<Node<M, L>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_on_two_lists_keeps_both_orders() {
        let mut m: MultiList<(), 2> = MultiList::with_capacity(4);
        let a = m.alloc(10, ());
        let b = m.alloc(20, ());
        m.push_head(0, a);
        m.push_head(0, b);
        m.push_head(1, b);
        m.push_head(1, a);
        assert_eq!((m.tail(0), m.tail(1)), (Some(a), Some(b)));
        m.move_to_head(0, a);
        assert_eq!((m.tail(0), m.head(0)), (Some(b), Some(a)));
        m.unlink(1, b);
        assert_eq!((m.len(1), m.tail(1), m.head(1)), (1, Some(a), Some(a)));
        m.unlink(0, b);
        assert!(m.on_none(b));
        m.release(b);
        assert_eq!(m.find(20), None);
        assert_eq!(m.find(10), Some(a));
        let c = m.alloc(30, ());
        assert_eq!(c, b, "a released node is reused");
        assert!(!m.is_full());
    }
}
