//! RandSieve-BlkD, the discrete random baseline of SieveStore section 5.1: "allocates a
//! randomly chosen 1% of the blocks accessed each day and batch-allocates them to the cache
//! for the next day".

use super::config_error::SieveConfigError;
use super::epoch::{EpochCounts, EpochSieve};
use crate::Access;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Choose a random `fraction` of each epoch's distinct blocks (seeded, reproducible).
#[derive(Clone, Debug)]
pub struct RandSieveBlkD {
    fraction: f64,
    counts: EpochCounts,
    rng: Xoshiro256PlusPlus,
}

impl RandSieveBlkD {
    /// A sieve choosing `fraction` (0..=1) of the distinct blocks of each epoch.
    pub fn new(fraction: f64, seed: u64) -> Result<Self, SieveConfigError> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(SieveConfigError::out_of_range(
                "randsieve-blkd",
                "fraction",
                fraction,
                "0..=1",
            ));
        }
        Ok(Self {
            fraction,
            counts: EpochCounts::default(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        })
    }
}

impl EpochSieve for RandSieveBlkD {
    fn name(&self) -> &'static str {
        "randsieve-blkd"
    }

    #[inline]
    fn observe(&mut self, access: &Access) {
        self.counts.add(access.key);
    }

    fn end_epoch(&mut self) -> Vec<(u64, u64)> {
        let mut v = self.counts.take_sorted();
        let n = (v.len() as f64 * self.fraction).round() as usize;
        let (chosen, _) = v.partial_shuffle(&mut self.rng, n);
        chosen.to_vec()
    }

    fn memory_bytes(&self) -> usize {
        self.counts.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chooses_one_percent_of_distinct_blocks() {
        let mut s = RandSieveBlkD::new(0.01, 3).unwrap();
        for k in 0..10_000u64 {
            s.observe(&Access::read(k, k));
            s.observe(&Access::read(k, k));
        }
        let c = s.end_epoch();
        assert_eq!(c.len(), 100);
        assert!(c.iter().all(|&(k, n)| k < 10_000 && n == 2));
        let mut keys: Vec<u64> = c.iter().map(|x| x.0).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 100, "no block chosen twice");
        // Not simply the first 100 keys.
        assert!(keys.iter().any(|&k| k >= 100));
    }
}
