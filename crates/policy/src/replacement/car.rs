//! CAR, Clock with Adaptive Replacement (Bansal & Modha, "CAR: Clock with Adaptive
//! Replacement", FAST 2004, figure 2).
//!
//! ARC's adaptation over two clocks: T1 holds blocks seen once recently, T2 blocks seen at
//! least twice, each a clock of reference bits; the history lists B1 and B2 remember blocks
//! evicted from T1 and T2. A hit only sets the block's reference bit. A miss on a full cache
//! runs `replace`: while `|T1| >= max(1, p)` the hand of T1 evicts an unreferenced block to
//! B1's MRU end or moves a referenced one (bit cleared) to T2's tail; otherwise the hand of
//! T2 evicts to B2 or recirculates. A new block then trims the history (`|T1| + |B1| = c`:
//! B1's LRU leaves; else a full directory of `2c`: B2's LRU leaves) and enters T1's tail; a
//! block found in B1 raises the target `p` of T1 by `max(1, |B2|/|B1|)`, one found in B2
//! lowers it by `max(1, |B1|/|B2|)`, and either enters T2's tail. `p` is real, as in the
//! paper, from 0 to `c`.
//!
//! History: the directory holds at most `2c` blocks (`c` resident), so a scan cannot grow
//! memory. libcachesim 0.3.x has no CAR policy class; the peer tests compare ember with a
//! reference written from the paper's figure 2 (equal miss counts).
//!
//! Memory: as [ARC](super::Arc), a node and an index entry per directory entry (`2c + 1`).

use super::Replacement;
use crate::keymap::KeyMap;
use crate::slab::{List, Slab};
use crate::Access;

const T1: u8 = 0;
const T2: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 3;

/// A directory entry's list and reference bit.
#[derive(Clone, Copy, Debug, Default)]
struct Meta {
    list: u8,
    referenced: bool,
}

/// Clock with Adaptive Replacement (see the module documentation).
#[derive(Clone, Debug)]
pub struct Car {
    map: KeyMap,
    slab: Slab<Meta>,
    /// T1, T2 (clocks: head the newest, tail the hand), B1, B2 (head the MRU end).
    lists: [List; 4],
    p: f64,
    c: usize,
}

impl Car {
    /// An empty CAR cache of `capacity` blocks (plus up to `capacity` history keys).
    pub fn new(capacity: usize) -> Self {
        let entries = 2 * capacity + 1;
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

    fn find(&self, key: u64) -> Option<u32> {
        let slab = &self.slab;
        self.map.get(key, |s| slab.key(s))
    }

    fn len_of(&self, l: u8) -> usize {
        self.lists[l as usize].len
    }

    /// Move slot `i` from its list to the head of list `to`, with reference bit 0.
    fn move_to(&mut self, i: u32, to: u8) {
        let from = self.slab.node(i).meta.list;
        self.lists[from as usize].unlink(self.slab.nodes_mut(), i);
        self.slab.node_mut(i).meta = Meta { list: to, referenced: false };
        self.lists[to as usize].push_head(self.slab.nodes_mut(), i);
    }

    /// Drop the LRU entry of history list `l`.
    fn discard(&mut self, l: u8) {
        if let Some(i) = self.lists[l as usize].pop_tail(self.slab.nodes_mut()) {
            let key = self.slab.key(i);
            self.map.remove(key, i);
            self.slab.release(i);
        }
    }

    /// The paper's `replace`: run the hands until one block leaves for the history.
    fn replace(&mut self) -> Option<u64> {
        loop {
            let from_t1 = self.len_of(T1) as f64 >= self.p.max(1.0) || self.len_of(T2) == 0;
            let (clock, ghost) = if from_t1 { (T1, B1) } else { (T2, B2) };
            let i = self.lists[clock as usize].tail;
            if i == crate::slab::NIL {
                return None;
            }
            if !self.slab.node(i).meta.referenced {
                self.move_to(i, ghost);
                return Some(self.slab.key(i));
            }
            // Referenced: T1's block goes to T2's tail, T2's recirculates; bit cleared.
            self.move_to(i, T2);
        }
    }
}

impl super::spec::FromSpec for Car {
    fn from_spec(capacity: usize, _spec: &super::spec::Spec) -> Self {
        Self::new(capacity)
    }
}

impl Replacement for Car {
    fn name(&self) -> &'static str {
        "car"
    }

    fn capacity(&self) -> usize {
        self.c
    }

    fn len(&self) -> usize {
        self.len_of(T1) + self.len_of(T2)
    }

    fn contains(&self, key: u64) -> bool {
        self.find(key).is_some_and(|i| self.slab.node(i).meta.list <= T2)
    }

    fn lookup(&mut self, access: &Access) -> bool {
        match self.find(access.key) {
            Some(i) if self.slab.node(i).meta.list <= T2 => {
                self.slab.node_mut(i).meta.referenced = true;
                true
            }
            _ => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.c == 0 {
            return None;
        }
        let key = access.key;
        let mut victim = None;
        let ghost = self.find(key);
        if self.len() >= self.c {
            victim = self.replace();
            if ghost.is_none() {
                if self.len_of(T1) + self.len_of(B1) >= self.c {
                    self.discard(B1);
                } else if self.len() + self.len_of(B1) + self.len_of(B2) >= 2 * self.c {
                    self.discard(B2);
                }
            }
        }
        match ghost {
            None => {
                let i = self.slab.alloc(key, Meta { list: T1, referenced: false });
                self.map.insert(key, i);
                self.lists[T1 as usize].push_head(self.slab.nodes_mut(), i);
            }
            Some(i) => {
                let (b1, b2) = (self.len_of(B1) as f64, self.len_of(B2) as f64);
                if self.slab.node(i).meta.list == B1 {
                    self.p = (self.p + (b2 / b1).max(1.0)).min(self.c as f64);
                } else {
                    self.p = (self.p - (b1 / b2).max(1.0)).max(0.0);
                }
                self.move_to(i, T2);
            }
        }
        victim
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.find(key) {
            Some(i) if self.slab.node(i).meta.list <= T2 => {
                let l = self.slab.node(i).meta.list;
                self.lists[l as usize].unlink(self.slab.nodes_mut(), i);
                self.map.remove(key, i);
                self.slab.release(i);
                true
            }
            _ => false,
        }
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.slab.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &mut Car, keys: &[u64]) -> Vec<(bool, Option<u64>)> {
        keys.iter().enumerate().map(|(t, &k)| p.access(&Access::read(k, t as u64))).collect()
    }

    #[test]
    fn a_referenced_block_survives_the_hand_and_moves_to_t2() {
        let mut p = Car::new(3);
        // 1 referenced; 4 runs T1's hand: 1 goes to T2, 2 leaves for B1.
        let r = run(&mut p, &[1, 2, 3, 1, 4]);
        assert_eq!(r[4], (false, Some(2)));
        assert_eq!(p.slab.node(p.find(1).unwrap_or(0)).meta.list, T2);
    }

    #[test]
    fn a_block_back_from_b1_raises_p_and_enters_t2() {
        let mut p = Car::new(3);
        // 4's replace: 1 (referenced) goes to T2, 2 to B1; T1 + B1 < c keeps the history.
        let r = run(&mut p, &[1, 2, 1, 3, 4]);
        assert_eq!(r[4], (false, Some(2)));
        assert_eq!(p.p(), 0.0);
        // 2 is in B1: 3 (T1's hand) leaves for B1, p grows by max(1, |B2|/|B1|) = 1, and 2
        // enters T2.
        assert_eq!(run(&mut p, &[2])[0], (false, Some(3)));
        assert_eq!(p.p(), 1.0);
        assert_eq!(p.slab.node(p.find(2).unwrap_or(0)).meta.list, T2);
    }

    #[test]
    fn history_stays_bounded_under_a_long_scan() {
        let c = 500;
        let mut p = Car::new(c);
        let full = p.memory_bytes();
        for k in 0..(10 * c as u64) {
            p.access(&Access::read(k % (3 * c as u64) + (k / 7) % 5, k));
            let dir = p.len() + p.len_of(B1) + p.len_of(B2);
            assert!(dir <= 2 * c && p.len_of(T1) + p.len_of(B1) <= c, "directory {dir}");
        }
        assert_eq!(p.memory_bytes(), full);
    }
}
