//! Which warmup selector to use, decided from evidence: every selector simulated on the
//! trace's own history ([`crate::warmup::experiment::run_warmup`]), ranked by the medians over
//! the simulated periods of `T_converge` (Bonfire eq. 1; lower is better), then of the
//! server load reduction (eq. 2; higher is better), then of the read hit rate. Figure 8's decision tree
//! (`ember_analyze::advise`) stays as the explanation; this is what `ember warmup advise`
//! recommends.

use crate::warmup::experiment::DayRuns;
use crate::warmup::scheme::Scheme;
use serde::Serialize;

/// One scheme's medians over the simulated periods.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SchemeEvidence {
    /// Scheme name (`cold`, `Last-K`, ...).
    pub scheme: String,
    /// Median `T_converge`, hours.
    pub converge_hours: f64,
    /// Median server load reduction over cold's convergence window, % (None: undefined in
    /// every period).
    pub load_reduction_percent: Option<f64>,
    /// Median read hit rate over the whole period, %.
    pub read_hit_percent: Option<f64>,
}

/// The evidence and the pick.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SelectorEvidence {
    /// Volume-periods simulated (each period after a volume's first).
    pub periods: usize,
    /// Cold first, then each warmed selector in the order simulated.
    pub schemes: Vec<SchemeEvidence>,
    /// The best warmed selector, if any period was simulated.
    pub best: Option<String>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Rank the schemes of `days` (the output of `run_warmup`) with thresholds `th_v`, `th_n` and
/// a backing bandwidth of `bandwidth` bytes per second.
pub fn rank_selectors(days: &[DayRuns], th_v: f64, th_n: f64, bandwidth: f64) -> SelectorEvidence {
    let metrics: Vec<_> = days.iter().map(|d| d.metrics(th_v, th_n, bandwidth)).collect();
    let mut names: Vec<String> = Vec::new();
    for m in metrics.iter().flatten() {
        if m.scheme != Scheme::AlwaysWarm.name() && !names.contains(&m.scheme) {
            names.push(m.scheme.clone());
        }
    }
    // Cold first.
    names.sort_by_key(|n| n != Scheme::Cold.name());
    let schemes: Vec<SchemeEvidence> = names
        .iter()
        .map(|name| {
            let of = |f: &dyn Fn(&crate::warmup::experiment::SchemeMetrics) -> Option<f64>| {
                median(
                    metrics.iter().flatten().filter(|m| &m.scheme == name).filter_map(f).collect(),
                )
            };
            SchemeEvidence {
                scheme: name.clone(),
                converge_hours: of(&|m| Some(m.converge_hours)).unwrap_or(f64::INFINITY),
                load_reduction_percent: of(&|m| m.load_reduction_percent),
                read_hit_percent: of(&|m| m.read_hit_percent),
            }
        })
        .collect();
    let best = schemes
        .iter()
        .filter(|s| s.scheme != Scheme::Cold.name())
        .min_by(|a, b| {
            let higher = |x: Option<f64>, y: Option<f64>| {
                y.unwrap_or(f64::NEG_INFINITY).total_cmp(&x.unwrap_or(f64::NEG_INFINITY))
            };
            a.converge_hours
                .total_cmp(&b.converge_hours)
                .then_with(|| higher(a.load_reduction_percent, b.load_reduction_percent))
                .then_with(|| higher(a.read_hit_percent, b.read_hit_percent))
        })
        .map(|s| s.scheme.clone());
    SelectorEvidence { periods: days.len(), schemes, best }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warmup::experiment::{run_warmup, VolumeAccesses, WarmupConfig};
    use ember_policy::warmup::SelectorKind;
    use ember_trace::{Op, Request, Trace};

    /// A trace whose every period reads the same hot 200 blocks every 10 minutes for 3 hours,
    /// then 2,000 one-off blocks: Top-K carries the hot set into the next period, Last-K the
    /// one-offs, so Top-K converges sooner and the evidence must pick it.
    #[test]
    fn the_pick_follows_the_simulated_convergence() {
        let hour = 3_600_000_000_000u64;
        let mut t = Trace::default();
        let vol = t.volumes.intern("v");
        let mut next_one_off = 1_000_000u64;
        for day in 0..4u64 {
            let start = day * 24 * hour;
            // The hot set, read once every 10 minutes for the first 3 hours.
            for rep in 0..18u64 {
                for b in 0..200u64 {
                    let time_ns = start + rep * 600_000_000_000 + b * 2_000_000_000;
                    t.requests.push(Request {
                        time_ns,
                        volume: vol,
                        op: Op::Read,
                        offset: b * 4096,
                        length: 4096,
                    });
                }
            }
            // Then one-off blocks, never read again.
            for i in 0..2_000u64 {
                let time_ns = start + 3 * hour + i * 10_000_000_000;
                let offset = next_one_off * 4096;
                t.requests.push(Request {
                    time_ns,
                    volume: vol,
                    op: Op::Read,
                    offset,
                    length: 4096,
                });
                next_one_off += 1;
            }
        }
        let vols = VolumeAccesses::of_trace(&t, 4096);
        let cfg = WarmupConfig {
            cache_percent: 50.0,
            warmup_percent: 5.0,
            region_bytes: 4096,
            selectors: vec![SelectorKind::LastK, SelectorKind::TopK],
            ..WarmupConfig::default()
        };
        let days = run_warmup(&vols, 0, &cfg);
        assert_eq!(days.len(), 3, "periods after the first");
        // Th_N = 0: every violation counts, so one cold interval shows.
        let ev = rank_selectors(&days, 0.9, 0.0, 100e6);
        assert_eq!(ev.periods, 3);
        let names: Vec<&str> = ev.schemes.iter().map(|s| s.scheme.as_str()).collect();
        assert_eq!(names, vec!["cold", "Last-K", "Top-K"]);
        let conv = |n: &str| ev.schemes.iter().find(|s| s.scheme == n).unwrap().converge_hours;
        assert!(conv("Top-K") < conv("Last-K"), "{ev:?}");
        assert_eq!(ev.best.as_deref(), Some("Top-K"), "{ev:?}");
    }

    #[test]
    fn no_period_no_pick() {
        let ev = rank_selectors(&[], 0.9, 0.05, 100e6);
        assert_eq!((ev.periods, ev.best), (0, None));
        assert!(ev.schemes.is_empty());
    }
}
