//! Every analysis of a trace, per volume and for the whole: what `ember analyze` prints.
//!
//! Imports the [`Analyzer`] and the types of [`crate::analysis`] it fills.

use crate::analysis::{Analysis, AnalyzeConfig};
use crate::analyzer::Analyzer;
use crate::dense::DenseIndex;
use crate::popularity::volume_shares;
use crate::reuse::DENSE_SLOTS_PER_KEY;
use crate::{Accesses, ShardsError, VolumeShare};
use ember_trace::Trace;
use serde::{Deserialize, Serialize};

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
