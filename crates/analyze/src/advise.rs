//! Bonfire's algorithm decision tree (Figure 8, section 4.3.3) over an [`Analysis`].
//!
//! - daily reaccesses dominate and happen at the same wall-clock hour every day: **First-K**,
//!   with the cache started just before that hour ("First-K works best when the cache is
//!   started just before the recurring daily event");
//! - hourly reaccesses dominate: **Last-K**;
//! - otherwise, small reuse distances (most reaccesses within 10 MB): **Last-K**;
//! - otherwise (big reuse distances): **First-K** when the warmup region is small (4 KiB),
//!   **Last-K** (Top-K does as well) when it is big (1 MiB).

use crate::Analysis;
use serde::{Deserialize, Serialize};

/// A warmup algorithm of Bonfire section 4.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Algorithm {
    /// The last K regions accessed.
    #[serde(rename = "last-k")]
    LastK,
    /// The first K regions of the previous day.
    #[serde(rename = "first-k")]
    FirstK,
    /// The K most frequently accessed regions.
    #[serde(rename = "top-k")]
    TopK,
    /// K random regions.
    #[serde(rename = "random-k")]
    RandomK,
}

impl Algorithm {
    /// The paper's name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::LastK => "Last-K",
            Algorithm::FirstK => "First-K",
            Algorithm::TopK => "Top-K",
            Algorithm::RandomK => "Random-K",
        }
    }
}

/// A recommendation and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Wall-clock hour (UTC) to start the new cache just before, for First-K on a daily
    /// pattern.
    pub start_before_hour: Option<u8>,
    /// The branch of Figure 8 taken, in words.
    pub reason: String,
}

/// Share of daily reaccesses within the busiest [`SAME_HOURS`] wall-clock hours from which the
/// daily pattern is taken to recur at the same time every day.
pub const SAME_HOUR_SHARE: f64 = 0.5;
/// Width in hours of the window of [`SAME_HOUR_SHARE`].
pub const SAME_HOURS: usize = 3;
/// Share of reaccesses within 10 MB above which reuse distances are "small".
pub const SMALL_REUSE_SHARE: f64 = 50.0;

/// Figure 8 over `a`, for a warmup region of `region_bytes`.
pub fn advise(a: &Analysis, region_bytes: u64) -> Advice {
    let [hourly, daily, other] = a.temporal.class_percent;
    let mut by_hour = [0u64; 24];
    for d in &a.temporal.daily_by_hour {
        for h in 0..24 {
            by_hour[h] += d[h];
        }
    }
    let total: u64 = by_hour.iter().sum();
    // The busiest window of SAME_HOURS consecutive wall-clock hours (wrapping at midnight),
    // earliest first on ties; the daily event starts at its first busy hour.
    let window = |h: usize| (0..SAME_HOURS).map(|i| by_hour[(h + i) % 24]).sum::<u64>();
    let best = (0..24).max_by_key(|&h| (window(h), 24 - h)).unwrap_or(0);
    let peak = window(best);
    let peak_hour =
        (0..SAME_HOURS).map(|i| (best + i) % 24).find(|&h| by_hour[h] > 0).unwrap_or(best);
    let same_hour = total > 0 && peak as f64 >= SAME_HOUR_SHARE * total as f64;
    let classes = format!(
        "hourly {hourly:.1} %, daily {daily:.1} %, other {other:.1} % of reaccessed blocks"
    );
    if daily >= hourly && daily >= other && daily > 0.0 && same_hour {
        return Advice {
            algorithm: Algorithm::FirstK,
            start_before_hour: Some(peak_hour as u8),
            reason: format!(
                "daily reaccesses dominate ({classes}) and {:.0} % of them happen within {SAME_HOURS} h from {peak_hour:02}:00 UTC every day: start the cache just before {peak_hour:02}:00 and warm it with the first regions of the previous day's period",
                100.0 * peak as f64 / total as f64
            ),
        };
    }
    if hourly >= daily && hourly >= other && hourly > 0.0 {
        return Advice {
            algorithm: Algorithm::LastK,
            start_before_hour: None,
            reason: format!("hourly reaccesses dominate ({classes}): warm with the most recently accessed regions"),
        };
    }
    let small = a.reuse.as_ref().map(|r| r.reaccess_bucket_percent[0]);
    match small {
        Some(s) if s >= SMALL_REUSE_SHARE => Advice {
            algorithm: Algorithm::LastK,
            start_before_hour: None,
            reason: format!("no hourly majority ({classes}) but reuse distances are small ({s:.1} % of reaccesses within 10 MB): Last-K"),
        },
        _ => {
            let s = small.map(|s| format!("{s:.1} % of reaccesses within 10 MB")).unwrap_or_else(|| "reuse distance not computed".into());
            if region_bytes < (1 << 20) {
                Advice {
                    algorithm: Algorithm::FirstK,
                    start_before_hour: None,
                    reason: format!("big reuse distances ({s}; {classes}) and a small warmup region ({region_bytes} B): First-K"),
                }
            } else {
                Advice {
                    algorithm: Algorithm::LastK,
                    start_before_hour: None,
                    reason: format!("big reuse distances ({s}; {classes}) and a big warmup region ({region_bytes} B): Last-K (Top-K does as well)"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Reuse;

    fn with(classes: [f64; 3], small: f64, daily_hour: Option<usize>) -> Analysis {
        let mut a = Analysis::default();
        a.temporal.class_percent = classes;
        if let Some(h) = daily_hour {
            let mut d = [0u64; 24];
            d[h] = 90;
            d[(h + 5) % 24] = 10;
            a.temporal.daily_by_hour = vec![d, d];
        }
        a.reuse = Some(Reuse {
            reaccess_bucket_percent: [small, 100.0 - small, 0.0, 0.0],
            ..Default::default()
        });
        a
    }

    #[test]
    fn bonfire_figure8_branches() {
        let d = advise(&with([10.0, 80.0, 10.0], 5.0, Some(2)), 1 << 20);
        assert_eq!((d.algorithm, d.start_before_hour), (Algorithm::FirstK, Some(2)));
        assert_eq!(
            advise(&with([80.0, 10.0, 20.0], 5.0, None), 1 << 20).algorithm,
            Algorithm::LastK
        );
        assert_eq!(advise(&with([10.0, 5.0, 90.0], 70.0, None), 4096).algorithm, Algorithm::LastK);
        assert_eq!(advise(&with([10.0, 5.0, 90.0], 20.0, None), 4096).algorithm, Algorithm::FirstK);
        assert_eq!(
            advise(&with([10.0, 5.0, 90.0], 20.0, None), 1 << 20).algorithm,
            Algorithm::LastK
        );
        // Daily majority without a recurring hour: falls to the reuse-distance branch.
        let mut spread = with([10.0, 80.0, 10.0], 20.0, None);
        spread.temporal.daily_by_hour = vec![[1; 24]];
        // A job over 23:00-01:00 wraps midnight and starts at 23:00.
        let mut late = with([10.0, 80.0, 10.0], 20.0, None);
        let mut d = [0u64; 24];
        (d[23], d[0], d[1], d[12]) = (30, 30, 30, 10);
        late.temporal.daily_by_hour = vec![d];
        assert_eq!(advise(&late, 1 << 20).start_before_hour, Some(23));
        assert_eq!(advise(&spread, 4096).algorithm, Algorithm::FirstK);
        assert_eq!(advise(&spread, 4096).start_before_hour, None);
    }
}
