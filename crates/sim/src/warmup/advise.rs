//! The warmup selector for a cache, chosen from evidence on the cache's own history: the one
//! entry point of the laboratory a server uses (`ember serve --warmup auto`).
//!
//! The history (a trace: the warmup log's records) is cut into [`AdviseConfig::periods`]
//! periods of equal length, [`INTERVALS_PER_PERIOD`] intervals each; each period is a restart
//! warmed from the one before ([`run_warmup`], Bonfire section 4.3), with the cache's size and
//! warmup size as percentages of the history's working set. The selectors are ranked by
//! [`rank_selectors`] (Bonfire eq. 1's `T_converge`, then eq. 2's server load reduction, then
//! hits), exactly as `ember warmup advise` ranks them.

use super::evidence::{rank_selectors, SelectorEvidence};
use super::experiment::{run_warmup, VolumeAccesses, WarmupConfig};
use ember_policy::warmup::SelectorKind;
use ember_trace::Trace;

/// Timeline intervals per period: hit rates are compared interval by interval.
pub const INTERVALS_PER_PERIOD: u64 = 20;

/// The cache a selector is chosen for, and how its history is judged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdviseConfig {
    /// Block size in bytes.
    pub block_size: u64,
    /// Data blocks of the cache.
    pub cache_blocks: u64,
    /// Blocks a preload may fill.
    pub warmup_blocks: u64,
    /// Warmup region size in bytes.
    pub region_bytes: u64,
    /// Seed of Random-K.
    pub seed: u64,
    /// Periods the history is cut into (at least 1).
    pub periods: u64,
    /// Th_V of Bonfire eq. 1.
    pub th_v: f64,
    /// Th_N of Bonfire eq. 1.
    pub th_n: f64,
    /// Backing bandwidth in bytes per second (the preload time of eq. 2's window).
    pub bandwidth: f64,
}

/// The selector chosen, with its evidence and what was simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct Advice {
    /// The best selector; `None` when no period after the first has accesses.
    pub selector: Option<SelectorKind>,
    /// Every scheme's medians over the simulated volume-periods.
    pub evidence: SelectorEvidence,
    /// Length of a simulated period, in nanoseconds.
    pub period_ns: u64,
    /// The cache's size in % of the history's working set.
    pub cache_percent: f64,
    /// The warmup size in % of the history's working set.
    pub warmup_percent: f64,
}

/// Simulate every selector on `history` for the cache `cfg` describes and pick the best.
pub fn advise(history: &Trace, cfg: &AdviseConfig) -> Advice {
    let t0 = history.requests.iter().map(|r| r.time_ns).min().unwrap_or(0);
    let t1 = history.requests.iter().map(|r| r.time_ns).max().unwrap_or(0);
    let period_ns = ((t1 - t0) / cfg.periods.max(1) + 1).max(1_000);
    let vols = VolumeAccesses::of_trace(history, cfg.block_size);
    let wss: u64 = vols.iter().map(|v| v.wss_blocks).sum::<u64>().max(1);
    let cache_percent = (100.0 * cfg.cache_blocks as f64 / wss as f64).min(100.0);
    let warmup_percent = (100.0 * cfg.warmup_blocks as f64 / wss as f64).min(cache_percent);
    let run = WarmupConfig {
        block_size: cfg.block_size,
        period_ns,
        interval_ns: (period_ns / INTERVALS_PER_PERIOD).max(1),
        cache_percent,
        warmup_percent,
        region_bytes: cfg.region_bytes,
        selectors: SelectorKind::ALL.to_vec(),
        readahead_bytes: 0,
        seed: cfg.seed,
    };
    let days = run_warmup(&vols, t0, &run);
    let evidence = rank_selectors(&days, cfg.th_v, cfg.th_n, cfg.bandwidth);
    let selector = evidence
        .best
        .as_deref()
        .and_then(|best| SelectorKind::ALL.into_iter().find(|k| k.name() == best));
    Advice { selector, evidence, period_ns, cache_percent, warmup_percent }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::{Op, Request};

    fn config(cache_blocks: u64) -> AdviseConfig {
        AdviseConfig {
            block_size: 4096,
            cache_blocks,
            warmup_blocks: cache_blocks / 10,
            region_bytes: 4096,
            seed: 1,
            periods: 4,
            th_v: 0.9,
            th_n: 0.0,
            bandwidth: 100e6,
        }
    }

    /// Four days, each reading a hot set of 200 blocks every 10 minutes for 3 hours, then
    /// 2,000 one-off blocks.
    fn history() -> Trace {
        let hour = 3_600_000_000_000u64;
        let mut t = Trace::default();
        let volume = t.volumes.intern("v");
        let read = |time_ns: u64, block: u64| Request {
            time_ns,
            volume,
            op: Op::Read,
            offset: block * 4096,
            length: 4096,
        };
        for day in 0..4u64 {
            let start = day * 24 * hour;
            for rep in 0..18u64 {
                for b in 0..200u64 {
                    t.requests.push(read(start + rep * 600_000_000_000 + b * 2_000_000_000, b));
                }
            }
            for i in 0..2_000u64 {
                t.requests
                    .push(read(start + 3 * hour + i * 10_000_000_000, 1_000_000 + day * 2_000 + i));
            }
        }
        t
    }

    /// The advice is the warmup experiment over the history's periods, ranked: the same
    /// evidence as running them by hand, and the selector the ranking names.
    #[test]
    fn advice_is_the_ranked_experiment_over_the_history() {
        let t = history();
        let cfg = config(4_000);
        let a = advise(&t, &cfg);
        let vols = VolumeAccesses::of_trace(&t, 4096);
        let wss: u64 = vols.iter().map(|v| v.wss_blocks).sum();
        assert_eq!(wss, 200 + 8_000);
        let last = t.requests.iter().map(|r| r.time_ns).max().unwrap_or(0);
        assert_eq!(a.period_ns, last / 4 + 1);
        assert!((a.cache_percent - 100.0 * 4_000.0 / wss as f64).abs() < 1e-9, "{a:?}");
        assert!((a.warmup_percent - 100.0 * 400.0 / wss as f64).abs() < 1e-9, "{a:?}");
        let run = WarmupConfig {
            block_size: 4096,
            period_ns: a.period_ns,
            interval_ns: a.period_ns / INTERVALS_PER_PERIOD,
            cache_percent: a.cache_percent,
            warmup_percent: a.warmup_percent,
            region_bytes: 4096,
            selectors: SelectorKind::ALL.to_vec(),
            readahead_bytes: 0,
            seed: 1,
        };
        let want = rank_selectors(&run_warmup(&vols, 0, &run), 0.9, 0.0, 100e6);
        assert_eq!(a.evidence, want);
        assert!(a.evidence.periods > 0);
        let best = a.evidence.best.as_deref();
        assert_eq!(a.selector.map(|k| k.name()), best, "{a:?}");
        assert!(a.selector.is_some(), "{a:?}");
    }

    /// An empty history simulates no period: no selector.
    #[test]
    fn an_empty_history_has_no_advice() {
        let a = advise(&Trace::default(), &config(100));
        assert_eq!(a.selector, None);
        assert_eq!(a.evidence.periods, 0);
    }
}
