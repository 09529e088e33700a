//! The reuse-distance histogram: built access by access ([`HistogramBuilder`]), with
//! Bonfire Figure 3's groups ([`REUSE_BUCKETS`]). Imports the pass ([`reuse_distances`]).

use super::distance::reuse_distances;
use crate::temporal::percent;
use serde::{Deserialize, Serialize};

/// Distances below this are counted in place by [`ReuseHistogram::of`].
const SHORT: usize = 1 << 15;

/// Sort `v` (LSD radix sort, 11 bits a pass, only as many passes as the largest value needs).
fn radix_sort(v: &mut Vec<u64>) {
    const BITS: u32 = 11;
    let Some(&max) = v.iter().max() else { return };
    let bits = 64 - max.leading_zeros();
    let mut buf = vec![0u64; v.len()];
    let mut shift = 0;
    while shift < bits {
        let mut pos = [0usize; 1 << BITS];
        for &x in v.iter() {
            pos[((x >> shift) & ((1 << BITS) - 1)) as usize] += 1;
        }
        let mut acc = 0;
        for p in pos.iter_mut() {
            let c = *p;
            *p = acc;
            acc += c;
        }
        for &x in v.iter() {
            let b = ((x >> shift) & ((1 << BITS) - 1)) as usize;
            buf[pos[b]] = x;
            pos[b] += 1;
        }
        std::mem::swap(v, &mut buf);
        shift += BITS;
    }
}

/// Long distances [`HistogramBuilder`] holds before sorting them into the histogram.
const LONG_BATCH: usize = 1 << 20;

/// A [`ReuseHistogram`] built access by access, in memory bounded by the largest distance
/// (below the distinct blocks), not the accesses.
///
/// Short distances are counted in place (the two small arrays stay in cache); long ones,
/// whose counters would be scattered over megabytes, are appended as `distance << 1 |
/// is_read` and radix-sorted in batches of [`LONG_BATCH`], so the histogram is built in
/// order.
pub struct HistogramBuilder {
    all: Vec<u64>,
    reads: Vec<u64>,
    cold: u64,
    long: Vec<u64>,
    /// Long distances held before a sort ([`LONG_BATCH`]; smaller in tests).
    batch: usize,
}

impl Default for HistogramBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl HistogramBuilder {
    /// No access yet.
    pub fn new() -> Self {
        Self {
            all: vec![0; SHORT],
            reads: vec![0; SHORT],
            cold: 0,
            long: Vec::new(),
            batch: LONG_BATCH,
        }
    }

    /// Count one access: its distance (`None` for a first access) and whether it is a read.
    #[inline]
    pub fn push(&mut self, d: Option<u64>, read: bool) {
        match d {
            None => self.cold += 1,
            Some(d) if (d as usize) < SHORT => {
                self.all[d as usize] += 1;
                self.reads[d as usize] += read as u64;
            }
            Some(d) => {
                self.long.push(d << 1 | read as u64);
                if self.long.len() >= self.batch {
                    self.fold_long();
                }
            }
        }
    }

    /// Sort the long distances held into the histogram.
    fn fold_long(&mut self) {
        radix_sort(&mut self.long);
        if let Some(&last) = self.long.last() {
            let len = (last >> 1) as usize + 1;
            if self.all.len() < len {
                self.all.resize(len, 0);
                self.reads.resize(len, 0);
            }
        }
        for &x in &self.long {
            let d = (x >> 1) as usize;
            self.all[d] += 1;
            self.reads[d] += x & 1;
        }
        self.long.clear();
    }

    /// The histogram, with `block_size`-byte blocks for Figure 3's groups.
    pub fn finish(mut self, block_size: u64) -> ReuseHistogram {
        self.fold_long();
        drop(self.long);
        let mut h = ReuseHistogram { all: self.all, cold: self.cold, ..Default::default() };
        let mut reads_hist = self.reads;
        let used = h.all.iter().rposition(|&n| n > 0).map_or(0, |d| d + 1);
        h.all.truncate(used);
        reads_hist.truncate(used);
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
        let mut b = HistogramBuilder::new();
        reuse_distances(keys, |i, d| b.push(d, !writes[i]));
        b.finish(block_size)
    }

    /// Accesses with a finite reuse distance.
    pub fn reuses(&self) -> u64 {
        self.all.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::DenseIndex;
    use crate::reuse::{ReusePass, DENSE_SLOTS_PER_KEY};

    #[test]
    fn radix_sort_sorts() {
        let mut x = 99u64;
        let mut v: Vec<u64> = (0..10_000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                x >> (x % 50)
            })
            .collect();
        let mut w = v.clone();
        w.sort_unstable();
        radix_sort(&mut v);
        assert_eq!(v, w);
    }

    #[test]
    fn long_distances_go_through_the_sorted_path() {
        // 40,000 distinct blocks, then again in the same order: every second access has
        // distance 39,999 (>= SHORT); a write among them is counted in `all` only.
        let keys: Vec<u64> = (0..40_000u64).chain(0..40_000).collect();
        let mut writes = vec![false; 80_000];
        writes[40_000] = true;
        let h = ReuseHistogram::of(&keys, &writes, 4096);
        assert_eq!(h.cold, 40_000);
        assert_eq!(h.all.len(), 40_000);
        assert_eq!(h.all[39_999], 40_000);
        assert_eq!(h.reaccess_median_blocks, 39_999);
        // 39,999 blocks of 4 KiB = 164 MB: the 100MB-1GB group.
        assert_eq!(h.reaccess_buckets, [0, 0, 39_999, 0]);
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

    #[test]
    fn chunked_pass_and_batched_long_distances_equal_the_whole_pass() {
        // Zipf-like keys over 100,000 blocks: many distances above SHORT.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let keys: Vec<u64> = (0..400_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let r = x % 100_000;
                r * r / 100_000 + (x >> 40) % 3
            })
            .collect();
        let writes: Vec<bool> = keys.iter().map(|k| k.is_multiple_of(5)).collect();
        let whole = ReuseHistogram::of(&keys, &writes, 4096);
        assert!(whole.all.len() > SHORT, "longest distance {}", whole.all.len());
        for dense in [true, false] {
            let index = dense.then(|| DenseIndex::of(&keys, DENSE_SLOTS_PER_KEY).expect("dense"));
            let mut pass = ReusePass::new(index);
            let mut b = HistogramBuilder { batch: 1000, ..HistogramBuilder::new() };
            let mut at = 0;
            for len in [1, 7, 64, 5000, 100_000].iter().cycle() {
                let end = (at + len).min(keys.len());
                pass.push(&keys[at..end], |i, d| b.push(d, !writes[at + i]));
                at = end;
                if at == keys.len() {
                    break;
                }
            }
            assert_eq!(pass.distinct(), whole.cold);
            assert_eq!(b.finish(4096), whole, "dense {dense}");
        }
    }
}
