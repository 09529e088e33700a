//! The sweep of Bonfire section 4.3.2: every combination of the Table 2 parameters, summarized
//! as Table 3 (for each configuration, the best selector per volume and period, then the
//! median over volumes and periods).

use crate::warmup::experiment::{run_warmup, DayRuns, SchemeMetrics, VolumeAccesses, WarmupConfig};
use crate::warmup::scheme::Scheme;
use serde::Serialize;

/// The parameter grid (Bonfire Table 2 by default).
#[derive(Clone, Debug, PartialEq)]
pub struct SweepGrid {
    /// Cache sizes, % of WSS: 25, 50, 75, 100.
    pub cache_percents: Vec<f64>,
    /// Warmup sizes, % of WSS: 5, 10, 25.
    pub warmup_percents: Vec<f64>,
    /// Warmup region sizes in bytes: 4 KiB, 1 MiB.
    pub region_bytes: Vec<u64>,
    /// Violation thresholds Th_V: 70, 80, 90 %.
    pub th_v: Vec<f64>,
    /// Convergence thresholds Th_N: 1, 3, 5 %.
    pub th_n: Vec<f64>,
}

impl Default for SweepGrid {
    fn default() -> Self {
        Self {
            cache_percents: vec![25.0, 50.0, 75.0, 100.0],
            warmup_percents: vec![5.0, 10.0, 25.0],
            region_bytes: vec![4096, 1 << 20],
            th_v: vec![0.7, 0.8, 0.9],
            th_n: vec![0.01, 0.03, 0.05],
        }
    }
}

/// One row of a Table 3-shaped summary (medians over volumes and periods).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table3Row {
    /// S_Cache, % of WSS.
    pub cache_percent: f64,
    /// S_Warmup, % of WSS.
    pub warmup_percent: f64,
    /// Warmup region size in bytes.
    pub region_bytes: u64,
    /// Th_V (fraction).
    pub th_v: f64,
    /// Th_N (fraction).
    pub th_n: f64,
    /// T_preload, minutes.
    pub preload_minutes: Option<f64>,
    /// Cold T_converge, hours.
    pub cold_hours: Option<f64>,
    /// Best selector's T_converge, hours.
    pub bonfire_hours: Option<f64>,
    /// T_converge improvement, %.
    pub converge_improvement_percent: Option<f64>,
    /// Cold server load reduction, %.
    pub cold_load_percent: Option<f64>,
    /// Always-warm server load reduction, %.
    pub always_warm_load_percent: Option<f64>,
    /// Best selector's server load reduction, %.
    pub bonfire_load_percent: Option<f64>,
    /// Server load reduction improvement, %.
    pub load_improvement_percent: Option<f64>,
    /// How often each selector was the best, by name.
    pub best_counts: Vec<(String, usize)>,
    /// Volume-periods summarized.
    pub samples: usize,
}

/// Median of the present values.
pub fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().flatten().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// The best warmed scheme of one volume-period: shortest convergence, then the largest load
/// reduction.
pub fn best_selector(m: &[SchemeMetrics]) -> Option<&SchemeMetrics> {
    m.iter()
        .filter(|x| x.scheme != Scheme::Cold.name() && x.scheme != Scheme::AlwaysWarm.name())
        .min_by(|a, b| {
            a.converge_intervals.cmp(&b.converge_intervals).then(
                b.load_reduction_percent
                    .unwrap_or(-1.0)
                    .total_cmp(&a.load_reduction_percent.unwrap_or(-1.0)),
            )
        })
}

/// Run the grid over `vols` (periods from `t0`), with `base` giving the other parameters and
/// `bandwidth` the backing bandwidth for T_preload. `progress` is called after each
/// (cache, warmup, region) simulation set.
pub fn sweep(
    vols: &[VolumeAccesses],
    t0: u64,
    base: &WarmupConfig,
    grid: &SweepGrid,
    bandwidth: f64,
    progress: &mut dyn FnMut(usize, usize),
) -> Vec<Table3Row> {
    let run =
        &mut |cfg: &WarmupConfig| Ok::<_, std::convert::Infallible>(run_warmup(vols, t0, cfg));
    match sweep_with(base, grid, bandwidth, progress, run) {
        Ok(rows) => rows,
        Err(e) => match e {},
    }
}

/// [`sweep`] with `run` running one configuration's experiment (over a held trace, or a
/// pass over a streamed one: [`crate::warmup::stream`]); stops at `run`'s first error.
pub fn sweep_with<E>(
    base: &WarmupConfig,
    grid: &SweepGrid,
    bandwidth: f64,
    progress: &mut dyn FnMut(usize, usize),
    run: &mut dyn FnMut(&WarmupConfig) -> Result<Vec<DayRuns>, E>,
) -> Result<Vec<Table3Row>, E> {
    let mut rows = Vec::new();
    let total = grid.cache_percents.len() * grid.warmup_percents.len() * grid.region_bytes.len();
    let mut done = 0;
    for &c in &grid.cache_percents {
        for &w in &grid.warmup_percents {
            for &region in &grid.region_bytes {
                let cfg = WarmupConfig {
                    cache_percent: c,
                    warmup_percent: w,
                    region_bytes: region,
                    ..base.clone()
                };
                let days = run(&cfg)?;
                done += 1;
                progress(done, total);
                for &tv in &grid.th_v {
                    for &tn in &grid.th_n {
                        let ms: Vec<Vec<SchemeMetrics>> =
                            days.iter().map(|d| d.metrics(tv, tn, bandwidth)).collect();
                        let get = |m: &[SchemeMetrics], s: &str| {
                            m.iter().find(|x| x.scheme == s).cloned()
                        };
                        let best: Vec<Option<SchemeMetrics>> =
                            ms.iter().map(|m| best_selector(m).cloned()).collect();
                        let mut counts: Vec<(String, usize)> = Vec::new();
                        for b in best.iter().flatten() {
                            match counts.iter_mut().find(|x| x.0 == b.scheme) {
                                Some(x) => x.1 += 1,
                                None => counts.push((b.scheme.clone(), 1)),
                            }
                        }
                        let cold = |f: fn(&SchemeMetrics) -> Option<f64>| {
                            median(
                                ms.iter().map(|m| get(m, Scheme::Cold.name()).and_then(|x| f(&x))),
                            )
                        };
                        rows.push(Table3Row {
                            cache_percent: c,
                            warmup_percent: w,
                            region_bytes: region,
                            th_v: tv,
                            th_n: tn,
                            preload_minutes: median(
                                best.iter().map(|b| b.as_ref().map(|b| b.preload_minutes)),
                            ),
                            cold_hours: cold(|x| Some(x.converge_hours)),
                            bonfire_hours: median(
                                best.iter().map(|b| b.as_ref().map(|b| b.converge_hours)),
                            ),
                            converge_improvement_percent: median(
                                best.iter().map(|b| {
                                    b.as_ref().and_then(|b| b.converge_improvement_percent)
                                }),
                            ),
                            cold_load_percent: cold(|x| x.load_reduction_percent),
                            always_warm_load_percent: median(ms.iter().map(|m| {
                                get(m, Scheme::AlwaysWarm.name())
                                    .and_then(|x| x.load_reduction_percent)
                            })),
                            bonfire_load_percent: median(
                                best.iter()
                                    .map(|b| b.as_ref().and_then(|b| b.load_reduction_percent)),
                            ),
                            load_improvement_percent: median(
                                best.iter()
                                    .map(|b| b.as_ref().and_then(|b| b.load_improvement_percent)),
                            ),
                            best_counts: counts,
                            samples: days.len(),
                        });
                    }
                }
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_present_values() {
        assert_eq!(median([Some(3.0), None, Some(1.0), Some(2.0)]), Some(2.0));
        assert_eq!(median([Some(4.0), Some(1.0)]), Some(2.5));
        assert_eq!(median([None]), None);
    }

    #[test]
    fn table2_grid_by_default() {
        let g = SweepGrid::default();
        assert_eq!(g.cache_percents.len() * g.warmup_percents.len() * g.region_bytes.len(), 24);
        assert_eq!((g.th_v.len(), g.th_n.len()), (3, 3));
    }
}
