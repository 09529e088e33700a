//! Exact reuse distance in O(n log n) (Bonfire Figure 3; Mattson's LRU stack distance).
//!
//! The reuse distance of an access is the number of distinct blocks accessed between it and
//! the previous access to the same block (a,b,c,a: 2 for the second a); a first access has
//! none (infinite). It equals the block's depth in an LRU stack, so an LRU cache of `s`
//! blocks hits exactly the accesses with distance `< s` ([`crate::mrc`]).
//!
//! Algorithm (Bennett and Kruskal, 1975): a Fenwick tree over access positions marks, for
//! every block seen, the position of its latest access. The distance of access `i` whose
//! block was last accessed at `p` is the number of marks after `p`: `D - prefix(p)` where `D`
//! is the number of distinct blocks so far. Then `p` is unmarked and `i` marked.

use crate::temporal::percent;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// A Fenwick (binary indexed) tree of counts over positions `1..=n`.
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Self { tree: vec![0; n + 1] }
    }

    /// Add `delta` (±1) at position `i` (1-based).
    #[inline]
    fn add(&mut self, mut i: usize, delta: i32) {
        let n = self.tree.len();
        while i < n {
            self.tree[i] = self.tree[i].wrapping_add(delta as u32);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of positions `1..=i`.
    #[inline]
    fn prefix(&self, mut i: usize) -> u64 {
        let mut s = 0u64;
        while i > 0 {
            s += self.tree[i] as u64;
            i &= i - 1;
        }
        s
    }
}

/// Call `f(i, distance)` for every access `i` of `keys` in order: `Some(d)` with its reuse
/// distance, or `None` for a block's first access. Returns the number of distinct blocks.
pub fn reuse_distances(keys: &[u64], mut f: impl FnMut(usize, Option<u64>)) -> u64 {
    let mut fen = Fenwick::new(keys.len());
    let mut last: FxHashMap<u64, usize> = FxHashMap::default();
    last.reserve(keys.len().min(1 << 24));
    let mut distinct = 0u64;
    for (i, &k) in keys.iter().enumerate() {
        let pos = i + 1;
        match last.insert(k, pos) {
            Some(p) => {
                let d = distinct - fen.prefix(p);
                fen.add(p, -1);
                f(i, Some(d));
            }
            None => {
                distinct += 1;
                f(i, None);
            }
        }
        fen.add(pos, 1);
    }
    distinct
}

/// Upper bounds (exclusive, in bytes) of the reuse-distance groups of Bonfire Figure 3:
/// under 10 MB, 10 MB to 100 MB, 100 MB to 1 GB, 1 GB and over. The paper's text names
/// 10 MB as the bound of "small" reuse distances; the other bounds are ember's decades.
pub const REUSE_BUCKETS: [(&str, u64); 4] = [
    ("<10MB", 10_000_000),
    ("10MB-100MB", 100_000_000),
    ("100MB-1GB", 1_000_000_000),
    (">=1GB", u64::MAX),
];

/// Reuse distances of a trace or volume: the full distribution and Figure 3's groups.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReuseHistogram {
    /// `all[d]`: accesses (reads and writes) with reuse distance `d` blocks; the LRU stack
    /// distance distribution of [`crate::mrc`].
    pub all: Vec<u64>,
    /// First accesses (infinite distance).
    pub cold: u64,
    /// Reaccesses (reads of a block accessed before) in each [`REUSE_BUCKETS`] group.
    pub reaccess_buckets: [u64; 4],
    /// Figure 3: `100 * reaccess_buckets / reaccesses`.
    pub reaccess_bucket_percent: [f64; 4],
    /// Median reuse distance of reaccesses, in blocks (0 when there is none).
    pub reaccess_median_blocks: u64,
}

impl ReuseHistogram {
    /// The histogram of `keys`/`writes` with `block_size`-byte blocks.
    pub fn of(keys: &[u64], writes: &[bool], block_size: u64) -> Self {
        let mut h = ReuseHistogram::default();
        let mut reads_hist: Vec<u64> = Vec::new();
        reuse_distances(keys, |i, d| match d {
            None => h.cold += 1,
            Some(d) => {
                let d = d as usize;
                if h.all.len() <= d {
                    h.all.resize(d + 1, 0);
                }
                h.all[d] += 1;
                if !writes[i] {
                    if reads_hist.len() <= d {
                        reads_hist.resize(d + 1, 0);
                    }
                    reads_hist[d] += 1;
                }
            }
        });
        let reaccesses: u64 = reads_hist.iter().sum();
        let mut seen = 0u64;
        let mut median_set = false;
        for (d, &n) in reads_hist.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let bytes = (d as u64).saturating_mul(block_size);
            let b = REUSE_BUCKETS.iter().position(|&(_, hi)| bytes < hi).unwrap_or(3);
            h.reaccess_buckets[b] += n;
            seen += n;
            if !median_set && 2 * seen >= reaccesses {
                h.reaccess_median_blocks = d as u64;
                median_set = true;
            }
        }
        for b in 0..4 {
            h.reaccess_bucket_percent[b] = percent(h.reaccess_buckets[b], reaccesses);
        }
        h
    }

    /// Accesses with a finite reuse distance.
    pub fn reuses(&self) -> u64 {
        self.all.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distances(keys: &[u64]) -> Vec<Option<u64>> {
        let mut out = Vec::new();
        reuse_distances(keys, |_, d| out.push(d));
        out
    }

    /// Quadratic reference: distinct keys strictly between the two accesses.
    fn naive(keys: &[u64]) -> Vec<Option<u64>> {
        (0..keys.len())
            .map(|i| {
                let p = (0..i).rev().find(|&j| keys[j] == keys[i])?;
                let mut s: Vec<u64> = keys[p + 1..i].to_vec();
                s.sort_unstable();
                s.dedup();
                Some(s.len() as u64)
            })
            .collect()
    }

    #[test]
    fn bonfire_figure3_reuse_distance_of_a_b_c_a_is_2() {
        assert_eq!(distances(&[1, 2, 3, 1]), vec![None, None, None, Some(2)]);
        assert_eq!(distances(&[1, 1]), vec![None, Some(0)]);
        assert_eq!(distances(&[1, 2, 2, 2, 1]), vec![None, None, Some(0), Some(0), Some(1)]);
    }

    #[test]
    fn matches_the_quadratic_definition_on_a_pseudo_random_trace() {
        let mut x = 12345u64;
        let keys: Vec<u64> = (0..3000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) % 200
            })
            .collect();
        assert_eq!(distances(&keys), naive(&keys));
    }

    #[test]
    fn figure3_buckets_count_reads_only() {
        // a b c a(R, d=2) b(W, d=2) with 4 MB blocks: distance 2 = 8 MB < 10 MB.
        let h =
            ReuseHistogram::of(&[1, 2, 3, 1, 2], &[false, false, false, false, true], 4_000_000);
        assert_eq!(h.cold, 3);
        assert_eq!(h.all, vec![0, 0, 2]);
        assert_eq!(h.reaccess_buckets, [1, 0, 0, 0]);
        assert_eq!(h.reaccess_bucket_percent, [100.0, 0.0, 0.0, 0.0]);
        assert_eq!(h.reaccess_median_blocks, 2);
        // With 40 MB blocks the same read lands in 10 MB-100 MB.
        let h = ReuseHistogram::of(&[1, 2, 3, 1], &[false; 4], 40_000_000);
        assert_eq!(h.reaccess_buckets, [0, 1, 0, 0]);
    }
}
