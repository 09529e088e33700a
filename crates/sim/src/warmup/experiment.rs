//! The warmup experiment of Bonfire section 4.3 (and section 6.1's Zipf run): the trace is cut
//! into periods (days by default); for every period `d >= 1` and every volume, a new LRU cache
//! starts at the beginning of period `d` (cold, or preloaded by a selector from period
//! `d - 1`'s accesses), and its read hit rate is compared, interval by interval, with an
//! always-warm LRU cache that has run since the start of the trace.
//!
//! Sizes are percentages of the volume's working-set size (its distinct blocks over the whole
//! trace), as in Bonfire Table 2. A selector picks regions (warmup region size, 4 KiB or
//! 1 MiB); the preload inserts every block of the chosen regions, most valuable last, until
//! the warmup size is reached. With readahead, a read miss also inserts the following blocks
//! of the readahead window (Bonfire: 128 KiB) that are not resident, in every scheme.

use crate::warmup::convergence::convergence_intervals;
use crate::warmup::load::{preload_seconds, server_load_reduction, ReadPoint};
use crate::warmup::scheme::Scheme;
use ember_policy::warmup::{SelectorKind, WarmupSelector};
use ember_policy::{Access, Lru, Replacement, NEVER};
use ember_trace::{Op, Trace};
use serde::Serialize;

/// One day in nanoseconds.
pub const DAY_NS: u64 = 86_400_000_000_000;

/// Parameters of one warmup experiment.
#[derive(Clone, Debug, PartialEq)]
pub struct WarmupConfig {
    /// Block (cache unit) size in bytes.
    pub block_size: u64,
    /// Length of a period (a new cache starts at each period's beginning); 1 day in Bonfire.
    pub period_ns: u64,
    /// Timeline interval inside a period (hit rates are compared per interval).
    pub interval_ns: u64,
    /// Cache size in % of the volume's WSS.
    pub cache_percent: f64,
    /// Warmup size in % of the volume's WSS.
    pub warmup_percent: f64,
    /// Warmup region size in bytes (a multiple of the block size).
    pub region_bytes: u64,
    /// Selectors to run besides cold and always-warm.
    pub selectors: Vec<SelectorKind>,
    /// Readahead window in bytes on a read miss; 0 for none.
    pub readahead_bytes: u64,
    /// Seed of Random-K.
    pub seed: u64,
}

impl Default for WarmupConfig {
    fn default() -> Self {
        Self {
            block_size: 4096,
            period_ns: DAY_NS,
            interval_ns: 600_000_000_000,
            cache_percent: 50.0,
            warmup_percent: 10.0,
            region_bytes: 1 << 20,
            selectors: SelectorKind::ALL.to_vec(),
            readahead_bytes: 0,
            seed: 1,
        }
    }
}

impl WarmupConfig {
    /// The cache capacity and the warmup size, in blocks, of a volume of `wss_blocks`
    /// distinct blocks (percentages of its WSS; a cache of at least one block).
    pub fn sizes(&self, wss_blocks: u64) -> (u64, u64) {
        let capacity = ((self.cache_percent / 100.0 * wss_blocks as f64).round() as u64).max(1);
        let warmup = (self.warmup_percent / 100.0 * wss_blocks as f64).round() as u64;
        (capacity, warmup)
    }
}

/// One volume's block accesses, in time order.
#[derive(Clone, Debug, Default)]
pub struct VolumeAccesses {
    /// Volume id.
    pub volume: u32,
    /// Volume name.
    pub name: String,
    /// (time, key, is_write) per block access.
    pub accesses: Vec<(u64, u64, bool)>,
    /// Distinct blocks.
    pub wss_blocks: u64,
}

impl VolumeAccesses {
    /// Every volume of `trace` with at least one block access.
    pub fn of_trace(trace: &Trace, block_size: u64) -> Vec<VolumeAccesses> {
        let names = trace.volumes.names();
        let mut out: Vec<VolumeAccesses> = (0..names.len().max(1))
            .map(|v| VolumeAccesses {
                volume: v as u32,
                name: names.get(v).cloned().unwrap_or_default(),
                ..Default::default()
            })
            .collect();
        for r in &trace.requests {
            let v = r.volume as usize;
            if v >= out.len() {
                out.resize_with(v + 1, VolumeAccesses::default);
                out[v].volume = r.volume;
            }
            for k in r.block_keys(block_size) {
                out[v].accesses.push((r.time_ns, k, r.op == Op::Write));
            }
        }
        for v in &mut out {
            v.accesses.sort_by_key(|a| a.0);
            let mut keys: Vec<u64> = v.accesses.iter().map(|a| a.1).collect();
            keys.sort_unstable();
            keys.dedup();
            v.wss_blocks = keys.len() as u64;
        }
        out.retain(|v| !v.accesses.is_empty());
        out
    }
}

/// The timelines of every scheme for one volume and one period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DayRuns {
    /// Volume name.
    pub volume: String,
    /// Period number (from 0 at the trace's first request).
    pub day: u64,
    /// Cache capacity in blocks.
    pub capacity_blocks: u64,
    /// Warmup size in blocks.
    pub warmup_blocks: u64,
    /// Block size in bytes.
    pub block_size: u64,
    /// Interval length in seconds.
    pub interval_s: f64,
    /// Per scheme: its name, the blocks it preloaded, and its timeline.
    pub runs: Vec<SchemeRun>,
}

/// One scheme's run over one period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchemeRun {
    /// Scheme name.
    pub scheme: String,
    /// Blocks preloaded before the period (0 for cold and always-warm).
    pub preloaded_blocks: u64,
    /// Reads and read hits per interval of the period.
    pub timeline: Vec<ReadPoint>,
}

/// One scheme's metrics for one volume and period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchemeMetrics {
    /// Scheme name.
    pub scheme: String,
    /// `T_converge` (eq. 1) in intervals.
    pub converge_intervals: usize,
    /// `T_converge` in hours.
    pub converge_hours: f64,
    /// Server load reduction (eq. 2, %) over the cold cache's convergence period.
    pub load_reduction_percent: Option<f64>,
    /// Pre-load time in minutes (warmup bytes at the backing bandwidth).
    pub preload_minutes: f64,
    /// Table 3 column 8: `(T_cold - T - T_preload) / T_cold`, in %.
    pub converge_improvement_percent: Option<f64>,
    /// Table 3 column 12: `(R - R_cold) / R_cold`, in %.
    pub load_improvement_percent: Option<f64>,
    /// Read hit rate over the whole period, in %.
    pub read_hit_percent: Option<f64>,
}

impl DayRuns {
    /// The run of `scheme`.
    pub fn run(&self, scheme: &str) -> Option<&SchemeRun> {
        self.runs.iter().find(|r| r.scheme == scheme)
    }

    /// Every scheme's metrics with thresholds `th_v`, `th_n` and a backing bandwidth of
    /// `bandwidth` bytes per second.
    pub fn metrics(&self, th_v: f64, th_n: f64, bandwidth: f64) -> Vec<SchemeMetrics> {
        let rates = |r: &SchemeRun| -> Vec<Option<f64>> {
            r.timeline.iter().map(ReadPoint::hit_rate).collect()
        };
        let Some(warm) = self.run(Scheme::AlwaysWarm.name()) else { return Vec::new() };
        let warm_rates = rates(warm);
        let conv = |r: &SchemeRun| convergence_intervals(&rates(r), &warm_rates, th_v, th_n);
        let cold_t = self.run(Scheme::Cold.name()).map(conv).unwrap_or(0);
        let cold_r =
            self.run(Scheme::Cold.name()).and_then(|c| server_load_reduction(&c.timeline, cold_t));
        let hours = |t: usize| t as f64 * self.interval_s / 3600.0;
        self.runs
            .iter()
            .map(|r| {
                let t = conv(r);
                let load = server_load_reduction(&r.timeline, cold_t);
                let preload_min =
                    preload_seconds(r.preloaded_blocks * self.block_size, bandwidth) / 60.0;
                let (reads, hits) =
                    r.timeline.iter().fold((0, 0), |a, p| (a.0 + p.reads, a.1 + p.read_hits));
                let improve_t = (cold_t > 0 && r.scheme != Scheme::Cold.name()).then(|| {
                    let ct = hours(cold_t);
                    100.0 * (ct - hours(t) - preload_min / 60.0) / ct
                });
                let improve_r = match (load, cold_r) {
                    (Some(x), Some(c)) if c > 0.0 && r.scheme != Scheme::Cold.name() => {
                        Some(100.0 * (x - c) / c)
                    }
                    _ => None,
                };
                SchemeMetrics {
                    scheme: r.scheme.clone(),
                    converge_intervals: t,
                    converge_hours: hours(t),
                    load_reduction_percent: load.map(|x| 100.0 * x),
                    preload_minutes: preload_min,
                    converge_improvement_percent: improve_t,
                    load_improvement_percent: improve_r,
                    read_hit_percent: (reads > 0).then(|| 100.0 * hits as f64 / reads as f64),
                }
            })
            .collect()
    }
}

/// The LRU cache of one run, with optional readahead.
pub(crate) struct Cache {
    lru: Lru,
    readahead: u64,
}

impl Cache {
    pub(crate) fn new(capacity: u64, readahead: u64) -> Self {
        Self { lru: Lru::new(capacity.max(1) as usize), readahead }
    }

    #[inline]
    fn access_of(key: u64, time_ns: u64, write: bool) -> Access {
        Access {
            key,
            time_ns,
            op: if write { Op::Write } else { Op::Read },
            vtime: 0,
            next_vtime: NEVER,
        }
    }

    /// Insert `key` unless resident (preload and readahead).
    fn load(&mut self, key: u64, time_ns: u64) {
        if !self.lru.contains(key) {
            self.lru.insert(&Self::access_of(key, time_ns, false));
        }
    }

    /// Run `accesses` (all in one period starting at `start_ns`), recording reads and read
    /// hits into `timeline` by interval.
    fn run(
        &mut self,
        accesses: &[(u64, u64, bool)],
        start_ns: u64,
        interval_ns: u64,
        timeline: &mut [ReadPoint],
    ) {
        for &(t, k, w) in accesses {
            self.step(t, k, w, start_ns, interval_ns, timeline);
        }
    }

    /// Run one access (time `t`, key `k`, a write if `w`) of the period starting at
    /// `start_ns`, recording a read and its hit into `timeline` by interval.
    #[inline]
    pub(crate) fn step(
        &mut self,
        t: u64,
        k: u64,
        w: bool,
        start_ns: u64,
        interval_ns: u64,
        timeline: &mut [ReadPoint],
    ) {
        let (hit, _) = self.lru.access(&Self::access_of(k, t, w));
        if !w {
            let last = timeline.len().saturating_sub(1);
            let i = (((t - start_ns.min(t)) / interval_ns) as usize).min(last);
            timeline[i].reads += 1;
            timeline[i].read_hits += hit as u64;
            if !hit {
                for j in 1..self.readahead {
                    self.load(k + j, t);
                }
            }
        }
    }

    /// Preload the regions `selector` picks for a warmup of `warmup` blocks (regions of
    /// `bpr` blocks) at `start_ns`: every block of the chosen regions, most valuable last,
    /// the budget spent from the most valuable end. Returns the blocks preloaded.
    pub(crate) fn preload(
        &mut self,
        selector: &dyn WarmupSelector,
        warmup: u64,
        bpr: u64,
        start_ns: u64,
    ) -> u64 {
        let regions = selector.select(warmup.div_ceil(bpr) as usize);
        let mut chosen = Vec::new();
        let mut budget = warmup;
        for &reg in regions.iter().rev() {
            if budget == 0 {
                break;
            }
            let take = bpr.min(budget);
            chosen.push((reg, take));
            budget -= take;
        }
        let mut preloaded = 0;
        for &(reg, take) in chosen.iter().rev() {
            for b in 0..take {
                self.load(reg * bpr + b, start_ns);
            }
            preloaded += take;
        }
        preloaded
    }
}

/// The periods of a volume: for each period number, the range of its accesses.
fn periods(v: &VolumeAccesses, t0: u64, period_ns: u64) -> Vec<(u64, std::ops::Range<usize>)> {
    let mut out: Vec<(u64, std::ops::Range<usize>)> = Vec::new();
    for (i, a) in v.accesses.iter().enumerate() {
        let d = (a.0 - t0.min(a.0)) / period_ns;
        match out.last_mut() {
            Some((ld, r)) if *ld == d => r.end = i + 1,
            _ => out.push((d, i..i + 1)),
        }
    }
    out
}

/// Run every scheme of `cfg` on every period `d >= 1` of every volume of `vols` (periods
/// counted from `t0`).
pub fn run_warmup(vols: &[VolumeAccesses], t0: u64, cfg: &WarmupConfig) -> Vec<DayRuns> {
    let mut out = Vec::new();
    let bs = cfg.block_size.max(1);
    let bpr = (cfg.region_bytes / bs).max(1);
    let ra = cfg.readahead_bytes / bs;
    let n_int = cfg.period_ns.div_ceil(cfg.interval_ns.max(1)) as usize;
    for v in vols {
        let (capacity, warmup) = cfg.sizes(v.wss_blocks);
        let ps = periods(v, t0, cfg.period_ns);
        // Always-warm: one cache over all periods.
        let mut warm = Cache::new(capacity, ra);
        let mut warm_timelines = Vec::new();
        for (d, r) in &ps {
            let mut tl = vec![ReadPoint::default(); n_int];
            warm.run(&v.accesses[r.clone()], t0 + d * cfg.period_ns, cfg.interval_ns, &mut tl);
            warm_timelines.push(tl);
        }
        for (pi, (d, r)) in ps.iter().enumerate() {
            if *d == 0 {
                continue;
            }
            let start = t0 + d * cfg.period_ns;
            let day = &v.accesses[r.clone()];
            let history: &[(u64, u64, bool)] = match pi.checked_sub(1).map(|p| &ps[p]) {
                Some((pd, pr)) if *pd + 1 == *d => &v.accesses[pr.clone()],
                _ => &[],
            };
            let mut runs = vec![SchemeRun {
                scheme: Scheme::AlwaysWarm.name().into(),
                preloaded_blocks: 0,
                timeline: warm_timelines[pi].clone(),
            }];
            let mut schemes = vec![(Scheme::Cold, None)];
            schemes.extend(cfg.selectors.iter().map(|&k| (Scheme::Warmed(k), Some(k))));
            for (scheme, sel) in schemes {
                let mut cache = Cache::new(capacity, ra);
                let mut preloaded = 0u64;
                if let Some(k) = sel {
                    let mut s = k.build(cfg.seed ^ d);
                    for &(t, key, _) in history {
                        s.observe(key / bpr, t);
                    }
                    preloaded = cache.preload(s.as_ref(), warmup, bpr, start);
                }
                let mut tl = vec![ReadPoint::default(); n_int];
                cache.run(day, start, cfg.interval_ns, &mut tl);
                runs.push(SchemeRun {
                    scheme: scheme.name().into(),
                    preloaded_blocks: preloaded,
                    timeline: tl,
                });
            }
            out.push(DayRuns {
                volume: v.name.clone(),
                day: *d,
                capacity_blocks: capacity,
                warmup_blocks: warmup,
                block_size: bs,
                interval_s: cfg.interval_ns as f64 / 1e9,
                runs,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::{Request, VolumeTable};

    const H: u64 = 3_600_000_000_000;

    fn trace(reqs: &[(u64, u64)]) -> Trace {
        let mut v = VolumeTable::new();
        v.intern("v");
        Trace::new(
            reqs.iter()
                .map(|&(t, b)| Request {
                    time_ns: t,
                    volume: 0,
                    op: Op::Read,
                    offset: b * 4096,
                    length: 4096,
                })
                .collect(),
            v,
        )
    }

    #[test]
    fn last_k_preloads_yesterdays_last_blocks_and_hits_at_once() {
        // Day 0 reads blocks 0..100; day 1 re-reads 90..100 (the last ten).
        let mut reqs: Vec<(u64, u64)> = (0..100).map(|b| (b * 60_000_000_000, b)).collect();
        reqs.extend((90..100).map(|b| (24 * H + b, b)));
        let t = trace(&reqs);
        let vols = VolumeAccesses::of_trace(&t, 4096);
        assert_eq!(vols[0].wss_blocks, 100);
        let cfg = WarmupConfig {
            cache_percent: 100.0,
            warmup_percent: 10.0,
            region_bytes: 4096,
            selectors: vec![SelectorKind::LastK, SelectorKind::FirstK],
            interval_ns: H,
            ..Default::default()
        };
        let days = run_warmup(&vols, 0, &cfg);
        assert_eq!(days.len(), 1);
        let d = &days[0];
        let hits = |s: &str| d.run(s).unwrap().timeline[0].read_hits;
        assert_eq!(d.run("Last-K").unwrap().preloaded_blocks, 10);
        assert_eq!(
            (hits("cold"), hits("always-warm"), hits("Last-K"), hits("First-K")),
            (0, 10, 10, 0)
        );
        let m = d.metrics(0.9, 0.0, 100e6);
        let get = |s: &str| m.iter().find(|x| x.scheme == s).unwrap().clone();
        assert_eq!(get("Last-K").converge_intervals, 0);
        assert_eq!(get("cold").converge_intervals, 1);
        assert_eq!(get("cold").load_reduction_percent, Some(0.0));
        assert_eq!(get("Last-K").load_reduction_percent, Some(100.0));
        // 10 blocks of 4 KiB at 100 MB/s.
        assert!((get("Last-K").preload_minutes - 40960.0 / 100e6 / 60.0).abs() < 1e-12);
    }

    #[test]
    fn readahead_turns_a_sequential_scan_into_hits() {
        let reqs: Vec<(u64, u64)> = (0..64).map(|b| (24 * H + b, b)).chain([(0, 1000)]).collect();
        let mut reqs = reqs;
        reqs.sort();
        let vols = VolumeAccesses::of_trace(&trace(&reqs), 4096);
        let cfg = WarmupConfig {
            cache_percent: 100.0,
            readahead_bytes: 128 << 10,
            selectors: vec![],
            ..Default::default()
        };
        let d = &run_warmup(&vols, 0, &cfg)[0];
        // 64 sequential blocks: a miss every 32 (128 KiB), the rest hit.
        let tl = &d.run("cold").unwrap().timeline;
        assert_eq!((tl[0].reads, tl[0].read_hits), (64, 62));
    }
}
