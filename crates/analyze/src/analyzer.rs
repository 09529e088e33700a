//! Every analysis of one trace or volume, gathered chunk by chunk: [`Analyzer`]. Its state is
//! per distinct block (the last access of each block, the current day's counts, the reuse
//! pass's positions and histogram), never per access, so a trace of any length streams
//! through it; [`crate::report::analyze_accesses`] is one chunk holding every access.
//!
//! Imports the single analyses' passes and the types of [`crate::analysis`]; the report and
//! the stream import it, never the other way.

use crate::analysis::{Analysis, AnalyzeConfig, Mrc, Reuse};
use crate::dense::DenseIndex;
use crate::mrc::log_sizes;
use crate::popularity::PopularityPass;
use crate::reuse::{HistogramBuilder, ReusePass};
use crate::shards::ShardsPass;
use crate::summary::SummaryPass;
use crate::temporal::TemporalPass;
use crate::{Accesses, MissRatioCurve, ShardsError, Spatial};

/// The analyses of one trace or volume in progress.
pub struct Analyzer {
    cfg: AnalyzeConfig,
    requests: u64,
    total_bytes: u64,
    summary: SummaryPass,
    temporal: TemporalPass,
    popularity: PopularityPass,
    /// The exact reuse pass (with [`AnalyzeConfig::exact`], unless sampled).
    exact: Option<(ReusePass, HistogramBuilder)>,
    /// SHARDS for the miss-ratio curve ([`AnalyzeConfig::shards_rate`]), unless sampled.
    shards: Option<ShardsPass>,
    /// SHARDS for reuse distances and the curve ([`AnalyzeConfig::sample_rate`]).
    sampled: Option<ShardsPass>,
}

impl Analyzer {
    /// No access yet. `dense` indexes every key the exact reuse pass will see (`None`: a
    /// hash map; the distances are the same).
    pub fn new(cfg: &AnalyzeConfig, dense: Option<DenseIndex>) -> Result<Self, ShardsError> {
        let sampled = cfg.sample_rate.map(ShardsPass::new).transpose()?;
        let unsampled = sampled.is_none();
        Ok(Self {
            cfg: cfg.clone(),
            requests: 0,
            total_bytes: 0,
            summary: SummaryPass::default(),
            temporal: TemporalPass::default(),
            popularity: PopularityPass::new(cfg.bins),
            exact: (cfg.exact && unsampled)
                .then(|| (ReusePass::new(dense), HistogramBuilder::new())),
            shards: cfg.shards_rate.filter(|_| unsampled).map(ShardsPass::new).transpose()?,
            sampled,
        })
    }

    /// Whether the exact reuse pass runs (and so wants a [`DenseIndex`]).
    pub fn wants_index(cfg: &AnalyzeConfig) -> bool {
        cfg.exact && cfg.sample_rate.is_none()
    }

    /// The next accesses of the trace or volume (in order, `a.block_size` the config's).
    pub fn push(&mut self, a: &Accesses) {
        self.requests += a.requests;
        self.total_bytes += a.total_bytes;
        for i in 0..a.len() {
            let (k, t, w) = (a.keys[i], a.times[i], a.writes[i]);
            self.summary.push(k, w);
            self.temporal.push(k, t, w);
            self.popularity.push(k, t);
        }
        if let Some((pass, hist)) = &mut self.exact {
            pass.push(&a.keys, |i, d| hist.push(d, !a.writes[i]));
        }
        if let Some(s) = &mut self.shards {
            s.push(&a.keys, &a.writes);
        }
        if let Some(s) = &mut self.sampled {
            s.push(&a.keys, &a.writes);
        }
    }

    /// The analysis.
    pub fn finish(self) -> Analysis {
        let cfg = &self.cfg;
        let bs = cfg.block_size.max(1);
        let summary = self.summary.finish(self.requests, self.total_bytes, bs);
        let (temporal, classes) = self.temporal.finish();
        let spatial = Spatial::of(&classes, bs, cfg.region_bytes);
        drop(classes);
        let popularity = self.popularity.finish();
        let sizes = log_sizes(summary.wss_blocks, cfg.mrc_points);
        let mut mrc = Mrc::default();
        let mut reuse = None;
        if let Some((_, hist)) = self.exact {
            let h = hist.finish(bs);
            mrc.exact = Some(MissRatioCurve::exact(&h, &sizes));
            reuse = Some(Reuse::of(&h, None));
        }
        let estimate = match (self.shards, self.sampled) {
            (Some(s), _) => Some((s, cfg.shards_rate, false)),
            (None, Some(s)) => Some((s, cfg.sample_rate, true)),
            (None, None) => None,
        };
        if let Some((pass, rate, for_reuse)) = estimate {
            let (h, n) = pass.finish(bs);
            let curve = MissRatioCurve::exact(&h, &sizes);
            if for_reuse {
                reuse = Some(Reuse::of(&h, rate));
            }
            if let Some(e) = &mrc.exact {
                let errs: Vec<f64> = e
                    .miss_ratio
                    .iter()
                    .zip(&curve.miss_ratio)
                    .map(|(x, y)| (x - y).abs())
                    .collect();
                mrc.shards_mean_abs_error =
                    Some(errs.iter().sum::<f64>() / errs.len().max(1) as f64);
                mrc.shards_max_abs_error = Some(errs.iter().copied().fold(0.0, f64::max));
            }
            mrc.shards = Some(curve);
            mrc.shards_rate = rate;
            mrc.shards_sampled = Some(n);
        }
        Analysis { summary, temporal, reuse, spatial, popularity, mrc }
    }
}
