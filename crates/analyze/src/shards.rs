//! SHARDS: a sampled miss-ratio curve for traces too large for the exact one (Waldspurger et
//! al., *Efficient MRC Construction with SHARDS*, FAST 2015; fixed-rate variant).
//!
//! A block is sampled when a hash of its key, modulo `P = 2^24`, is below `T = R * P`; the
//! sampled accesses are run through the exact reuse-distance pass, each distance is scaled
//! by `1 / R`, and the miss ratio at size `s` is the share of sampled accesses whose scaled
//! distance is not below `s` (first accesses included).

use crate::{reuse_distances, MissRatioCurve};
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
    if !(rate > 0.0 && rate <= 1.0) {
        return Err(ShardsError(rate));
    }
    let t = ((rate * P as f64).round() as u64).clamp(1, P);
    let r = t as f64 / P as f64;
    let sampled: Vec<u64> = keys.iter().copied().filter(|&k| hash(k) % P < t).collect();
    // Scaled distances, bucketed in units of whole blocks.
    let mut scaled: Vec<u64> = Vec::new();
    let mut cold = 0u64;
    reuse_distances(&sampled, |_, d| match d {
        None => cold += 1,
        Some(d) => {
            let s = (d as f64 / r) as usize;
            if scaled.len() <= s {
                scaled.resize(s + 1, 0);
            }
            scaled[s] += 1;
        }
    });
    let h = crate::ReuseHistogram { all: scaled, cold, ..Default::default() };
    Ok((MissRatioCurve::exact(&h, sizes), sampled.len() as u64))
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
