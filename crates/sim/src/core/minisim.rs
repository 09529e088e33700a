//! Miss-ratio curves for any replacement policy by miniature simulation (MINISIM:
//! Waldspurger, Saemundsson, Ahmad and Park, "Cache Modeling and Optimization using
//! Miniature Simulations", USENIX ATC 2017), as libCacheSim's mrcProfiler does.
//!
//! The trace is sampled spatially, as SHARDS samples it: a block is kept when a hash of its
//! key, taken modulo [`MODULUS`], falls below a threshold `T = rate * MODULUS`, so every
//! access of a kept block is kept and every access of another is dropped. The policy itself
//! then runs over the sampled accesses at each cache size scaled by the same rate (a cache of
//! `s` blocks becomes one of `round(s * rate)` blocks, at least one), and the miniature's
//! miss ratio estimates the full cache's. The work and the policy state shrink with the rate;
//! every policy of the registry runs unchanged, through [`simulate`].
//!
//! At rate 1 every block is kept and the runs are those of `ember sim`, exactly.
//!
//! A miniature cache of a few hundred blocks estimates poorly: its miss ratio moves by
//! whole points with which popular blocks the sample happens to hold. So, as SHARDS'
//! fixed-size variant keeps a fixed number of sampled blocks rather than a fixed rate
//! (Waldspurger et al., FAST 2015, section 3.3) and libCacheSim's mrcProfiler lets the rate
//! follow the cache size, [`run_minis_floored`] raises the rate for a small cache so that its
//! miniature holds at least [`MIN_MINI_BLOCKS`] blocks, up to [`MAX_RATE_BOOST`] times the
//! requested rate. The samples are nested (a block kept at one threshold is kept at every
//! higher one), so one pass keeps the widest sample ([`SpatialSample::widest`]) and each
//! cache size filters its own from it.

use crate::core::distinct::DistinctCounter;
use crate::core::simulate::{simulate, RunConfig, SimResult};
use crate::core::stream::{AccessStream, AccessStreamBuilder, Split};
use crate::SimError;
use ember_policy::admission::Aod;
use ember_policy::replacement::{build, Spec};
use ember_trace::BlockChunk;

/// The hash space of the spatial sample: a block is kept when `hash(key) % MODULUS < T`.
pub const MODULUS: u64 = 1 << 24;

/// The fewest blocks a miniature cache is given by raising the sampling rate for a small
/// cache ([`run_minis_floored`]): below a few hundred blocks a miniature's miss ratio strays
/// by more than a point from the full cache's.
pub const MIN_MINI_BLOCKS: u64 = 2_000;

/// The most the sampling rate of a small cache is raised above the requested rate
/// ([`SpatialSample::widest`]): bounds the memory and time of the widest sample.
pub const MAX_RATE_BOOST: u64 = 16;

/// The spatial sample of MINISIM (and SHARDS): which blocks are kept, at what rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpatialSample {
    threshold: u64,
}

impl SpatialSample {
    /// The sample keeping about `rate` of the blocks (`0 < rate <= 1`; the rate is rounded
    /// to a multiple of `1 / MODULUS`).
    pub fn new(rate: f64) -> Result<Self, SimError> {
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(SimError::Invalid(format!(
                "sampling rate {rate} must be above 0 and at most 1 (1% is 0.01)"
            )));
        }
        let threshold = ((rate * MODULUS as f64).round() as u64).clamp(1, MODULUS);
        Ok(Self { threshold })
    }

    /// The rate as sampled: `T / MODULUS`.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / MODULUS as f64
    }

    /// True if the block of `key` is in the sample.
    #[inline]
    pub fn keeps(&self, key: u64) -> bool {
        self.threshold >= MODULUS || mix(key) % MODULUS < self.threshold
    }

    /// The widest sample a small cache may need: [`MAX_RATE_BOOST`] times this rate, at most
    /// every block. It holds every sample [`SpatialSample::for_capacity`] returns.
    pub fn widest(&self) -> Self {
        Self { threshold: self.threshold.saturating_mul(MAX_RATE_BOOST).min(MODULUS) }
    }

    /// The sample for a cache of `blocks` blocks: this rate, raised so that the miniature
    /// cache holds at least [`MIN_MINI_BLOCKS`] blocks, but not beyond `widest`'s rate (nor
    /// below this one).
    pub fn for_capacity(&self, widest: &SpatialSample, blocks: u64) -> Self {
        let want = (MIN_MINI_BLOCKS as u128 * MODULUS as u128).div_ceil(blocks.max(1) as u128);
        let want = u64::try_from(want).unwrap_or(u64::MAX);
        let hi = widest.threshold.max(self.threshold);
        Self { threshold: want.clamp(self.threshold, hi) }
    }

    /// The miniature cache standing for a cache of `blocks` blocks: `round(blocks * rate)`,
    /// at least one block.
    pub fn scaled(&self, blocks: u64) -> u64 {
        if self.threshold >= MODULUS {
            return blocks;
        }
        ((blocks as f64 * self.rate()).round() as u64).max(1)
    }
}

/// splitmix64's finalizer: spreads block keys (dense runs of integers) over the hash space.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The sampled accesses of a trace, built chunk by chunk as a reader yields them, with the
/// whole trace's totals (so that percentage sizes are of the whole working set).
#[derive(Debug)]
pub struct SampledStream {
    sample: SpatialSample,
    builder: AccessStreamBuilder,
    requests: u64,
    accesses: u64,
    wss: DistinctCounter,
}

impl SampledStream {
    /// An empty sample for `block_size`-byte blocks.
    pub fn new(sample: SpatialSample, block_size: u64) -> Result<Self, SimError> {
        let builder = AccessStreamBuilder::new(block_size, Split::Blocks)?.without_times();
        Ok(Self { sample, builder, requests: 0, accesses: 0, wss: DistinctCounter::new() })
    }

    /// Take the kept accesses of `chunk` (each a request of its own in the sample) and count
    /// all of them in the whole trace's totals.
    pub fn push_chunk(&mut self, chunk: &BlockChunk) {
        self.requests += chunk.requests();
        self.accesses += chunk.keys.len() as u64;
        self.wss.add_all(&chunk.keys);
        for (&key, &flags) in chunk.keys.iter().zip(&chunk.flags) {
            if self.sample.keeps(key) {
                self.builder.push_block(key, 0, flags & ember_trace::FLAG_WRITE != 0);
            }
        }
    }

    /// Requests of the whole trace so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Block accesses of the whole trace so far.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Distinct blocks of the whole trace so far.
    pub fn wss(&self) -> u64 {
        self.wss.count()
    }

    /// The sampled stream (next-access times computed if `oracle`, for OPT).
    pub fn finish(self, oracle: bool) -> AccessStream {
        self.builder.finish(oracle)
    }
}

/// One miniature run: the policy at the scaled size over the sample, whose trace had
/// `full_accesses` block accesses. Its counters are the sample's, adjusted as SHARDS-adj
/// adjusts its histogram (Waldspurger et al., FAST 2015, section 4.2): a sample holds more or
/// fewer accesses than `rate * full_accesses`, mostly as a few very popular blocks fall in or
/// out of it, and the difference is counted as read hits (removed from them if negative), so
/// that misses are over the expected number of sampled accesses. Its miss ratio estimates
/// that of a cache of `capacity_blocks`.
pub fn run_mini(
    sample: &SpatialSample,
    stream: &AccessStream,
    full_accesses: u64,
    policy: &Spec,
    capacity_blocks: u64,
) -> SimResult {
    let mini = usize::try_from(sample.scaled(capacity_blocks)).unwrap_or(usize::MAX);
    let mut p = build(*policy, mini);
    let mut r = simulate(&mut *p, &mut Aod, stream, &RunConfig::default());
    r.capacity_blocks = capacity_blocks;
    let expected = (full_accesses as f64 * sample.rate()).round() as u64;
    let c = &mut r.totals;
    if expected >= c.block_accesses {
        let more = expected - c.block_accesses;
        c.read_hits += more;
        c.reads += more;
    } else {
        let fewer = (c.block_accesses - expected).min(c.read_hits);
        c.read_hits -= fewer;
        c.reads -= fewer;
    }
    c.block_accesses = c.reads + c.writes;
    r
}

/// Every cell of `cells` (policy, full size in blocks) as a miniature run over `stream` (of
/// a trace of `full_accesses` block accesses), on up to `threads` threads, in the order of
/// `cells`.
pub fn run_minis(
    sample: &SpatialSample,
    stream: &AccessStream,
    full_accesses: u64,
    cells: &[(Spec, u64)],
    threads: usize,
) -> Vec<SimResult> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<SimResult>> = vec![None; cells.len()];
    let slots: Vec<std::sync::Mutex<&mut Option<SimResult>>> =
        out.iter_mut().map(std::sync::Mutex::new).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(cells.len()) {
            let (next, slots) = (&next, &slots);
            s.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((spec, cap)) = cells.get(i) else { break };
                let r = run_mini(sample, stream, full_accesses, spec, *cap);
                // A poisoned lock means another run panicked; the scope re-raises it.
                if let Some(Ok(mut slot)) = slots.get(i).map(|m| m.lock()) {
                    **slot = Some(r);
                }
            });
        }
    });
    drop(slots);
    out.into_iter().flatten().collect()
}

/// The accesses of `stream` (a sample at least as wide as `sample`) whose blocks `sample`
/// keeps, each a request of its own (next-access times computed if `stream` has them).
pub fn narrow(stream: &AccessStream, sample: &SpatialSample) -> Result<AccessStream, SimError> {
    let mut b = AccessStreamBuilder::new(stream.block_size(), Split::Blocks)?.without_times();
    for (i, &key) in stream.keys().iter().enumerate() {
        if sample.keeps(key) {
            b.push_block(key, 0, stream.is_write(i));
        }
    }
    Ok(b.finish(stream.next_access().is_some()))
}

/// [`run_minis`] with a floor on the miniature cache size: `stream` is the sample `widest`
/// (of `sample.widest()`), and each cell runs over its own sample,
/// [`SpatialSample::for_capacity`], filtered from it ([`narrow`]) once per distinct rate.
/// Returns the results in the order of `cells`, each with the rate it ran at.
pub fn run_minis_floored(
    sample: &SpatialSample,
    widest: &SpatialSample,
    stream: &AccessStream,
    full_accesses: u64,
    cells: &[(Spec, u64)],
    threads: usize,
) -> Result<Vec<(SimResult, f64)>, SimError> {
    let own: Vec<SpatialSample> =
        cells.iter().map(|&(_, cap)| sample.for_capacity(widest, cap)).collect();
    let mut rates: Vec<SpatialSample> = own.clone();
    rates.sort_by_key(|s| s.threshold);
    rates.dedup();
    let mut out: Vec<Option<(SimResult, f64)>> = vec![None; cells.len()];
    for s in rates {
        let narrowed;
        let sub = if s == *widest {
            stream
        } else {
            narrowed = narrow(stream, &s)?;
            &narrowed
        };
        let idx: Vec<usize> = (0..cells.len()).filter(|&i| own[i] == s).collect();
        let these: Vec<(Spec, u64)> = idx.iter().map(|&i| cells[i]).collect();
        let results = run_minis(&s, sub, full_accesses, &these, threads);
        for (i, r) in idx.into_iter().zip(results) {
            out[i] = Some((r, s.rate()));
        }
    }
    Ok(out.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_policy::replacement::Kind;
    use ember_trace::{FLAG_FIRST, FLAG_WRITE};

    fn chunk(keys: &[u64]) -> BlockChunk {
        let mut c = BlockChunk::default();
        for (i, &k) in keys.iter().enumerate() {
            c.keys.push(k);
            c.flags.push(FLAG_FIRST | if i % 5 == 0 { FLAG_WRITE } else { 0 });
        }
        c
    }

    /// A skewed sequence of block keys.
    fn keys(n: usize, blocks: u64) -> Vec<u64> {
        let mut x = 7u64;
        (0..n)
            .map(|_| {
                x = mix(x);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                (blocks as f64 * u.powf(1.5)) as u64
            })
            .collect()
    }

    #[test]
    fn rates_are_checked_and_sizes_scale() {
        assert!(SpatialSample::new(0.0).is_err());
        assert!(SpatialSample::new(1.5).is_err());
        assert!(SpatialSample::new(f64::NAN).is_err());
        let s = SpatialSample::new(0.01).unwrap();
        assert!((s.rate() - 0.01).abs() < 1e-6);
        assert_eq!(s.scaled(10_000), 100);
        assert_eq!(s.scaled(10), 1);
        let all = SpatialSample::new(1.0).unwrap();
        assert_eq!(all.scaled(12_345), 12_345);
        assert!((0..1000).all(|k| all.keeps(k)));
        // About the rate of the blocks are kept, and a block is kept or not for good.
        let kept = (0..1_000_000u64).filter(|&k| s.keeps(k)).count();
        assert!((9_000..11_000).contains(&kept), "{kept}");
        assert!((0..1000u64).all(|k| s.keeps(k) == s.keeps(k)));
    }

    /// At rate 1 the miniature runs are the full runs.
    #[test]
    fn rate_one_is_the_full_simulation() {
        let k = keys(20_000, 3_000);
        let sample = SpatialSample::new(1.0).unwrap();
        let mut s = SampledStream::new(sample, 4096).unwrap();
        s.push_chunk(&chunk(&k[..7_000]));
        s.push_chunk(&chunk(&k[7_000..]));
        assert_eq!((s.requests(), s.accesses()), (20_000, 20_000));
        let wss = s.wss();
        let stream = s.finish(true);
        let cells = [(Kind::Lru, 100), (Kind::Arc, 500), (Kind::S3Fifo, 50), (Kind::Opt, 300)]
            .map(|(k, n)| (Spec::from(k), n));
        let got = run_minis(&sample, &stream, 20_000, &cells, 3);
        assert_eq!(got.len(), 4);
        let mut full = AccessStreamBuilder::new(4096, Split::Blocks).unwrap();
        full.push_chunk(&chunk(&k));
        let full = full.finish(true);
        for (r, &(kind, cap)) in got.iter().zip(&cells) {
            let mut p = build(kind, cap as usize);
            let want = simulate(&mut *p, &mut Aod, &full, &RunConfig::default());
            assert_eq!(r.totals, want.totals, "{kind:?} at {cap}");
            assert_eq!(r.capacity_blocks, cap);
        }
        assert!(wss > 1000 && wss <= 3000, "{wss}");
    }

    /// At 10 % the miniature LRU's miss ratio is near the full LRU's.
    #[test]
    fn a_sample_estimates_the_miss_ratio() {
        let k = keys(400_000, 200_000);
        let sample = SpatialSample::new(0.1).unwrap();
        let mut s = SampledStream::new(sample, 4096).unwrap();
        s.push_chunk(&chunk(&k));
        let stream = s.finish(false);
        assert!(stream.len() > 20_000 && stream.len() < 60_000, "{}", stream.len());
        let mut full = AccessStreamBuilder::new(4096, Split::Blocks).unwrap();
        full.push_chunk(&chunk(&k));
        let full = full.finish(false);
        for cap in [2_000u64, 20_000] {
            let mini = run_mini(&sample, &stream, 400_000, &Spec::from(Kind::Lru), cap);
            let mut p = build(Kind::Lru, cap as usize);
            let want = simulate(&mut *p, &mut Aod, &full, &RunConfig::default());
            let (a, b) = (1.0 - mini.totals.hit_ratio(), 1.0 - want.totals.hit_ratio());
            assert!((a - b).abs() < 0.02, "at {cap}: {a} against {b}");
        }
    }

    #[test]
    fn small_caches_get_a_higher_rate() {
        let s = SpatialSample::new(0.01).unwrap();
        let w = s.widest();
        assert!((w.rate() - 0.16).abs() < 1e-6);
        // Large caches keep the requested rate; small ones reach the floor, then the widest.
        assert_eq!(s.for_capacity(&w, 10_000_000), s);
        let mid = s.for_capacity(&w, 50_000);
        assert!((mid.scaled(50_000) as i64 - MIN_MINI_BLOCKS as i64).abs() <= 1);
        assert_eq!(s.for_capacity(&w, 1_000), w);
        assert_eq!(SpatialSample::new(1.0).unwrap().widest(), SpatialSample::new(1.0).unwrap());
        // Nested: whatever a narrower sample keeps, the wider one keeps.
        assert!((0..100_000u64).all(|k| !mid.keeps(k) || w.keeps(k)));
        assert!((0..100_000u64).all(|k| !s.keeps(k) || mid.keeps(k)));
    }

    /// With the floor, each cell equals a plain miniature run at its own rate, and at rate 1
    /// the runs are the full ones.
    #[test]
    fn floored_runs_are_miniatures_at_their_own_rates() {
        let k = keys(200_000, 100_000);
        let base = SpatialSample::new(0.02).unwrap();
        let widest = base.widest();
        let mut s = SampledStream::new(widest, 4096).unwrap();
        s.push_chunk(&chunk(&k));
        let stream = s.finish(true);
        let cells = [(Kind::Lru, 500), (Kind::Arc, 20_000), (Kind::Opt, 200_000)]
            .map(|(k, n)| (Spec::from(k), n));
        let got = run_minis_floored(&base, &widest, &stream, 200_000, &cells, 2).unwrap();
        assert_eq!(got.len(), 3);
        for ((r, rate), &(kind, cap)) in got.iter().zip(&cells) {
            let own = base.for_capacity(&widest, cap);
            assert_eq!(*rate, own.rate());
            let mut only = SampledStream::new(own, 4096).unwrap();
            only.push_chunk(&chunk(&k));
            let want = run_mini(&own, &only.finish(true), 200_000, &kind, cap);
            assert_eq!(r.totals, want.totals, "{kind:?} at {cap}");
        }
        assert_eq!(got[0].1, widest.rate());
        assert_eq!(got[2].1, base.rate());
        let one = SpatialSample::new(1.0).unwrap();
        let mut all = SampledStream::new(one, 4096).unwrap();
        all.push_chunk(&chunk(&k));
        let all = all.finish(true);
        let exact = run_minis(&one, &all, 200_000, &cells, 2);
        let floored = run_minis_floored(&one, &one, &all, 200_000, &cells, 2).unwrap();
        for (a, (b, _)) in exact.iter().zip(&floored) {
            assert_eq!(a.totals, b.totals);
        }
    }
}
