//! RandSieve-C, the continuous random baseline of SieveStore section 5.1: "a continuous
//! variant that randomly allocates 1% of all misses". It shows that SieveStore's gains come
//! from identifying hot blocks, not from allocating rarely.

use super::config_error::SieveConfigError;
use super::Admission;
use crate::Access;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The paper's sampling fraction: 1 % of misses.
pub const DEFAULT_FRACTION: f64 = 0.01;

/// Allocate each miss independently with probability `fraction` (seeded, reproducible).
#[derive(Clone, Debug)]
pub struct RandSieveC {
    fraction: f64,
    rng: Xoshiro256PlusPlus,
}

impl RandSieveC {
    /// A sieve admitting a `fraction` (0..=1) of misses, drawn from a generator seeded with
    /// `seed`.
    pub fn new(fraction: f64, seed: u64) -> Result<Self, SieveConfigError> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(SieveConfigError::out_of_range(
                "randsieve-c",
                "fraction",
                fraction,
                "0..=1",
            ));
        }
        Ok(Self { fraction, rng: Xoshiro256PlusPlus::seed_from_u64(seed) })
    }
}

impl Admission for RandSieveC {
    fn name(&self) -> &'static str {
        "randsieve-c"
    }

    #[inline]
    fn observe(&mut self, _access: &Access, _hit: bool) {}

    #[inline]
    fn admit(&mut self, _access: &Access) -> bool {
        self.rng.gen::<f64>() < self.fraction
    }

    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Xoshiro256PlusPlus>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_about_the_fraction_and_is_reproducible() {
        let mut a = RandSieveC::new(DEFAULT_FRACTION, 7).unwrap();
        let mut b = RandSieveC::new(DEFAULT_FRACTION, 7).unwrap();
        let n = 200_000;
        let xs: Vec<bool> = (0..n).map(|i| a.admit(&Access::read(i, i))).collect();
        let ys: Vec<bool> = (0..n).map(|i| b.admit(&Access::read(i, i))).collect();
        assert_eq!(xs, ys);
        let k = xs.iter().filter(|&&x| x).count() as f64;
        // Binomial(200000, 0.01): mean 2000, sd ~44.5; 5 sd either side.
        assert!((k - 2000.0).abs() < 225.0, "admitted {k}");
        assert!(RandSieveC::new(1.5, 0).is_err());
    }
}
