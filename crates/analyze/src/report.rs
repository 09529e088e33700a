//! Every analysis of a trace, per volume and for the whole: what `ember analyze` prints.

use crate::analyzer::Analyzer;
use crate::dense::DenseIndex;
use crate::popularity::{volume_shares, DEFAULT_BINS};
use crate::reuse::DENSE_SLOTS_PER_KEY;
use crate::{
    Accesses, MissRatioCurve, Popularity, ShardsError, Spatial, Summary, Temporal, VolumeShare,
};
use ember_trace::Trace;
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

/// One volume's analysis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VolumeAnalysis {
    /// Volume id.
    pub volume: u32,
    /// Volume name.
    pub name: String,
    /// Its analysis.
    pub analysis: Analysis,
}

/// `ember analyze`'s document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceReport {
    /// Block size in bytes.
    pub block_size: u64,
    /// The whole trace.
    pub whole: Analysis,
    /// Each volume.
    pub volumes: Vec<VolumeAnalysis>,
    /// Each volume's share of the top 1 % blocks.
    pub top1_volume_share: Vec<VolumeShare>,
}

impl TraceReport {
    /// The analyses to show, named: each volume's, then the whole trace's as `(all)` unless
    /// there is exactly one volume (whose analysis is then the whole's).
    pub fn named(&self) -> Vec<(String, &Analysis)> {
        let mut v: Vec<(String, &Analysis)> =
            self.volumes.iter().map(|x| (x.name.clone(), &x.analysis)).collect();
        if self.volumes.len() != 1 {
            v.push(("(all)".into(), &self.whole));
        }
        v
    }
}

/// Analyze one access list.
pub fn analyze_accesses(a: &Accesses, cfg: &AnalyzeConfig) -> Result<Analysis, ShardsError> {
    let cfg = AnalyzeConfig { block_size: a.block_size, ..cfg.clone() };
    let dense = if Analyzer::wants_index(&cfg) {
        DenseIndex::of(&a.keys, DENSE_SLOTS_PER_KEY)
    } else {
        None
    };
    let mut an = Analyzer::new(&cfg, dense)?;
    an.push(a);
    Ok(an.finish())
}

/// Analyze `trace`: the whole and (with [`AnalyzeConfig::per_volume`]) each volume.
pub fn analyze(trace: &Trace, cfg: &AnalyzeConfig) -> Result<TraceReport, ShardsError> {
    let all = Accesses::from_trace(trace, cfg.block_size);
    let whole = analyze_accesses(&all, cfg)?;
    let names = trace.volumes.names();
    let top1_volume_share = volume_shares(&all, names);
    drop(all);
    let mut volumes = Vec::new();
    if names.len() == 1 {
        volumes.push(VolumeAnalysis { volume: 0, name: names[0].clone(), analysis: whole.clone() });
    } else if cfg.per_volume {
        for (v, name) in names.iter().enumerate() {
            let a = Accesses::from_volume(trace, v as u32, cfg.block_size);
            volumes.push(VolumeAnalysis {
                volume: v as u32,
                name: name.clone(),
                analysis: analyze_accesses(&a, cfg)?,
            });
        }
    }
    Ok(TraceReport { block_size: cfg.block_size, whole, volumes, top1_volume_share })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::{Op, Request, VolumeTable};

    /// `volumes` volumes, volume `v` reading blocks `v*100..v*100+10+v`.
    fn trace(volumes: u32) -> Trace {
        let mut table = VolumeTable::new();
        let mut requests = Vec::new();
        for v in 0..volumes {
            table.intern(&format!("vol{v}"));
            for b in 0..10 + u64::from(v) {
                let offset = (u64::from(v) * 100 + b) * 4096;
                let time_ns = requests.len() as u64;
                requests.push(Request { time_ns, volume: v, op: Op::Read, offset, length: 4096 });
            }
        }
        Trace::new(requests, table)
    }

    #[test]
    fn named_lists_each_volume_then_the_whole() {
        let cfg = AnalyzeConfig { mrc_points: 2, bins: 10, ..AnalyzeConfig::default() };
        let r = analyze(&trace(2), &cfg).unwrap();
        let named = r.named();
        let names: Vec<&str> = named.iter().map(|n| n.0.as_str()).collect();
        assert_eq!(names, ["vol0", "vol1", "(all)"]);
        assert_eq!(named[1].1.summary, r.volumes[1].analysis.summary);
        assert_eq!(named[2].1, &r.whole);
        assert_ne!(named[0].1.summary, named[1].1.summary);
        // One volume: its analysis is the whole's, listed once.
        let one = analyze(&trace(1), &cfg).unwrap();
        let names: Vec<String> = one.named().into_iter().map(|n| n.0).collect();
        assert_eq!(names, ["vol0"]);
        // The whole only (no per-volume analyses): just `(all)`.
        let whole = analyze(&trace(3), &AnalyzeConfig { per_volume: false, ..cfg }).unwrap();
        let names: Vec<String> = whole.named().into_iter().map(|n| n.0).collect();
        assert_eq!(names, ["(all)"]);
    }
}
