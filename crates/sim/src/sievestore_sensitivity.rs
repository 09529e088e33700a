//! SieveStore's sensitivity analysis (Pritchett and Thottethodi, ISCA 2010, section 5.1,
//! "Sensitivity"): the sieves' thresholds and window/epoch lengths varied one at a time
//! around the paper's tuned values, each run in the ensemble cache the experiment uses.
//!
//! The paper summarizes what it found without its data: a threshold too low (below 8 for
//! SieveStore-D) sieves inadequately; in the high range (8-20) the hit rate barely moves;
//! window and epoch lengths matter little, though lengths under 8 hours degrade somewhat.
//! [`sensitivity`] produces the numbers those sentences are about, on any trace.

use crate::ensemble::{run_partitioned, Partition};
use crate::experiment_sievestore::ExperimentError;
use crate::sievestore::SieveSpec;
use ember_policy::admission::sievestore_d::DEFAULT_EPOCH_NS;
use ember_policy::admission::SieveStoreCConfig;
use ember_trace::Trace;
use serde::Serialize;

const HOUR_NS: u64 = 3_600_000_000_000;

/// One point of the sweep: a sieve with one parameter moved away from the paper's value.
#[derive(Clone, Debug, Serialize)]
pub struct SensitivityPoint {
    /// `sievestore-d` or `sievestore-c`.
    pub sieve: String,
    /// The parameter varied: `t`, `epoch`, `t1`, `t2` or `window`.
    pub parameter: String,
    /// Its value (hours for `epoch` and `window`).
    pub value: f64,
    /// True for the paper's tuned value.
    pub paper: bool,
    /// Block accesses over the days counted.
    pub accesses: u64,
    /// Hits (accesses captured) over the days counted.
    pub hits: u64,
    /// Allocation-writes over the days counted.
    pub allocation_writes: u64,
}

impl SensitivityPoint {
    /// Fraction of accesses captured (hits / accesses).
    pub fn captured(&self) -> f64 {
        if self.accesses == 0 {
            0.0
        } else {
            self.hits as f64 / self.accesses as f64
        }
    }
}

/// The grid of the sweep: (sieve, parameter, value, is the paper's, spec).
fn grid() -> Vec<(&'static str, &'static str, f64, bool, SieveSpec)> {
    let mut g = Vec::new();
    for t in [2u64, 4, 6, 8, 10, 14, 20] {
        let spec = SieveSpec::SieveStoreD { t, epoch_ns: DEFAULT_EPOCH_NS };
        g.push(("sievestore-d", "t", t as f64, t == 10, spec));
    }
    for h in [2u64, 4, 8, 24, 48] {
        let spec = SieveSpec::SieveStoreD { t: 10, epoch_ns: h * HOUR_NS };
        g.push(("sievestore-d", "epoch", h as f64, h == 24, spec));
    }
    let c = SieveStoreCConfig::default();
    for t1 in [1u32, 3, 6, 9, 12, 18] {
        let spec = SieveSpec::SieveStoreC(SieveStoreCConfig { t1, ..c });
        g.push(("sievestore-c", "t1", t1 as f64, t1 == c.t1, spec));
    }
    for t2 in [1u32, 2, 4, 6, 8] {
        let spec = SieveSpec::SieveStoreC(SieveStoreCConfig { t2, ..c });
        g.push(("sievestore-c", "t2", t2 as f64, t2 == c.t2, spec));
    }
    for h in [1u64, 2, 4, 8, 16] {
        let w = h * HOUR_NS;
        let spec =
            SieveSpec::SieveStoreC(SieveStoreCConfig { window_ns: w, prune_interval_ns: w, ..c });
        g.push(("sievestore-c", "window", h as f64, w == c.window_ns, spec));
    }
    g
}

/// Run the sweep over `trace` in an ensemble cache of `capacity` blocks, on `threads`
/// threads. Day 1 is left out of the counts, as the experiment does (SieveStore-D has no
/// history to choose from on its first day).
pub fn sensitivity(
    trace: &Trace,
    block_size: u64,
    capacity: usize,
    threads: usize,
) -> Result<Vec<SensitivityPoint>, ExperimentError> {
    if trace.requests.is_empty() || capacity == 0 || block_size == 0 {
        return Err(ExperimentError::Invalid(
            "the sweep needs requests, a capacity and a block size".into(),
        ));
    }
    let jobs = grid();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: std::sync::Mutex<Vec<Option<Result<SensitivityPoint, ExperimentError>>>> =
        std::sync::Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|sc| {
        for _ in 0..threads.clamp(1, jobs.len()) {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((sieve, parameter, value, paper, spec)) = jobs.get(i) else { break };
                let r = run_partitioned(
                    &trace.requests,
                    block_size,
                    capacity,
                    Partition::Ensemble,
                    spec,
                )
                .map_err(ExperimentError::from)
                .map(|run| {
                    let t = run.total_from(1);
                    SensitivityPoint {
                        sieve: sieve.to_string(),
                        parameter: parameter.to_string(),
                        value: *value,
                        paper: *paper,
                        accesses: t.accesses,
                        hits: t.hits(),
                        allocation_writes: t.allocation_writes,
                    }
                });
                if let Ok(mut g) = out.lock() {
                    g[i] = Some(r);
                }
            });
        }
    });
    let out = out.into_inner().unwrap_or_default();
    out.into_iter()
        .map(|r| {
            r.unwrap_or_else(|| Err(ExperimentError::Invalid("a sweep thread panicked".into())))
        })
        .collect()
}

/// The sweep as a text table, one block per (sieve, parameter).
pub fn table(points: &[SensitivityPoint]) -> String {
    let mut s = String::from(
        "SieveStore sensitivity (ISCA 2010, section 5.1): one parameter varied, the others at \
         the paper's values; days 2.. counted\n\
         sieve         param   value  captured  allocation-writes\n",
    );
    for p in points {
        s.push_str(&format!(
            "{:<13} {:<6} {:>6}  {:>7.2}%  {:>17}{}\n",
            p.sieve,
            p.parameter,
            p.value,
            100.0 * p.captured(),
            p.allocation_writes,
            if p.paper { "  (paper)" } else { "" }
        ));
    }
    s
}
