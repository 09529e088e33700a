//! First-K (Bonfire section 4.2): the first `k` regions of the history (the past 24 hours).
//! Designed for daily reaccesses: it warms the cache with what the same period of the
//! previous day touched first, which pays off when the cache starts just before a recurring
//! daily job.

use super::WarmupSelector;
use std::collections::HashMap;

/// The regions accessed first.
#[derive(Clone, Debug, Default)]
pub struct FirstK {
    first: HashMap<u64, u64>,
    seq: u64,
}

impl FirstK {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }
}

impl WarmupSelector for FirstK {
    fn name(&self) -> &'static str {
        "First-K"
    }

    fn observe(&mut self, region: u64, _time_ns: u64) {
        self.first.entry(region).or_insert(self.seq);
        self.seq += 1;
    }

    /// The `k` regions with the earliest first access, the very first one last (so it ends
    /// at the most-recently-used end of an LRU cache).
    fn select(&self, k: usize) -> Vec<u64> {
        let mut v: Vec<(u64, u64)> = self.first.iter().map(|(&r, &s)| (s, r)).collect();
        v.sort_unstable();
        v.truncate(k);
        v.reverse();
        v.into_iter().map(|x| x.1).collect()
    }

    fn clear(&mut self) {
        self.first.clear();
        self.seq = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_earliest_regions() {
        let mut s = FirstK::new();
        for (i, r) in [5, 2, 5, 9, 2, 7].into_iter().enumerate() {
            s.observe(r, i as u64);
        }
        assert_eq!(s.select(2), vec![2, 5]);
        assert_eq!(s.select(9), vec![7, 9, 2, 5]);
    }
}
