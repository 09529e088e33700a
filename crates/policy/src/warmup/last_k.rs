//! Last-K (Bonfire section 4.2): the last `k` regions accessed. Designed for hourly
//! reaccesses; choosing the most recently accessed regions imitates an LRU cache's state.

use super::WarmupSelector;
use std::collections::HashMap;

/// The most recently accessed regions.
#[derive(Clone, Debug, Default)]
pub struct LastK {
    last: HashMap<u64, u64>,
    seq: u64,
}

impl LastK {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }
}

impl WarmupSelector for LastK {
    fn name(&self) -> &'static str {
        "Last-K"
    }

    fn observe(&mut self, region: u64, _time_ns: u64) {
        self.last.insert(region, self.seq);
        self.seq += 1;
    }

    /// The `k` regions with the latest last access, oldest of them first.
    fn select(&self, k: usize) -> Vec<u64> {
        let mut v: Vec<(u64, u64)> = self.last.iter().map(|(&r, &s)| (s, r)).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.truncate(k);
        v.reverse();
        v.into_iter().map(|x| x.1).collect()
    }

    fn clear(&mut self) {
        self.last.clear();
        self.seq = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_most_recent_regions_most_recent_last() {
        let mut s = LastK::new();
        for (i, r) in [1, 2, 3, 1, 4, 2].into_iter().enumerate() {
            s.observe(r, i as u64);
        }
        // Last accesses: 3@2, 1@3, 4@4, 2@5.
        assert_eq!(s.select(2), vec![4, 2]);
        assert_eq!(s.select(10), vec![3, 1, 4, 2]);
        s.clear();
        assert!(s.select(3).is_empty());
    }
}
