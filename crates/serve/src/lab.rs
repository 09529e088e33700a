//! The one door of the server to the laboratory (`ember_sim`): the admission registry's specs
//! that the sieves are built from ([`SieveSettings::spec`], [`admission`]), and the warmup
//! experiment that `--warmup auto` runs on the logged history ([`choose`]). Nothing else in
//! this crate imports `ember_sim`.
//!
//! `--warmup auto` chooses the selector from evidence. The warmup log's history is simulated
//! with the laboratory's own code (`run_warmup`, ranked by `rank_selectors`, exactly what
//! `ember warmup advise` prints): the history is cut into [`PERIODS`] periods of equal length
//! (20 intervals each), each period a restart warmed from the one before, with the live
//! cache's size and warmup size as percentages of the logged working set. The best
//! `T_converge` (then load reduction, then hits) wins. A log too short to decide (fewer than
//! [`MIN_RECORDS`] records, or no period after the first with accesses) falls back to Last-K.

use anyhow::{anyhow, bail};
use ember_policy::admission::{EpochAdmission, SieveStoreCConfig};
use ember_policy::warmup::SelectorKind;
use ember_policy::Admission;
use ember_sim::warmup_evidence::rank_selectors;
use ember_sim::warmup_experiment::{run_warmup, VolumeAccesses, WarmupConfig};
use ember_trace::{Trace, VolumeTable};
use std::path::Path;

use ember_sim::sievestore::{Sieve, SieveSpec};

use crate::config::SieveSettings;

impl SieveSettings {
    /// `spec` with these parameters in place of its defaults.
    pub fn apply(&self, spec: SieveSpec) -> anyhow::Result<SieveSpec> {
        if !(self.fraction > 0.0 && self.fraction <= 1.0) {
            bail!("--sieve-fraction {}: above 0 and at most 1", self.fraction);
        }
        if self.epoch_ns == 0 || self.window_ns == 0 {
            bail!("--epoch and --sieve-window must be longer than 0");
        }
        if self.subwindows == 0 || self.imct == 0 {
            bail!("--sieve-subwindows and --sieve-imct must be at least 1");
        }
        let (fraction, seed, epoch_ns) = (self.fraction, self.seed, self.epoch_ns);
        Ok(match spec {
            SieveSpec::SieveStoreC(_) => SieveSpec::SieveStoreC(SieveStoreCConfig {
                t1: self.t1,
                t2: self.t2,
                window_ns: self.window_ns,
                k: self.subwindows,
                imct_entries: self.imct,
                prune_interval_ns: self.window_ns,
            }),
            SieveSpec::SieveStoreD { .. } => SieveSpec::SieveStoreD { t: self.threshold, epoch_ns },
            SieveSpec::RandSieveC { .. } => SieveSpec::RandSieveC { fraction, seed },
            SieveSpec::RandSieveBlkD { .. } => {
                SieveSpec::RandSieveBlkD { fraction, seed, epoch_ns }
            }
            SieveSpec::Ideal { .. } => SieveSpec::Ideal { fraction, epoch_ns },
            other => other,
        })
    }

    /// Parse `name` (an `--admission` value) and apply these parameters.
    pub fn spec(&self, name: &str) -> anyhow::Result<SieveSpec> {
        let spec: SieveSpec =
            name.trim().parse().map_err(|e: String| anyhow!("--admission: {e}"))?;
        self.apply(spec)
    }
}

/// The admission sieve called `s`, with `params`, and, for a discrete sieve (SieveStore-D,
/// RandSieve-BlkD), its epoch: it counts accesses (at most `count_bytes` of counts per epoch)
/// and the engine's batch mover installs its choice at each epoch's end. The ideal sieve
/// needs the future and is refused.
pub fn admission(
    s: &str,
    params: &SieveSettings,
    count_bytes: u64,
) -> anyhow::Result<(Box<dyn Admission>, Option<u64>)> {
    let spec = params.spec(s)?;
    match spec.build().map_err(|e| anyhow!("--admission {s}: {e}"))? {
        Sieve::Continuous(sieve) => Ok((sieve, None)),
        Sieve::Discrete(sieve, epoch_ns) => {
            let a = EpochAdmission::new(sieve, usize::try_from(count_bytes).unwrap_or(usize::MAX))
                .map_err(|e| anyhow!("--admission {s}: {e}"))?;
            Ok((Box::new(a), Some(epoch_ns)))
        }
    }
}

/// Periods the logged history is cut into.
pub const PERIODS: u64 = 4;
/// Fewer records than this: too short to decide.
pub const MIN_RECORDS: usize = 1000;
/// Th_V of `ember warmup advise`'s default; Th_N 0 (every violating interval counts: with
/// 20 intervals a period, advise's 5 % would forgive one cold interval and tie every
/// selector at 0) and advise's bandwidth.
const TH_V: f64 = 0.9;
const TH_N: f64 = 0.0;
const BANDWIDTH: f64 = 100e6;

/// What the live cache preloads into.
#[derive(Clone, Copy, Debug)]
pub struct LiveCache {
    /// Block size.
    pub block_size: u64,
    /// Data blocks of the cache.
    pub cache_blocks: u64,
    /// Blocks the preload may fill.
    pub warmup_blocks: u64,
    /// Warmup region bytes.
    pub region_bytes: u64,
    /// Seed of Random-K.
    pub seed: u64,
}

/// Choose the selector for the log at `log`; returns it and the line that gives the evidence
/// (or why Last-K is the fallback).
pub fn choose(log: &Path, live: LiveCache) -> (SelectorKind, String) {
    let fallback = |why: String| (SelectorKind::LastK, format!("auto: Last-K, because {why}"));
    let bytes = match std::fs::read(log) {
        Ok(b) => b,
        Err(e) => return fallback(format!("the warmup log cannot be read ({e})")),
    };
    let (volumes, requests): (VolumeTable, _) =
        match ember_trace::formats::warmup_log::requests(&bytes) {
            Ok(x) => x,
            Err(e) => return fallback(format!("the warmup log is unusable ({e})")),
        };
    if requests.len() < MIN_RECORDS {
        return fallback(format!(
            "the log is too short to decide ({} requests, at least {MIN_RECORDS} needed)",
            requests.len()
        ));
    }
    let trace = Trace { volumes, requests };
    let t0 = trace.requests.iter().map(|r| r.time_ns).min().unwrap_or(0);
    let t1 = trace.requests.iter().map(|r| r.time_ns).max().unwrap_or(0);
    let period = ((t1 - t0) / PERIODS + 1).max(1_000);
    let vols = VolumeAccesses::of_trace(&trace, live.block_size);
    let wss: u64 = vols.iter().map(|v| v.wss_blocks).sum::<u64>().max(1);
    let cache_percent = (100.0 * live.cache_blocks as f64 / wss as f64).min(100.0);
    let warmup_percent = (100.0 * live.warmup_blocks as f64 / wss as f64).min(cache_percent);
    let cfg = WarmupConfig {
        block_size: live.block_size,
        period_ns: period,
        interval_ns: (period / 20).max(1),
        cache_percent,
        warmup_percent,
        region_bytes: live.region_bytes,
        selectors: SelectorKind::ALL.to_vec(),
        readahead_bytes: 0,
        seed: live.seed,
    };
    let days = run_warmup(&vols, t0, &cfg);
    let ev = rank_selectors(&days, TH_V, TH_N, BANDWIDTH);
    let Some(best) = ev.best.as_deref() else {
        return fallback("no simulated period after the first has accesses".into());
    };
    let Some(kind) = SelectorKind::ALL.into_iter().find(|k| k.name() == best) else {
        return fallback(format!("the simulation named an unknown selector {best}"));
    };
    let evidence: Vec<String> = ev
        .schemes
        .iter()
        .map(|s| {
            format!(
                "{} T_converge {:.3} s, load reduction {}",
                s.scheme,
                s.converge_hours * 3600.0,
                s.load_reduction_percent.map_or("-".into(), |v| format!("{v:.1} %"))
            )
        })
        .collect();
    (
        kind,
        format!(
            "auto: {kind}, simulated on the log's {} requests ({} periods of {:.1} s, cache \
             {:.1} % and warmup {:.1} % of the logged working set; medians over {} \
             volume-periods): {}",
            trace.requests.len(),
            PERIODS,
            period as f64 / 1e9,
            cache_percent,
            warmup_percent,
            ev.periods,
            evidence.join("; ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sieve_parameters_reach_the_specs() {
        let p = SieveSettings {
            t1: 3,
            t2: 2,
            window_ns: 60_000_000_000,
            threshold: 5,
            epoch_ns: 3_600_000_000_000,
            fraction: 0.5,
            ..SieveSettings::default()
        };
        match p.spec("sievestore-c").unwrap() {
            SieveSpec::SieveStoreC(c) => {
                assert_eq!((c.t1, c.t2, c.window_ns, c.k), (3, 2, 60_000_000_000, 4))
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(
            p.spec("sievestore-d").unwrap(),
            SieveSpec::SieveStoreD { t: 5, epoch_ns: 3_600_000_000_000 }
        );
        assert_eq!(
            p.spec("randsieve-c").unwrap(),
            SieveSpec::RandSieveC { fraction: 0.5, seed: 1 }
        );
        assert_eq!(p.spec("wmna").unwrap(), SieveSpec::Wmna);
        // The defaults are the paper's.
        let d = SieveSettings::default();
        assert_eq!(d.spec("sievestore-c").unwrap(), "sievestore-c".parse::<SieveSpec>().unwrap());
        assert_eq!(d.spec("sievestore-d").unwrap(), "sievestore-d".parse::<SieveSpec>().unwrap());
        let bad = SieveSettings { fraction: 0.0, ..SieveSettings::default() };
        assert!(bad.spec("randsieve-c").is_err());
    }

    #[test]
    fn admissions() {
        let p = SieveSettings::default();
        let name = |s: &str| admission(s, &p, 1 << 20).map(|(a, e)| (a.name(), e)).ok();
        assert_eq!(name("aod"), Some(("aod", None)));
        assert_eq!(name("sievestore-c"), Some(("sievestore-c", None)));
        assert_eq!(name("sievestore-d"), Some(("sievestore-d", Some(86_400_000_000_000))));
        assert_eq!(name("ideal"), None, "the ideal sieve needs the future");
        assert!(admission("nope", &p, 1 << 20).is_err());
    }
}
