//! `ember analyze`'s report over a trace that streams past: the same document as
//! [`crate::report::analyze`] over the held trace, in memory per distinct block, not per
//! request.
//!
//! A counting pass ([`AnalyzeCensus`]) gathers each volume's block range and accesses, so
//! the exact reuse pass can index blocks densely ([`DenseIndex`]) as it does on a held
//! trace; the analysis pass ([`analyze_stream`]) splits requests into block accesses in
//! chunks of [`CHUNK`] and feeds one [`Analyzer`] for the whole trace and, when the trace has
//! several volumes, one per volume, all at once.

use crate::analysis::AnalyzeConfig;
use crate::analyzer::Analyzer;
use crate::dense::DenseRanges;
use crate::popularity::BlockCounts;
use crate::report::{TraceReport, VolumeAnalysis};
use crate::reuse::DENSE_SLOTS_PER_KEY;
use crate::{Accesses, ShardsError};
use ember_trace::Request;

/// Block accesses gathered before they are analyzed.
pub const CHUNK: usize = 1 << 15;

/// What the analysis pass needs to know of a trace before it starts.
#[derive(Clone, Debug, Default)]
pub struct AnalyzeCensus {
    block_size: u64,
    ranges: DenseRanges,
    /// Block accesses per volume id.
    accesses: Vec<u64>,
    keys: Vec<u64>,
}

impl AnalyzeCensus {
    /// A census of `block_size`-byte blocks (at least 1).
    pub fn new(block_size: u64) -> Self {
        Self { block_size: block_size.max(1), ..Self::default() }
    }

    /// Count one request.
    pub fn push(&mut self, r: &Request) {
        self.keys.clear();
        self.keys.extend(r.block_keys(self.block_size));
        self.ranges.add_all(&self.keys);
        let v = r.volume as usize;
        if v >= self.accesses.len() {
            self.accesses.resize(v + 1, 0);
        }
        self.accesses[v] += self.keys.len() as u64;
    }
}

/// An [`Analyzer`] and its chunk of accesses not yet analyzed.
struct Fed {
    analyzer: Analyzer,
    chunk: Accesses,
}

impl Fed {
    fn new(cfg: &AnalyzeConfig, ranges: Option<DenseRanges>) -> Result<Self, ShardsError> {
        let dense = ranges
            .filter(|_| Analyzer::wants_index(cfg))
            .and_then(|r| r.index(DENSE_SLOTS_PER_KEY));
        Ok(Self { analyzer: Analyzer::new(cfg, dense)?, chunk: Accesses::new(cfg.block_size) })
    }

    fn push(&mut self, r: &Request) {
        self.chunk.push(r);
        if self.chunk.len() >= CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.analyzer.push(&self.chunk);
        self.chunk = Accesses::new(self.chunk.block_size);
    }

    fn finish(mut self) -> crate::Analysis {
        self.flush();
        self.analyzer.finish()
    }
}

/// Analyze the trace whose requests `requests` yields (one pass), given its `census` (a pass
/// over the same requests) and its volume `names`: the whole and (with
/// [`AnalyzeConfig::per_volume`]) each volume, as [`crate::report::analyze`] does over the
/// held trace. Stops at the first error of `requests`.
pub fn analyze_stream<E: From<ShardsError>>(
    census: &AnalyzeCensus,
    names: &[String],
    cfg: &AnalyzeConfig,
    requests: impl Iterator<Item = Result<Request, E>>,
) -> Result<TraceReport, E> {
    let mut whole = Fed::new(cfg, Some(census.ranges.clone()))?;
    let mut volumes: Vec<Fed> = Vec::new();
    if names.len() != 1 && cfg.per_volume {
        for v in 0..names.len() {
            let n = census.accesses.get(v).copied().unwrap_or(0);
            volumes.push(Fed::new(cfg, Some(census.ranges.volume(v as u32, n)))?);
        }
    }
    let mut counts = BlockCounts::default();
    for r in requests {
        let r = r?;
        let before = whole.chunk.len();
        whole.chunk.push(&r);
        counts.push_all(&whole.chunk.keys[before..]);
        if whole.chunk.len() >= CHUNK {
            whole.flush();
        }
        if let Some(v) = volumes.get_mut(r.volume as usize) {
            v.push(&r);
        }
    }
    let whole = whole.finish();
    let top1_volume_share = counts.volume_shares(names);
    let volumes = if names.len() == 1 {
        vec![VolumeAnalysis { volume: 0, name: names[0].clone(), analysis: whole.clone() }]
    } else {
        volumes
            .into_iter()
            .enumerate()
            .map(|(v, fed)| VolumeAnalysis {
                volume: v as u32,
                name: names[v].clone(),
                analysis: fed.finish(),
            })
            .collect()
    };
    Ok(TraceReport { block_size: cfg.block_size, whole, volumes, top1_volume_share })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::analyze;
    use ember_trace::{Op, Trace, VolumeTable};

    /// Three volumes (one never accessed) over three days, reads and writes, requests of one
    /// to three blocks, more than two chunks: the streamed report equals the held one, with
    /// the exact pass, SHARDS beside it, and SHARDS instead of it.
    #[test]
    fn streamed_report_equals_the_held_one() {
        let mut table = VolumeTable::new();
        for n in ["a", "b", "idle"] {
            table.intern(n);
        }
        let mut x = 11u64;
        let requests: Vec<Request> = (0..60_000u64)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let hot = x >> 63 == 1;
                let block = (x >> 30) % if hot { 50 } else { 40_000 };
                Request {
                    time_ns: i * 4_000_000_000, // 4 s apart: 2.8 days
                    volume: ((x >> 20) % 2) as u32,
                    op: if (x >> 10).is_multiple_of(4) { Op::Write } else { Op::Read },
                    offset: block * 4096 + (x >> 5) % 2 * 100,
                    length: 4096 * (1 + (x >> 8) as u32 % 2),
                }
            })
            .collect();
        let trace = Trace::new(requests, table);
        let names = trace.volumes.names().to_vec();
        for (exact, shards, sample) in
            [(true, None, None), (true, Some(0.1), None), (false, None, Some(0.25))]
        {
            let cfg = AnalyzeConfig {
                exact,
                shards_rate: shards,
                sample_rate: sample,
                bins: 100,
                ..AnalyzeConfig::default()
            };
            let held = analyze(&trace, &cfg).unwrap();
            let mut census = AnalyzeCensus::new(cfg.block_size);
            trace.requests.iter().for_each(|r| census.push(r));
            let streamed = analyze_stream::<ShardsError>(
                &census,
                &names,
                &cfg,
                trace.requests.iter().map(|r| Ok(*r)),
            )
            .unwrap();
            assert_eq!(held.volumes.len(), 3);
            assert_eq!(held.whole.popularity.days.len(), 3);
            assert!(held.whole.summary.block_accesses > 2 * CHUNK as u64);
            assert_eq!(held.whole.reuse.is_some(), exact || sample.is_some());
            assert_eq!(streamed, held, "exact {exact}, shards {shards:?}, sample {sample:?}");
        }
    }
}
