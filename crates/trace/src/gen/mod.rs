//! Synthetic trace generators.
//!
//! Every generator is deterministic given its seed: the same configuration gives the same
//! requests, bit for bit, on every platform (the random streams are xoshiro256++ seeded by
//! [`rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64`]). Every request reads or writes exactly
//! one block (`offset = block * block_size`, `length = block_size`).
//!
//! Time stamps: a generator issues `rate` requests per second at a fixed interval, so request
//! `i` (0-based) of a single stream is stamped `floor(i * 1e9 / rate)` nanoseconds. The
//! read/write mix is an independent random stream: changing the write ratio never changes
//! which blocks are addressed.
//!
//! Generators:
//! - [`zipf`]: Zipf-like popularity over N blocks, ranks scrambled over the address space
//!   ([`ZipfConfig`], [`ZipfStream`]).
//! - [`uniform`]: uniform random over N blocks ([`UniformConfig`], [`UniformStream`]).
//! - [`seq`]: a sequential loop over N blocks ([`SeqConfig`], [`SeqStream`]).
//! - [`ww_random_stream()`], [`ww_seq_stream()`], [`ww_zipf_stream()`]: the single-client
//!   synthetic workloads of Wong and Wilkes, *My cache or yours?*, USENIX ATC 2002, section 3
//!   ([`ww`]: [`WwConfig`], [`WarmedStream`]; [`ww_random()`], [`ww_seq()`] and [`ww_zipf()`]
//!   collect them into a [`WarmedTrace`]).
//! - [`multi_client`]: N clients over one array, disjoint, conjoint or partially shared
//!   (Wong and Wilkes section 5; [`MultiClientConfig::warmed_stream`], collected by
//!   [`MultiClientConfig::trace`] into a [`MultiClientTrace`]).
//! - [`bonfire`] and [`ensemble`]: days of reaccess patterns and a storage ensemble.
//!
//! Every generator is a stream (`Iterator<Item = Request>`, with an exact size where the
//! length is known up front) so a caller can write or simulate 10M+ requests without holding
//! them; `trace()` (or the functions named above) collects one into memory.

pub mod bonfire;
pub mod ensemble;
pub mod multi_client;
pub mod scramble;
pub mod seq;
pub mod uniform;
pub mod ww;
pub mod ww_random;
pub mod ww_seq;
pub mod ww_zipf;
pub mod zipf;

pub use multi_client::{
    ClientLayout, MultiClientConfig, MultiClientStream, MultiClientTrace, Pattern, Sharing,
};
pub use scramble::Scramble;
pub use seq::{SeqConfig, SeqStream};
pub use uniform::{UniformConfig, UniformStream};
pub use ww::{WarmedStream, WarmedTrace, WwConfig};
pub use ww_random::{ww_random, ww_random_stream};
pub use ww_seq::{ww_seq, ww_seq_stream};
pub use ww_zipf::{ww_zipf, ww_zipf_stream};
pub use zipf::{ZipfConfig, ZipfStream};

use crate::{Op, Request, Trace, TraceError, VolumeTable, DEFAULT_BLOCK_SIZE};
use rand::Rng;
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The random number generator of every generator.
pub type GenRng = Xoshiro256PlusPlus;

/// The default request rate: 1000 requests per second (one every millisecond).
pub const DEFAULT_RATE: f64 = 1000.0;

/// The highest request rate accepted: one request per nanosecond, so that the time stamps of a
/// stream strictly increase.
pub const MAX_RATE: f64 = 1e9;

/// Options every generator shares.
#[derive(Clone, Debug, PartialEq)]
pub struct Common {
    /// Seed of the random streams.
    pub seed: u64,
    /// Block size in bytes; every request covers exactly one block.
    pub block_size: u64,
    /// Requests per second (per client for [`multi_client`]); in (0, [`MAX_RATE`]].
    pub rate: f64,
    /// Fraction of requests that are writes, in [0, 1]. Each request is a write with this
    /// probability, independently.
    pub write_ratio: f64,
}

impl Default for Common {
    fn default() -> Self {
        Self { seed: 0, block_size: DEFAULT_BLOCK_SIZE, rate: DEFAULT_RATE, write_ratio: 0.0 }
    }
}

impl Common {
    /// Common options with this seed and the defaults otherwise (4 KiB blocks, 1000 requests
    /// per second, reads only).
    pub fn with_seed(seed: u64) -> Self {
        Self { seed, ..Self::default() }
    }

    /// Check the options; `blocks` is the size of the address space the generator will use.
    pub fn validate(&self, blocks: u64) -> Result<(), TraceError> {
        if self.block_size == 0 || self.block_size > u32::MAX as u64 {
            return Err(TraceError::Invalid(format!(
                "block size must be in 1..={} bytes, got {}",
                u32::MAX,
                self.block_size
            )));
        }
        if !(self.rate > 0.0 && self.rate <= MAX_RATE) {
            return Err(TraceError::Invalid(format!(
                "request rate must be in (0, {MAX_RATE}] per second, got {}",
                self.rate
            )));
        }
        if !(0.0..=1.0).contains(&self.write_ratio) {
            return Err(TraceError::Invalid(format!(
                "write ratio must be in [0, 1], got {}",
                self.write_ratio
            )));
        }
        if blocks == 0 {
            return Err(TraceError::Invalid("the number of blocks must be at least 1".into()));
        }
        if blocks.checked_mul(self.block_size).is_none() {
            return Err(TraceError::Invalid(format!(
                "{blocks} blocks of {} bytes overflow a 64-bit byte offset",
                self.block_size
            )));
        }
        Ok(())
    }

    /// The two random streams of a generator: (blocks, ops). The op stream is the block stream
    /// advanced by one xoshiro jump (2^128 steps), so the two never overlap.
    pub(crate) fn rngs(&self) -> (GenRng, GenRng) {
        let blocks = GenRng::seed_from_u64(self.seed);
        let mut ops = blocks.clone();
        ops.jump();
        (blocks, ops)
    }

    /// The time stamp of request `i` of a stream, in nanoseconds.
    #[inline]
    pub(crate) fn time_ns(&self, i: u64) -> u64 {
        (i as f64 * (1e9 / self.rate)) as u64
    }
}

/// Draws the op of each request: reads only when the write ratio is 0 (no random numbers are
/// used then), writes only when it is 1, otherwise a Bernoulli trial per request.
#[derive(Clone, Debug)]
pub(crate) struct OpMix {
    write_ratio: f64,
    rng: GenRng,
}

impl OpMix {
    pub(crate) fn new(write_ratio: f64, rng: GenRng) -> Self {
        Self { write_ratio, rng }
    }

    #[inline]
    pub(crate) fn next_op(&mut self) -> Op {
        if self.write_ratio <= 0.0 {
            Op::Read
        } else if self.write_ratio >= 1.0 || self.rng.gen_bool(self.write_ratio) {
            Op::Write
        } else {
            Op::Read
        }
    }
}

/// The clock and op mix of one stream of one-block requests: stamps request `i` with
/// [`Common::time_ns`] and draws its op.
#[derive(Clone, Debug)]
pub(crate) struct Ticker {
    next: u64,
    total: u64,
    volume: u32,
    block_size: u64,
    interval_ns: f64,
    ops: OpMix,
}

impl Ticker {
    /// A ticker for `total` requests to `volume`, with the op stream `ops_rng`.
    pub(crate) fn new(common: &Common, total: u64, volume: u32, ops_rng: GenRng) -> Self {
        Self {
            next: 0,
            total,
            volume,
            block_size: common.block_size,
            interval_ns: 1e9 / common.rate,
            ops: OpMix::new(common.write_ratio, ops_rng),
        }
    }

    /// Requests still to come.
    #[inline]
    pub(crate) fn remaining(&self) -> u64 {
        self.total - self.next
    }

    /// Index of the next request.
    #[inline]
    pub(crate) fn index(&self) -> u64 {
        self.next
    }

    /// The next request, reading or writing `block`. Call only while `remaining() > 0`.
    #[inline]
    pub(crate) fn emit(&mut self, block: u64) -> Request {
        let t = (self.next as f64 * self.interval_ns) as u64;
        self.next += 1;
        one_block(t, self.volume, self.ops.next_op(), block, self.block_size)
    }
}

/// A one-block request.
#[inline]
pub(crate) fn one_block(time_ns: u64, volume: u32, op: Op, block: u64, block_size: u64) -> Request {
    Request { time_ns, volume, op, offset: block * block_size, length: block_size as u32 }
}

/// A volume table holding the one volume `name` (id 0).
pub(crate) fn single_volume(name: &str) -> VolumeTable {
    let mut v = VolumeTable::new();
    v.intern(name);
    v
}

/// Collect a stream into a [`Trace`], reserving the exact size first.
pub(crate) fn collect(
    stream: impl ExactSizeIterator<Item = Request>,
    volumes: VolumeTable,
) -> Trace {
    let mut requests = Vec::with_capacity(stream.len());
    requests.extend(stream);
    Trace::new(requests, volumes)
}

#[cfg(test)]
pub(crate) mod test_util {
    use crate::{Op, Request};

    /// FNV-1a over every request's fields, in order, and the number of requests: pins a
    /// generator's output across a rewrite of the generator.
    pub fn digest<'a>(reqs: impl Iterator<Item = &'a Request>) -> (u64, u64) {
        let (mut h, mut n) = (0xcbf2_9ce4_8422_2325u64, 0u64);
        for r in reqs {
            for v in [r.time_ns, r.offset, r.length as u64, r.volume as u64, r.op.is_write() as u64]
            {
                for b in v.to_le_bytes() {
                    h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
                }
            }
            n += 1;
        }
        (h, n)
    }

    /// Fraction of writes.
    pub fn write_fraction(reqs: &[Request]) -> f64 {
        reqs.iter().filter(|r| r.op == Op::Write).count() as f64 / reqs.len() as f64
    }

    /// Block index of each request (all one-block requests).
    pub fn blocks(reqs: &[Request], bs: u64) -> Vec<u64> {
        reqs.iter()
            .map(|r| {
                assert_eq!(r.length as u64, bs);
                assert_eq!(r.offset % bs, 0);
                r.offset / bs
            })
            .collect()
    }

    /// Pearson chi-square statistic of `counts` against equal expected counts.
    pub fn chi_square_uniform(counts: &[u64]) -> f64 {
        let total: u64 = counts.iter().sum();
        let e = total as f64 / counts.len() as f64;
        counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_rejects_bad_options() {
        let ok = Common::with_seed(1);
        assert!(ok.validate(10).is_ok());
        assert!(Common { write_ratio: 1.5, ..ok.clone() }.validate(10).is_err());
        assert!(Common { write_ratio: f64::NAN, ..ok.clone() }.validate(10).is_err());
        assert!(Common { rate: 0.0, ..ok.clone() }.validate(10).is_err());
        assert!(Common { rate: 2e9, ..ok.clone() }.validate(10).is_err());
        assert!(Common { block_size: 0, ..ok.clone() }.validate(10).is_err());
        assert!(ok.validate(0).is_err());
        assert!(ok.validate(u64::MAX / 2).is_err());
    }

    #[test]
    fn time_stamps_follow_the_rate() {
        let c = Common { rate: 250.0, ..Common::default() };
        assert_eq!(c.time_ns(0), 0);
        assert_eq!(c.time_ns(1), 4_000_000);
        assert_eq!(c.time_ns(1000), 4_000_000_000);
        let fast = Common { rate: MAX_RATE, ..Common::default() };
        assert_eq!(fast.time_ns(12_345_678), 12_345_678);
    }

    #[test]
    fn op_mix_extremes_and_middle() {
        let (_, r) = Common::with_seed(3).rngs();
        let mut reads = OpMix::new(0.0, r.clone());
        let mut writes = OpMix::new(1.0, r.clone());
        let mut mixed = OpMix::new(0.3, r);
        assert!((0..1000).all(|_| reads.next_op() == Op::Read));
        assert!((0..1000).all(|_| writes.next_op() == Op::Write));
        let w = (0..100_000).filter(|_| mixed.next_op() == Op::Write).count() as f64 / 1e5;
        // Binomial sd = sqrt(0.3 * 0.7 / 1e5) = 0.00145; 0.01 is ~7 sd.
        assert!((w - 0.3).abs() < 0.01, "write fraction {w}");
    }
}
