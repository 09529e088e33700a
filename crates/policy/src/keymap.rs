//! The hash index every replacement policy uses: block key → slab slot.
//!
//! Open addressing with linear probing and backward-shift deletion (no tombstones), sized
//! once from the number of entries it must hold, so it never rehashes on the hot path.
//!
//! Each table entry is one `u64`: the upper 32 bits are a fingerprint of the key (the top half
//! of a multiplicative hash), the lower 32 bits the slot. The key itself lives in the caller's
//! slab, which the lookup reads only when a fingerprint matches, so a table entry costs 8 bytes
//! and the table, at load factor 1/2, 16 bytes per entry. The entry's home bucket is derived
//! from its fingerprint alone (`fingerprint * buckets >> 32`, a multiply-shift range
//! reduction), so deletion can shift entries back without touching the slab.

/// Marks an empty bucket. Slot `u32::MAX` is never stored, so no live entry equals it.
const EMPTY: u64 = u64::MAX;

/// Buckets per entry the map is sized for (load factor 1/2).
const BUCKETS_PER_ENTRY: usize = 2;

/// The smallest table, so tiny caches still probe short runs.
const MIN_BUCKETS: usize = 16;

/// A fixed-size open-addressing map from `u64` keys to `u32` slots.
///
/// The map does not store keys; [`KeyMap::get`] takes the slab's key accessor to confirm a
/// fingerprint match. Every inserted key must be absent (the policies look up first).
#[derive(Clone, Debug)]
pub struct KeyMap {
    table: Box<[u64]>,
    len: usize,
    max_len: usize,
}

/// The 32-bit fingerprint of `key`: the high half of a multiplicative (Fibonacci) hash of the
/// key folded onto itself, so both volume and block bits reach it.
#[inline(always)]
fn fingerprint(key: u64) -> u32 {
    ((key ^ (key >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

impl KeyMap {
    /// A map able to hold `entries` keys at once.
    pub fn with_entries(entries: usize) -> Self {
        let buckets = entries.saturating_mul(BUCKETS_PER_ENTRY).max(MIN_BUCKETS);
        Self { table: vec![EMPTY; buckets].into_boxed_slice(), len: 0, max_len: entries }
    }

    /// Number of keys in the map.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the map holds no key.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of keys the map was sized for.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Bytes of memory the table occupies.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.table)
    }

    #[inline(always)]
    fn home(&self, fp: u32) -> usize {
        ((fp as u64 * self.table.len() as u64) >> 32) as usize
    }

    #[inline(always)]
    fn next(&self, i: usize) -> usize {
        let j = i + 1;
        if j == self.table.len() {
            0
        } else {
            j
        }
    }

    /// The slot of `key`, if present. `key_of(slot)` must return the key stored in `slot`.
    #[inline]
    pub fn get(&self, key: u64, key_of: impl Fn(u32) -> u64) -> Option<u32> {
        let fp = fingerprint(key);
        let mut i = self.home(fp);
        loop {
            let e = self.table[i];
            if e == EMPTY {
                return None;
            }
            if (e >> 32) as u32 == fp && key_of(e as u32) == key {
                return Some(e as u32);
            }
            i = self.next(i);
        }
    }

    /// Map `key`, which must be absent, to `slot`.
    ///
    /// # Panics
    /// If the map already holds as many keys as it was sized for, or `slot` is `u32::MAX`:
    /// both are bugs in the calling policy, never consequences of input.
    #[inline]
    pub fn insert(&mut self, key: u64, slot: u32) {
        assert!(self.len < self.max_len.max(1) && slot != u32::MAX, "KeyMap overfull");
        let fp = fingerprint(key);
        let mut i = self.home(fp);
        while self.table[i] != EMPTY {
            i = self.next(i);
        }
        self.table[i] = (u64::from(fp) << 32) | u64::from(slot);
        self.len += 1;
    }

    /// Remove the entry of `key`, known to map to `slot`. Returns false if it was absent.
    #[inline]
    pub fn remove(&mut self, key: u64, slot: u32) -> bool {
        let fp = fingerprint(key);
        let want = (u64::from(fp) << 32) | u64::from(slot);
        let mut i = self.home(fp);
        loop {
            let e = self.table[i];
            if e == EMPTY {
                return false;
            }
            if e == want {
                break;
            }
            i = self.next(i);
        }
        self.shift_back(i);
        self.len -= 1;
        true
    }

    /// Fill the hole at `hole` by moving back later entries of the same run whose home
    /// lies at or before the hole (cyclically).
    #[inline]
    fn shift_back(&mut self, mut hole: usize) {
        let n = self.table.len();
        let mut j = hole;
        loop {
            j = self.next(j);
            let e = self.table[j];
            if e == EMPTY {
                break;
            }
            let home = self.home((e >> 32) as u32);
            // Distances measured backwards from j, modulo the table size.
            let from_home = if j >= home { j - home } else { j + n - home };
            let from_hole = if j >= hole { j - hole } else { j + n - hole };
            if from_home >= from_hole {
                self.table[hole] = e;
                hole = j;
            }
        }
        self.table[hole] = EMPTY;
    }

    /// Remove every entry.
    pub fn clear(&mut self) {
        self.table.fill(EMPTY);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys live in a plain vector "slab"; slot i holds keys[i].
    fn check(map: &KeyMap, keys: &[u64], live: &[bool]) {
        for (slot, (&k, &l)) in keys.iter().zip(live).enumerate() {
            let got = map.get(k, |s| keys[s as usize]);
            assert_eq!(got, if l { Some(slot as u32) } else { None }, "key {k}");
        }
    }

    #[test]
    fn insert_get_remove_roundtrip() {
        let keys: Vec<u64> = (0..100).map(|i| i * 7919 + (i << 48)).collect();
        let mut map = KeyMap::with_entries(100);
        let mut live = vec![false; 100];
        for (i, &k) in keys.iter().enumerate() {
            map.insert(k, i as u32);
            live[i] = true;
        }
        assert_eq!(map.len(), 100);
        check(&map, &keys, &live);
        for i in (0..100).step_by(3) {
            assert!(map.remove(keys[i], i as u32));
            assert!(!map.remove(keys[i], i as u32), "second remove of {i}");
            live[i] = false;
        }
        assert_eq!(map.len(), 100 - 34);
        check(&map, &keys, &live);
        assert_eq!(map.get(123_456_789, |s| keys[s as usize]), None);
    }

    #[test]
    fn colliding_keys_survive_backward_shift() {
        // A tiny table forces long runs, wrap-around and shifting across the end.
        let n = 8;
        let keys: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x1234_5678_9abc)).collect();
        let mut map = KeyMap::with_entries(n);
        let mut live = vec![true; n];
        for (i, &k) in keys.iter().enumerate() {
            map.insert(k, i as u32);
        }
        for victim in [3usize, 0, 7, 5] {
            assert!(map.remove(keys[victim], victim as u32));
            live[victim] = false;
            check(&map, &keys, &live);
        }
        for victim in [3usize, 0] {
            map.insert(keys[victim], victim as u32);
            live[victim] = true;
        }
        check(&map, &keys, &live);
    }

    #[test]
    fn randomized_against_std_hashmap() {
        use std::collections::HashMap;
        let cap = 500;
        let mut map = KeyMap::with_entries(cap);
        let mut reference: HashMap<u64, u32> = HashMap::new();
        let mut slots: Vec<u64> = vec![0; cap];
        let mut free: Vec<u32> = (0..cap as u32).rev().collect();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = x % 2000;
            let found = map.get(key, |s| slots[s as usize]);
            assert_eq!(found, reference.get(&key).copied());
            match found {
                Some(slot) => {
                    assert!(map.remove(key, slot));
                    reference.remove(&key);
                    free.push(slot);
                }
                None => {
                    if let Some(slot) = free.pop() {
                        slots[slot as usize] = key;
                        map.insert(key, slot);
                        reference.insert(key, slot);
                    }
                }
            }
            assert_eq!(map.len(), reference.len());
        }
    }

    #[test]
    fn memory_is_sixteen_bytes_per_entry() {
        assert_eq!(KeyMap::with_entries(100_000).memory_bytes(), 1_600_000);
    }
}
