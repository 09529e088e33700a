//! A shared-index grid evaluator: LRU, FIFO, CLOCK and S3-FIFO at several sizes each, over one
//! hash index of the keys any cell holds, so that a request costs one probe for all cells
//! instead of one per cell (a 16-cell grid of four policies at four sizes).
//!
//! It is a second implementation of those four policies, kept for speed only; the policies of
//! `ember_policy` stay the reference, and every cell's counters equal a single run's exactly
//! (tests below and `crates/cli/tests/sim_shared_grid.rs` compare them cell by cell):
//! - LRU at every size in one log of accesses with a tail per size (`lru_log.rs`, Mattson's
//!   inclusion property);
//! - FIFO: an insertion counter per size and a stamp per size of each entry (`fifo_stamps.rs`);
//! - CLOCK: a ring of entry ids per size (`rings.rs`);
//! - S3-FIFO: small, main and ghost queues per size (`s3fifo.rs`).
//!
//! Each key has an entry id (`entries.rs`) whose state the policies keep in dense arrays; an
//! entry no cell (and no S3-FIFO ghost) holds any more is freed by the next sweep of the
//! slab. Accesses are looked up a batch at a time, then each policy runs over the batch
//! (`SharedGrid::run_batch`). [`SharedGrid::supports`] says which grids it takes: those four
//! policies, at most [`MAX_SIZES`] sizes each, admission on every miss, no timeline and no
//! oracle. `ember sim` sends any other grid to the per-cell path. An uncounted warm-up
//! period is a snapshot of every cell's counters where it ends, subtracted at the end.

mod entries;
mod fifo_stamps;
mod lru_log;
mod rings;
mod s3fifo;

use crate::core::cutter::Cutter;
use crate::core::distinct::DistinctCounter;
use crate::core::streaming::{RecordWarmup, StreamTotals, CHUNK_ACCESSES};
use crate::core::warmup_period::{CountStart, WarmupPeriod};
use crate::{Counters, SimResult};
use ember_policy::replacement::Kind;
use ember_policy::with_replacement;
use ember_trace::formats::oracle_general::{record_key, RECORD_SIZE};
use ember_trace::{BlockChunk, BlockReader, TraceError, FLAG_FIRST};

use entries::{Entries, Present, SWEEP_EVERY};
use lru_log::LruTails;
use rings::Rings;
use s3fifo::S3Sizes;

/// Most sizes a policy can have in one shared grid (one bit or byte per size in an entry).
pub const MAX_SIZES: usize = 8;

/// What one cell counts beside what every cell shares (requests, reads, writes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CellCounts {
    /// Read accesses that hit.
    pub read_hits: u64,
    /// Write accesses that hit.
    pub write_hits: u64,
    /// Blocks evicted.
    pub evictions: u64,
}

/// Where a cell's state lives.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// LRU, at this position of the ascending sizes.
    Lru(usize),
    /// FIFO, size `i`.
    Fifo(usize),
    /// CLOCK, ring `i`.
    Clock(usize),
    /// S3-FIFO, size `i`.
    S3(usize),
}

/// How far ahead an access's index group is loaded when its entry is looked up.
const PREFETCH_AHEAD: usize = 16;

/// How far ahead a policy's pass over a batch loads an entry's state.
const STATE_AHEAD: usize = 8;

/// Accesses looked up before the policies run over them (see [`SharedGrid::run_batch`]): few
/// enough that their ids stay in the closest caches between the passes.
const BATCH: usize = 4096;

/// A grid of LRU, FIFO, CLOCK and S3-FIFO cells over one shared index.
#[derive(Debug)]
pub struct SharedGrid {
    entries: Entries,
    lru: Option<LruTails>,
    clock: Option<Rings>,
    s3: Option<S3Sizes>,
    cells: Vec<(Kind, usize, Slot)>,
    requests: u64,
    accesses: u64,
    writes: u64,
    /// Accesses looked up and not yet simulated: (entry, write).
    batch: Vec<(u32, bool)>,
    /// The entries are swept by this many accesses at the latest (FIFO's stamps: see
    /// [`SWEEP_EVERY`]).
    renew_by: u64,
    /// Keys the index did not hold (every first access among them), for the working set.
    fresh: Vec<u64>,
    wss: DistinctCounter,
}

impl SharedGrid {
    /// True if a grid of `cells` (policy, capacity in blocks) can run here: every policy LRU,
    /// FIFO, CLOCK or S3-FIFO, at most [`MAX_SIZES`] cells of each, and every capacity below
    /// 2^31 blocks.
    pub fn supports(cells: &[(Kind, u64)]) -> bool {
        let mut per = [0usize; 4];
        for &(k, cap) in cells {
            let i = match k {
                Kind::Lru => 0,
                Kind::Fifo => 1,
                Kind::Clock => 2,
                Kind::S3Fifo => 3,
                _ => return false,
            };
            per[i] += 1;
            if per[i] > MAX_SIZES || cap >= 1 << 31 {
                return false;
            }
        }
        true
    }

    /// The grid of `cells` (policy, capacity in blocks), or `None` if
    /// [`SharedGrid::supports`] refuses it.
    pub fn new(cells: &[(Kind, usize)]) -> Option<Self> {
        let as_u64: Vec<(Kind, u64)> = cells.iter().map(|&(k, c)| (k, c as u64)).collect();
        if !Self::supports(&as_u64) {
            return None;
        }
        let caps_of = |kind: Kind| -> Vec<usize> {
            cells.iter().filter(|c| c.0 == kind).map(|c| c.1).collect()
        };
        let (lru_caps, fifo_caps, clock_caps, s3_caps) =
            (caps_of(Kind::Lru), caps_of(Kind::Fifo), caps_of(Kind::Clock), caps_of(Kind::S3Fifo));
        // LRU's sizes in ascending order; its cells name their place in it.
        let mut lru_order: Vec<usize> = (0..lru_caps.len()).collect();
        lru_order.sort_by_key(|&i| lru_caps[i]);
        let sorted: Vec<usize> = lru_order.iter().map(|&i| lru_caps[i]).collect();
        let mut seen = [0usize; 4];
        let slots = cells
            .iter()
            .map(|&(k, c)| {
                let slot = match k {
                    Kind::Lru => {
                        let nth = seen[0];
                        seen[0] += 1;
                        Slot::Lru(lru_order.iter().position(|&o| o == nth).unwrap_or(0))
                    }
                    Kind::Fifo => {
                        seen[1] += 1;
                        Slot::Fifo(seen[1] - 1)
                    }
                    Kind::Clock => {
                        seen[2] += 1;
                        Slot::Clock(seen[2] - 1)
                    }
                    _ => {
                        seen[3] += 1;
                        Slot::S3(seen[3] - 1)
                    }
                };
                (k, c, slot)
            })
            .collect();
        let max = |v: &[usize]| v.iter().copied().max().unwrap_or(0);
        let expected = max(&lru_caps)
            .max(max(&fifo_caps))
            .max(max(&clock_caps))
            .max(max(&s3_caps).saturating_mul(2));
        Some(Self {
            entries: Entries::new(
                expected.saturating_add(expected / 2),
                &fifo_caps,
                Present { clock_sizes: clock_caps.len(), s3_sizes: s3_caps.len() },
            ),
            lru: (!sorted.is_empty()).then(|| LruTails::new(sorted)),
            clock: (!clock_caps.is_empty()).then(|| Rings::new(&clock_caps)),
            s3: (!s3_caps.is_empty()).then(|| S3Sizes::new(&s3_caps)),
            cells: slots,
            requests: 0,
            accesses: 0,
            writes: 0,
            batch: Vec::with_capacity(BATCH),
            renew_by: SWEEP_EVERY,
            fresh: Vec::new(),
            wss: DistinctCounter::new(),
        })
    }

    /// Simulate one block access at every cell.
    pub fn access(&mut self, key: u64, write: bool) {
        self.resolve(key, write);
        self.run_batch();
    }

    /// Find (or create) `key`'s entry and queue the access for [`SharedGrid::run_batch`].
    #[inline(always)]
    fn resolve(&mut self, key: u64, write: bool) {
        let (x, created) = self.entries.get_or_insert(key);
        if created {
            self.fresh.push(key);
        }
        self.batch.push((x, write));
    }

    /// Simulate the queued accesses at every cell, one policy at a time: each policy's pass
    /// loads its own state of the entries [`STATE_AHEAD`] accesses ahead (their ids are known,
    /// so no load waits for another), and reads nothing of the other policies'. The policies
    /// share nothing but the entry ids, so the order of the passes changes no result. Then
    /// the entries are swept if due (never during a batch: a queued access's entry may look
    /// held by no cell until its pass has run).
    fn run_batch(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        let es = &mut self.entries;
        if self.lru.is_some() || !es.fifo.is_none() {
            for (j, &(x, write)) in batch.iter().enumerate() {
                if let Some(&(a, _)) = batch.get(j + STATE_AHEAD) {
                    es.prefetch_row(a);
                }
                if let Some(l) = self.lru.as_mut() {
                    l.access(es, x, write);
                }
                if !es.fifo.is_none() {
                    es.fifo_access(x, write);
                }
            }
        }
        if let Some(c) = self.clock.as_mut() {
            for (j, &(x, write)) in batch.iter().enumerate() {
                if let Some(&(a, _)) = batch.get(j + STATE_AHEAD) {
                    es.prefetch_clock(a);
                }
                c.access(es, x, write);
            }
        }
        if let Some(s) = self.s3.as_mut() {
            for (j, &(x, write)) in batch.iter().enumerate() {
                if let Some(&(a, _)) = batch.get(j + STATE_AHEAD) {
                    es.prefetch_s3(a);
                }
                s.access(es, x, write);
            }
        }
        self.accesses += batch.len() as u64;
        self.writes += batch.iter().filter(|a| a.1).count() as u64;
        self.batch = batch;
        self.batch.clear();
        if self.entries.wants_sweep() || self.accesses >= self.renew_by {
            self.entries.sweep();
            self.renew_by = self.accesses + SWEEP_EVERY;
        }
    }

    fn count_fresh(&mut self) {
        self.wss.add_all(&self.fresh);
        self.fresh.clear();
    }

    /// Simulate oracleGeneral `records` (each one read access and one request).
    pub fn run_records(&mut self, records: &[u8]) {
        let n = records.len() / RECORD_SIZE;
        for j in 0..n {
            if let Some(k) = record_key(records, j + PREFETCH_AHEAD) {
                self.entries.prefetch(k);
            }
            if let Some(k) = record_key(records, j) {
                self.resolve(k, false);
            }
            if self.batch.len() == BATCH {
                self.run_batch();
            }
        }
        self.run_batch();
        self.requests += n as u64;
        self.count_fresh();
    }

    /// Simulate the accesses of `chunk`.
    pub fn run_chunk(&mut self, chunk: &BlockChunk) {
        self.run_accesses(&chunk.keys, &chunk.flags);
    }

    /// Simulate the accesses of `keys` with their `flags`.
    fn run_accesses(&mut self, keys: &[u64], flags: &[u8]) {
        for (j, (&k, &f)) in keys.iter().zip(flags).enumerate() {
            if let Some(&ahead) = keys.get(j + PREFETCH_AHEAD) {
                self.entries.prefetch(ahead);
            }
            self.resolve(k, f & 1 != 0);
            if self.batch.len() == BATCH {
                self.run_batch();
            }
            self.requests += u64::from(f & FLAG_FIRST != 0);
        }
        self.run_batch();
        self.count_fresh();
    }

    /// What the pass saw of the trace.
    pub fn totals(&self) -> StreamTotals {
        StreamTotals {
            requests: self.requests,
            accesses: self.accesses,
            wss: self.wss.count(),
            counted_from: None,
        }
    }

    /// Every cell's result, in the order of [`SharedGrid::new`]'s `cells`: what
    /// [`crate::simulate`] gives for that policy at that capacity (with AOD, no timeline).
    pub fn results(&self) -> Vec<SimResult> {
        self.cells
            .iter()
            .map(|&(kind, cap, slot)| {
                let c = match slot {
                    Slot::Lru(i) => self.lru.as_ref().map(|l| l.counts(i)),
                    Slot::Fifo(i) => Some(self.entries.fifo.counts(i)),
                    Slot::Clock(i) => self.clock.as_ref().map(|r| r.counts(i)),
                    Slot::S3(i) => self.s3.as_ref().map(|s| s.counts(i)),
                }
                .unwrap_or_default();
                let reads = self.accesses - self.writes;
                let misses = self.accesses - c.read_hits - c.write_hits;
                SimResult {
                    policy: with_replacement!(kind, 0, |p| ember_policy::Replacement::name(&p))
                        .to_owned(),
                    admission: "aod".to_owned(),
                    capacity_blocks: cap as u64,
                    totals: Counters {
                        requests: self.requests,
                        block_accesses: self.accesses,
                        reads,
                        writes: self.writes,
                        read_hits: c.read_hits,
                        write_hits: c.write_hits,
                        read_misses: reads - c.read_hits,
                        write_misses: self.writes - c.write_hits,
                        allocation_writes: misses,
                        evictions: c.evictions,
                    },
                    timeline: None,
                    counted_from: None,
                    seq_cutoff_bypasses: None,
                }
            })
            .collect()
    }
}

/// The cells split into up to `threads` shared grids, by policy (a policy's sizes stay
/// together, sharing their index); each group's cell positions in `cells`.
fn groups(cells: &[(Kind, usize)], threads: usize) -> Vec<(SharedGrid, Vec<usize>)> {
    let mut kinds: Vec<Kind> = Vec::new();
    for c in cells {
        if !kinds.contains(&c.0) {
            kinds.push(c.0);
        }
    }
    let n = threads.clamp(1, kinds.len().max(1));
    let mut out = Vec::new();
    for g in 0..n {
        let members: Vec<usize> = (0..cells.len())
            .filter(|&i| kinds.iter().position(|&k| k == cells[i].0).unwrap_or(0) % n == g)
            .collect();
        let sub: Vec<(Kind, usize)> = members.iter().map(|&i| cells[i]).collect();
        if let Some(grid) = SharedGrid::new(&sub) {
            out.push((grid, members));
        }
    }
    out
}

/// Run `work` on every group, on its own thread when there are several.
fn each_group(groups: &mut [(SharedGrid, Vec<usize>)], work: &(dyn Fn(&mut SharedGrid) + Sync)) {
    if groups.len() <= 1 {
        for (g, _) in groups.iter_mut() {
            work(g);
        }
        return;
    }
    std::thread::scope(|s| {
        for (g, _) in groups.iter_mut() {
            s.spawn(move || work(g));
        }
    });
}

/// Every group's results, in group order: a snapshot.
fn snapshot(groups: &[(SharedGrid, Vec<usize>)]) -> Vec<Vec<SimResult>> {
    groups.iter().map(|(g, _)| g.results()).collect()
}

/// Where the uncounted warm-up period ended in a shared pass: the counters of every cell
/// then, and where counting started.
struct WarmupEnd {
    before: Vec<Vec<SimResult>>,
    start: Option<CountStart>,
}

/// The cells' results in their order, and the first group's totals. With `warmup`, each
/// cell's counters are those after it (all of them zero if the trace ended within it:
/// `before` is `None`).
fn collect(
    groups: &[(SharedGrid, Vec<usize>)],
    cells: usize,
    warmup: Option<WarmupEnd>,
) -> (Vec<SimResult>, StreamTotals) {
    let mut slots: Vec<Option<SimResult>> = (0..cells).map(|_| None).collect();
    let now = snapshot(groups);
    for (gi, ((_, members), results)) in groups.iter().zip(&now).enumerate() {
        for (j, (r, &i)) in results.iter().zip(members).enumerate() {
            let mut r = r.clone();
            if let Some(w) = &warmup {
                let before = w.before.get(gi).and_then(|g| g.get(j)).map_or(r.totals, |b| b.totals);
                r.totals = r.totals - before;
                r.counted_from = w.start;
            }
            slots[i] = Some(r);
        }
    }
    let mut totals = groups.first().map(|g| g.0.totals()).unwrap_or_default();
    totals.counted_from = warmup.and_then(|w| w.start);
    (slots.into_iter().flatten().collect(), totals)
}

/// [`run_streaming_records`](crate::core::streaming::run_streaming_records) for a grid
/// [`SharedGrid::supports`]: the records are read in place, and each group of policies (up
/// to `threads`, one thread each) simulates all its cells with one index probe per access. Returns what the per-cell path returns.
pub fn run_shared_records(
    reader: &mut BlockReader,
    cells: &[(Kind, usize)],
    warmup: WarmupPeriod,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Vec<SimResult>, StreamTotals), TraceError> {
    let mut gs = groups(cells, threads);
    let mut vtime = 0u64;
    let mut warm = RecordWarmup::new(warmup);
    let mut before = None;
    loop {
        let records = reader.next_records(CHUNK_ACCESSES)?;
        if records.len() < RECORD_SIZE {
            break;
        }
        for part in warm.parts(records, vtime) {
            if part.start.is_some() {
                before = Some(snapshot(&gs));
            }
            each_group(&mut gs, &|g| g.run_records(part.records));
        }
        vtime += (records.len() / RECORD_SIZE) as u64;
        progress(vtime);
    }
    let end = (!warmup.is_none())
        .then(|| WarmupEnd { before: before.unwrap_or_default(), start: warm.count_start() });
    Ok(collect(&gs, cells.len(), end))
}

/// [`run_streaming`](crate::core::streaming::run_streaming) (no timeline) for a grid
/// [`SharedGrid::supports`], over chunks from `next_chunk` (with times for a warm-up by
/// time), with each group of policies (up to `threads`) on its own thread.
pub fn run_shared_chunks<E>(
    next_chunk: &mut dyn FnMut(&mut BlockChunk) -> Result<bool, E>,
    cells: &[(Kind, usize)],
    warmup: WarmupPeriod,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Vec<SimResult>, StreamTotals), E> {
    let mut gs = groups(cells, threads);
    let mut chunk = BlockChunk::default();
    let mut done = 0u64;
    let mut cutter = Cutter::with_warmup(None, warmup);
    let mut before = None;
    while next_chunk(&mut chunk)? {
        done += chunk.len() as u64;
        let c = &chunk;
        for piece in cutter.cut(c) {
            if piece.count_start.is_some() {
                before = Some(snapshot(&gs));
            }
            let r = piece.range;
            each_group(&mut gs, &|g| g.run_accesses(&c.keys[r.clone()], &c.flags[r.clone()]));
        }
        progress(done);
    }
    let end = (!warmup.is_none())
        .then(|| WarmupEnd { before: before.unwrap_or_default(), start: cutter.count_start() });
    Ok(collect(&gs, cells.len(), end))
}

#[cfg(test)]
mod tests;
