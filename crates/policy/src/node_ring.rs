//! A first-in first-out queue of slab nodes kept in ring positions: a queue whose order is
//! never changed but at its ends (S3-FIFO's small queue, and its main queue, whose
//! reinsertion takes the oldest node and appends it as the newest).
//!
//! A [`List`](crate::slab::List) finds the next node to leave through the links of the one
//! leaving now, so a walk of many nodes (an eviction that reinserts several before it finds
//! its victim) waits for one node's load after another. Here the order is an array of node
//! numbers: the node `k` places from the oldest is known without loading any node, so the
//! nodes an eviction will walk can be loaded ahead of it ([`NodeRing::ahead`]).
//!
//! Each node in the ring keeps its position in its `prev` field (its `next` is unused), so a
//! node removed from the middle ([`NodeRing::unlink`]) leaves a *hole*, a position marked
//! [`NIL`], skipped when the oldest end reaches it. The ring has a quarter more positions than
//! nodes; an append that finds every position taken (holes among them) first packs the live
//! nodes together in order, at most once per quarter of the capacity of appends. A queue that
//! never loses a node from the middle (a trace simulation) never packs.
//!
//! Memory: 4 bytes a position, 1.25 positions a node.

use crate::slab::{Node, NIL};

/// A bounded FIFO queue of slab nodes.
#[derive(Clone, Debug)]
pub struct NodeRing {
    /// Node numbers from `tail` for `span` positions; [`NIL`] is a hole.
    slots: Box<[u32]>,
    /// Position of the oldest node (or hole).
    tail: usize,
    /// Positions in use from `tail`, holes included.
    span: usize,
    /// Nodes in the queue.
    pub len: usize,
}

impl NodeRing {
    /// An empty queue for at most `capacity` nodes.
    ///
    /// # Panics
    /// If its positions (a quarter more than `capacity`) do not fit a `u32`.
    pub fn with_capacity(capacity: usize) -> Self {
        let positions = capacity + (capacity / 4).max(1);
        assert!(positions < u32::MAX as usize, "queue capacity {capacity} exceeds u32 positions");
        Self { slots: vec![NIL; positions].into_boxed_slice(), tail: 0, span: 0, len: 0 }
    }

    /// Whether the queue holds no node.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of memory held.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<u32>()
    }

    /// The position `k` places after the oldest.
    #[inline(always)]
    fn at(&self, k: usize) -> usize {
        let p = self.tail + k;
        if p >= self.slots.len() {
            p - self.slots.len()
        } else {
            p
        }
    }

    /// Append node `i` (in no queue) as the newest.
    ///
    /// # Panics
    /// If every position already holds a node (a quarter more nodes than the capacity).
    #[inline]
    pub fn push_head<M>(&mut self, nodes: &mut [Node<M>], i: u32) {
        if self.span == self.slots.len() {
            self.pack(nodes);
        }
        let p = self.at(self.span);
        self.slots[p] = i;
        nodes[i as usize].prev = p as u32;
        self.span += 1;
        self.len += 1;
    }

    /// The oldest node, or `None` if the queue is empty (holes before it are dropped).
    #[inline(always)]
    pub fn tail(&mut self) -> Option<u32> {
        while self.span > 0 {
            let i = self.slots[self.tail];
            if i != NIL {
                return Some(i);
            }
            self.advance();
        }
        None
    }

    #[inline(always)]
    fn advance(&mut self) {
        self.tail += 1;
        if self.tail == self.slots.len() {
            self.tail = 0;
        }
        self.span -= 1;
    }

    /// Take the oldest node out of the queue.
    #[inline(always)]
    pub fn pop_tail(&mut self) -> Option<u32> {
        let i = self.tail()?;
        self.slots[self.tail] = NIL;
        self.advance();
        self.len -= 1;
        Some(i)
    }

    /// Take node `i`, which is in this queue, out of it (a hole stays at its position).
    #[inline]
    pub fn unlink<M>(&mut self, nodes: &[Node<M>], i: u32) {
        let p = nodes[i as usize].prev as usize;
        debug_assert_eq!(self.slots[p], i, "node {i} is not at its position");
        self.slots[p] = NIL;
        self.len -= 1;
    }

    /// The node `k` positions after the oldest (holes counted), or [`NIL`]: a node an
    /// eviction will soon walk, to load ahead.
    #[inline(always)]
    pub fn ahead(&self, k: usize) -> u32 {
        if k < self.span {
            self.slots[self.at(k)]
        } else {
            NIL
        }
    }

    /// Move the live nodes together, oldest at position 0, keeping their order.
    fn pack<M>(&mut self, nodes: &mut [Node<M>]) {
        assert!(
            self.len < self.slots.len(),
            "queue over its capacity of {} nodes",
            self.slots.len()
        );
        let live: Vec<u32> =
            (0..self.span).map(|k| self.slots[self.at(k)]).filter(|&i| i != NIL).collect();
        self.slots.fill(NIL);
        for (p, &i) in live.iter().enumerate() {
            self.slots[p] = i;
            nodes[i as usize].prev = p as u32;
        }
        self.tail = 0;
        self.span = live.len();
    }

    /// Keys of the queue's nodes, newest first.
    pub fn keys<M>(&self, nodes: &[Node<M>]) -> Vec<u64> {
        (0..self.span)
            .rev()
            .map(|k| self.slots[self.at(k)])
            .filter(|&i| i != NIL)
            .map(|i| nodes[i as usize].key)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slab::Slab;
    use std::collections::VecDeque;

    /// Random appends, pops and removals from the middle (holes, packs, wrap-around) keep the
    /// same order as a `VecDeque`.
    #[test]
    fn keeps_fifo_order_through_holes_and_packs() {
        let cap = 40;
        let mut slab: Slab<()> = Slab::with_capacity(cap);
        let mut ring = NodeRing::with_capacity(cap);
        let mut model: VecDeque<u32> = VecDeque::new();
        let mut next_key = 0u64;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 10 {
                0..=4 if model.len() < cap => {
                    let i = slab.alloc(next_key, ());
                    next_key += 1;
                    ring.push_head(slab.nodes_mut(), i);
                    model.push_back(i);
                }
                5..=6 => {
                    let got = ring.pop_tail();
                    assert_eq!(got, model.pop_front(), "step {step}: pop");
                    if let Some(i) = got {
                        slab.release(i);
                    }
                }
                7 if !model.is_empty() => {
                    // Reinsert the oldest as the newest (S3-FIFO's main queue).
                    let i = ring.pop_tail().unwrap();
                    assert_eq!(Some(i), model.pop_front(), "step {step}: reinsert");
                    ring.push_head(slab.nodes_mut(), i);
                    model.push_back(i);
                }
                _ if !model.is_empty() => {
                    let at = (x >> 20) as usize % model.len();
                    let i = model.remove(at).unwrap();
                    ring.unlink(slab.nodes(), i);
                    slab.release(i);
                }
                _ => {}
            }
            assert_eq!(ring.len, model.len(), "step {step}: length");
            assert_eq!(ring.tail(), model.front().copied(), "step {step}: oldest");
            if step % 97 == 0 {
                let want: Vec<u64> = model.iter().rev().map(|&i| slab.key(i)).collect();
                assert_eq!(ring.keys(slab.nodes()), want, "step {step}: order");
            }
        }
    }
}
