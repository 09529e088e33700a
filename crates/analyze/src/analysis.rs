//! One analysis of a trace or volume: what to compute ([`AnalyzeConfig`]) and what comes out
//! ([`Analysis`]: Bonfire's Table 1 and Figures 1-4, SieveStore's popularity, the LRU
//! miss-ratio curves). Types only, with the report's view of a reuse histogram; computed by
//! [`crate::analyzer`], gathered per volume by [`crate::report`].
//!
//! Imports only the result types of the single analyses (summary, temporal, spatial,
//! popularity, miss-ratio curve, reuse histogram), never what combines them.

use crate::popularity::DEFAULT_BINS;
use crate::{MissRatioCurve, Popularity, ReuseHistogram, Spatial, Summary, Temporal};
use serde::{Deserialize, Serialize};

/// What to compute.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalyzeConfig {
    /// Block size in bytes (4 KiB in Bonfire).
    pub block_size: u64,
    /// Region size of the spatial-clustering analysis in bytes (1 MiB in Bonfire).
    pub region_bytes: u64,
    /// Popularity bins per day (10,000 in SieveStore).
    pub bins: usize,
    /// Points of the miss-ratio curve (log-spaced cache sizes from 1 block to the WSS).
    pub mrc_points: usize,
    /// Compute the exact reuse distances and miss-ratio curve.
    pub exact: bool,
    /// Also estimate the miss-ratio curve with SHARDS at this sampling rate.
    pub shards_rate: Option<f64>,
    /// Compute reuse distances and the miss-ratio curve from a SHARDS sample at this rate
    /// instead of exactly (state about `rate` times the exact pass's); the exact pass and
    /// `shards_rate` are then not run.
    pub sample_rate: Option<f64>,
    /// Analyze each volume on its own too (always true in effect for one volume: its
    /// analysis is the whole's).
    pub per_volume: bool,
}

impl Default for AnalyzeConfig {
    fn default() -> Self {
        Self {
            block_size: 4096,
            region_bytes: 1 << 20,
            bins: DEFAULT_BINS,
            mrc_points: 64,
            exact: true,
            shards_rate: None,
            sample_rate: None,
            per_volume: true,
        }
    }
}

/// The miss-ratio curves of one analysis.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mrc {
    /// Exact LRU curve (when computed).
    pub exact: Option<MissRatioCurve>,
    /// SHARDS estimate (when asked for).
    pub shards: Option<MissRatioCurve>,
    /// SHARDS sampling rate.
    pub shards_rate: Option<f64>,
    /// Accesses SHARDS sampled.
    pub shards_sampled: Option<u64>,
    /// Mean absolute error of SHARDS against exact over the curve's sizes (both computed).
    pub shards_mean_abs_error: Option<f64>,
    /// Largest absolute error of SHARDS against exact.
    pub shards_max_abs_error: Option<f64>,
}

/// Reuse distances for the report: Figure 3's groups and the exact distribution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reuse {
    /// Figure 3 group names.
    pub buckets: Vec<String>,
    /// Reaccesses in each group.
    pub reaccess_buckets: [u64; 4],
    /// Figure 3: share (%) of reaccesses in each group.
    pub reaccess_bucket_percent: [f64; 4],
    /// Median reuse distance of reaccesses in blocks.
    pub reaccess_median_blocks: u64,
    /// First accesses (no reuse distance).
    pub cold: u64,
    /// The full distribution over all accesses: `(distance in blocks, accesses)` for every
    /// distance that occurs.
    pub distribution: Vec<(u64, u64)>,
    /// When set, everything above comes from a SHARDS sample at this rate: distances are
    /// scaled by `1 / rate`, counts are of the sampled accesses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_rate: Option<f64>,
}

/// Every analysis of one trace or volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Table 1.
    pub summary: Summary,
    /// Figures 1a, 1b, 2.
    pub temporal: Temporal,
    /// Figure 3 (when exact analysis ran).
    pub reuse: Option<Reuse>,
    /// Figure 4.
    pub spatial: Spatial,
    /// SieveStore Figure 2.
    pub popularity: Popularity,
    /// LRU miss-ratio curves.
    pub mrc: Mrc,
}

impl Reuse {
    /// The report's reuse section of `h` (`sample_rate`: a SHARDS histogram's rate).
    pub fn of(h: &ReuseHistogram, sample_rate: Option<f64>) -> Self {
        Reuse {
            buckets: crate::REUSE_BUCKETS.iter().map(|b| b.0.to_string()).collect(),
            reaccess_buckets: h.reaccess_buckets,
            reaccess_bucket_percent: h.reaccess_bucket_percent,
            reaccess_median_blocks: h.reaccess_median_blocks,
            cold: h.cold,
            distribution: h
                .all
                .iter()
                .enumerate()
                .filter(|x| *x.1 > 0)
                .map(|(d, &n)| (d as u64, n))
                .collect(),
            sample_rate,
        }
    }
}
