//! Preallocated node storage with intrusive doubly-linked lists, the queues of every
//! replacement policy.
//!
//! A [`Slab`] owns a fixed number of [`Node`]s addressed by `u32` slot; a [`List`] is a head,
//! a tail and a length threaded through the nodes' `prev`/`next` links. A node belongs to at
//! most one list at a time; several lists (ARC's T1/T2/B1/B2, SLRU's segments) share a slab.
//! Head is the most recently inserted end, tail the next to leave.

/// The null link.
pub const NIL: u32 = u32::MAX;

/// One cached (or ghost) block: its key, its list links and per-policy metadata `M`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Node<M> {
    /// The block key.
    pub key: u64,
    /// Towards the head (newer), or [`NIL`].
    pub prev: u32,
    /// Towards the tail (older), or [`NIL`].
    pub next: u32,
    /// Per-policy state (CLOCK's counter, SIEVE's visited bit, ARC's list, ...).
    pub meta: M,
}

/// A fixed-capacity pool of nodes with a free list.
#[derive(Clone, Debug)]
pub struct Slab<M> {
    nodes: Vec<Node<M>>,
    /// Head of the free list, threaded through `next`.
    free: u32,
    capacity: usize,
    live: usize,
}

impl<M: Copy + Default> Slab<M> {
    /// A slab of `capacity` nodes. Memory is reserved now; nodes are initialized on first use.
    ///
    /// # Panics
    /// If `capacity` does not fit a `u32` slot (more than 4 billion blocks).
    pub fn with_capacity(capacity: usize) -> Self {
        assert!(capacity < NIL as usize, "slab capacity {capacity} exceeds u32 slots");
        Self { nodes: Vec::with_capacity(capacity), free: NIL, capacity, live: 0 }
    }

    /// Number of nodes in use.
    #[inline]
    pub fn live(&self) -> usize {
        self.live
    }

    /// Maximum number of nodes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes reserved for nodes.
    pub fn memory_bytes(&self) -> usize {
        self.capacity * std::mem::size_of::<Node<M>>()
    }

    /// Take a free node for `key` with `meta`, unlinked. Returns [`NIL`] if all are in use.
    #[inline]
    pub fn alloc(&mut self, key: u64, meta: M) -> u32 {
        let node = Node { key, prev: NIL, next: NIL, meta };
        if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            self.live += 1;
            i
        } else if self.nodes.len() < self.capacity {
            self.nodes.push(node);
            self.live += 1;
            (self.nodes.len() - 1) as u32
        } else {
            NIL
        }
    }

    /// Return node `i`, already unlinked from every list, to the free list.
    #[inline]
    pub fn release(&mut self, i: u32) {
        self.nodes[i as usize].next = self.free;
        self.free = i;
        self.live -= 1;
    }

    /// Start loading node `i` (nothing if it was never allocated): a prefetch, which never
    /// faults and changes nothing observable.
    #[inline(always)]
    pub fn prefetch(&self, i: u32) {
        if let Some(n) = self.nodes.get(i as usize) {
            crate::prefetch::prefetch(n);
        }
    }

    /// The key in node `i`.
    #[inline(always)]
    pub fn key(&self, i: u32) -> u64 {
        self.nodes[i as usize].key
    }

    /// Node `i`.
    #[inline(always)]
    pub fn node(&self, i: u32) -> &Node<M> {
        &self.nodes[i as usize]
    }

    /// Node `i`, mutably.
    #[inline(always)]
    pub fn node_mut(&mut self, i: u32) -> &mut Node<M> {
        &mut self.nodes[i as usize]
    }

    /// The nodes, for [`List`] operations.
    #[inline(always)]
    pub fn nodes_mut(&mut self) -> &mut [Node<M>] {
        &mut self.nodes
    }

    /// The nodes.
    #[inline(always)]
    pub fn nodes(&self) -> &[Node<M>] {
        &self.nodes
    }
}

/// Node `i` of `nodes`, unchecked in release builds.
///
/// List operations are the innermost loop of every policy; their indices come from the links
/// the lists themselves maintain (always < the slab's node count), so the bounds checks are
/// debug assertions.
#[inline(always)]
fn at<M>(nodes: &mut [Node<M>], i: u32) -> &mut Node<M> {
    debug_assert!((i as usize) < nodes.len(), "slab link {i} out of range");
    // SAFETY: callers pass only slots linked into a list over these nodes (debug-checked).
    unsafe { nodes.get_unchecked_mut(i as usize) }
}

/// A doubly-linked list threaded through a slab's nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct List {
    /// Newest node, or [`NIL`].
    pub head: u32,
    /// Oldest node, or [`NIL`].
    pub tail: u32,
    /// Number of nodes in the list.
    pub len: usize,
}

impl Default for List {
    fn default() -> Self {
        Self::new()
    }
}

impl List {
    /// An empty list.
    pub const fn new() -> Self {
        Self { head: NIL, tail: NIL, len: 0 }
    }

    /// True if the list has no node.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Link unlinked node `i` at the head.
    #[inline(always)]
    pub fn push_head<M>(&mut self, nodes: &mut [Node<M>], i: u32) {
        let old = self.head;
        {
            let n = &mut nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        if old != NIL {
            at(nodes, old).prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
        self.len += 1;
    }

    /// Unlink node `i`, which is in this list.
    #[inline(always)]
    pub fn unlink<M>(&mut self, nodes: &mut [Node<M>], i: u32) {
        let (prev, next) = {
            let n = &nodes[i as usize];
            (n.prev, n.next)
        };
        if prev != NIL {
            at(nodes, prev).next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            at(nodes, next).prev = prev;
        } else {
            self.tail = prev;
        }
        self.len -= 1;
    }

    /// Link unlinked node `i` right behind node `anchor` (on the tail side), which is in
    /// this list.
    #[inline]
    pub fn insert_after<M>(&mut self, nodes: &mut [Node<M>], anchor: u32, i: u32) {
        let next = at(nodes, anchor).next;
        {
            let n = &mut nodes[i as usize];
            n.prev = anchor;
            n.next = next;
        }
        at(nodes, anchor).next = i;
        if next != NIL {
            at(nodes, next).prev = i;
        } else {
            self.tail = i;
        }
        self.len += 1;
    }

    /// Move node `i`, which is in this list, to the head.
    #[inline(always)]
    pub fn move_to_head<M>(&mut self, nodes: &mut [Node<M>], i: u32) {
        if self.head != i {
            self.unlink(nodes, i);
            self.push_head(nodes, i);
        }
    }

    /// Unlink and return the tail, or `None` if the list is empty.
    #[inline(always)]
    pub fn pop_tail<M>(&mut self, nodes: &mut [Node<M>]) -> Option<u32> {
        let t = self.tail;
        if t == NIL {
            None
        } else {
            self.unlink(nodes, t);
            Some(t)
        }
    }

    /// Keys from head to tail (for tests and debugging; O(len)).
    pub fn keys<M>(&self, nodes: &[Node<M>]) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len);
        let mut i = self.head;
        while i != NIL {
            out.push(nodes[i as usize].key);
            i = nodes[i as usize].next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_without_metadata_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Node<()>>(), 16);
    }

    #[test]
    fn list_operations_keep_order() {
        let mut slab: Slab<()> = Slab::with_capacity(4);
        let mut list = List::new();
        let a = slab.alloc(10, ());
        let b = slab.alloc(20, ());
        let c = slab.alloc(30, ());
        for i in [a, b, c] {
            list.push_head(slab.nodes_mut(), i);
        }
        assert_eq!(list.keys(slab.nodes()), vec![30, 20, 10]);
        list.move_to_head(slab.nodes_mut(), a);
        assert_eq!(list.keys(slab.nodes()), vec![10, 30, 20]);
        assert_eq!(list.pop_tail(slab.nodes_mut()), Some(b));
        list.unlink(slab.nodes_mut(), a);
        assert_eq!(list.keys(slab.nodes()), vec![30]);
        assert_eq!((list.head, list.tail, list.len), (c, c, 1));
        slab.release(b);
        slab.release(a);
        assert_eq!(slab.live(), 1);
        // Freed nodes come back last-freed first, then fresh ones, then NIL.
        assert_eq!(slab.alloc(40, ()), a);
        assert_eq!(slab.alloc(50, ()), b);
        assert_eq!(slab.alloc(60, ()), 3);
        assert_eq!(slab.alloc(70, ()), NIL);
        assert_eq!(slab.key(b), 50);
    }
}
