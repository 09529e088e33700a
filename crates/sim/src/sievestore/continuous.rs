//! SieveStore's manager for a continuous (per-miss) sieve, fed one request at a time so a run
//! can read its trace from memory ([`super::run::run_continuous`]) or stream it from a file
//! ([`super::stream`]) with the same code deciding: a per-miss sieve under a replacement
//! policy; every block access is a hit or a miss, and a miss is allocated if the sieve
//! admits it.

use super::accesses::access;
use super::metrics::{Recorder, SieveRun};
use ember_policy::{Admission, Replacement};
use ember_trace::Request;

/// A continuous sieve's run over requests given one at a time: the counters, the virtual
/// time and the sieve's peak memory. The cache and the sieve are owned by the caller and
/// passed to every call.
pub struct ContinuousState {
    rec: Recorder,
    capacity: usize,
    peak_mem: usize,
    vtime: u64,
}

impl ContinuousState {
    /// A run whose days and minutes count from `origin`, with `cache`'s capacity.
    pub fn new(origin: u64, cache: &dyn Replacement, sieve: &dyn Admission) -> Self {
        Self {
            rec: Recorder::new(origin),
            capacity: cache.capacity(),
            peak_mem: sieve.memory_bytes(),
            vtime: 0,
        }
    }

    /// Count the coming requests (`on`), or let them run uncounted (the warm-up period).
    pub fn set_counting(&mut self, on: bool) {
        self.rec.counting = on;
    }

    /// Every block access of `r`.
    #[inline]
    pub fn request(
        &mut self,
        r: &Request,
        block_size: u64,
        cache: &mut dyn Replacement,
        sieve: &mut dyn Admission,
    ) {
        for key in r.block_keys(block_size) {
            let a = access(r, key, &mut self.vtime);
            sieve.prefetch(&a);
            let hit = cache.lookup(&a);
            sieve.observe(&a, hit);
            let mut allocated = false;
            if !hit {
                sieve.set_occupancy(cache.len(), self.capacity);
                if sieve.admit(&a) {
                    cache.insert(&a);
                    allocated = true;
                }
            }
            self.rec.access(&a, hit, allocated);
            if self.vtime & 0xFFFF == 0 {
                self.peak_mem = self.peak_mem.max(sieve.memory_bytes());
            }
        }
    }

    /// The run's result.
    pub fn finish(self, sieve: &dyn Admission) -> SieveRun {
        SieveRun {
            name: sieve.name().to_string(),
            capacity_blocks: self.capacity as u64,
            days: self.rec.days,
            minutes: self.rec.minutes,
            sieve_memory_bytes: self.peak_mem.max(sieve.memory_bytes()) as u64,
            warmup_minutes: 0,
        }
    }
}
