//! What a run counts: requests, block accesses, hits and misses split by reads and writes,
//! allocation-writes and evictions.

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

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
        a += a;
        assert_eq!(a.block_accesses, 8);
        assert_eq!(a.read_hits, 4);
        assert_eq!(Counters::default().hit_ratio(), 0.0);
    }
}
