//! The one door of the server to the laboratory (`ember_sim`): the warmup experiment that
//! `--warmup auto` runs on the logged history ([`choose`]), through `ember_sim::warmup::advise`.
//! Nothing else in this crate imports `ember_sim`: the sieves come from `ember_policy`
//! (`admission.rs`).
//!
//! `--warmup auto` chooses the selector from evidence. The warmup log's history is simulated
//! with the laboratory's own code (`advise`, ranked exactly as `ember warmup advise` ranks):
//! the history is cut into [`PERIODS`] periods of equal length (20 intervals each), each
//! period a restart warmed from the one before, with the live cache's size and warmup size as
//! percentages of the logged working set. The best `T_converge` (then load reduction, then
//! hits) wins. A log too short to decide (fewer than [`MIN_RECORDS`] records, or no period
//! after the first with accesses) falls back to Last-K.

use ember_policy::warmup::SelectorKind;
use ember_sim::warmup::{advise, AdviseConfig};
use ember_trace::{Trace, VolumeTable};
use std::path::Path;

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
    let advice = advise(
        &trace,
        &AdviseConfig {
            block_size: live.block_size,
            cache_blocks: live.cache_blocks,
            warmup_blocks: live.warmup_blocks,
            region_bytes: live.region_bytes,
            seed: live.seed,
            periods: PERIODS,
            th_v: TH_V,
            th_n: TH_N,
            bandwidth: BANDWIDTH,
        },
    );
    let (ev, period, cache_percent, warmup_percent) =
        (&advice.evidence, advice.period_ns, advice.cache_percent, advice.warmup_percent);
    let Some(kind) = advice.selector else {
        return fallback("no simulated period after the first has accesses".into());
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
