//! The array tier's crash and warm restart in a deployment (Bonfire, FAST 2013, section 5;
//! docs/design/warmup.md): after request R of the trace the array is killed and started
//! again. Its cache starts empty (a memory cache, or a cache file after `kill -9` under
//! write-through), its sieve forgets what it counted, its clients reconnect with their
//! copies unknown to the new process (their DEMOTEs of earlier copies are refused as stale,
//! [`super::stale_copies`]), and, with a warmup log, it preloads from the log.
//!
//! The log ([`WarmupLog`]) holds what the live array's monitor records: every READ and write
//! the array served, oldest first, at most as many records as the circular log keeps; a
//! DEMOTE is not a request and is not logged. The plan ([`WarmupLog::plan`]) is the
//! engine's (`ember_engine::warmup::plan`): every logged block is shown to the selector as
//! its region, the budget is spent from the most valuable region on, and the blocks are
//! deduplicated and sorted by address, the order the preload inserts them in. The preload
//! inserts each as a READ of an absent block (the scheme's read position), skips blocks
//! already cached, and stops when the cache is full: it evicts nothing. Its sieve is not
//! asked (the selector decided).
//!
//! What the model leaves out: a write-back-persist array's recovered dirty blocks, the
//! requests logged in the last interval before the kill (the live log loses at most its last
//! 10 ms), and requests that reach the array while its preload still runs (the laboratory
//! preloads at once).

use std::collections::VecDeque;

use ember_policy::warmup::SelectorKind;
use ember_trace::{block_key, key_block, key_volume};

/// How the restarted array warms up: its `[warmup]` settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ArrayWarmup {
    /// The selector (`--warmup`).
    #[serde(serialize_with = "selector_name")]
    pub selector: SelectorKind,
    /// Random-K's seed.
    pub seed: u64,
    /// Blocks to preload at most (`--warmup-size` of the array's capacity).
    pub budget_blocks: u64,
    /// Blocks in a region (`--warmup-region` / the block size).
    pub region_blocks: u64,
    /// Records the circular log keeps (`--warmup-log-size` / 32).
    pub log_records: usize,
}

fn selector_name<S: serde::Serializer>(k: &SelectorKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

/// When the array crashes and how it comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ArrayCrash {
    /// The array is killed after this many requests of the trace.
    pub after_requests: u64,
    /// Its warmup (none: it restarts cold).
    pub warmup: Option<ArrayWarmup>,
}

/// The array's warmup log: the block accesses it served, oldest first.
#[derive(Clone, Debug, Default)]
pub struct WarmupLog {
    records: VecDeque<(u64, u64)>,
    capacity: usize,
}

impl WarmupLog {
    /// A log that keeps the newest `capacity` records.
    pub fn new(capacity: usize) -> Self {
        Self { records: VecDeque::new(), capacity }
    }

    /// The array served a READ or a write of the block it keys `key` at `time_ns`.
    pub fn record(&mut self, key: u64, time_ns: u64) {
        if self.capacity == 0 {
            return;
        }
        if self.records.len() == self.capacity {
            self.records.pop_front();
        }
        self.records.push_back((key, time_ns));
    }

    /// The array keys to preload, sorted by address, as `warmup` plans them.
    pub fn plan(&self, warmup: &ArrayWarmup) -> Vec<u64> {
        let bpr = warmup.region_blocks.max(1);
        let region = |k: u64| block_key(key_volume(k), key_block(k) / bpr);
        let mut s = warmup.selector.build(warmup.seed);
        for &(k, t) in &self.records {
            s.observe(region(k), t);
        }
        let budget = warmup.budget_blocks;
        let regions = s.select(budget.div_ceil(bpr) as usize);
        let mut keys = Vec::new();
        let mut left = budget;
        for &r in regions.iter().rev() {
            if left == 0 {
                break;
            }
            let first = key_block(r) * bpr;
            let n = bpr.min(left);
            keys.extend((first..first + n).map(|b| block_key(key_volume(r), b)));
            left -= n;
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warmup(selector: SelectorKind, budget: u64, region: u64) -> ArrayWarmup {
        ArrayWarmup {
            selector,
            seed: 1,
            budget_blocks: budget,
            region_blocks: region,
            log_records: 10,
        }
    }

    #[test]
    fn plans_as_the_engine_does() {
        // The engine's own case (ember_engine::warmup::plan): volume 0 blocks 10, 11, 100,
        // 11, 12 and volume 1 block 5, 4 KiB regions.
        let mut log = WarmupLog::new(10);
        for (i, k) in [(0, 10), (0, 11), (1, 5), (0, 100), (0, 11), (0, 12)].iter().enumerate() {
            log.record(block_key(k.0, k.1), i as u64);
        }
        let all = log.plan(&warmup(SelectorKind::LastK, 100, 1));
        let keys: Vec<(u32, u64)> = all.iter().map(|&k| (key_volume(k), key_block(k))).collect();
        assert_eq!(keys, vec![(0, 10), (0, 11), (0, 12), (0, 100), (1, 5)]);
        let last3: Vec<u64> = log.plan(&warmup(SelectorKind::LastK, 3, 1));
        assert_eq!(last3, vec![block_key(0, 11), block_key(0, 12), block_key(0, 100)]);
        // Top-K over 16-block regions: region 0 of volume 0 (four accesses), whole.
        let top = log.plan(&warmup(SelectorKind::TopK, 16, 16));
        assert_eq!(top, (0..16).map(|b| block_key(0, b)).collect::<Vec<_>>());
    }

    #[test]
    fn the_log_keeps_its_newest_records() {
        let mut log = WarmupLog::new(2);
        for b in 0..5 {
            log.record(block_key(0, b), b);
        }
        assert_eq!(log.plan(&warmup(SelectorKind::FirstK, 10, 1)), vec![3, 4]);
    }
}
