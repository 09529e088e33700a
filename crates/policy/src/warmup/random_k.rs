//! Random-K (Bonfire section 4.2): `k` regions drawn uniformly, without replacement, from
//! the regions of the history. The comparison point with no knowledge of the workload.

use super::WarmupSelector;
use rand::Rng;
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::HashSet;

/// Random regions of the history.
#[derive(Clone, Debug)]
pub struct RandomK {
    seen: HashSet<u64>,
    /// Distinct regions in first-access order (so the draw does not depend on hashing).
    order: Vec<u64>,
    seed: u64,
}

impl RandomK {
    /// An empty history; `seed` fixes the draw.
    pub fn new(seed: u64) -> Self {
        Self { seen: HashSet::new(), order: Vec::new(), seed }
    }
}

impl WarmupSelector for RandomK {
    fn name(&self) -> &'static str {
        "Random-K"
    }

    fn observe(&mut self, region: u64, _time_ns: u64) {
        if self.seen.insert(region) {
            self.order.push(region);
        }
    }

    /// A uniform sample of `k` regions (all when fewer), in draw order.
    fn select(&self, k: usize) -> Vec<u64> {
        let mut v = self.order.clone();
        let k = k.min(v.len());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed);
        for i in 0..k {
            let j = rng.gen_range(i..v.len());
            v.swap(i, j);
        }
        v.truncate(k);
        v
    }

    fn clear(&mut self) {
        self.seen.clear();
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_distinct_observed_regions_deterministically() {
        let mut s = RandomK::new(7);
        for r in 0..1000u64 {
            s.observe(r % 100, r);
        }
        let a = s.select(30);
        assert_eq!(a.len(), 30);
        let mut d = a.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 30);
        assert!(a.iter().all(|&r| r < 100));
        assert_eq!(a, s.select(30));
        assert_ne!(a, RandomK { seed: 8, ..s.clone() }.select(30));
        assert_eq!(s.select(500).len(), 100);
    }
}
