//! Direct indexing of dense block keys: one slot per block of each volume's accessed range.
//!
//! Block traces address dense ranges, so when the blocks of each volume span at most a few
//! times as many slots as there are accesses, a per-key table can be a plain array indexed
//! by `base[volume] + block` (the volumes' ranges laid end to end) instead of a hash map:
//! one cache miss per lookup instead of hashing and probing. Sparse keys (hashed object ids)
//! are left to a hash map. The same density test as `ember_sim::stream::distinct_keys`.

use ember_trace::{key_block, key_volume};

/// Dense indexes of a set of keys: `index(k) = key_block(k) - lo(volume) + start(volume)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DenseIndex {
    /// Per volume (indexed by `key_volume`): the slot of block 0, modulo 2^64.
    base: Vec<u64>,
    /// Total slots (the sum of the volumes' block ranges).
    slots: usize,
}

impl DenseIndex {
    /// The index of `keys` when their volumes' block ranges total at most `max_per_key`
    /// slots per key (at least `1 << 16` slots in all), else `None` (sparse keys).
    pub fn of(keys: &[u64], max_per_key: u64) -> Option<Self> {
        let mut r = DenseRanges::default();
        r.add_all(keys);
        r.index(max_per_key)
    }

    /// Number of slots: every indexed key maps below it.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The slot of `key`, which must be one of the keys the index was built from.
    #[inline]
    pub fn index(&self, key: u64) -> usize {
        key_block(key).wrapping_add(self.base[key_volume(key) as usize]) as usize
    }
}

/// The block range of each volume of a set of keys, gathered as the keys stream past (a
/// counting pass), for a [`DenseIndex`] of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DenseRanges {
    /// Per volume (indexed by `key_volume`): (min block, max block); (MAX, 0) if none.
    ranges: Vec<(u64, u64)>,
    /// Keys added.
    keys: u64,
}

impl DenseRanges {
    /// Add `keys`.
    pub fn add_all(&mut self, keys: &[u64]) {
        let mut last_vol = usize::MAX;
        let mut cur = (u64::MAX, 0u64);
        for &k in keys {
            let v = key_volume(k) as usize;
            let b = key_block(k);
            if v != last_vol {
                if last_vol != usize::MAX {
                    self.ranges[last_vol] = cur;
                }
                if v >= self.ranges.len() {
                    self.ranges.resize(v + 1, (u64::MAX, 0));
                }
                last_vol = v;
                cur = self.ranges[v];
            }
            cur = (cur.0.min(b), cur.1.max(b));
        }
        if last_vol != usize::MAX {
            self.ranges[last_vol] = cur;
        }
        self.keys += keys.len() as u64;
    }

    /// The ranges of volume `volume`'s keys only (as if only they had been added).
    pub fn volume(&self, volume: u32, keys: u64) -> Self {
        let v = volume as usize;
        let mut ranges = vec![(u64::MAX, 0); v + 1];
        if let Some(&r) = self.ranges.get(v) {
            ranges[v] = r;
        }
        Self { ranges, keys }
    }

    /// The index of the keys added when their volumes' block ranges total at most
    /// `max_per_key` slots per key (at least `1 << 16` slots in all), else `None`.
    pub fn index(&self, max_per_key: u64) -> Option<DenseIndex> {
        let limit = self.keys.saturating_mul(max_per_key).max(1 << 16);
        let mut at = 0u64;
        let mut base = vec![0u64; self.ranges.len()];
        for (v, &(lo, hi)) in self.ranges.iter().enumerate() {
            if lo > hi {
                continue; // volume not accessed
            }
            base[v] = at.wrapping_sub(lo);
            at += hi - lo + 1;
            if at > limit {
                return None;
            }
        }
        Some(DenseIndex { base, slots: usize::try_from(at).ok()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::block_key;

    #[test]
    fn dense_volumes_are_laid_end_to_end() {
        let keys = [block_key(2, 1000), block_key(0, 5), block_key(2, 1003), block_key(0, 7)];
        let d = DenseIndex::of(&keys, 4).expect("dense");
        // Volume 0: blocks 5..=7 in slots 0..3; volume 2: blocks 1000..=1003 in slots 3..7.
        assert_eq!(d.slots(), 7);
        let got: Vec<usize> = keys.iter().map(|&k| d.index(k)).collect();
        assert_eq!(got, vec![3, 0, 6, 2]);
        assert_eq!(DenseIndex::of(&[], 4).map(|d| d.slots()), Some(0));
    }

    #[test]
    fn sparse_keys_are_refused() {
        // Hashed ids: two keys 2^40 blocks apart are far beyond 4 slots per key.
        assert_eq!(DenseIndex::of(&[1, 1 << 40], 4), None);
        let spread: Vec<u64> = (0..100_000u64).map(|i| i * 0x1_0000_0001).collect();
        assert_eq!(DenseIndex::of(&spread, 4), None);
    }
}
