//! SieveStore's cache managers (SieveStore sections 3 and 4) and their metrics.
//!
//! - *Continuous* sieves ([`ember_policy::Admission`]: AOD, WMNA, SieveStore-C, RandSieve-C,
//!   OCF nhit) run under a fully-associative LRU cache ([`ember_policy::Lru`]), as in
//!   the paper's simulator: every block access is a hit or a miss; a miss is allocated (an
//!   *allocation-write*) if the sieve admits it.
//! - *Discrete* sieves ([`ember_policy::EpochSieve`]: SieveStore-D, RandSieve-BlkD, the ideal
//!   sieve) are batch allocators: at each epoch's end the chosen blocks (at most the
//!   capacity, most wanted first) become the cache's contents for the next epoch, with no
//!   replacement and no allocation inside an epoch. A resident block chosen again is not
//!   moved (its replacement and allocation cancel); every other chosen block is one
//!   allocation-write (a *move*). The ideal sieve, an oracle, is applied to the epoch it was
//!   chosen from. Moves are staggered evenly over the epoch's minutes for the cost model (the
//!   paper schedules them in slack periods, section 3.2).
//!
//! Metrics are kept per calendar day (accesses captured, split read/write, allocation-writes,
//! SSD operations) and per minute (SSD operations, for the drive-occupancy cost model of
//! [`crate::cost_model`]). Days and minutes count from midnight (UTC for MSR traces) of the
//! first request's day.

use crate::cost_model::MinuteOps;
use crate::sievestore_run::{ContinuousState, DiscreteState};
use ember_policy::admission::{EpochSieve, Sieve, SieveConfigError, SieveSpec};
use ember_policy::Lru;
use ember_policy::{Access, Admission, Replacement, NEVER};
use ember_trace::Request;

/// One day in nanoseconds.
pub const DAY_NS: u64 = 86_400_000_000_000;

/// One minute in nanoseconds.
pub const MINUTE_NS: u64 = 60_000_000_000;

/// One calendar day of a run (SieveStore Figures 5-7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DayStats {
    /// Block accesses.
    pub accesses: u64,
    /// Block reads.
    pub reads: u64,
    /// Block writes.
    pub writes: u64,
    /// Reads that hit (captured reads; SSD reads).
    pub read_hits: u64,
    /// Writes that hit (captured writes; SSD writes).
    pub write_hits: u64,
    /// Allocation-writes (for discrete sieves: the moves of the batch allocation).
    pub allocation_writes: u64,
    /// Discrete sieves: resident blocks chosen again, whose move was cancelled.
    pub cancelled_moves: u64,
}

impl DayStats {
    /// Accesses captured (hits).
    pub fn hits(&self) -> u64 {
        self.read_hits + self.write_hits
    }

    /// SSD operations: read hits, write hits and allocation-writes.
    pub fn ssd_ops(&self) -> u64 {
        self.hits() + self.allocation_writes
    }

    fn add(&mut self, o: &DayStats) {
        self.accesses += o.accesses;
        self.reads += o.reads;
        self.writes += o.writes;
        self.read_hits += o.read_hits;
        self.write_hits += o.write_hits;
        self.allocation_writes += o.allocation_writes;
        self.cancelled_moves += o.cancelled_moves;
    }
}

/// The result of one sieve over one trace at one cache size.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SieveRun {
    /// The sieve's name (with a suffix for variants, e.g. `aod-2x`).
    pub name: String,
    /// Cache capacity in blocks (total over partitions).
    pub capacity_blocks: u64,
    /// Per calendar day.
    pub days: Vec<DayStats>,
    /// Per minute, SSD operations.
    pub minutes: Vec<MinuteOps>,
    /// Peak bytes of the sieve's own state (summed over partitions).
    pub sieve_memory_bytes: u64,
}

impl SieveRun {
    /// All days added up.
    pub fn total(&self) -> DayStats {
        self.total_from(0)
    }

    /// Days `first..` added up (SieveStore excludes day 1 where SieveStore-D bootstraps).
    pub fn total_from(&self, first: usize) -> DayStats {
        let mut t = DayStats::default();
        for d in self.days.iter().skip(first) {
            t.add(d);
        }
        t
    }

    /// Hit ratio over all accesses.
    pub fn hit_ratio(&self) -> f64 {
        let t = self.total();
        if t.accesses == 0 {
            0.0
        } else {
            t.hits() as f64 / t.accesses as f64
        }
    }

    /// Add another run's counts (another partition of the same cache) into this one.
    pub fn merge(&mut self, o: &SieveRun) {
        if self.days.len() < o.days.len() {
            self.days.resize(o.days.len(), DayStats::default());
        }
        for (a, b) in self.days.iter_mut().zip(&o.days) {
            a.add(b);
        }
        if self.minutes.len() < o.minutes.len() {
            self.minutes.resize(o.minutes.len(), MinuteOps::default());
        }
        for (a, b) in self.minutes.iter_mut().zip(&o.minutes) {
            a.read_hits += b.read_hits;
            a.write_hits += b.write_hits;
            a.allocation_writes += b.allocation_writes;
        }
        self.capacity_blocks += o.capacity_blocks;
        self.sieve_memory_bytes += o.sieve_memory_bytes;
    }
}

/// The origin of day and minute numbering for `requests`: midnight of the first request's
/// day.
pub fn day_origin(requests: &[Request]) -> u64 {
    requests.first().map(|r| r.time_ns / DAY_NS * DAY_NS).unwrap_or(0)
}

/// Grows per-day and per-minute counters on demand.
pub(crate) struct Recorder {
    origin: u64,
    pub(crate) days: Vec<DayStats>,
    pub(crate) minutes: Vec<MinuteOps>,
}

impl Recorder {
    pub(crate) fn new(origin: u64) -> Self {
        Self { origin, days: Vec::new(), minutes: Vec::new() }
    }

    #[inline]
    fn slots(&mut self, time_ns: u64) -> (&mut DayStats, &mut MinuteOps) {
        let rel = time_ns.saturating_sub(self.origin);
        let d = (rel / DAY_NS) as usize;
        let m = (rel / MINUTE_NS) as usize;
        if self.days.len() <= d {
            self.days.resize(d + 1, DayStats::default());
        }
        if self.minutes.len() <= m {
            self.minutes.resize(m + 1, MinuteOps::default());
        }
        (&mut self.days[d], &mut self.minutes[m])
    }

    #[inline]
    pub(crate) fn access(&mut self, a: &Access, hit: bool, allocated: bool) {
        let write = a.op.is_write();
        let (d, m) = self.slots(a.time_ns);
        d.accesses += 1;
        if write {
            d.writes += 1;
        } else {
            d.reads += 1;
        }
        if hit {
            if write {
                d.write_hits += 1;
                m.write_hits += 1;
            } else {
                d.read_hits += 1;
                m.read_hits += 1;
            }
        }
        if allocated {
            d.allocation_writes += 1;
            m.allocation_writes += 1;
        }
    }

    /// Charge `moves` allocation-writes to the epoch `[start, end)`: to the day of `start`,
    /// spread evenly over the epoch's minutes.
    pub(crate) fn batch(&mut self, start: u64, end: u64, moves: u64, cancelled: u64) {
        let (d, _) = self.slots(start);
        d.allocation_writes += moves;
        d.cancelled_moves += cancelled;
        let m0 = (start.saturating_sub(self.origin) / MINUTE_NS) as usize;
        let m1 = ((end.saturating_sub(self.origin)).div_ceil(MINUTE_NS) as usize).max(m0 + 1);
        let n = (m1 - m0) as u64;
        if self.minutes.len() < m1 {
            self.minutes.resize(m1, MinuteOps::default());
        }
        for (i, m) in self.minutes[m0..m1].iter_mut().enumerate() {
            m.allocation_writes += moves / n + ((i as u64) < moves % n) as u64;
        }
    }
}

/// Every block access of `requests` as an [`Access`] (no oracle information).
pub fn accesses(requests: &[Request], block_size: u64) -> impl Iterator<Item = Access> + '_ {
    let mut vtime = 0u64;
    requests
        .iter()
        .flat_map(move |r| {
            let (time_ns, op) = (r.time_ns, r.op);
            r.block_keys(block_size).map(move |key| (key, time_ns, op))
        })
        .map(move |(key, time_ns, op)| {
            let a = Access { key, time_ns, op, vtime, next_vtime: NEVER };
            vtime += 1;
            a
        })
}

/// Run a continuous sieve over `requests` with `cache` as replacement (its current contents
/// count as resident). `origin` numbers days and minutes.
pub fn run_continuous(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    cache: &mut dyn Replacement,
    sieve: &mut dyn Admission,
) -> SieveRun {
    let mut run = ContinuousState::new(origin, cache, sieve);
    for r in requests {
        run.request(r, block_size, cache, sieve);
    }
    run.finish(sieve)
}

/// Run a discrete (epoch) sieve over `requests` with room for `capacity` blocks; epochs of
/// `epoch_ns` start at `origin`.
pub fn run_discrete(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    capacity: usize,
    epoch_ns: u64,
    sieve: &mut dyn EpochSieve,
) -> SieveRun {
    let mut run = DiscreteState::new(origin, capacity, epoch_ns, sieve, Vec::new());
    for r in requests {
        match run.request(r, block_size, sieve) {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }
    match run.finish(block_size, sieve) {
        Ok(result) => result,
        Err(never) => match never {},
    }
}

/// Run `spec` over `requests` with a cache of `capacity` blocks (LRU under continuous
/// sieves, as in the paper's simulator).
pub fn run_sieve(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    capacity: usize,
    spec: &SieveSpec,
) -> Result<SieveRun, SieveConfigError> {
    run_sieve_with(requests, block_size, origin, capacity, spec, &|c| Box::new(Lru::new(c)))
}

/// Makes an empty replacement policy of a given capacity (for continuous sieves).
pub type CacheFactory<'a> = &'a (dyn Fn(usize) -> Box<dyn Replacement> + Sync);

/// [`run_sieve`] with the replacement policy under continuous sieves made by `make_cache`
/// (discrete sieves have no replacement inside an epoch).
pub fn run_sieve_with(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    capacity: usize,
    spec: &SieveSpec,
    make_cache: CacheFactory<'_>,
) -> Result<SieveRun, SieveConfigError> {
    Ok(match spec.build()? {
        Sieve::Continuous(mut s) => {
            let mut cache = make_cache(capacity);
            run_continuous(requests, block_size, origin, cache.as_mut(), s.as_mut())
        }
        Sieve::Discrete(mut s, epoch_ns) => {
            run_discrete(requests, block_size, origin, capacity, epoch_ns, s.as_mut())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::Op;

    const H: u64 = 3_600_000_000_000;

    fn req(time_ns: u64, block: u64, op: Op) -> Request {
        Request { time_ns, volume: 0, op, offset: block * 4096, length: 4096 }
    }

    /// SieveStore section 3.2: no replacement inside an epoch, batch allocation at its end,
    /// and a block chosen again is not moved.
    #[test]
    fn sievestore_d_holds_contents_for_an_epoch_and_cancels_repeat_moves() {
        let mut reqs = Vec::new();
        // Day 0: block 1 x10, block 2 x10, block 3 x9.
        for i in 0..10 {
            reqs.push(req(i * H, 1, Op::Read));
            reqs.push(req(i * H + 1, 2, Op::Read));
            if i < 9 {
                reqs.push(req(i * H + 2, 3, Op::Write));
            }
        }
        // Day 1: block 1 x10 (chosen again), block 4 x12 (new), block 3 x1.
        for i in 0..12 {
            if i < 10 {
                reqs.push(req(DAY_NS + i * H, 1, Op::Read));
            }
            reqs.push(req(DAY_NS + i * H + 1, 4, Op::Write));
        }
        reqs.push(req(DAY_NS + 20 * H, 3, Op::Read));
        // Day 2: one access each to 1, 2 and 4.
        for b in [1, 2, 4] {
            reqs.push(req(2 * DAY_NS + b * H, b, Op::Read));
        }
        reqs.sort_by_key(|r| r.time_ns);
        let spec = SieveSpec::SieveStoreD { t: 10, epoch_ns: DAY_NS };
        let r = run_sieve(&reqs, 4096, 0, 100, &spec).unwrap();
        // Day 0: nothing resident (bootstrap). Block 4 is new on day 1 and not resident
        // before day 2 even though it passed the threshold during day 1.
        assert_eq!(r.days[0].hits(), 0);
        // Day 1: blocks 1 and 2 resident: 10 hits on 1; 4 and 3 miss.
        assert_eq!(r.days[1].hits(), 10);
        assert_eq!(r.days[1].allocation_writes, 2, "blocks 1 and 2 moved in at day 0's end");
        assert_eq!(r.days[1].cancelled_moves, 0);
        // Day 2: blocks 1 and 4 resident; 1 was chosen again, so only 4 moves.
        assert_eq!(r.days[2].allocation_writes, 1);
        assert_eq!(r.days[2].cancelled_moves, 1);
        assert_eq!(r.days[2].hits(), 2, "1 and 4 hit, 2 was replaced");
        assert_eq!(r.days[2].write_hits, 0);
        // Moves are spread over the epoch's 1440 minutes: day 1's two moves land in its
        // first two minutes.
        let day1_minutes = &r.minutes[1440..2880];
        assert_eq!(day1_minutes.iter().map(|m| m.allocation_writes).sum::<u64>(), 2);
    }

    /// A capacity smaller than the chosen set keeps the most-accessed blocks.
    #[test]
    fn sievestore_d_keeps_the_most_wanted_when_full() {
        let mut reqs = Vec::new();
        for i in 0..20 {
            reqs.push(req(i * H / 2, 1, Op::Read));
            if i < 12 {
                reqs.push(req(i * H / 2 + 1, 2, Op::Read));
            }
        }
        reqs.push(req(DAY_NS, 1, Op::Read));
        reqs.push(req(DAY_NS + 1, 2, Op::Read));
        let spec = SieveSpec::SieveStoreD { t: 10, epoch_ns: DAY_NS };
        let r = run_sieve(&reqs, 4096, 0, 1, &spec).unwrap();
        assert_eq!(r.days[1].hits(), 1);
        assert_eq!(r.days[1].read_hits, 1);
        assert_eq!(r.days[1].allocation_writes, 1);
    }

    /// The ideal sieve is an oracle: the day's top blocks are resident during that day.
    #[test]
    fn ideal_applies_its_choice_to_the_same_day() {
        let mut reqs = Vec::new();
        for i in 0..50 {
            reqs.push(req(i * 1000, 7, Op::Read));
        }
        for b in 100..199 {
            reqs.push(req(60_000 + b, b, Op::Read));
        }
        let spec = SieveSpec::Ideal { fraction: 0.01, epoch_ns: DAY_NS };
        let r = run_sieve(&reqs, 4096, 0, 10, &spec).unwrap();
        assert_eq!(r.days[0].hits(), 50);
        assert_eq!(r.days[0].allocation_writes, 1);
    }

    #[test]
    fn continuous_runs_count_hits_and_allocation_writes() {
        let reqs = vec![
            req(0, 1, Op::Read),
            req(1, 1, Op::Write),
            req(2, 2, Op::Write),
            req(3, 2, Op::Read),
            req(MINUTE_NS, 1, Op::Read),
        ];
        let r = run_sieve(&reqs, 4096, 0, 10, &SieveSpec::Wmna).unwrap();
        let t = r.total();
        assert_eq!((t.accesses, t.reads, t.writes), (5, 3, 2));
        assert_eq!(t.allocation_writes, 2, "read misses of 1 and 2");
        assert_eq!((t.read_hits, t.write_hits), (1, 1));
        assert_eq!(r.minutes[1].read_hits, 1);
        let r = run_sieve(&reqs, 4096, 0, 10, &SieveSpec::Aod).unwrap();
        assert_eq!(r.total().allocation_writes, 2);
        assert_eq!(r.total().hits(), 3);
    }
}
