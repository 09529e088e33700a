//! A plain LRU for tests, until the `policies` branch's LRU is merged in.

use ember_policy::{Access, Replacement};
use std::collections::{BTreeMap, HashMap};

/// Least-recently-used order over `capacity` blocks.
pub struct Lru {
    cap: usize,
    stamp: u64,
    by_key: HashMap<u64, u64>,
    by_stamp: BTreeMap<u64, u64>,
}

impl Lru {
    /// An empty LRU of `cap` blocks.
    pub fn new(cap: usize) -> Self {
        Self { cap, stamp: 0, by_key: HashMap::new(), by_stamp: BTreeMap::new() }
    }

    fn touch(&mut self, key: u64) {
        if let Some(old) = self.by_key.insert(key, self.stamp) {
            self.by_stamp.remove(&old);
        }
        self.by_stamp.insert(self.stamp, key);
        self.stamp += 1;
    }
}

impl Replacement for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.by_key.len()
    }
    fn contains(&self, key: u64) -> bool {
        self.by_key.contains_key(&key)
    }
    fn lookup(&mut self, a: &Access) -> bool {
        if self.by_key.contains_key(&a.key) {
            self.touch(a.key);
            true
        } else {
            false
        }
    }
    fn insert(&mut self, a: &Access) -> Option<u64> {
        let mut victim = None;
        if self.by_key.len() >= self.cap {
            if let Some((&s, &k)) = self.by_stamp.iter().next() {
                self.by_stamp.remove(&s);
                self.by_key.remove(&k);
                victim = Some(k);
            }
        }
        self.touch(a.key);
        victim
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.by_key.remove(&key) {
            Some(s) => {
                self.by_stamp.remove(&s);
                true
            }
            None => false,
        }
    }
}
