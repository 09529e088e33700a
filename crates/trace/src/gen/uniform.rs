//! `uniform`: one-block requests uniformly at random over N blocks (the "random" workload of
//! Wong and Wilkes section 2.1: "a spatially uniform distribution of requests across some
//! working set").

use super::{single_volume, Common, GenRng, Ticker};
use crate::{Request, Trace, TraceError, VolumeTable};
use rand::Rng;

/// Configuration of the [`uniform`](self) generator.
#[derive(Clone, Debug, PartialEq)]
pub struct UniformConfig {
    /// Number of distinct blocks N; the volume spans blocks `0..blocks`.
    pub blocks: u64,
    /// Number of requests to generate.
    pub requests: u64,
    /// Name of the one volume.
    pub volume: String,
    /// Seed, block size, rate and write ratio.
    pub common: Common,
}

impl UniformConfig {
    /// `requests` uniform requests over `blocks` blocks on volume `uniform`.
    pub fn new(blocks: u64, requests: u64, common: Common) -> Self {
        Self { blocks, requests, volume: "uniform".into(), common }
    }

    /// The requests as a stream.
    pub fn stream(&self) -> Result<UniformStream, TraceError> {
        self.common.validate(self.blocks)?;
        let (rng, ops_rng) = self.common.rngs();
        Ok(UniformStream {
            blocks: self.blocks,
            rng,
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

/// The requests of a [`UniformConfig`], generated one at a time.
#[derive(Clone, Debug)]
pub struct UniformStream {
    blocks: u64,
    rng: GenRng,
    tick: Ticker,
    volume: String,
}

impl UniformStream {
    /// The volume table: the one volume, id 0.
    pub fn volumes(&self) -> VolumeTable {
        single_volume(&self.volume)
    }
}

impl Iterator for UniformStream {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.tick.remaining() == 0 {
            return None;
        }
        let block = self.rng.gen_range(0..self.blocks);
        Some(self.tick.emit(block))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.tick.remaining() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for UniformStream {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::test_util::{blocks, chi_square_uniform, write_fraction};

    #[test]
    fn chi_square_is_consistent_with_uniform() {
        let t = UniformConfig::new(1000, 200_000, Common::with_seed(11)).trace().unwrap();
        let mut counts = vec![0u64; 1000];
        for b in blocks(&t.requests, 4096) {
            counts[b as usize] += 1;
        }
        // 999 degrees of freedom: mean 999, sd sqrt(2 * 999) = 44.7. The 0.1% and 99.9%
        // quantiles are ~864 and ~1143; accept [850, 1150].
        let chi2 = chi_square_uniform(&counts);
        assert!((850.0..1150.0).contains(&chi2), "chi-square {chi2}");
    }

    #[test]
    fn covers_every_block() {
        // 100 blocks, 5000 requests: P(some block missed) <= 100 * 0.99^5000 ~ 1e-20.
        let t = UniformConfig::new(100, 5000, Common::with_seed(3)).trace().unwrap();
        let mut seen = [false; 100];
        for b in blocks(&t.requests, 4096) {
            seen[b as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn deterministic_and_write_mix() {
        let c = |seed, w| Common { write_ratio: w, ..Common::with_seed(seed) };
        let a = UniformConfig::new(500, 40_000, c(1, 0.5)).trace().unwrap();
        let b = UniformConfig::new(500, 40_000, c(1, 0.5)).trace().unwrap();
        let d = UniformConfig::new(500, 40_000, c(2, 0.5)).trace().unwrap();
        assert_eq!(a.requests, b.requests);
        assert_ne!(blocks(&a.requests, 4096), blocks(&d.requests, 4096));
        let w = write_fraction(&a.requests);
        // sd = sqrt(0.25 / 4e4) = 0.0025.
        assert!((w - 0.5).abs() < 0.015, "write fraction {w}");
        assert_eq!(a.volumes.name(0), "uniform");
    }
}
