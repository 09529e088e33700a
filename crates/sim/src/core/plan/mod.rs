//! A plan for `ember sim`'s grid: the request (a trace file, replacement policies, cache
//! sizes, a timeline, threads) and the choice of the driver that runs it. A caller describes
//! what it wants ([`Plan::new`]) and runs it ([`Plan::run`]); the plan decides how, and every
//! driver gives the same results (each is checked against [`crate::simulate`] on the whole
//! stream).
//!
//! The drivers, in the order the plan considers them:
//!
//! 1. [`Driver::Whole`]: with an oracle policy (OPT) and [`PlanOptions::whole_trace`], the
//!    whole trace is held as an [`crate::AccessStream`] with its next-access times and the
//!    grid runs over it ([`crate::core::grid::run_grid`]): 9 bytes a block access, 17 with
//!    the future. A reference for the streamed paths.
//! 2. [`Driver::NextAccess`]: with an oracle policy, the trace is read once into temporary
//!    files ([`ember_trace::Spool`]), a backward pass over them computes the next-access times
//!    (its map holds one entry per distinct block), and the grid streams from the files
//!    ([`crate::core::streaming::run_streaming_with_next`]).
//! 3. [`Driver::Shared`]: a grid of several LRU, FIFO, CLOCK and S3-FIFO cells without a
//!    timeline runs over one shared index ([`crate::core::grid_shared`]): one probe per
//!    access for all cells.
//! 4. [`Driver::Records`]: an oracleGeneral trace without a timeline is read in place,
//!    zero-copy ([`crate::core::streaming::run_streaming_records`]).
//! 5. [`Driver::Chunks`]: otherwise the trace streams in bounded chunks, every cell
//!    simulating each chunk while the next is read ([`crate::core::streaming::run_streaming`]).
//!
//! Every streamed driver reads the trace once, twice when a size is a percentage of the
//! working set and no next-access pass counts it first ([`FirstPass::WorkingSet`]); memory is
//! the policies' state and two chunks, whatever the trace's length. Every run admits every
//! miss (AOD). Every driver takes an uncounted warm-up period ([`PlanOptions::warmup`]).

mod error;
mod streamed;
mod whole;

pub use error::PlanError;

use crate::core::capacity::Capacity;
use crate::core::streaming::StreamTotals;
use crate::core::warmup_period::WarmupPeriod;
use crate::{Interval, SimResult};
use ember_policy::replacement::Spec;
use ember_policy::seq_cutoff::SeqCutoffConfig;
use ember_trace::ReadOptions;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The trace a plan reads.
#[derive(Clone, Debug)]
pub struct TraceSource {
    /// The trace file (a pipe or FIFO streams, but is read only once).
    pub path: PathBuf,
    /// How to read it: format, CSV columns, block size.
    pub read: ReadOptions,
    /// One access per request, keyed by its first block (libCacheSim's object view of a
    /// block trace), instead of one access per block.
    pub per_request: bool,
}

/// How a plan runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Record a timeline with this interval.
    pub interval: Option<Interval>,
    /// Worker threads (at least 1 is used).
    pub threads: usize,
    /// With an oracle policy, hold the whole trace in memory instead of spooling the
    /// next-access times to temporary files ([`Driver::Whole`]).
    pub whole_trace: bool,
    /// The uncounted warm-up period: its requests run, the counters start after it.
    pub warmup: WarmupPeriod,
    /// The sequential cutoff in front of the cache (off by default); with it the trace is
    /// held whole ([`Driver::Whole`]).
    pub seq_cutoff: SeqCutoffConfig,
}

/// One cell of the grid: a policy at a size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The replacement policy and its parameters.
    pub policy: Spec,
    /// The size as the caller wrote it (`1%`, `64MiB`, `1000`).
    pub size: String,
    /// The capacity in blocks.
    pub capacity: u64,
}

/// The driver a plan ran (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// The whole trace in memory.
    Whole,
    /// Streamed, with next-access times from temporary files.
    NextAccess,
    /// Streamed over one shared index for every cell.
    Shared,
    /// Streamed, oracleGeneral records read in place.
    Records,
    /// Streamed in chunks.
    Chunks,
}

/// A pass over the trace before the simulating one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstPass {
    /// Counting the working set, for sizes in percent of it.
    WorkingSet,
    /// Spooling the trace and computing its next-access times, for an oracle policy.
    NextAccess,
}

impl fmt::Display for FirstPass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FirstPass::WorkingSet => "working-set",
            FirstPass::NextAccess => "next-access",
        })
    }
}

/// How far a running plan has come, in units of work: block accesses read when the trace
/// streams, block accesses simulated over all runs when it is held whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The simulation starts: `work` units to do, when known, over `runs` runs.
    Start {
        /// Units of work of the whole simulation, if known.
        work: Option<u64>,
        /// Runs in the grid.
        runs: usize,
    },
    /// `done` units are done; with the trace held whole, `runs_done` runs have finished.
    Advance {
        /// Units of work done.
        done: u64,
        /// Runs finished, where the driver knows it.
        runs_done: Option<usize>,
    },
}

/// Where a plan's time went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    /// From the start to the simulation: opening the trace and the passes before the
    /// simulating one (reading the whole trace and computing its next-access times, for
    /// [`Driver::Whole`]).
    pub before: Duration,
    /// [`Driver::Whole`]: reading the trace (the rest of `before` computed the next-access
    /// times). Zero otherwise.
    pub read: Duration,
    /// The simulation.
    pub simulate: Duration,
}

/// What a plan gives back.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Every cell with its result, in the plan's order.
    pub runs: Vec<(Cell, SimResult)>,
    /// What the trace held: requests, block accesses, distinct blocks (all of them, the
    /// warm-up's too), and where counting started after the warm-up period.
    pub totals: StreamTotals,
    /// Malformed records skipped while reading.
    pub skipped: u64,
    /// The driver that ran.
    pub driver: Driver,
    /// The pass before the simulating one, if there was one.
    pub first_pass: Option<FirstPass>,
    /// Threads that simulated.
    pub threads: usize,
    /// Where the time went.
    pub timings: Timings,
}

/// A grid of replacement policies at cache sizes over one trace, and how to run it.
#[derive(Clone, Debug)]
pub struct Plan {
    source: TraceSource,
    policies: Vec<Spec>,
    sizes: Vec<(String, Capacity)>,
    options: PlanOptions,
}

impl Plan {
    /// A plan for every policy of `policies` (a [`Spec`], or a
    /// [`Kind`](ember_policy::replacement::Kind) for its defaults) at every size of `sizes`
    /// (each with the text the caller wrote), policy-major, over `source`. At least one
    /// policy, one size and a positive block size. Each run's result is named by its spec
    /// (`lruk:k=3`), so runs of one policy with different parameters stay apart.
    pub fn new<P: Into<Spec>>(
        source: TraceSource,
        policies: Vec<P>,
        sizes: Vec<(String, Capacity)>,
        options: PlanOptions,
    ) -> Result<Self, PlanError> {
        let policies: Vec<Spec> = policies.into_iter().map(Into::into).collect();
        if policies.is_empty() || sizes.is_empty() {
            return Err(PlanError::Invalid("a plan needs at least one policy and one size".into()));
        }
        if source.read.block_size == 0 {
            return Err(PlanError::Invalid("the block size must be positive".into()));
        }
        Ok(Self { source, policies, sizes, options })
    }

    /// The trace the plan reads.
    pub fn source(&self) -> &TraceSource {
        &self.source
    }

    /// How the plan runs.
    pub fn options(&self) -> &PlanOptions {
        &self.options
    }

    /// True if a policy needs each access's next-access time (OPT).
    pub fn needs_oracle(&self) -> bool {
        self.policies.iter().any(|p| p.needs_oracle())
    }

    /// True if a size is a percentage of the working set, which must be counted first.
    pub fn needs_wss(&self) -> bool {
        self.sizes.iter().any(|(_, c)| matches!(c, Capacity::Percent(_)))
    }

    /// The grid's cells, policy-major, with capacities for a trace of `wss` distinct blocks.
    pub fn cells(&self, wss: u64) -> Vec<Cell> {
        let block_size = self.source.read.block_size;
        self.policies
            .iter()
            .flat_map(|&policy| {
                self.sizes.iter().map(move |(size, c)| Cell {
                    policy,
                    size: size.clone(),
                    capacity: c.blocks(block_size, wss),
                })
            })
            .collect()
    }

    /// Run the grid with the driver the request calls for (see the module documentation),
    /// reporting progress to `progress` (from worker threads too).
    pub fn run(&self, progress: &(dyn Fn(Progress) + Sync)) -> Result<Outcome, PlanError> {
        if (self.needs_oracle() && self.options.whole_trace) || self.options.seq_cutoff.is_active()
        {
            whole::run(self, progress)
        } else {
            streamed::run(self, progress)
        }
    }
}

/// Each cell with its result, the result named by the cell's spec (a policy's own name does
/// not show its parameters).
fn named(cells: Vec<Cell>, results: Vec<SimResult>) -> Vec<(Cell, SimResult)> {
    cells
        .into_iter()
        .zip(results)
        .map(|(c, mut r)| {
            r.policy = c.policy.to_string();
            (c, r)
        })
        .collect()
}

/// `n` as a capacity in blocks for a policy in memory.
fn usize_capacity(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests;
