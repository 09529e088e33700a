//! SHARDS: a sampled miss-ratio curve for traces too large for the exact one (Waldspurger et
//! al., *Efficient MRC Construction with SHARDS*, FAST 2015; fixed-rate variant).
//!
//! A block is sampled when a hash of its key, modulo `P = 2^24`, is below `T = R * P`; the
//! sampled accesses are run through the exact reuse-distance pass, each distance is scaled
//! by `1 / R`, and the miss ratio at size `s` is the share of sampled accesses whose scaled
//! distance is not below `s` (first accesses included).

use crate::reuse::{HistogramBuilder, ReusePass};
use crate::{MissRatioCurve, ReuseHistogram};
use std::fmt;

/// The modulus of the sampling hash.
const P: u64 = 1 << 24;

/// An invalid sampling rate.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardsError(pub f64);

impl fmt::Display for ShardsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SHARDS sampling rate must be in (0, 1], got {}", self.0)
    }
}

impl std::error::Error for ShardsError {}

/// SplitMix64's finalizer, the sampling hash.
#[inline]
fn hash(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The SHARDS estimate of the LRU miss-ratio curve of `keys` at `sizes` (blocks), sampling
/// at `rate`. Returns the curve and the number of sampled accesses.
pub fn shards_mrc(
    keys: &[u64],
    rate: f64,
    sizes: &[u64],
) -> Result<(MissRatioCurve, u64), ShardsError> {
    let mut p = ShardsPass::new(rate)?;
    p.push_with(keys, |_| true);
    let (h, n) = p.finish(1);
    Ok((MissRatioCurve::exact(&h, sizes), n))
}

/// The SHARDS pass over keys that arrive in chunks: the exact reuse-distance pass over the
/// sampled blocks only, so its state is about `rate` times the exact pass's (a hash-map entry
/// per sampled block), plus the histogram of scaled distances (8 bytes per block of the
/// largest scaled distance, at most about the working set).
pub struct ShardsPass {
    /// Threshold: a key is sampled when `hash(key) % P < t`.
    t: u64,
    /// The effective rate, `t / P`.
    r: f64,
    pass: ReusePass,
    hist: HistogramBuilder,
    sampled: u64,
    keys: Vec<u64>,
    reads: Vec<bool>,
}

impl ShardsPass {
    /// An empty pass sampling at `rate`, in (0, 1].
    pub fn new(rate: f64) -> Result<Self, ShardsError> {
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(ShardsError(rate));
        }
        let t = ((rate * P as f64).round() as u64).clamp(1, P);
        Ok(Self {
            t,
            r: t as f64 / P as f64,
            pass: ReusePass::new(None),
            hist: HistogramBuilder::new(),
            sampled: 0,
            keys: Vec::new(),
            reads: Vec::new(),
        })
    }

    /// The next block accesses: `keys`, and whether each is a write.
    pub fn push(&mut self, keys: &[u64], writes: &[bool]) {
        self.push_with(keys, |i| !writes[i]);
    }

    /// The next block accesses: `keys`, and `read(i)` whether access `i` is a read.
    fn push_with(&mut self, keys: &[u64], read: impl Fn(usize) -> bool) {
        self.keys.clear();
        self.reads.clear();
        for (i, &k) in keys.iter().enumerate() {
            if hash(k) % P < self.t {
                self.keys.push(k);
                self.reads.push(read(i));
            }
        }
        self.sampled += self.keys.len() as u64;
        let (r, hist, reads) = (self.r, &mut self.hist, &self.reads);
        // Distances scaled by 1/R, in units of whole blocks.
        self.pass.push(&self.keys, |i, d| hist.push(d.map(|d| (d as f64 / r) as u64), reads[i]));
    }

    /// The histogram of scaled distances (`block_size`-byte blocks for Figure 3's groups;
    /// counts are of sampled accesses) and the number of sampled accesses.
    pub fn finish(self, block_size: u64) -> (ReuseHistogram, u64) {
        (self.hist.finish(block_size), self.sampled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_one_is_exact() {
        let keys: Vec<u64> = (0..5000u64).map(|i| (i * 7919) % 300).collect();
        let sizes = [1, 10, 100, 299, 300, 301];
        let exact = MissRatioCurve::exact(
            &crate::ReuseHistogram::of(&keys, &vec![false; 5000], 4096),
            &sizes,
        );
        let (s, n) = shards_mrc(&keys, 1.0, &sizes).unwrap();
        assert_eq!(n, 5000);
        assert_eq!(s, exact);
        assert!(shards_mrc(&keys, 0.0, &sizes).is_err());
        assert!(shards_mrc(&keys, 1.5, &sizes).is_err());
    }
}
