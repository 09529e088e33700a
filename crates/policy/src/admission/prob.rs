//! The probabilistic filter: admit each missed block with a fixed probability, whatever the
//! block. libCacheSim's `ProbAdmissioner` (`admission/prob.c`, default probability 0.5); the
//! same idea as SieveStore's RandSieve-C, with libCacheSim's generator so that the two
//! decide alike: Lemire's lehmer64 (a 128-bit multiplicative congruential generator, the
//! upper 64 bits of the state after each multiplication), a miss admitted when the draw
//! modulo 10^7 is below `probability * 10^7` (truncated).
//!
//! The generator starts from the state libCacheSim's Python package starts from
//! (0xDEADBEEF) with seed 1, the default; another seed sets the state's upper half to
//! `seed - 1`. libCacheSim's state is per thread and shared by every filter of the thread,
//! so its decisions equal these for one filter in a fresh thread.

use super::config_error::SieveConfigError;
use super::Admission;
use crate::Access;

/// libCacheSim's default probability.
pub const DEFAULT_PROBABILITY: f64 = 0.5;

/// The resolution of the probability: draws are taken modulo this.
const MODULE: u64 = 10_000_000;

/// lehmer64's multiplier.
const MULTIPLIER: u128 = 0xda94_2042_e4dd_58b5;

/// The generator's state with seed 1 (libCacheSim's initial state).
const INITIAL_STATE: u128 = 0xDEAD_BEEF;

/// Admit each miss with a fixed probability (see the module documentation).
#[derive(Clone, Debug)]
pub struct Probabilistic {
    threshold: u64,
    state: u128,
}

impl Probabilistic {
    /// A filter admitting misses with `probability` (above 0, at most 1), its generator
    /// started from `seed` (1: libCacheSim's start).
    pub fn new(probability: f64, seed: u64) -> Result<Self, SieveConfigError> {
        if !(probability > 0.0 && probability <= 1.0) {
            return Err(SieveConfigError::out_of_range(
                "prob",
                "probability",
                probability,
                "above 0 and at most 1",
            ));
        }
        let threshold = (probability * MODULE as f64) as u64;
        let state = (u128::from(seed.wrapping_sub(1)) << 64) | INITIAL_STATE;
        Ok(Self { threshold, state })
    }

    /// The next draw of lehmer64.
    #[inline]
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_mul(MULTIPLIER);
        (self.state >> 64) as u64
    }
}

impl Admission for Probabilistic {
    fn name(&self) -> &'static str {
        "prob"
    }

    #[inline]
    fn observe(&mut self, _access: &Access, _hit: bool) {}

    #[inline]
    fn admit(&mut self, _access: &Access) -> bool {
        self.next() % MODULE < self.threshold
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first 40 decisions at 0.5 of libCacheSim 0.3.5's `ProbAdmissioner` in a fresh
    /// process (`LRU(1000, admissioner=ProbAdmissioner(0.5))` over keys 1..=40, then which
    /// are resident).
    #[test]
    fn decides_as_libcachesim_does() {
        let mut p = Probabilistic::new(0.5, 1).unwrap();
        let got: String =
            (0..40).map(|i| if p.admit(&Access::read(i, i)) { '1' } else { '0' }).collect();
        assert_eq!(got, "0010111011111001001000110100011000001000");
    }

    #[test]
    fn admits_about_the_probability_and_seeds_differ() {
        let mut a = Probabilistic::new(0.1, 1).unwrap();
        let n = 100_000;
        let k = (0..n).filter(|&i| a.admit(&Access::read(i, i))).count() as f64;
        // Binomial(100000, 0.1): sd about 95.
        assert!((k - 10_000.0).abs() < 500.0, "{k}");
        let mut b = Probabilistic::new(0.5, 2).unwrap();
        let mut c = Probabilistic::new(0.5, 1).unwrap();
        let differ =
            (0..64).filter(|&i| b.admit(&Access::read(i, i)) != c.admit(&Access::read(i, i)));
        assert!(differ.count() > 10);
        assert!(Probabilistic::new(0.0, 1).is_err());
        assert!(Probabilistic::new(1.5, 1).is_err());
        let mut all = Probabilistic::new(1.0, 1).unwrap();
        assert!((0..1000).all(|i| all.admit(&Access::read(i, i))));
    }
}
