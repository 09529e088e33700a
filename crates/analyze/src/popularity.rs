//! Popularity skew (SieveStore, Pritchett and Thottethodi, ISCA 2010, Figure 2).
//!
//! Per day of the trace (days counted from the first access), blocks are sorted by their
//! access count that day, most accessed first, and cut into (up to) 10,000 bins of equal
//! numbers of blocks; each bin reports its mean access count and the cumulative share of the
//! day's accesses up to and including it. Across volumes, [`VolumeShare`] gives each volume's
//! share of the whole trace's top 1 % most accessed blocks.

use crate::{Accesses, DAY_NS};
use ember_trace::key_volume;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// The default number of bins: 10,000.
pub const DEFAULT_BINS: usize = 10_000;

/// One day's popularity curve.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PopularityDay {
    /// Day number from 0.
    pub day: u64,
    /// Block accesses that day.
    pub accesses: u64,
    /// Distinct blocks accessed that day.
    pub blocks: u64,
    /// Mean access count of each bin (most popular first).
    pub bin_mean: Vec<f64>,
    /// Cumulative share (%) of the day's accesses after each bin.
    pub cumulative_percent: Vec<f64>,
    /// Share (%) of the day's accesses that go to its top 1 % of blocks.
    pub top1_percent: f64,
}

/// Popularity skew of a trace or volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Popularity {
    /// One curve per day with accesses.
    pub days: Vec<PopularityDay>,
}

/// One volume's share of the trace's top 1 % most accessed blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VolumeShare {
    /// Volume id.
    pub volume: u32,
    /// Volume name.
    pub name: String,
    /// Share (%) of the top-1 % blocks that belong to this volume.
    pub blocks_percent: f64,
    /// Share (%) of the accesses to the top-1 % blocks that go to this volume.
    pub accesses_percent: f64,
}

/// Block counts sorted most-accessed first (ties by key, for determinism).
fn sorted_counts(counts: FxHashMap<u64, u64>) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = counts.into_iter().collect();
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// Number of blocks in the top 1 % (at least one when there is any block).
fn top1_len(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.div_ceil(100)
    }
}

impl PopularityDay {
    fn of(day: u64, counts: FxHashMap<u64, u64>, bins: usize) -> Self {
        let v = sorted_counts(counts);
        let n = v.len();
        let total: u64 = v.iter().map(|x| x.1).sum();
        let nb = bins.clamp(1, n.max(1));
        let mut d = PopularityDay { day, accesses: total, blocks: n as u64, ..Default::default() };
        let mut cum = 0u64;
        for b in 0..nb.min(n) {
            let (lo, hi) = (b * n / nb, (b + 1) * n / nb);
            let s: u64 = v[lo..hi].iter().map(|x| x.1).sum();
            cum += s;
            d.bin_mean.push(s as f64 / (hi - lo).max(1) as f64);
            d.cumulative_percent.push(100.0 * cum as f64 / total.max(1) as f64);
        }
        let top: u64 = v[..top1_len(n)].iter().map(|x| x.1).sum();
        d.top1_percent = 100.0 * top as f64 / total.max(1) as f64;
        d
    }
}

impl Popularity {
    /// Per-day curves of `a` in `bins` bins.
    pub fn of(a: &Accesses, bins: usize) -> Self {
        let mut p = PopularityPass::new(bins);
        for (&k, &t) in a.keys.iter().zip(&a.times) {
            p.push(k, t);
        }
        p.finish()
    }
}

/// [`Popularity`] gathered access by access: the finished days' curves and the current
/// day's count per distinct block.
#[derive(Clone, Debug, Default)]
pub struct PopularityPass {
    bins: usize,
    /// Time of the first access (days count from it).
    t0: Option<u64>,
    days: Vec<PopularityDay>,
    cur_day: Option<u64>,
    counts: FxHashMap<u64, u64>,
}

impl PopularityPass {
    /// No access yet; `bins` bins a day.
    pub fn new(bins: usize) -> Self {
        Self { bins, ..Self::default() }
    }

    /// Count one access of `k` at `t`.
    #[inline]
    pub fn push(&mut self, k: u64, t: u64) {
        let t0 = *self.t0.get_or_insert(t);
        let d = t.saturating_sub(t0) / DAY_NS;
        if self.cur_day != Some(d) {
            if let Some(cd) = self.cur_day {
                let counts = std::mem::take(&mut self.counts);
                self.days.push(PopularityDay::of(cd, counts, self.bins));
            }
            self.cur_day = Some(d);
        }
        *self.counts.entry(k).or_insert(0) += 1;
    }

    /// The curves.
    pub fn finish(mut self) -> Popularity {
        if let Some(cd) = self.cur_day {
            self.days.push(PopularityDay::of(cd, self.counts, self.bins));
        }
        Popularity { days: self.days }
    }
}

/// Each volume's share of the whole trace's top 1 % most accessed blocks; `names[v]` is
/// volume `v`'s name.
pub fn volume_shares(a: &Accesses, names: &[String]) -> Vec<VolumeShare> {
    let mut counts = BlockCounts::default();
    counts.push_all(&a.keys);
    counts.volume_shares(names)
}

/// Accesses per distinct block, counted as the keys stream past.
#[derive(Clone, Debug, Default)]
pub struct BlockCounts {
    counts: FxHashMap<u64, u64>,
}

impl BlockCounts {
    /// Count `keys`.
    pub fn push_all(&mut self, keys: &[u64]) {
        for &k in keys {
            *self.counts.entry(k).or_insert(0) += 1;
        }
    }

    /// Each volume's share of the top 1 % most accessed blocks ([`volume_shares`]).
    pub fn volume_shares(self, names: &[String]) -> Vec<VolumeShare> {
        let v = sorted_counts(self.counts);
        let top = &v[..top1_len(v.len())];
        let total_acc: u64 = top.iter().map(|x| x.1).sum();
        (0..names.len())
            .map(|vol| {
                let mine: Vec<&(u64, u64)> =
                    top.iter().filter(|x| key_volume(x.0) == vol as u32).collect();
                VolumeShare {
                    volume: vol as u32,
                    name: names[vol].clone(),
                    blocks_percent: 100.0 * mine.len() as f64 / top.len().max(1) as f64,
                    accesses_percent: 100.0 * mine.iter().map(|x| x.1).sum::<u64>() as f64
                        / total_acc.max(1) as f64,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::{block_key, Op, Request};

    #[test]
    fn sievestore_figure2_bins_and_cumulative_share() {
        // Day 0: block 0 accessed 6 times, blocks 1..=4 once each (10 accesses). Day 1: one.
        let mut reqs = Vec::new();
        let mut push = |t: u64, b: u64, v: u32| {
            reqs.push(Request {
                time_ns: t,
                volume: v,
                op: Op::Read,
                offset: b * 4096,
                length: 4096,
            })
        };
        for i in 0..6 {
            push(i, 0, 0);
        }
        for b in 1..=4 {
            push(10 + b, b, 1);
        }
        push(DAY_NS + 5, 9, 0);
        let a = Accesses::from_requests(reqs.iter(), 4096);
        let p = Popularity::of(&a, 10_000);
        assert_eq!(p.days.len(), 2);
        let d0 = &p.days[0];
        assert_eq!((d0.accesses, d0.blocks), (10, 5));
        assert_eq!(d0.bin_mean, vec![6.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(d0.cumulative_percent, vec![60.0, 70.0, 80.0, 90.0, 100.0]);
        assert_eq!(d0.top1_percent, 60.0);
        let p2 = Popularity::of(&a, 2);
        // Two bins: blocks [0, 2) and [2, 5).
        assert_eq!(p2.days[0].bin_mean, vec![3.5, 1.0]);
        let s = volume_shares(&a, &["a".into(), "b".into()]);
        assert_eq!(s[0].blocks_percent, 100.0);
        assert_eq!(s[1].blocks_percent, 0.0);
        assert_eq!(key_volume(block_key(1, 3)), 1);
    }
}
