//! The ideal sieve of SieveStore sections 3.1 and 5.1: an oracle that knows each day's
//! accesses in advance and keeps that day's top 1 % most-accessed blocks resident for the
//! whole day (batch-allocated at the day's start). It bounds what a day-by-day discrete sieve
//! (SieveStore-D) can capture.

use super::config_error::SieveConfigError;
use super::epoch::{EpochCounts, EpochSieve};
use crate::Access;

/// The paper's fraction: the top 1 % of blocks accessed in an epoch.
pub const DEFAULT_TOP_FRACTION: f64 = 0.01;

/// Choose the top `fraction` of each epoch's distinct blocks by access count, resident during
/// that same epoch ([`EpochSieve::oracle`]).
#[derive(Clone, Debug)]
pub struct Ideal {
    fraction: f64,
    counts: EpochCounts,
}

impl Ideal {
    /// An oracle keeping the top `fraction` (0..=1) of each epoch's blocks.
    pub fn new(fraction: f64) -> Result<Self, SieveConfigError> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(SieveConfigError::out_of_range("ideal", "fraction", fraction, "0..=1"));
        }
        Ok(Self { fraction, counts: EpochCounts::default() })
    }

    /// The paper's ideal sieve (top 1 %).
    pub fn paper() -> Self {
        Self { fraction: DEFAULT_TOP_FRACTION, counts: EpochCounts::default() }
    }
}

impl EpochSieve for Ideal {
    fn name(&self) -> &'static str {
        "ideal"
    }

    #[inline]
    fn observe(&mut self, access: &Access) {
        self.counts.add(access.key);
    }

    fn end_epoch(&mut self) -> Vec<(u64, u64)> {
        let mut v = self.counts.take_sorted();
        let n = (v.len() as f64 * self.fraction).ceil() as usize;
        v.truncate(n);
        v
    }

    fn oracle(&self) -> bool {
        true
    }

    fn memory_bytes(&self) -> usize {
        self.counts.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_top_one_percent() {
        let mut s = Ideal::paper();
        // 1000 blocks; block k accessed (k % 50) + 1 times: the top 10 are 49, 99, ... 999
        // (50 accesses each).
        for k in 0..1000u64 {
            for _ in 0..(k % 50) + 1 {
                s.observe(&Access::read(k, 0));
            }
        }
        let c = s.end_epoch();
        assert_eq!(c.len(), 10);
        assert!(c.iter().all(|&(k, n)| n == 50 && k % 50 == 49));
        assert!(s.oracle());
    }
}
