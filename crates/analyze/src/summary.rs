//! Working-set size, total data and reaccess percentage: the columns of Bonfire Table 1.
//!
//! A *reaccess* is a read of a block accessed before: a read-after-read or a read-after-write
//! (Bonfire section 3, by the op of the block's previous access). The reaccess percentage is
//! the share of block accesses that are reaccesses.

use crate::Accesses;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Table 1 of Bonfire for one trace or volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Requests touching at least one block.
    pub requests: u64,
    /// Block accesses.
    pub block_accesses: u64,
    /// Block accesses by reads.
    pub reads: u64,
    /// Block accesses by writes.
    pub writes: u64,
    /// Working-set size: distinct blocks touched.
    pub wss_blocks: u64,
    /// `wss_blocks * block_size`.
    pub wss_bytes: u64,
    /// Bytes requested (Table 1 *Size*).
    pub total_bytes: u64,
    /// Reads of a block whose previous access was a read.
    pub read_after_read: u64,
    /// Reads of a block whose previous access was a write.
    pub read_after_write: u64,
    /// `100 * (read_after_read + read_after_write) / block_accesses`.
    pub reaccess_percent: f64,
}

impl Summary {
    /// Table 1 columns of `a`.
    pub fn of(a: &Accesses) -> Self {
        let mut p = SummaryPass::default();
        for (&k, &w) in a.keys.iter().zip(&a.writes) {
            p.push(k, w);
        }
        p.finish(a.requests, a.total_bytes, a.block_size)
    }
}

/// [`Summary`] gathered access by access: one entry per distinct block (whether its last
/// access was a write).
#[derive(Clone, Debug, Default)]
pub struct SummaryPass {
    last: FxHashMap<u64, bool>,
    rar: u64,
    raw: u64,
    writes: u64,
    accesses: u64,
}

impl SummaryPass {
    /// Count one block access (`w`: a write).
    #[inline]
    pub fn push(&mut self, k: u64, w: bool) {
        self.writes += w as u64;
        self.accesses += 1;
        if let Some(prev_write) = self.last.insert(k, w) {
            if !w {
                if prev_write {
                    self.raw += 1;
                } else {
                    self.rar += 1;
                }
            }
        }
    }

    /// The columns, given the requests and bytes they asked for and the block size.
    pub fn finish(self, requests: u64, total_bytes: u64, block_size: u64) -> Summary {
        let n = self.accesses;
        let wss = self.last.len() as u64;
        let (rar, raw) = (self.rar, self.raw);
        Summary {
            requests,
            block_accesses: n,
            reads: n - self.writes,
            writes: self.writes,
            wss_blocks: wss,
            wss_bytes: wss * block_size,
            total_bytes,
            read_after_read: rar,
            read_after_write: raw,
            reaccess_percent: if n == 0 { 0.0 } else { 100.0 * (rar + raw) as f64 / n as f64 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::{Op, Request};

    #[test]
    fn table1_columns_on_a_hand_built_trace() {
        // a R, b W, a R (RAR), b R (RAW), c R, b W (rewrite: not a reaccess).
        let ops = [
            (0, Op::Read),
            (1, Op::Write),
            (0, Op::Read),
            (1, Op::Read),
            (2, Op::Read),
            (1, Op::Write),
        ];
        let reqs: Vec<Request> = ops
            .iter()
            .enumerate()
            .map(|(i, &(b, op))| Request {
                time_ns: i as u64,
                volume: 0,
                op,
                offset: b * 4096,
                length: 4096,
            })
            .collect();
        let s = Summary::of(&Accesses::from_requests(reqs.iter(), 4096));
        assert_eq!((s.wss_blocks, s.wss_bytes, s.total_bytes), (3, 3 * 4096, 6 * 4096));
        assert_eq!((s.reads, s.writes, s.read_after_read, s.read_after_write), (4, 2, 1, 1));
        assert!((s.reaccess_percent - 100.0 * 2.0 / 6.0).abs() < 1e-9);
    }
}
