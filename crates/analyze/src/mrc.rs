//! LRU miss-ratio curves from stack distances (Mattson et al., 1970).
//!
//! By LRU's inclusion property, an LRU cache of `s` blocks (allocating every miss) hits an
//! access exactly when its reuse distance is below `s`. So one pass of [`crate::reuse`] gives
//! the miss ratio at every size: `miss(s) = 1 - #{d < s} / accesses`.

use crate::ReuseHistogram;
use serde::{Deserialize, Serialize};

/// Miss ratio (over all block accesses) at a list of cache sizes in blocks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MissRatioCurve {
    /// Cache sizes in blocks, increasing.
    pub sizes: Vec<u64>,
    /// Miss ratio at each size.
    pub miss_ratio: Vec<f64>,
}

impl MissRatioCurve {
    /// The exact curve of `h` at `sizes` (blocks; sorted here).
    pub fn exact(h: &ReuseHistogram, sizes: &[u64]) -> Self {
        let cum = cumulative_hits(h);
        let total = h.cold + h.reuses();
        let mut sizes = sizes.to_vec();
        sizes.sort_unstable();
        sizes.dedup();
        let miss_ratio = sizes
            .iter()
            .map(|&s| {
                if total == 0 {
                    return 0.0;
                }
                1.0 - hits_from(&cum, s) as f64 / total as f64
            })
            .collect();
        Self { sizes, miss_ratio }
    }

    /// Miss ratio at `size` by linear interpolation between the curve's points (the first or
    /// last point outside them).
    pub fn at(&self, size: u64) -> f64 {
        match self.sizes.binary_search(&size) {
            Ok(i) => self.miss_ratio[i],
            Err(0) => self.miss_ratio.first().copied().unwrap_or(1.0),
            Err(i) if i >= self.sizes.len() => self.miss_ratio.last().copied().unwrap_or(1.0),
            Err(i) => {
                let (s0, s1) = (self.sizes[i - 1] as f64, self.sizes[i] as f64);
                let (m0, m1) = (self.miss_ratio[i - 1], self.miss_ratio[i]);
                m0 + (m1 - m0) * (size as f64 - s0) / (s1 - s0)
            }
        }
    }
}

/// `cum[s]` = accesses with reuse distance `< s`, for `s` in `0..=max distance + 1`.
pub fn cumulative_hits(h: &ReuseHistogram) -> Vec<u64> {
    let mut cum = Vec::with_capacity(h.all.len() + 1);
    let mut acc = 0u64;
    cum.push(0);
    for &n in &h.all {
        acc += n;
        cum.push(acc);
    }
    cum
}

/// Hits of an LRU cache of `size` blocks from [`cumulative_hits`].
pub fn hits_from(cum: &[u64], size: u64) -> u64 {
    let i = (size as usize).min(cum.len() - 1);
    cum[i]
}

/// `n` cache sizes spread evenly on a log scale over `1..=max` blocks (deduplicated).
pub fn log_sizes(max: u64, n: usize) -> Vec<u64> {
    let max = max.max(1);
    let mut v: Vec<u64> = (0..n.max(2))
        .map(|i| {
            let f = i as f64 / (n.max(2) - 1) as f64;
            ((max as f64).powf(f)).round().max(1.0) as u64
        })
        .collect();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_b_c_a_misses_below_three_blocks_and_hits_from_three() {
        let h = ReuseHistogram::of(&[1, 2, 3, 1], &[false; 4], 4096);
        let m = MissRatioCurve::exact(&h, &[3, 1, 2, 4]);
        assert_eq!(m.sizes, vec![1, 2, 3, 4]);
        assert_eq!(m.miss_ratio, vec![1.0, 1.0, 0.75, 0.75]);
        assert_eq!(m.at(0), 1.0);
        assert_eq!(m.at(100), 0.75);
    }

    #[test]
    fn log_sizes_span_one_to_max() {
        let s = log_sizes(1000, 4);
        assert_eq!(s, vec![1, 10, 100, 1000]);
    }
}
