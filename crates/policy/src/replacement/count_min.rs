//! The frequency sketch of TinyLFU (Einziger, Friedman & Manes, ACM ToS 2017, section 3): a
//! count-min sketch (Cormode & Muthukrishnan 2005) of small saturating counters with the
//! paper's *reset*: after `sample` increments every counter is halved, so the counts
//! estimate the recent frequency and old popularity fades.
//!
//! Four rows of `width` 4-bit counters (kept one a byte, saturating at 15 as in the paper's
//! Caffeine implementation, or at 255 for libCacheSim's reading), `width` the power of two at or above the capacity in blocks, so
//! memory is bounded by the capacity: 4 bytes a block. Each row hashes the key with its own
//! seed, drawn from the policy's seed: the same seed gives the same estimates.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Rows of the sketch.
const DEPTH: usize = 4;
/// A counter's largest value in the paper (4 bits).
pub(crate) const MAX: u8 = 15;

/// A count-min sketch with periodic halving (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct CountMin {
    counters: Vec<u8>,
    mask: u64,
    seeds: [u64; DEPTH],
    /// Increments since the last halving, and how many trigger one.
    added: u64,
    sample: u64,
    /// A counter's largest value.
    max: u8,
}

/// splitmix64's finalizer: block keys are dense, the counters' positions must not be.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl CountMin {
    /// A sketch for a cache of `capacity` blocks, halved every `sample` increments, its
    /// counters saturating at `max`, its hashes drawn from `seed`.
    pub(crate) fn new(capacity: usize, sample: u64, max: u8, seed: u64) -> Self {
        let width = capacity.max(16).next_power_of_two();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        Self {
            counters: vec![0; DEPTH * width],
            mask: width as u64 - 1,
            seeds: std::array::from_fn(|_| rng.gen()),
            added: 0,
            sample: sample.max(1),
            max,
        }
    }

    /// The counter positions of `key`, one per row.
    fn slots(&self, key: u64) -> [usize; DEPTH] {
        let width = self.mask as usize + 1;
        std::array::from_fn(|r| r * width + (mix(key ^ self.seeds[r]) & self.mask) as usize)
    }

    /// The estimated recent frequency of `key`: the least of its counters.
    pub(crate) fn estimate(&self, key: u64) -> u8 {
        self.slots(key).iter().map(|&i| self.counters[i]).min().unwrap_or(0)
    }

    /// Count one access to `key` (its counters below the maximum grow by one), halving every
    /// counter when the sample is complete.
    pub(crate) fn increment(&mut self, key: u64) {
        self.add(key);
        self.added += 1;
        if self.added >= self.sample {
            self.added = 0;
            self.halve();
        }
    }

    /// Count one access to `key`, outside the sample (the caller halves).
    pub(crate) fn add(&mut self, key: u64) {
        for i in self.slots(key) {
            let c = &mut self.counters[i];
            *c = c.saturating_add(1).min(self.max);
        }
    }

    /// Halve every counter.
    pub(crate) fn halve(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
    }

    /// Bytes of the counters.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.counters.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_never_undercount_and_halve_after_the_sample() {
        let mut s = CountMin::new(4096, 1000, MAX, 1);
        for _ in 0..5 {
            s.increment(7);
        }
        s.increment(8);
        assert!(s.estimate(7) >= 5 && s.estimate(8) >= 1);
        for _ in 0..40 {
            s.increment(9);
        }
        assert_eq!(s.estimate(9), MAX, "saturates at 15");
        for k in 100..(100 + 1000 - 46) {
            s.increment(k);
        }
        // 1000 increments: every counter halved.
        assert!(s.estimate(9) <= MAX / 2 + 1, "{}", s.estimate(9));
        assert!(s.estimate(7) <= 3, "{}", s.estimate(7));
    }
}
