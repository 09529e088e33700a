//! [`Driver::Whole`]: the whole trace held as an [`AccessStream`] with its next-access times
//! (9 bytes a block access, 17 with them), and the grid run over it on up to the plan's
//! threads ([`run_grid`]). A reference for the streamed drivers, which hold no trace.

use super::{usize_capacity, Cell, Driver, Outcome, Plan, PlanError, Progress, Timings};
use crate::core::grid::run_grid;
use crate::core::streaming::{StreamTotals, CHUNK_ACCESSES};
use crate::{
    simulate_with_progress, AccessStream, AccessStreamBuilder, RunConfig, SimResult, Split,
};
use ember_policy::admission::{Aod, CutoffAdmission};
use ember_policy::seq_cutoff::SeqCutoffConfig;
use ember_policy::with_replacement;
use ember_trace::{BlockChunk, BlockReader};
use std::time::Instant;

/// Run `plan` over the whole trace held in memory.
pub(super) fn run(plan: &Plan, progress: &(dyn Fn(Progress) + Sync)) -> Result<Outcome, PlanError> {
    let started = Instant::now();
    let source = &plan.source;
    let path = &source.path;
    let interval = plan.options.interval;
    let warmup = plan.options.warmup;
    let split = if source.per_request { Split::FirstBlock } else { Split::Blocks };
    // Stream the trace straight into the access stream: no intermediate Vec<Request>.
    let mut builder = AccessStreamBuilder::new(source.read.block_size, split)?;
    // Times are kept for a timeline, and with a warm-up to say when counting starts.
    let keep_times = interval.is_some() || !warmup.is_none();
    if !keep_times {
        // No timeline, and plain runs use AOD, which ignores time: 8 bytes per access saved.
        builder = builder.without_times();
    }
    let mut reader = BlockReader::open(path, &source.read, source.per_request, keep_times)
        .map_err(|source| PlanError::Open { path: path.clone(), source })?;
    let mut chunk = BlockChunk::default();
    while reader
        .next_chunk(&mut chunk, CHUNK_ACCESSES)
        .map_err(|source| PlanError::Read { path: path.clone(), source })?
    {
        builder.push_chunk(&chunk);
    }
    let skipped = reader.stats().skipped;
    let read = started.elapsed();
    let stream = builder.finish(true);
    let cells = plan.cells(stream.wss());
    let config = RunConfig { interval, warmup };
    let threads = plan.options.threads.max(1);
    let accesses = stream.len() as u64;
    progress(Progress::Start { work: Some(accesses * cells.len() as u64), runs: cells.len() });
    let sim_start = Instant::now();
    let cutoff = plan.options.seq_cutoff;
    let results = run_grid(
        &cells,
        accesses,
        threads,
        |c, tick| run_cell(c, &stream, &config, cutoff, tick),
        &|p| progress(Progress::Advance { done: p.done_accesses, runs_done: Some(p.done_runs) }),
    );
    let simulate = sim_start.elapsed();
    let counted_from = results.first().and_then(|r| r.counted_from);
    Ok(Outcome {
        threads: threads.min(cells.len()),
        runs: super::named(cells, results),
        totals: StreamTotals {
            requests: stream.requests(),
            accesses,
            wss: stream.wss(),
            counted_from,
        },
        skipped,
        driver: Driver::Whole,
        first_pass: None,
        timings: Timings { before: sim_start - started, read, simulate },
    })
}

/// Run one cell with a concrete policy type, so the hot loop is monomorphized; behind the
/// sequential cutoff `cutoff` when it is active.
fn run_cell(
    cell: &Cell,
    stream: &AccessStream,
    config: &RunConfig,
    cutoff: SeqCutoffConfig,
    tick: &mut dyn FnMut(u64),
) -> SimResult {
    let cap = usize_capacity(cell.capacity);
    if !cutoff.is_active() {
        return with_replacement!(cell.policy, cap, |p| simulate_with_progress(
            &mut p, &mut Aod, stream, config, tick
        ));
    }
    let mut sieve = CutoffAdmission::new(cutoff, Box::new(Aod));
    let mut r = with_replacement!(cell.policy, cap, |p| simulate_with_progress(
        &mut p, &mut sieve, stream, config, tick
    ));
    r.seq_cutoff_bypasses = Some(sieve.cutoff().cut_total());
    r
}
