//! Top-K (Bonfire section 4.2): the `k` most frequently accessed regions of the history. A
//! frequency-based comparison point for when nothing is known of the workload's timing.

use super::WarmupSelector;
use std::collections::HashMap;

/// The most frequently accessed regions.
#[derive(Clone, Debug, Default)]
pub struct TopK {
    /// Per region: (accesses, last access sequence number).
    counts: HashMap<u64, (u64, u64)>,
    seq: u64,
}

impl TopK {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }
}

impl WarmupSelector for TopK {
    fn name(&self) -> &'static str {
        "Top-K"
    }

    fn observe(&mut self, region: u64, _time_ns: u64) {
        let e = self.counts.entry(region).or_insert((0, 0));
        e.0 += 1;
        e.1 = self.seq;
        self.seq += 1;
    }

    /// The `k` regions with the most accesses (ties: the more recent first), the most
    /// accessed last.
    fn select(&self, k: usize) -> Vec<u64> {
        let mut v: Vec<((u64, u64), u64)> = self.counts.iter().map(|(&r, &c)| (c, r)).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.truncate(k);
        v.reverse();
        v.into_iter().map(|x| x.1).collect()
    }

    fn clear(&mut self) {
        self.counts.clear();
        self.seq = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_most_frequent_regions() {
        let mut s = TopK::new();
        for (i, r) in [1, 2, 2, 3, 3, 3, 4, 1].into_iter().enumerate() {
            s.observe(r, i as u64);
        }
        // Counts: 3x3, 2x2, 1x2 (1 more recent than 2), 4x1.
        assert_eq!(s.select(1), vec![3]);
        assert_eq!(s.select(3), vec![2, 1, 3]);
    }
}
