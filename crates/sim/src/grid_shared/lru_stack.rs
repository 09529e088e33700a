//! LRU at every size in one recency stack (Mattson et al.'s inclusion property: the cache of
//! size `c` holds exactly the `c` most recently used keys).
//!
//! Each entry keeps its *level*, the smallest size (in ascending order) whose cache holds it,
//! and each size keeps a *marker*, the entry at its boundary (position `c - 1` from the top).
//! An access at level `L` is a hit for every size from `L` up and a miss below; the entry
//! moves to the top, and at every size below `L` the marked entry drops out of that size
//! (one level down) and the marker moves to the entry before it. The stack holds only the
//! largest size's keys: the entry that drops out of it is evicted. So the hits of every size
//! come from one stack update of O(#sizes) steps, and each size's misses and evictions equal
//! [`ember_policy::Lru`]'s at that capacity.

use super::entries::{Entries, NIL, OUT};
use super::CellCounts;

/// The recency stack and one marker per size.
#[derive(Debug)]
pub(crate) struct LruStack {
    /// Capacities in ascending order.
    caps: Vec<usize>,
    /// The entry at position `caps[i] - 1`, or [`NIL`] while the stack is shorter.
    marker: Vec<u32>,
    /// The level of a key just moved to the top: the first size with room for one key.
    top_level: u8,
    head: u32,
    tail: u32,
    len: usize,
    /// Accesses by the level they found the key at (index `caps.len()`: in no cache), for
    /// reads and for writes.
    hist: Vec<[u64; 2]>,
    /// Evictions per size.
    evictions: Vec<u64>,
}

impl LruStack {
    /// A stack for capacities `caps`, sorted ascending.
    pub fn new(caps: Vec<usize>) -> Self {
        debug_assert!(caps.windows(2).all(|w| w[0] <= w[1]));
        let n = caps.len();
        let top_level = caps.iter().position(|&c| c > 0).unwrap_or(n) as u8;
        Self {
            marker: vec![NIL; n],
            top_level,
            head: NIL,
            tail: NIL,
            len: 0,
            hist: vec![[0; 2]; n + 1],
            evictions: vec![0; n],
            caps,
        }
    }

    /// Simulate an access to entry `x` at every size.
    #[inline(always)]
    pub fn access(&mut self, es: &mut Entries, x: u32, write: bool) {
        let k = self.caps.len();
        let level = es.get(x).level;
        let l = if level == OUT { k } else { level as usize };
        self.hist[l][write as usize] += 1;
        if self.top_level as usize >= k || (l < k && self.head == x) {
            // No size holds a key, or the key is already on top: nothing moves.
            return;
        }
        let present = l < k;
        let mut set_tail = false;
        for i in 0..l {
            let m = self.marker[i];
            if m != NIL {
                // The marked entry drops out of size i (size i evicts it).
                let e = es.get_mut(m);
                e.level = (i + 1) as u8;
                let pm = e.prev;
                self.marker[i] = if pm == NIL { x } else { pm };
                // The next miss at size i reads the new marker's entry.
                es.prefetch_entry(pm);
                self.evictions[i] += 1;
            } else if !present && self.caps[i] == self.len + 1 {
                set_tail = true;
            }
        }
        if present {
            let (p, n) = {
                let e = es.get(x);
                (e.prev, e.next)
            };
            for i in l..k {
                if self.marker[i] == x {
                    self.marker[i] = p;
                }
            }
            // Unlink x (not the head, so p != NIL).
            es.get_mut(p).next = n;
            if n == NIL {
                self.tail = p;
            } else {
                es.get_mut(n).prev = p;
            }
        } else {
            self.len += 1;
        }
        // Push x on top.
        {
            let e = es.get_mut(x);
            e.prev = NIL;
            e.next = self.head;
            e.level = self.top_level;
        }
        if self.head == NIL {
            self.tail = x;
        } else {
            es.get_mut(self.head).prev = x;
        }
        self.head = x;
        if self.len > self.caps[k - 1] {
            // The bottom entry left the largest size: out of the stack.
            let t = self.tail;
            let p = es.get(t).prev;
            es.get_mut(p).next = NIL;
            self.tail = p;
            self.len -= 1;
            let e = es.get_mut(t);
            e.prev = NIL;
            e.next = NIL;
            e.level = OUT;
            es.release_if_empty(t);
        }
        if set_tail {
            for i in 0..l {
                if self.marker[i] == NIL && self.caps[i] == self.len {
                    self.marker[i] = self.tail;
                }
            }
        }
    }

    /// (read hits, write hits, evictions) of size `i` (ascending order).
    pub fn counts(&self, i: usize) -> CellCounts {
        let (mut r, mut w) = (0, 0);
        for h in &self.hist[..=i] {
            r += h[0];
            w += h[1];
        }
        CellCounts { read_hits: r, write_hits: w, evictions: self.evictions[i] }
    }
}
