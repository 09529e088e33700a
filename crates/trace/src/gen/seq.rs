//! `seq`: a sequential loop over N blocks. Request `i` addresses block `(start + i) mod N`, so
//! the trace is repeated scans of blocks `0..N` (the SEQ pattern of Wong and Wilkes section
//! 3.3). The block sequence does not depend on the seed; only the read/write mix does.

use super::{single_volume, Common, Ticker};
use crate::{Request, Trace, TraceError, VolumeTable};

/// Configuration of the [`seq`](self) generator.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqConfig {
    /// Length of the loop N in blocks; the volume spans blocks `0..blocks`.
    pub blocks: u64,
    /// Number of requests to generate.
    pub requests: u64,
    /// Position in the loop of the first request (taken modulo `blocks`).
    pub start: u64,
    /// Name of the one volume.
    pub volume: String,
    /// Seed (of the read/write mix), block size, rate and write ratio.
    pub common: Common,
}

impl SeqConfig {
    /// `requests` sequential requests looping over `blocks` blocks from block 0, on volume
    /// `seq`.
    pub fn new(blocks: u64, requests: u64, common: Common) -> Self {
        Self { blocks, requests, start: 0, volume: "seq".into(), common }
    }

    /// The requests as a stream.
    pub fn stream(&self) -> Result<SeqStream, TraceError> {
        self.common.validate(self.blocks)?;
        let (_, ops_rng) = self.common.rngs();
        Ok(SeqStream {
            blocks: self.blocks,
            start: self.start % self.blocks,
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

/// The requests of a [`SeqConfig`], generated one at a time.
#[derive(Clone, Debug)]
pub struct SeqStream {
    blocks: u64,
    start: u64,
    tick: Ticker,
    volume: String,
}

impl SeqStream {
    /// The volume table: the one volume, id 0.
    pub fn volumes(&self) -> VolumeTable {
        single_volume(&self.volume)
    }
}

impl Iterator for SeqStream {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.tick.remaining() == 0 {
            return None;
        }
        let block = (self.start + self.tick.index() % self.blocks) % self.blocks;
        Some(self.tick.emit(block))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.tick.remaining() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for SeqStream {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::test_util::{blocks, write_fraction};
    use crate::Op;

    #[test]
    fn exact_loop_order() {
        let t = SeqConfig::new(5, 12, Common::with_seed(0)).trace().unwrap();
        assert_eq!(blocks(&t.requests, 4096), vec![0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]);
        assert!(t.requests.iter().all(|r| r.op == Op::Read));
        let mut cfg = SeqConfig::new(5, 7, Common::with_seed(0));
        cfg.start = 13;
        assert_eq!(blocks(&cfg.trace().unwrap().requests, 4096), vec![3, 4, 0, 1, 2, 3, 4]);
    }

    #[test]
    fn seed_moves_only_the_write_mix() {
        let c = |seed| Common { write_ratio: 0.2, ..Common::with_seed(seed) };
        let a = SeqConfig::new(1000, 20_000, c(1)).trace().unwrap();
        let b = SeqConfig::new(1000, 20_000, c(1)).trace().unwrap();
        let d = SeqConfig::new(1000, 20_000, c(2)).trace().unwrap();
        assert_eq!(a.requests, b.requests);
        assert_ne!(a.requests, d.requests);
        assert_eq!(blocks(&a.requests, 4096), blocks(&d.requests, 4096));
        let w = write_fraction(&a.requests);
        // sd = sqrt(0.16 / 2e4) = 0.0028.
        assert!((w - 0.2).abs() < 0.015, "write fraction {w}");
    }
}
