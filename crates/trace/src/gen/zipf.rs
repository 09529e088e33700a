//! `zipf`: Zipf-like popularity over N blocks.
//!
//! The probability that a request addresses the block of popularity rank `i` (1-based) is
//! proportional to `1 / i^alpha` (Wong and Wilkes section 2.2; Breslau et al.'s "Zipf-like"
//! form). Ranks are drawn by rejection-inversion ([`rand_distr::Zipf`]): constant memory and
//! constant expected time per sample, so 10M requests over 10M blocks need no table.
//!
//! By default rank `i` is mapped to a block by a seeded permutation ([`Scramble`]) so popular
//! blocks are scattered over the volume; with `scramble = false` rank `i` is block `i - 1`
//! (the most popular blocks are contiguous at the start of the volume).

use super::{single_volume, Common, GenRng, Scramble, Ticker};
use crate::{Request, Trace, TraceError, VolumeTable};
use rand::Rng;

/// Samples Zipf ranks `1..=n` with exponent `alpha`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZipfRanks {
    n: u64,
    dist: rand_distr::Zipf<f64>,
}

impl ZipfRanks {
    /// Ranks `1..=n`, exponent `alpha >= 0` (0 is uniform).
    pub(crate) fn new(n: u64, alpha: f64) -> Result<Self, TraceError> {
        if !(alpha.is_finite() && alpha >= 0.0) {
            return Err(TraceError::Invalid(format!(
                "the Zipf exponent alpha must be finite and >= 0, got {alpha}"
            )));
        }
        let dist = rand_distr::Zipf::new(n, alpha)
            .map_err(|e| TraceError::Invalid(format!("Zipf over {n} blocks: {e}")))?;
        Ok(Self { n, dist })
    }

    /// A rank in `1..=n`.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut GenRng) -> u64 {
        // The sampler works in f64; clamp the rare rounding past either end.
        (rng.sample(self.dist) as u64).clamp(1, self.n)
    }
}

/// Configuration of the [`zipf`](self) generator.
#[derive(Clone, Debug, PartialEq)]
pub struct ZipfConfig {
    /// The Zipf exponent (0 gives uniform popularity; Wong and Wilkes use 1).
    pub alpha: f64,
    /// Number of distinct blocks N; the volume spans blocks `0..blocks`.
    pub blocks: u64,
    /// Number of requests to generate.
    pub requests: u64,
    /// Scatter ranks over the volume with a seeded permutation (true) or keep rank `i` at
    /// block `i - 1` (false).
    pub scramble: bool,
    /// Name of the one volume.
    pub volume: String,
    /// Seed, block size, rate and write ratio.
    pub common: Common,
}

impl ZipfConfig {
    /// `requests` Zipf requests with exponent `alpha` over `blocks` blocks, scrambled, on
    /// volume `zipf`.
    pub fn new(alpha: f64, blocks: u64, requests: u64, common: Common) -> Self {
        Self { alpha, blocks, requests, scramble: true, volume: "zipf".into(), common }
    }

    /// The requests as a stream.
    pub fn stream(&self) -> Result<ZipfStream, TraceError> {
        self.common.validate(self.blocks)?;
        let ranks = ZipfRanks::new(self.blocks, self.alpha)?;
        let (blocks_rng, ops_rng) = self.common.rngs();
        let scramble = self
            .scramble
            .then(|| Scramble::new(self.blocks, self.common.seed ^ 0x5a1f_5eed_0000_0001));
        Ok(ZipfStream {
            ranks,
            scramble,
            rng: blocks_rng,
            tick: Ticker::new(&self.common, self.requests, 0, ops_rng),
            volume: self.volume.clone(),
        })
    }

    /// The whole trace in memory.
    pub fn trace(&self) -> Result<Trace, TraceError> {
        let s = self.stream()?;
        let volumes = s.volumes();
        Ok(super::collect(s, volumes))
    }
}

/// The requests of a [`ZipfConfig`], generated one at a time.
#[derive(Clone, Debug)]
pub struct ZipfStream {
    ranks: ZipfRanks,
    scramble: Option<Scramble>,
    rng: GenRng,
    tick: Ticker,
    volume: String,
}

impl ZipfStream {
    /// The volume table: the one volume, id 0.
    pub fn volumes(&self) -> VolumeTable {
        single_volume(&self.volume)
    }

    /// The block holding popularity rank `rank` (1-based, at most N).
    pub fn block_of_rank(&self, rank: u64) -> u64 {
        let r = rank.saturating_sub(1);
        match &self.scramble {
            Some(s) => s.apply(r),
            None => r,
        }
    }
}

impl Iterator for ZipfStream {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.tick.remaining() == 0 {
            return None;
        }
        let rank = self.ranks.sample(&mut self.rng);
        let block = self.block_of_rank(rank);
        Some(self.tick.emit(block))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.tick.remaining() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for ZipfStream {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::test_util::{blocks, write_fraction};

    /// Least-squares slope of ln(count) against ln(rank) over ranks `1..=top`.
    fn log_log_slope(counts: &[u64], top: usize) -> f64 {
        let pts: Vec<(f64, f64)> = (1..=top)
            .filter(|&r| counts[r - 1] > 0)
            .map(|r| ((r as f64).ln(), (counts[r - 1] as f64).ln()))
            .collect();
        let n = pts.len() as f64;
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        sxy / sxx
    }

    fn rank_counts(alpha: f64, scramble: bool) -> Vec<u64> {
        let n = 100_000;
        let mut cfg = ZipfConfig::new(alpha, n, 1_000_000, Common::with_seed(7));
        cfg.scramble = scramble;
        let s = cfg.stream().unwrap();
        // Invert the rank -> block map to count by rank.
        let mut rank_of_block = vec![0usize; n as usize];
        for rank in 1..=n {
            rank_of_block[s.block_of_rank(rank) as usize] = rank as usize;
        }
        let mut counts = vec![0u64; n as usize];
        for r in s {
            counts[rank_of_block[(r.offset / 4096) as usize] - 1] += 1;
        }
        counts
    }

    #[test]
    fn rank_frequency_slope_matches_alpha() {
        // 1M samples over 100K blocks; fit ranks 1..=1000, where the expected count at the
        // last rank is still ~90 (alpha 0.9) so Poisson noise averages out. Tolerance 0.05.
        for (alpha, scramble) in [(0.9, true), (1.0, false), (1.2, true), (0.6, false)] {
            let slope = log_log_slope(&rank_counts(alpha, scramble), 1000);
            assert!(
                (-slope - alpha).abs() < 0.05,
                "alpha {alpha} (scramble {scramble}): fitted slope {slope}"
            );
        }
    }

    #[test]
    fn top_rank_share_matches_the_exact_probability() {
        // P(rank 1) = 1 / H(N, alpha); for N = 100K, alpha = 1, H = 12.0901.
        let counts = rank_counts(1.0, true);
        let h: f64 = (1..=100_000).map(|i| 1.0 / i as f64).sum();
        let share = counts[0] as f64 / 1e6;
        // Binomial sd = sqrt(p(1-p)/1e6) ~ 0.00027; tolerance ~7 sd.
        assert!((share - 1.0 / h).abs() < 0.002, "share {share} vs {}", 1.0 / h);
    }

    #[test]
    fn scrambled_and_contiguous_layouts() {
        let mut cfg = ZipfConfig::new(1.0, 1_000_000, 10, Common::with_seed(1));
        cfg.scramble = false;
        let s = cfg.stream().unwrap();
        assert_eq!((1..=5).map(|r| s.block_of_rank(r)).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        cfg.scramble = true;
        let s = cfg.stream().unwrap();
        let top: Vec<u64> = (1..=5).map(|r| s.block_of_rank(r)).collect();
        assert!(top.windows(2).all(|w| w[0].abs_diff(w[1]) > 1), "{top:?}");
        assert!(top.iter().all(|&b| b < 1_000_000));
    }

    #[test]
    fn deterministic_given_seed() {
        let a = ZipfConfig::new(0.9, 10_000, 5_000, Common::with_seed(5)).trace().unwrap();
        let b = ZipfConfig::new(0.9, 10_000, 5_000, Common::with_seed(5)).trace().unwrap();
        let c = ZipfConfig::new(0.9, 10_000, 5_000, Common::with_seed(6)).trace().unwrap();
        assert_eq!(a.requests, b.requests);
        assert_ne!(a.requests, c.requests);
        assert_eq!(a.volumes.names(), &["zipf".to_string()]);
        assert_eq!(a.requests.len(), 5_000);
    }

    #[test]
    fn write_ratio_changes_ops_not_blocks() {
        let reads = ZipfConfig::new(0.9, 10_000, 50_000, Common::with_seed(5)).trace().unwrap();
        let common = Common { write_ratio: 0.25, ..Common::with_seed(5) };
        let mixed = ZipfConfig::new(0.9, 10_000, 50_000, common).trace().unwrap();
        assert_eq!(blocks(&reads.requests, 4096), blocks(&mixed.requests, 4096));
        assert_eq!(write_fraction(&reads.requests), 0.0);
        let w = write_fraction(&mixed.requests);
        // sd = sqrt(0.25 * 0.75 / 5e4) = 0.0019.
        assert!((w - 0.25).abs() < 0.01, "write fraction {w}");
    }

    #[test]
    fn stream_is_exact_size_and_time_ordered() {
        let common = Common { rate: 500.0, block_size: 512, ..Common::with_seed(2) };
        let s = ZipfConfig::new(0.8, 77, 1000, common).stream().unwrap();
        assert_eq!(s.len(), 1000);
        let reqs: Vec<Request> = s.collect();
        assert_eq!(reqs[999].time_ns, 999 * 2_000_000);
        assert!(reqs.windows(2).all(|w| w[0].time_ns < w[1].time_ns));
        assert!(reqs.iter().all(|r| r.offset / 512 < 77 && r.length == 512 && r.volume == 0));
    }

    #[test]
    fn rejects_bad_alpha() {
        assert!(ZipfConfig::new(-0.1, 10, 10, Common::default()).stream().is_err());
        assert!(ZipfConfig::new(f64::NAN, 10, 10, Common::default()).stream().is_err());
        assert!(ZipfConfig::new(1.0, 0, 10, Common::default()).stream().is_err());
    }
}
