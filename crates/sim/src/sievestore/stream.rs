//! SieveStore runs over a trace that streams: every cell of a grid (a sieve at a
//! cache size, in one cache or in per-volume partitions) is fed each request as it is read,
//! so the trace is read once and never held.
//!
//! Memory is each cell's own state (its replacement policy and sieve, per-day and per-minute
//! counters, and for the ideal sieve one epoch's requests, of which at most
//! [`super::epoch_spool::DEFAULT_LIMIT`] stay in memory and the rest go to a temporary file).
//! Partitioned cells need each volume's share of the accesses before the first request is
//! simulated: a first pass ([`TraceCounts`]) counts them (and the working set, for sizes
//! given as a percentage), so a partitioned or percentage-sized grid reads the trace twice.
//! The results equal [`super::ensemble::run_partitioned_with`] over the same requests held in
//! memory (tested below for every sieve and partitioning). The requests of an uncounted
//! warm-up period ([`WarmupPeriod`]) run through every cell but are not counted.

use super::continuous::ContinuousState;
use super::discrete::DiscreteState;
use crate::sievestore::ensemble::{add_weight, capacities_from_weights, Partition};
use crate::sievestore::epoch_spool::{EpochSpool, DEFAULT_LIMIT};
use crate::sievestore::{CacheFactory, SieveRun, DAY_NS, MINUTE_NS};
use crate::WarmupPeriod;
use ember_policy::admission::{EpochSieve, Sieve, SieveConfigError, SieveSpec};
use ember_policy::{Admission, Replacement};
use ember_trace::Request;
use std::collections::HashSet;

/// One cell of a streamed grid.
#[derive(Clone)]
pub struct StreamCell<'a> {
    /// The sieve.
    pub spec: SieveSpec,
    /// Cache capacity in blocks (the total over partitions).
    pub capacity: usize,
    /// One cache, or per-volume partitions.
    pub partition: Partition,
    /// The replacement policy under continuous sieves.
    pub make_cache: CacheFactory<'a>,
}

/// What a streamed run can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StreamError<E: std::error::Error + 'static> {
    /// Reading the trace failed (the reader's error names the file and line).
    #[error(transparent)]
    Read(E),
    /// A sieve's parameters are invalid.
    #[error(transparent)]
    Config(#[from] SieveConfigError),
    /// The ideal sieve's epoch spool failed.
    #[error("spooling an epoch to a temporary file: {0}")]
    Spool(#[from] std::io::Error),
    /// A worker thread panicked.
    #[error("a worker thread panicked")]
    Panicked,
    /// A partitioned cell met a volume the first pass did not count.
    #[error("volume {0} was not in the first pass: the trace changed between the passes")]
    Changed(u32),
}

/// The first pass's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceCounts {
    /// Block accesses per volume (index = volume id).
    pub weights: Vec<u64>,
    /// Distinct blocks, if asked for.
    pub distinct_blocks: Option<u64>,
}

/// Count each volume's block accesses, and the distinct blocks if `distinct` (memory: a set
/// of the distinct blocks, 8 bytes each plus the set's overhead; the only state of this
/// module that grows with the trace's working set rather than with the cache).
pub fn count<E, I>(requests: I, block_size: u64, distinct: bool) -> Result<TraceCounts, E>
where
    I: Iterator<Item = Result<Request, E>>,
{
    let mut weights = Vec::new();
    let mut set: HashSet<u64> = HashSet::new();
    for r in requests {
        let r = r?;
        add_weight(&mut weights, &r, block_size);
        if distinct {
            set.extend(r.block_keys(block_size));
        }
    }
    Ok(TraceCounts { weights, distinct_blocks: distinct.then_some(set.len() as u64) })
}

/// A sieve at work on one cache (or one partition).
enum Machine {
    Continuous { cache: Box<dyn Replacement>, sieve: Box<dyn Admission>, state: ContinuousState },
    Discrete { sieve: Box<dyn EpochSieve>, state: DiscreteState<EpochSpool> },
}

impl Machine {
    fn new(
        spec: &SieveSpec,
        origin: u64,
        capacity: usize,
        make_cache: CacheFactory<'_>,
        spool_limit: usize,
    ) -> Result<Self, SieveConfigError> {
        Ok(match spec.build()? {
            Sieve::Continuous(sieve) => {
                let cache = make_cache(capacity);
                let state = ContinuousState::new(origin, cache.as_ref(), sieve.as_ref());
                Machine::Continuous { cache, sieve, state }
            }
            Sieve::Discrete(sieve, epoch_ns) => {
                let spool = EpochSpool::new(spool_limit);
                let state = DiscreteState::new(origin, capacity, epoch_ns, sieve.as_ref(), spool);
                Machine::Discrete { sieve, state }
            }
        })
    }

    #[inline]
    fn request(&mut self, r: &Request, block_size: u64) -> std::io::Result<()> {
        match self {
            Machine::Continuous { cache, sieve, state } => {
                state.request(r, block_size, cache.as_mut(), sieve.as_mut());
                Ok(())
            }
            Machine::Discrete { sieve, state } => state.request(r, block_size, sieve.as_mut()),
        }
    }

    fn set_counting(&mut self, on: bool) {
        match self {
            Machine::Continuous { state, .. } => state.set_counting(on),
            Machine::Discrete { state, .. } => state.set_counting(on),
        }
    }

    fn finish(self, block_size: u64) -> std::io::Result<SieveRun> {
        match self {
            Machine::Continuous { sieve, state, .. } => Ok(state.finish(sieve.as_ref())),
            Machine::Discrete { mut sieve, state } => state.finish(block_size, sieve.as_mut()),
        }
    }
}

/// A cell at work: one machine, or one per volume (made at the volume's first request).
struct CellRun<'c, 'a> {
    cell: &'c StreamCell<'a>,
    /// Per-volume capacities (partitioned cells).
    caps: Vec<usize>,
    ensemble: Option<Machine>,
    parts: Vec<Option<Machine>>,
}

/// Run every cell over `requests` in one pass. Partitioned cells need `counts` from a first
/// pass ([`count`]) over the same requests; `spool_limit` is how many of an ideal sieve's
/// epoch's requests stay in memory (the rest go to a temporary file). Results come in the
/// order of `cells`.
pub fn run_streamed<E, I>(
    requests: I,
    block_size: u64,
    cells: &[StreamCell<'_>],
    counts: Option<&TraceCounts>,
    spool_limit: usize,
) -> Result<Vec<SieveRun>, StreamError<E>>
where
    E: std::error::Error + 'static,
    I: Iterator<Item = Result<Request, E>>,
{
    run_streamed_after(requests, block_size, cells, counts, spool_limit, WarmupPeriod::None)
}

/// [`run_streamed`] with an uncounted warm-up period: its requests (those touching a block,
/// numbered from 0; times from the first of them) run through every cell, whose caches and
/// sieves evolve, but the counters start after it. The minutes wholly within it are left
/// out of the cost model ([`SieveRun::warmup_minutes`]).
pub fn run_streamed_after<E, I>(
    requests: I,
    block_size: u64,
    cells: &[StreamCell<'_>],
    counts: Option<&TraceCounts>,
    spool_limit: usize,
    warmup: WarmupPeriod,
) -> Result<Vec<SieveRun>, StreamError<E>>
where
    E: std::error::Error + 'static,
    I: Iterator<Item = Result<Request, E>>,
{
    let mut runs: Vec<CellRun<'_, '_>> = Vec::with_capacity(cells.len());
    for cell in cells {
        cell.spec.build()?;
        let caps = match cell.partition {
            Partition::Ensemble => Vec::new(),
            mode => {
                let Some(counts) = counts else {
                    return Err(StreamError::Config(SieveConfigError::out_of_range(
                        "partition",
                        "counts",
                        0,
                        "a first pass's per-volume counts",
                    )));
                };
                capacities_from_weights(&counts.weights, cell.capacity, mode)
            }
        };
        runs.push(CellRun { cell, caps, ensemble: None, parts: Vec::new() });
    }
    // Days and minutes count from midnight of the first request's day, in every cell.
    let mut origin: Option<u64> = None;
    let mut counting = warmup.is_none();
    let (mut first_ns, mut seen) = (None::<u64>, 0u64);
    let mut warmup_minutes = 0usize;
    for r in requests {
        let r = r.map_err(StreamError::Read)?;
        let origin = *origin.get_or_insert(r.time_ns / DAY_NS * DAY_NS);
        if !counting && r.length > 0 {
            let t0 = *first_ns.get_or_insert(r.time_ns);
            if warmup.over_at(seen, r.time_ns.saturating_sub(t0)) {
                counting = true;
                warmup_minutes = (r.time_ns.saturating_sub(origin) / MINUTE_NS) as usize;
            }
            seen += 1;
        }
        for run in &mut runs {
            let cell = run.cell;
            let machine = if cell.partition == Partition::Ensemble {
                if run.ensemble.is_none() {
                    run.ensemble = Some(Machine::new(
                        &cell.spec,
                        origin,
                        cell.capacity,
                        cell.make_cache,
                        spool_limit,
                    )?);
                }
                run.ensemble.as_mut()
            } else {
                let v = r.volume as usize;
                if v >= run.caps.len() {
                    return Err(StreamError::Changed(r.volume));
                }
                if run.parts.len() <= v {
                    run.parts.resize_with(v + 1, || None);
                }
                if run.parts[v].is_none() {
                    let share =
                        cell.spec.for_partition(run.caps[v] as f64 / cell.capacity.max(1) as f64);
                    run.parts[v] = Some(Machine::new(
                        &share,
                        origin,
                        run.caps[v],
                        cell.make_cache,
                        spool_limit,
                    )?);
                }
                run.parts[v].as_mut()
            };
            if let Some(m) = machine {
                m.set_counting(counting);
                m.request(&r, block_size)?;
            }
        }
    }
    let mut out = Vec::with_capacity(runs.len());
    for run in runs {
        let cell = run.cell;
        let result = if cell.partition == Partition::Ensemble {
            match run.ensemble {
                Some(m) => m.finish(block_size)?,
                // No request at all: the whole-trace path's run over an empty trace.
                None => Machine::new(&cell.spec, 0, cell.capacity, cell.make_cache, spool_limit)?
                    .finish(block_size)?,
            }
        } else {
            let mut total = SieveRun { name: cell.spec.name().to_string(), ..SieveRun::default() };
            for m in run.parts.into_iter().flatten() {
                total.merge(&m.finish(block_size)?);
            }
            total
        };
        let warmup_minutes = if counting { warmup_minutes } else { result.minutes.len() };
        out.push(SieveRun { warmup_minutes, ..result });
    }
    Ok(out)
}

/// Opens the trace for one pass, from any thread.
pub type OpenRequests<'a, E> =
    &'a (dyn Fn() -> Result<Box<dyn Iterator<Item = Result<Request, E>> + Send + 'a>, E> + Sync);

/// What one worker thread of [`run_streamed_parallel`] returns: its cells' runs, by index.
type ThreadRuns<E> = Result<Vec<(usize, SieveRun)>, StreamError<E>>;

/// [`run_streamed`] on `threads` threads: the cells are dealt round-robin and each thread reads
/// the trace once (a pass from `open`), feeding its cells. Results come in the order of `cells`.
pub fn run_streamed_parallel<E>(
    open: OpenRequests<'_, E>,
    block_size: u64,
    cells: &[StreamCell<'_>],
    counts: Option<&TraceCounts>,
    threads: usize,
) -> Result<Vec<SieveRun>, StreamError<E>>
where
    E: std::error::Error + Send + 'static,
{
    let threads = threads.clamp(1, cells.len().max(1));
    let outcome: Vec<ThreadRuns<E>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                sc.spawn(move || {
                    let mine: Vec<usize> = (t..cells.len()).step_by(threads).collect();
                    let subset: Vec<StreamCell<'_>> =
                        mine.iter().map(|&i| cells[i].clone()).collect();
                    let requests = open().map_err(StreamError::Read)?;
                    let runs = run_streamed(requests, block_size, &subset, counts, DEFAULT_LIMIT)?;
                    Ok(mine.into_iter().zip(runs).collect())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(Err(StreamError::Panicked))).collect()
    });
    let mut results: Vec<Option<SieveRun>> = vec![None; cells.len()];
    for part in outcome {
        for (i, run) in part? {
            results[i] = Some(run);
        }
    }
    results.into_iter().map(|r| r.ok_or(StreamError::Panicked)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sievestore::ensemble::run_partitioned_with;
    use ember_policy::replacement::{build, Kind};
    use ember_trace::gen::ensemble::{generate, EnsembleConfig};

    /// Every sieve under every partitioning, streamed with a tiny spool (so the ideal sieve's
    /// epochs spill to the file), equals the whole-trace run over the same requests.
    #[test]
    fn streamed_runs_equal_the_whole_trace_runs_for_every_sieve_and_partitioning() {
        let cfg =
            EnsembleConfig { days: 3, accesses_per_day: 40_000, ..EnsembleConfig::with_volumes(5) };
        let trace = generate(&cfg).expect("generate the ensemble");
        let reqs = &trace.requests;
        assert!(reqs.len() > 50_000, "{}", reqs.len());
        let counts = count(reqs.iter().copied().map(Ok::<_, std::io::Error>), 4096, true)
            .expect("counting cannot fail");
        let wss = counts.distinct_blocks.expect("asked for") as usize;
        let lru: CacheFactory<'_> = &|c| build(Kind::Lru, c);
        let s3: CacheFactory<'_> = &|c| build(Kind::S3Fifo, c);
        let mut cells = Vec::new();
        for spec in SieveSpec::all() {
            for partition in [Partition::Ensemble, Partition::Proportional, Partition::Equal] {
                for (capacity, make_cache) in [(wss / 100, lru), (wss / 20, s3)] {
                    cells.push(StreamCell { spec: spec.clone(), capacity, partition, make_cache });
                }
            }
        }
        let streamed = run_streamed(
            reqs.iter().copied().map(Ok::<_, std::io::Error>),
            4096,
            &cells,
            Some(&counts),
            100,
        )
        .expect("streamed run");
        assert_eq!(streamed.len(), cells.len());
        for (cell, got) in cells.iter().zip(&streamed) {
            let want = run_partitioned_with(
                reqs,
                4096,
                cell.capacity,
                cell.partition,
                &cell.spec,
                cell.make_cache,
            )
            .expect("whole-trace run");
            assert!(
                got == &want,
                "{} {} at {} blocks: streamed {:?} (sieve bytes {}), whole trace {:?} ({})",
                cell.spec.name(),
                cell.partition.name(),
                cell.capacity,
                got.total(),
                got.sieve_memory_bytes,
                want.total(),
                want.sieve_memory_bytes
            );
            assert!(got.total().accesses > 0);
        }
        // The runs are not all alike: the comparison had something to compare.
        let hits: HashSet<u64> = streamed.iter().map(|r| r.total().hits()).collect();
        assert!(hits.len() > cells.len() / 2, "{hits:?}");
    }

    /// The uncounted warm-up period: a cell's counters after it equal its counters over the
    /// whole trace less those over the warm-up's requests alone (a prefix of the trace runs
    /// the same decisions), for every sieve whose choice does not look ahead (the ideal
    /// sieve's epoch is cut short by the prefix) and every partitioning; by time as by
    /// requests; and the minutes wholly within the warm-up are left out of the cost model.
    #[test]
    fn warmup_counts_what_follows_it_for_every_sieve() {
        let cfg =
            EnsembleConfig { days: 3, accesses_per_day: 30_000, ..EnsembleConfig::with_volumes(4) };
        let trace = generate(&cfg).expect("generate the ensemble");
        let reqs = &trace.requests;
        let counts = count(reqs.iter().copied().map(Ok::<_, std::io::Error>), 4096, true)
            .expect("counting cannot fail");
        let wss = counts.distinct_blocks.expect("asked for") as usize;
        let lru: CacheFactory<'_> = &|c| build(Kind::Lru, c);
        let mut cells = Vec::new();
        for spec in SieveSpec::NAMES.iter().filter(|n| **n != "ideal") {
            for partition in [Partition::Ensemble, Partition::Proportional] {
                let spec: SieveSpec = spec.parse().expect("a sieve");
                cells.push(StreamCell { spec, capacity: wss / 50, partition, make_cache: lru });
            }
        }
        let t0 = reqs.iter().find(|r| r.length > 0).map_or(0, |r| r.time_ns);
        let n = reqs.len() * 2 / 5;
        let by_time = WarmupPeriod::Time(reqs[n].time_ns - t0);
        for warmup in [WarmupPeriod::Requests(n as u64), by_time] {
            let k = match warmup {
                WarmupPeriod::Requests(_) => n,
                _ => reqs.iter().position(|r| r.time_ns - t0 >= reqs[n].time_ns - t0).unwrap_or(n),
            };
            let it = |rs: &[Request]| {
                rs.iter().copied().map(Ok::<_, std::io::Error>).collect::<Vec<_>>()
            };
            let run = |rs: &[Request], w| {
                run_streamed_after(it(rs).into_iter(), 4096, &cells, Some(&counts), 100, w)
                    .expect("run")
            };
            let (whole, head, after) = (
                run(reqs, WarmupPeriod::None),
                run(&reqs[..k], WarmupPeriod::None),
                run(reqs, warmup),
            );
            for (i, cell) in cells.iter().enumerate() {
                let (w, h, a) = (whole[i].total(), head[i].total(), after[i].total());
                let what = format!("{} {} {warmup}", cell.spec.name(), cell.partition.name());
                assert_eq!(a.accesses, w.accesses - h.accesses, "{what}");
                assert_eq!(a.read_hits, w.read_hits - h.read_hits, "{what}");
                assert_eq!(a.write_hits, w.write_hits - h.write_hits, "{what}");
                assert_eq!(
                    a.allocation_writes,
                    w.allocation_writes - h.allocation_writes,
                    "{what}"
                );
                assert_eq!(a.cancelled_moves, w.cancelled_moves - h.cancelled_moves, "{what}");
                assert!(w.hits() > 0, "{what}");
                let m = after[i].warmup_minutes;
                let early = &after[i].minutes[..m.min(after[i].minutes.len())];
                assert!(m > 1000 && early.iter().all(|x| x.read_hits == 0), "{what} {m}");
                assert_eq!(after[i].counted_minutes().len(), after[i].minutes.len() - m);
            }
        }
    }

    #[test]
    fn a_partitioned_cell_without_counts_and_a_changed_trace_are_errors() {
        let reqs =
            [Request { time_ns: 0, volume: 3, op: ember_trace::Op::Read, offset: 0, length: 4096 }];
        let lru: CacheFactory<'_> = &|c| build(Kind::Lru, c);
        let cell = |partition| StreamCell {
            spec: SieveSpec::Aod,
            capacity: 10,
            partition,
            make_cache: lru,
        };
        let it = || reqs.iter().map(|r| Ok::<_, std::io::Error>(*r));
        let e = run_streamed(it(), 4096, &[cell(Partition::Equal)], None, 10).unwrap_err();
        assert!(matches!(e, StreamError::Config(_)), "{e}");
        let counts = TraceCounts { weights: vec![1, 1], distinct_blocks: None };
        let e = run_streamed(it(), 4096, &[cell(Partition::Equal)], Some(&counts), 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "volume 3 was not in the first pass: the trace changed between the passes"
        );
        let ok =
            run_streamed(it(), 4096, &[cell(Partition::Ensemble)], None, 10).expect("ensemble");
        assert_eq!(ok[0].total().accesses, 1);
    }
}
