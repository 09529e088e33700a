//! `ember sim --experiment sievestore`: SieveStore's comparison (sections 5.1-5.3) on any
//! trace. Every sieve runs over the trace in an ensemble cache and in per-volume partitions of
//! the same total size (the four quadrants of Figure 1); AOD and WMNA also run at twice the
//! size, as in the paper. For each configuration: accesses captured per day (split
//! read/write; Figure 5), allocation-writes per day (Figure 6), SSD operations (Figure 7),
//! per-minute drive IOPS occupancy (Figure 8) and the drives needed for 100 %, 99.9 % and
//! 90 % of the minutes (Figure 9), plus the sieve's memory.

use crate::sievestore::cost_model::{
    drives_needed, occupancy_per_minute, DeviceModel, PAPER_COVERAGES,
};
use crate::sievestore::ensemble::{add_weight, Partition};
use crate::sievestore::stream::{
    run_streamed_parallel, OpenRequests, StreamCell, StreamError, TraceCounts,
};
use crate::sievestore::{CacheFactory, SieveRun, DAY_NS};
use ember_policy::admission::{SieveConfigError, SieveSpec};
use ember_policy::Lru;
use ember_trace::{Request, Trace};
use std::collections::HashSet;
use std::fmt::Write as _;

/// An error of the experiment.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A sieve rejected its parameters.
    #[error(transparent)]
    Sieve(#[from] SieveConfigError),
    /// The experiment cannot run on this input.
    #[error("sievestore experiment: {0}")]
    Invalid(String),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct SieveStoreExperiment {
    /// Cache block size in bytes.
    pub block_size: u64,
    /// Cache capacity in blocks; `None` sizes it like the paper ([`default_capacity`]).
    pub capacity_blocks: Option<usize>,
    /// The sieves (default: all, [`SieveSpec::all`]).
    pub sieves: Vec<SieveSpec>,
    /// Partitionings to run each sieve under (default: ensemble and proportional).
    pub partitions: Vec<Partition>,
    /// Also run AOD and WMNA (ensemble) at twice the capacity.
    pub unsieved_double: bool,
    /// The SSD model for the cost model.
    pub device: DeviceModel,
    /// Worker threads (configurations run in parallel).
    pub threads: usize,
}

impl Default for SieveStoreExperiment {
    fn default() -> Self {
        Self {
            block_size: 4096,
            capacity_blocks: None,
            sieves: SieveSpec::all(),
            partitions: vec![Partition::Ensemble, Partition::Proportional],
            unsieved_double: true,
            device: DeviceModel::x25e(),
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        }
    }
}

/// One configuration's results.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ExperimentRow {
    /// Label for tables and plots, e.g. `sievestore-c`, `aod-2x`, `sievestore-c/proportional`.
    pub label: String,
    /// The sieve's name.
    pub sieve: String,
    /// How the capacity was shared.
    pub partition: Partition,
    /// True if the sieve is selective (not AOD/WMNA).
    pub sieved: bool,
    /// Counts per day and minute.
    pub run: SieveRun,
    /// Drive IOPS occupancy per minute.
    pub occupancy: Vec<f64>,
    /// Drives needed for 100 %, 99.9 % and 90 % of the minutes.
    pub drives: [u32; 3],
}

/// All results.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ExperimentReport {
    /// Cache capacity in blocks.
    pub capacity_blocks: usize,
    /// Block size in bytes.
    pub block_size: u64,
    /// The device model's name.
    pub device: String,
    /// Calendar days of the trace.
    pub days: usize,
    /// One row per configuration, ensemble rows first.
    pub rows: Vec<ExperimentRow>,
}

/// The paper's sizing: its 16 GB cache held the ensemble's daily top 1 % of blocks (at most
/// 11.9 GB) with room to spare, so the default is 1.35 times the largest daily top 1 %.
pub fn default_capacity(trace: &Trace, block_size: u64) -> usize {
    let mut daily = DailyBlocks::default();
    for r in &trace.requests {
        daily.add(r, block_size);
    }
    daily.default_capacity()
}

/// The distinct blocks of each calendar day (counted from midnight of the first request's
/// day), for [`default_capacity`]: memory is one set of block keys per day.
#[derive(Default)]
pub struct DailyBlocks {
    origin: Option<u64>,
    days: Vec<HashSet<u64>>,
}

impl DailyBlocks {
    /// Count `r`'s blocks into its day.
    pub fn add(&mut self, r: &Request, block_size: u64) {
        let origin = *self.origin.get_or_insert(r.time_ns / DAY_NS * DAY_NS);
        let d = (r.time_ns.saturating_sub(origin) / DAY_NS) as usize;
        if self.days.len() <= d {
            self.days.resize_with(d + 1, HashSet::new);
        }
        self.days[d].extend(r.block_keys(block_size));
    }

    /// 1.35 times the largest daily top 1 % (at least 1 block).
    pub fn default_capacity(&self) -> usize {
        let top = self.days.iter().map(|s| s.len().div_ceil(100)).max().unwrap_or(1);
        ((top as f64 * 1.35).ceil() as usize).max(1)
    }
}

impl SieveStoreExperiment {
    /// Run every configuration over `trace` held in memory.
    pub fn run(&self, trace: &Trace) -> Result<ExperimentReport, ExperimentError> {
        if trace.requests.is_empty() {
            return Err(ExperimentError::Invalid("the trace has no requests".into()));
        }
        let open =
            || -> Result<Box<dyn Iterator<Item = _> + Send + '_>, std::convert::Infallible> {
                Ok(Box::new(trace.requests.iter().copied().map(Ok)))
            };
        self.run_streamed(&open).map_err(|e| match e {
            StreamedError::Experiment(e) => e,
            StreamedError::Read(never) => match never {},
        })
    }

    /// Run every configuration over the requests `open` streams, never holding them: one
    /// counting pass (each volume's share, and the days' distinct blocks if the capacity is
    /// not given), then one pass per worker thread, each feeding its share of the
    /// configurations every request as it is read (`crate::sievestore::stream`).
    pub fn run_streamed<E: std::error::Error + Send + 'static>(
        &self,
        open: OpenRequests<'_, E>,
    ) -> Result<ExperimentReport, StreamedError<E>> {
        if self.block_size == 0 {
            return Err(ExperimentError::Invalid("block size must be positive".into()).into());
        }
        for s in &self.sieves {
            s.build().map_err(ExperimentError::from)?;
        }
        // The first pass: each volume's share, the days' distinct blocks if needed.
        let mut weights = Vec::new();
        let mut daily = DailyBlocks::default();
        let mut requests = 0u64;
        for r in open().map_err(StreamedError::Read)? {
            let r = r.map_err(StreamedError::Read)?;
            requests += 1;
            add_weight(&mut weights, &r, self.block_size);
            if self.capacity_blocks.is_none() {
                daily.add(&r, self.block_size);
            }
        }
        if requests == 0 {
            return Err(ExperimentError::Invalid("the trace has no requests".into()).into());
        }
        let capacity = self.capacity_blocks.unwrap_or_else(|| daily.default_capacity());
        drop(daily);
        if capacity == 0 {
            return Err(ExperimentError::Invalid("cache capacity must be positive".into()).into());
        }
        let counts = TraceCounts { weights, distinct_blocks: None };
        // (label, spec, partition, capacity)
        let mut jobs: Vec<(String, SieveSpec, Partition, usize)> = Vec::new();
        for &p in &self.partitions {
            for s in &self.sieves {
                let label = match p {
                    Partition::Ensemble => s.name().to_string(),
                    _ => format!("{}/{}", s.name(), p.name()),
                };
                jobs.push((label, s.clone(), p, capacity));
            }
            if p == Partition::Ensemble && self.unsieved_double {
                for s in [SieveSpec::Aod, SieveSpec::Wmna] {
                    jobs.push((format!("{}-2x", s.name()), s, p, capacity * 2));
                }
            }
        }
        let lru: CacheFactory<'_> = &|c| Box::new(Lru::new(c));
        let cells: Vec<StreamCell<'_>> = jobs
            .iter()
            .map(|(_, spec, p, cap)| StreamCell {
                spec: spec.clone(),
                capacity: *cap,
                partition: *p,
                make_cache: lru,
            })
            .collect();
        let results =
            run_streamed_parallel(open, self.block_size, &cells, Some(&counts), self.threads)?;
        let mut rows = Vec::with_capacity(jobs.len());
        let mut days = 0;
        for ((label, spec, p, _), mut run) in jobs.into_iter().zip(results) {
            run.name = label.clone();
            days = days.max(run.days.len());
            let occupancy = occupancy_per_minute(&run.minutes, &self.device, self.block_size);
            let drives = PAPER_COVERAGES.map(|c| drives_needed(&occupancy, c));
            rows.push(ExperimentRow {
                label,
                sieve: spec.name().to_string(),
                partition: p,
                sieved: spec.is_sieved(),
                run,
                occupancy,
                drives,
            });
        }
        Ok(ExperimentReport {
            capacity_blocks: capacity,
            block_size: self.block_size,
            device: self.device.name.clone(),
            days,
            rows,
        })
    }
}

/// An error of a streamed experiment: the experiment's own, or the trace reader's.
#[derive(Debug, thiserror::Error)]
pub enum StreamedError<E: std::error::Error + 'static> {
    /// The experiment's own error.
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    /// Reading the trace failed.
    #[error(transparent)]
    Read(E),
}

impl<E: std::error::Error + 'static> From<StreamError<E>> for StreamedError<E> {
    fn from(e: StreamError<E>) -> Self {
        match e {
            StreamError::Read(e) => StreamedError::Read(e),
            StreamError::Config(e) => StreamedError::Experiment(e.into()),
            other => StreamedError::Experiment(ExperimentError::Invalid(other.to_string())),
        }
    }
}

impl ExperimentReport {
    /// The row labelled `label`.
    pub fn row(&self, label: &str) -> Option<&ExperimentRow> {
        self.rows.iter().find(|r| r.label == label)
    }

    /// The paper's tables as text: accesses captured per day, allocation-writes per day, SSD
    /// operations, and drives needed with the sieve's memory.
    pub fn tables(&self) -> String {
        let mut s = String::new();
        let days = self.days;
        let w = self.rows.iter().map(|r| r.label.len()).max().unwrap_or(8).max(8);
        let _ = writeln!(
            s,
            "SieveStore experiment: cache {} blocks of {} B, device {}, {} day(s)\n",
            self.capacity_blocks, self.block_size, self.device, days
        );
        let header = |s: &mut String, title: &str, last: &str| {
            let _ = writeln!(s, "{title}");
            let _ = write!(s, "{:w$}", "config");
            for d in 1..=days {
                let _ = write!(s, " {:>9}", format!("day{d}"));
            }
            let _ = writeln!(s, " {:>10}", last);
        };
        header(&mut s, "Accesses captured (% of accesses; reads+writes; Figure 5)", "avg d2+");
        for r in &self.rows {
            let _ = write!(s, "{:w$}", r.label);
            for d in 0..days {
                let st = r.run.days.get(d).copied().unwrap_or_default();
                let _ = write!(s, " {:>9.2}", pct(st.hits(), st.accesses));
            }
            let t = r.run.total_from(1);
            let _ = writeln!(s, " {:>10.2}", pct(t.hits(), t.accesses));
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "Captured reads / writes (% of accesses, days 2+)");
        for r in &self.rows {
            let t = r.run.total_from(1);
            let _ = writeln!(
                s,
                "{:w$} reads {:>6.2}  writes {:>6.2}",
                r.label,
                pct(t.read_hits, t.accesses),
                pct(t.write_hits, t.accesses)
            );
        }
        let _ = writeln!(s);
        header(&mut s, "Allocation-writes (blocks; Figure 6)", "total");
        for r in &self.rows {
            let _ = write!(s, "{:w$}", r.label);
            for d in 0..days {
                let st = r.run.days.get(d).copied().unwrap_or_default();
                let _ = write!(s, " {:>9}", st.allocation_writes);
            }
            let _ = writeln!(s, " {:>10}", r.run.total().allocation_writes);
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "SSD operations, whole trace (blocks; Figure 7)");
        let _ = writeln!(
            s,
            "{:w$} {:>12} {:>12} {:>12} {:>12} {:>8}",
            "config", "read hits", "write hits", "alloc-writes", "total", "% acc"
        );
        for r in &self.rows {
            let t = r.run.total();
            let _ = writeln!(
                s,
                "{:w$} {:>12} {:>12} {:>12} {:>12} {:>8.2}",
                r.label,
                t.read_hits,
                t.write_hits,
                t.allocation_writes,
                t.ssd_ops(),
                pct(t.ssd_ops(), t.accesses)
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "Drives needed ({}; Figures 8 and 9) and sieve memory", self.device);
        let _ = writeln!(
            s,
            "{:w$} {:>6} {:>6} {:>6} {:>9} {:>14}",
            "config", "100%", "99.9%", "90%", "max occ", "sieve bytes"
        );
        for r in &self.rows {
            let max = r.occupancy.iter().copied().fold(0.0, f64::max);
            let _ = writeln!(
                s,
                "{:w$} {:>6} {:>6} {:>6} {:>9.3} {:>14}",
                r.label, r.drives[0], r.drives[1], r.drives[2], max, r.run.sieve_memory_bytes
            );
        }
        s
    }
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::{Op, Request, VolumeTable};

    #[test]
    fn runs_every_configuration_and_prints_tables() {
        let mut v = VolumeTable::new();
        v.intern("a_0");
        v.intern("b_0");
        let reqs: Vec<Request> = (0..4000u64)
            .map(|i| Request {
                time_ns: i * 40_000_000_000,
                volume: (i % 2) as u32,
                op: if i % 4 == 0 { Op::Write } else { Op::Read },
                offset: (i % 37) * 4096,
                length: 4096,
            })
            .collect();
        let t = Trace::new(reqs, v);
        let exp = SieveStoreExperiment { threads: 2, ..SieveStoreExperiment::default() };
        let rep = exp.run(&t).unwrap();
        // 8 sieves x 2 partitionings + AOD/WMNA at 2x.
        assert_eq!(rep.rows.len(), 18);
        assert!(rep.days >= 2);
        let aod = rep.row("aod").unwrap();
        assert_eq!(aod.run.total().accesses, 4000);
        assert!(rep.row("sievestore-c/proportional").is_some());
        assert_eq!(rep.row("aod-2x").unwrap().run.capacity_blocks, 2 * rep.capacity_blocks as u64);
        let text = rep.tables();
        assert!(text.contains("Accesses captured") && text.contains("sievestore-d"));
        assert!(SieveStoreExperiment::default().run(&Trace::default()).is_err());
    }
}
