//! SieveStore's sensitivity analysis (Pritchett and Thottethodi, ISCA 2010, section 5.1,
//! "Sensitivity"): the sieves' thresholds and window/epoch lengths varied one at a time
//! around the paper's tuned values, each run in the ensemble cache the experiment uses.
//!
//! The paper summarizes what it found without its data: a threshold too low (below 8 for
//! SieveStore-D) sieves inadequately; in the high range (8-20) the hit rate barely moves;
//! window and epoch lengths matter little, though lengths under 8 hours degrade somewhat.
//! [`sensitivity`] produces the numbers those sentences are about, on any trace.

use crate::sievestore::ensemble::Partition;
use crate::sievestore::experiment::{ExperimentError, StreamedError};
use crate::sievestore::stream::{run_streamed_parallel, OpenRequests, StreamCell};
use crate::sievestore::CacheFactory;
use ember_policy::admission::sievestore_d::DEFAULT_EPOCH_NS;
use ember_policy::admission::{SieveSpec, SieveStoreCConfig};
use ember_policy::Lru;
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
    if trace.requests.is_empty() {
        return Err(ExperimentError::Invalid(
            "the sweep needs requests, a capacity and a block size".into(),
        ));
    }
    let open = || -> Result<Box<dyn Iterator<Item = _> + Send + '_>, std::convert::Infallible> {
        Ok(Box::new(trace.requests.iter().copied().map(Ok)))
    };
    sensitivity_streamed(&open, block_size, capacity, threads).map_err(|e| match e {
        StreamedError::Experiment(e) => e,
        StreamedError::Read(never) => match never {},
    })
}

/// [`sensitivity`] over the requests `open` streams: the points are dealt to `threads`
/// threads, each reading the trace once (`crate::sievestore::stream`); never holds the trace.
pub fn sensitivity_streamed<E: std::error::Error + Send + 'static>(
    open: OpenRequests<'_, E>,
    block_size: u64,
    capacity: usize,
    threads: usize,
) -> Result<Vec<SensitivityPoint>, StreamedError<E>> {
    if capacity == 0 || block_size == 0 {
        return Err(ExperimentError::Invalid(
            "the sweep needs requests, a capacity and a block size".into(),
        )
        .into());
    }
    let jobs = grid();
    let lru: CacheFactory<'_> = &|c| Box::new(Lru::new(c));
    let cells: Vec<StreamCell<'_>> = jobs
        .iter()
        .map(|(.., spec)| StreamCell {
            spec: spec.clone(),
            capacity,
            partition: Partition::Ensemble,
            make_cache: lru,
        })
        .collect();
    let runs = run_streamed_parallel(open, block_size, &cells, None, threads)?;
    if runs.iter().all(|r| r.total().accesses == 0) {
        return Err(ExperimentError::Invalid(
            "the sweep needs requests, a capacity and a block size".into(),
        )
        .into());
    }
    Ok(jobs
        .into_iter()
        .zip(runs)
        .map(|((sieve, parameter, value, paper, _), run)| {
            let t = run.total_from(1);
            SensitivityPoint {
                sieve: sieve.to_string(),
                parameter: parameter.to_string(),
                value,
                paper,
                accesses: t.accesses,
                hits: t.hits(),
                allocation_writes: t.allocation_writes,
            }
        })
        .collect())
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
