//! What a run counts: requests, block accesses, hits and misses split by reads and writes,
//! allocation-writes and evictions.

use serde::{Deserialize, Serialize};
use std::ops::{AddAssign, Sub};

/// Counters of one run or of one timeline interval.
///
/// Hits, misses and the hit ratio count block accesses, not requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Requests that touched at least one block.
    pub requests: u64,
    /// Block accesses (every block of every request).
    pub block_accesses: u64,
    /// Block accesses by reads.
    pub reads: u64,
    /// Block accesses by writes.
    pub writes: u64,
    /// Read block accesses that found the block resident.
    pub read_hits: u64,
    /// Write block accesses that found the block resident.
    pub write_hits: u64,
    /// Read block accesses that missed.
    pub read_misses: u64,
    /// Write block accesses that missed.
    pub write_misses: u64,
    /// Missed blocks the admission policy let into the cache (SieveStore's allocation-writes).
    pub allocation_writes: u64,
    /// Blocks the replacement policy evicted to make room.
    pub evictions: u64,
}

impl Counters {
    /// Read and write hits.
    pub fn hits(&self) -> u64 {
        self.read_hits + self.write_hits
    }

    /// Read and write misses.
    pub fn misses(&self) -> u64 {
        self.read_misses + self.write_misses
    }

    /// Hits over block accesses (0 when there were none).
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.hits(), self.block_accesses)
    }

    /// Read hits over read block accesses (0 when there were none).
    pub fn read_hit_ratio(&self) -> f64 {
        ratio(self.read_hits, self.reads)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.requests += o.requests;
        self.block_accesses += o.block_accesses;
        self.reads += o.reads;
        self.writes += o.writes;
        self.read_hits += o.read_hits;
        self.write_hits += o.write_hits;
        self.read_misses += o.read_misses;
        self.write_misses += o.write_misses;
        self.allocation_writes += o.allocation_writes;
        self.evictions += o.evictions;
    }
}

impl Sub for Counters {
    type Output = Counters;

    /// The counters of what happened after `o` was taken, from a later snapshot of the same
    /// run (each field saturates at 0).
    fn sub(self, o: Counters) -> Counters {
        Counters {
            requests: self.requests.saturating_sub(o.requests),
            block_accesses: self.block_accesses.saturating_sub(o.block_accesses),
            reads: self.reads.saturating_sub(o.reads),
            writes: self.writes.saturating_sub(o.writes),
            read_hits: self.read_hits.saturating_sub(o.read_hits),
            write_hits: self.write_hits.saturating_sub(o.write_hits),
            read_misses: self.read_misses.saturating_sub(o.read_misses),
            write_misses: self.write_misses.saturating_sub(o.write_misses),
            allocation_writes: self.allocation_writes.saturating_sub(o.allocation_writes),
            evictions: self.evictions.saturating_sub(o.evictions),
        }
    }
}

/// The counters of one timeline interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalStats {
    /// The interval's number, from 0 (intervals without any access are left out).
    pub index: u64,
    /// Start of the interval in nanoseconds since the first request's time (for request-count
    /// intervals: the time of the interval's first request).
    pub start_ns: u64,
    /// Number of requests before the interval's first one.
    pub start_request: u64,
    /// True if the interval lies in the uncounted warm-up period: its counters are not in the
    /// run's totals. (The interval in which counting starts is cut in two: its warm-up part,
    /// then its counted part, which starts at the first counted request.)
    #[serde(default)]
    pub warmup: bool,
    /// What happened in the interval.
    #[serde(flatten)]
    pub counters: Counters,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_sums() {
        let mut a = Counters {
            block_accesses: 4,
            reads: 3,
            writes: 1,
            read_hits: 2,
            write_hits: 1,
            read_misses: 1,
            ..Default::default()
        };
        assert_eq!(a.hits(), 3);
        assert_eq!(a.misses(), 1);
        assert!((a.hit_ratio() - 0.75).abs() < 1e-12);
        assert!((a.read_hit_ratio() - 2.0 / 3.0).abs() < 1e-12);
        let once = a;
        a += a;
        assert_eq!(a.block_accesses, 8);
        assert_eq!(a.read_hits, 4);
        assert_eq!(a - once, once);
        assert_eq!(once - a, Counters::default());
        assert_eq!(Counters::default().hit_ratio(), 0.0);
    }
}
