//! SieveStore's metrics (Pritchett and Thottethodi, ISCA 2010, section 5, Figures 5-7): per
//! calendar day, accesses captured (split read/write), allocation-writes and cancelled moves;
//! per minute, SSD operations for the drive-occupancy cost model of
//! [`super::cost_model`]. Days and minutes count from midnight (UTC for MSR traces) of the
//! first request's day ([`day_origin`]).

use super::cost_model::MinuteOps;
use ember_policy::Access;
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
    /// Leading minutes that lie wholly in the uncounted warm-up period (their counters are
    /// zero and the cost model leaves them out; 0 without a warm-up).
    pub warmup_minutes: usize,
}

impl SieveRun {
    /// The minutes after the uncounted warm-up period: those the cost model counts.
    pub fn counted_minutes(&self) -> &[MinuteOps] {
        &self.minutes[self.warmup_minutes.min(self.minutes.len())..]
    }

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

/// Grows per-day and per-minute counters on demand; records nothing while `counting` is off
/// (the uncounted warm-up period).
pub(crate) struct Recorder {
    origin: u64,
    pub(crate) days: Vec<DayStats>,
    pub(crate) minutes: Vec<MinuteOps>,
    pub(crate) counting: bool,
}

impl Recorder {
    pub(crate) fn new(origin: u64) -> Self {
        Self { origin, days: Vec::new(), minutes: Vec::new(), counting: true }
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
        if !self.counting {
            return;
        }
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
        if !self.counting {
            return;
        }
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
