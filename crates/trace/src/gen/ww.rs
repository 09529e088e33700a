//! The evaluation setting of Wong and Wilkes, *My cache or yours? Making storage more
//! exclusive*, USENIX ATC 2002, section 3: the cache sizes the synthetic workloads are sized
//! against, and the warm-up-then-timed procedure.
//!
//! Section 3.1: "the client and array caches were restricted to N_c = N_a = 16384 blocks",
//! with "4 KB READS" (64 MB caches of 4 KB blocks). "In each experiment, we first 'warmed up'
//! the caches with a working-set size set of READS; the performance of these READS is not
//! included in the results." Sections 3.2-3.4 then issue `N` warm-up READS followed by
//! `10 x N` timed READS, where `N` is the workload's working-set size:
//!
//! | workload | section | working set | with N_c = N_a = 16384 |
//! |---|---|---|---|
//! | RANDOM ([`super::ww_random()`]) | 3.2 | N_rand = N_c + N_a | 32768 |
//! | SEQ ([`super::ww_seq()`]) | 3.3 | N_seq = N_c + N_a - 1 | 32767 |
//! | ZIPF ([`super::ww_zipf()`]) | 3.4 | N_Zipf = 1.5 (N_c + N_a), alpha = 1 | 49152 |
//!
//! A generated workload is a [`WarmedStream`]: the warm-up requests followed by the timed
//! requests, generated one at a time, with the boundary given up front both as a request
//! count and as a time stamp; [`WarmedStream::collect`] holds it as a [`WarmedTrace`]. The
//! workload's length is set by the cache sizes (11 requests a block of the working set), so
//! `ember trace gen` writes it from the stream, in constant memory. The single
//! client is volume `client0` (as in [`super::multi_client`]), so the trace feeds the
//! client/array hierarchy simulator unchanged.

use super::Common;
use crate::{Request, Trace, TraceError, VolumeTable};

/// Client cache size N_c in blocks (section 3.1).
pub const WW_CLIENT_BLOCKS: u64 = 16384;
/// Array cache size N_a in blocks (section 3.1).
pub const WW_ARRAY_BLOCKS: u64 = 16384;
/// Block size of the section 3 experiments: "4 KB READS" (section 3.1).
pub const WW_BLOCK_SIZE: u64 = 4096;
/// Timed READS per warm-up READ: "N warm-up READS, followed by 10 x N timed READS"
/// (sections 3.2, 3.3, 3.4).
pub const WW_TIMED_MULTIPLIER: u64 = 10;
/// Zipf exponent: "the probability of a READ for the i-th block proportional to 1/i^alpha,
/// where alpha is a scaling constant commonly set to 1" (section 2.2). With N_Zipf = 49152,
/// alpha = 1 gives the thirds Z_0, Z_1, Z_2 90.3 %, 6.1 % and 3.6 % of the accesses, the
/// "90 %", "6 %" and "remaining 4 %" of section 3.4.
pub const WW_ZIPF_ALPHA: f64 = 1.0;
/// Name of the single client's volume.
pub const WW_CLIENT_VOLUME: &str = "client0";

/// Parameters of the section 3 workloads. [`Default`] gives the paper's values.
#[derive(Clone, Debug, PartialEq)]
pub struct WwConfig {
    /// Client cache size N_c in blocks (paper: 16384).
    pub client_blocks: u64,
    /// Array cache size N_a in blocks (paper: 16384).
    pub array_blocks: u64,
    /// Timed READS per warm-up READ (paper: 10).
    pub timed_multiplier: u64,
    /// Zipf exponent of ZIPF (paper: 1).
    pub zipf_alpha: f64,
    /// Seed, block size (paper: 4096), rate and write ratio (paper: 0, READS only).
    pub common: Common,
}

impl Default for WwConfig {
    fn default() -> Self {
        Self {
            client_blocks: WW_CLIENT_BLOCKS,
            array_blocks: WW_ARRAY_BLOCKS,
            timed_multiplier: WW_TIMED_MULTIPLIER,
            zipf_alpha: WW_ZIPF_ALPHA,
            common: Common { block_size: WW_BLOCK_SIZE, ..Common::default() },
        }
    }
}

impl WwConfig {
    /// The paper's parameters with this seed.
    pub fn with_seed(seed: u64) -> Self {
        let mut c = Self::default();
        c.common.seed = seed;
        c
    }

    fn cache_sum(&self) -> Result<u64, TraceError> {
        if self.client_blocks == 0 || self.array_blocks == 0 {
            return Err(TraceError::Invalid("N_c and N_a must be at least 1 block".into()));
        }
        self.client_blocks
            .checked_add(self.array_blocks)
            .ok_or_else(|| TraceError::Invalid("N_c + N_a overflows".into()))
    }

    /// N_rand = N_c + N_a (section 3.2).
    pub fn n_rand(&self) -> Result<u64, TraceError> {
        self.cache_sum()
    }

    /// N_seq = N_c + N_a - 1 (section 3.3; "the -1 accounts for double-caching of the most
    /// recently read block").
    pub fn n_seq(&self) -> Result<u64, TraceError> {
        Ok(self.cache_sum()? - 1)
    }

    /// N_Zipf = 1.5 (N_c + N_a), rounded down (section 3.4).
    pub fn n_zipf(&self) -> Result<u64, TraceError> {
        let s = self.cache_sum()?;
        Ok(s + s / 2)
    }

    /// Total requests for working set `n`: `n` warm-up plus `timed_multiplier * n` timed.
    pub(crate) fn total(&self, n: u64) -> Result<u64, TraceError> {
        self.timed_multiplier
            .checked_add(1)
            .and_then(|m| m.checked_mul(n))
            .ok_or_else(|| TraceError::Invalid("request count overflows".into()))
    }

    /// Wrap a stream of one-client requests whose first `n` (the working set) are the
    /// warm-up.
    pub(crate) fn warmed<S>(&self, requests: S, volumes: VolumeTable, n: u64) -> WarmedStream<S> {
        WarmedStream {
            requests,
            volumes,
            warmup_requests: n,
            timed_start_ns: self.common.time_ns(n),
            working_set_blocks: n,
        }
    }
}

/// A trace whose first requests warm the caches up and whose remaining requests are timed
/// (Wong and Wilkes section 3.1: the warm-up READS' "performance is not included in the
/// results").
#[derive(Clone, Debug)]
pub struct WarmedTrace {
    /// All requests, warm-up first.
    pub trace: Trace,
    /// Number of warm-up requests: `trace.requests[..warmup_requests]` warm up,
    /// `trace.requests[warmup_requests..]` are timed.
    pub warmup_requests: usize,
    /// Time stamp of the first timed request: a request is timed exactly when its `time_ns`
    /// is at least this value (every warm-up request is stamped earlier).
    pub timed_start_ns: u64,
    /// The working-set size in blocks (N_rand, N_seq or N_Zipf; for a multi-client trace the
    /// size of the array address space).
    pub working_set_blocks: u64,
}

impl WarmedTrace {
    /// The warm-up requests.
    pub fn warmup(&self) -> &[Request] {
        &self.trace.requests[..self.warmup_requests.min(self.trace.requests.len())]
    }

    /// The timed requests.
    pub fn timed(&self) -> &[Request] {
        &self.trace.requests[self.warmup_requests.min(self.trace.requests.len())..]
    }
}

/// A warmed workload generated one request at a time: what [`WarmedTrace`] holds, with the
/// warm-up boundary known before the first request. Memory is the generator's state, whatever
/// the length.
#[derive(Clone, Debug)]
pub struct WarmedStream<S> {
    /// The requests in time order, warm-up first.
    pub requests: S,
    /// The volume table of the requests.
    pub volumes: VolumeTable,
    /// Number of warm-up requests: the first `warmup_requests` of `requests`.
    pub warmup_requests: u64,
    /// Time stamp of the first timed request: a request is timed exactly when its `time_ns`
    /// is at least this value.
    pub timed_start_ns: u64,
    /// The working-set size in blocks (as in [`WarmedTrace::working_set_blocks`]).
    pub working_set_blocks: u64,
}

impl<S: ExactSizeIterator<Item = Request>> WarmedStream<S> {
    /// Requests still to come (all of them before the first is taken).
    pub fn remaining(&self) -> u64 {
        self.requests.len() as u64
    }

    /// The whole trace in memory.
    pub fn collect(self) -> WarmedTrace {
        WarmedTrace {
            trace: super::collect(self.requests, self.volumes),
            warmup_requests: self.warmup_requests as usize,
            timed_start_ns: self.timed_start_ns,
            working_set_blocks: self.working_set_blocks,
        }
    }
}

#[cfg(test)]
pub(crate) mod test_lru {
    /// The requests of this configuration (awkward rate, writes, small caches) are pinned by
    /// digest in each Wong and Wilkes generator's tests, as the generators that held the
    /// whole trace made them: the streamed generators must give the same traces.
    pub(crate) fn pinned_config() -> super::WwConfig {
        super::WwConfig {
            client_blocks: 700,
            array_blocks: 500,
            timed_multiplier: 4,
            common: super::Common { seed: 13, rate: 333.0, write_ratio: 0.25, block_size: 512 },
            ..super::WwConfig::default()
        }
    }

    use std::collections::{BTreeMap, HashMap};

    /// Hit rate of an LRU cache of `capacity` blocks over `warmup` then `timed` block
    /// accesses, counting hits in `timed` only.
    pub fn lru_hit_rate(capacity: usize, warmup: &[u64], timed: &[u64]) -> f64 {
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut order: BTreeMap<u64, u64> = BTreeMap::new();
        let mut hits = 0u64;
        for (t, &b) in warmup.iter().chain(timed).enumerate() {
            let t = t as u64;
            if let Some(old) = last.insert(b, t) {
                order.remove(&old);
                if t >= warmup.len() as u64 {
                    hits += 1;
                }
            } else if order.len() == capacity {
                if let Some((_, victim)) = order.pop_first() {
                    last.remove(&victim);
                }
            }
            order.insert(t, b);
        }
        hits as f64 / timed.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_set_sizes_of_section_3() {
        let c = WwConfig::default();
        assert_eq!(c.n_rand().unwrap(), 32768); // section 3.2
        assert_eq!(c.n_seq().unwrap(), 32767); // section 3.3
        assert_eq!(c.n_zipf().unwrap(), 49152); // section 3.4
        assert_eq!(c.total(32768).unwrap(), 11 * 32768);
        assert_eq!(c.common.block_size, 4096);
        assert_eq!(c.common.write_ratio, 0.0);
    }

    #[test]
    fn lru_helper_counts_timed_hits_only() {
        // Capacity 2: warm-up 1,2; timed 1 (hit), 3 (miss, evicts 2), 2 (miss), 1 (miss).
        let h = test_lru::lru_hit_rate(2, &[1, 2], &[1, 3, 2, 1]);
        assert_eq!(h, 0.25);
    }
}
