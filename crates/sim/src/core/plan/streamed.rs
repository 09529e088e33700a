//! The streamed drivers of a [`Plan`]: the trace read in bounded chunks (or in place), after a
//! first pass when one is needed (next-access times for an oracle, the working set for sizes
//! in percent), with the per-cell runs or the shared index.

use super::{usize_capacity, Cell, Driver, FirstPass, Outcome, Plan, PlanError, Progress, Timings};
use crate::core::chunk_run::{policy_run, ChunkRun};
use crate::core::grid_shared::{run_shared_chunks, run_shared_records, SharedGrid};
use crate::core::streaming::{
    count_pass, run_streaming, run_streaming_records, run_streaming_with_next, StreamTotals,
    CHUNK_ACCESSES,
};
use ember_policy::admission::Aod;
use ember_policy::replacement::{Kind, Spec};
use ember_policy::with_replacement;
use ember_trace::{
    format_from_name, BlockChunk, BlockReader, Format, NextAccess, Spool, TraceError,
};
use std::time::Instant;

/// Run `plan` streamed: [`Driver::NextAccess`], [`Driver::Shared`], [`Driver::Records`] or
/// [`Driver::Chunks`].
pub(super) fn run(plan: &Plan, progress: &(dyn Fn(Progress) + Sync)) -> Result<Outcome, PlanError> {
    let started = Instant::now();
    let source = &plan.source;
    let path = &source.path;
    let interval = plan.options.interval;
    let warmup = plan.options.warmup;
    // Times are kept for a timeline, and with a warm-up (to end it by time and to say when
    // counting starts) except where oracleGeneral records are read in place: each record
    // carries its own time, and keeping times would take that path away.
    let in_place = source.read.block_size < 1 << 16
        && source.read.format.or_else(|| format_from_name(path)) == Some(Format::OracleGeneral);
    let keep_times =
        interval.is_some() || (!warmup.is_none() && (!in_place || plan.needs_oracle()));
    let open = || {
        BlockReader::open(path, &source.read, source.per_request, keep_times)
            .map_err(|source| PlanError::Open { path: path.clone(), source })
    };
    let reading = |source: TraceError| PlanError::Read { path: path.clone(), source };
    let mut skipped = 0u64;
    let future = if plan.needs_oracle() {
        let mut r = open()?;
        let future = spool(&mut r, keep_times, &reading)?;
        skipped = r.stats().skipped;
        Some(future)
    } else {
        None
    };
    let counted = if let Some(f) = &future {
        Some(StreamTotals {
            requests: f.requests(),
            accesses: f.len(),
            wss: f.distinct(),
            counted_from: None,
        })
    } else if plan.needs_wss() {
        if !BlockReader::rereadable(path) {
            return Err(PlanError::Invalid(format!(
                "{}: a size in % of the working set needs a first pass over the trace, and a pipe \
                 can be read only once: give sizes in blocks or bytes",
                path.display()
            )));
        }
        let mut r = open()?;
        Some(count_pass(&mut |c| r.next_chunk(c, CHUNK_ACCESSES)).map_err(reading)?)
    } else {
        None
    };
    let first_pass = match (&future, counted) {
        (Some(_), _) => Some(FirstPass::NextAccess),
        (None, Some(_)) => Some(FirstPass::WorkingSet),
        (None, None) => None,
    };
    let cells = plan.cells(counted.map_or(0, |t| t.wss));
    let shared = shared_grid(&cells, interval.is_some() || future.is_some());
    let runs: Vec<Box<dyn ChunkRun>> = cells
        .iter()
        .filter(|_| shared.is_none())
        .map(|c| {
            with_replacement!(c.policy, usize_capacity(c.capacity), |p| policy_run(
                p,
                Aod,
                interval.is_some()
            ))
        })
        .collect();
    let threads = plan.options.threads.max(1);
    progress(Progress::Start { work: counted.map(|t| t.accesses), runs: cells.len() });
    let on_progress = |done: u64| progress(Progress::Advance { done, runs_done: None });
    let sim_start = Instant::now();
    let (driver, (results, totals)) = if let Some(f) = &future {
        let mut reader = f.reader();
        let out = run_streaming_with_next(
            &mut |c, next| reader.next_chunk(c, next, CHUNK_ACCESSES),
            runs,
            interval,
            warmup,
            threads,
            &on_progress,
        )
        .map_err(PlanError::SpoolRead)?;
        (Driver::NextAccess, out)
    } else {
        let mut reader = open()?;
        let out = if let Some(grid) = &shared {
            let out = if reader.reads_records_in_place() {
                run_shared_records(&mut reader, grid, warmup, threads, &on_progress)
            } else {
                run_shared_chunks(
                    &mut |c| reader.next_chunk(c, CHUNK_ACCESSES),
                    grid,
                    warmup,
                    threads,
                    &on_progress,
                )
            };
            (Driver::Shared, out.map_err(reading)?)
        } else if reader.reads_records_in_place() && interval.is_none() {
            let out = run_streaming_records(&mut reader, runs, warmup, threads, &on_progress);
            (Driver::Records, out.map_err(reading)?)
        } else {
            let out = run_streaming(
                &mut |c| reader.next_chunk(c, CHUNK_ACCESSES),
                runs,
                interval,
                warmup,
                threads,
                &on_progress,
            );
            (Driver::Chunks, out.map_err(reading)?)
        };
        skipped = reader.stats().skipped;
        out
    };
    let simulate = sim_start.elapsed();
    let threads = match driver {
        Driver::Shared => {
            let mut kinds: Vec<Spec> = cells.iter().map(|c| c.policy).collect();
            kinds.dedup();
            threads.min(kinds.len())
        }
        _ => threads.min(cells.len()),
    };
    Ok(Outcome {
        runs: super::named(cells, results),
        totals,
        skipped,
        driver,
        first_pass,
        threads,
        timings: Timings { before: sim_start - started, read: Default::default(), simulate },
    })
}

/// The cells as one shared grid, if there are several, no timeline or future is needed, every
/// policy has its default parameters, and [`SharedGrid::supports`] them (a warm-up period is no
/// obstacle).
fn shared_grid(cells: &[Cell], timeline_or_future: bool) -> Option<Vec<(Kind, usize)>> {
    if cells.len() <= 1 || timeline_or_future || cells.iter().any(|c| !c.policy.is_default()) {
        return None;
    }
    let grid: Vec<(Kind, u64)> = cells.iter().map(|c| (c.policy.kind(), c.capacity)).collect();
    SharedGrid::supports(&grid).then(|| grid.into_iter().map(|(k, n)| (k, n as usize)).collect())
}

/// Read the trace from `r` into temporary files (with the accesses' times if `keep_times`)
/// and compute its next-access times; `reading` says what a failing read was.
fn spool(
    r: &mut BlockReader,
    keep_times: bool,
    reading: &dyn Fn(TraceError) -> PlanError,
) -> Result<NextAccess, PlanError> {
    let dir = std::env::temp_dir();
    let mut spool =
        Spool::new(keep_times).map_err(|source| PlanError::SpoolCreate { dir, source })?;
    let mut c = BlockChunk::default();
    while r.next_chunk(&mut c, CHUNK_ACCESSES).map_err(reading)? {
        spool.push(&c).map_err(PlanError::SpoolWrite)?;
    }
    spool.finish().map_err(PlanError::NextAccess)
}
