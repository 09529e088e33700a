//! The fully-associative LRU cache of SieveStore section 4's simulator ("a fully-associative,
//! 16GB cache with LRU replacement"), used under every continuous sieve. An intrusive doubly
//! linked list over a slab, indexed by a block-key hash map: O(1) per access.

use ember_policy::admission::key_hash::{key_map, KeyMap};
use ember_policy::{Access, Replacement};

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    key: u64,
    prev: u32,
    next: u32,
}

/// LRU replacement over `capacity` block slots.
#[derive(Clone, Debug)]
pub struct SieveLru {
    capacity: usize,
    map: KeyMap<u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
}

impl SieveLru {
    /// An empty LRU cache of `capacity` blocks (at most 2^32 - 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.min(NIL as usize - 1);
        let mut map = key_map();
        map.reserve(capacity.min(1 << 24));
        Self {
            capacity,
            map,
            nodes: Vec::with_capacity(capacity.min(1 << 24)),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        self.nodes[i as usize].prev = NIL;
        self.nodes[i as usize].next = self.head;
        if self.head != NIL {
            self.nodes[self.head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }
}

impl Replacement for SieveLru {
    fn name(&self) -> &'static str {
        "lru"
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn contains(&self, key: u64) -> bool {
        self.map.contains_key(&key)
    }

    #[inline]
    fn lookup(&mut self, access: &Access) -> bool {
        match self.map.get(&access.key) {
            Some(&i) => {
                if self.head != i {
                    self.unlink(i);
                    self.push_front(i);
                }
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.capacity == 0 {
            return None;
        }
        if self.map.len() < self.capacity {
            let i = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.nodes.push(Node { key: access.key, prev: NIL, next: NIL });
                    (self.nodes.len() - 1) as u32
                }
            };
            self.nodes[i as usize].key = access.key;
            self.push_front(i);
            self.map.insert(access.key, i);
            return None;
        }
        // Full: reuse the LRU slot.
        let i = self.tail;
        let victim = self.nodes[i as usize].key;
        self.unlink(i);
        self.map.remove(&victim);
        self.nodes[i as usize].key = access.key;
        self.push_front(i);
        self.map.insert(access.key, i);
        Some(victim)
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.map.remove(&key) {
            Some(i) => {
                self.unlink(i);
                self.free.push(i);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(k: u64) -> Access {
        Access::read(k, 0)
    }

    #[test]
    fn evicts_the_least_recently_used() {
        let mut c = SieveLru::new(2);
        assert_eq!(c.access(&a(1)), (false, None));
        assert_eq!(c.access(&a(2)), (false, None));
        assert_eq!(c.access(&a(1)), (true, None));
        assert_eq!(c.access(&a(3)), (false, Some(2)));
        assert!(c.contains(1) && c.contains(3) && !c.contains(2));
        assert!(c.remove(1));
        assert_eq!(c.len(), 1);
        assert_eq!(c.access(&a(4)), (false, None));
        assert_eq!(c.access(&a(5)), (false, Some(3)));
        assert_eq!(c.len(), 2);
    }
}
