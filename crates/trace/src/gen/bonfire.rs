//! A multi-day workload with the reaccess patterns of Bonfire (Zhang et al., FAST 2013,
//! section 3): hourly reaccesses, a daily job, and one-off accesses.
//!
//! Two streams are merged by time:
//!
//! - the *background* stream issues `common.rate` one-block requests per second for `days`
//!   days. Each request is, independently, an *hourly reaccess* with probability `hourly`
//!   (it re-reads a block the background stream accessed within the last hour, picked by an
//!   age drawn from an exponential distribution of mean `hourly_mean_age_s`, truncated below
//!   one hour, so the most recent blocks are the likeliest: Bonfire Figure 1b), else a
//!   *one-off* access to a block never accessed before (blocks scattered over `blocks` by a
//!   seeded permutation). Hourly reaccesses are reads; one-offs are writes with probability
//!   `common.write_ratio`.
//! - the *daily job* (like a nightly regression test, Bonfire Figure 2): every day at
//!   `daily_hour:00` (UTC) it reads the same `daily_regions` regions of `region_bytes`, each
//!   whole and in address order (spatially clustered, Figure 4), spread evenly over
//!   `daily_minutes` minutes. Its regions lie past the one-off address space.
//!
//! Time stamps start at `start_hour:00` UTC on 2007-02-22 (the MSR-Cambridge traces start at
//! 5 PM that day), so written as MSR-Cambridge CSV the wall-clock hours are right.

use super::{one_block, single_volume, Common, OpMix, Scramble};
use crate::{Op, Request, Trace, TraceError};
use rand::Rng;
use std::collections::VecDeque;

/// 2007-02-22 00:00:00 UTC in nanoseconds since the Unix epoch.
pub const MSR_START_DAY_NS: u64 = 1_172_102_400 * 1_000_000_000;
const HOUR_NS: u64 = 3_600_000_000_000;

/// Configuration of [`bonfire`].
#[derive(Clone, Debug, PartialEq)]
pub struct BonfireConfig {
    /// Days of trace (may be fractional).
    pub days: f64,
    /// Wall-clock hour (UTC) of the first request.
    pub start_hour: u32,
    /// Probability that a background request is an hourly reaccess, in [0, 1].
    pub hourly: f64,
    /// Mean age of the block an hourly reaccess re-reads, in seconds.
    pub hourly_mean_age_s: f64,
    /// Regions the daily job reads every day (0: no daily job).
    pub daily_regions: u64,
    /// Wall-clock hour (UTC) the daily job starts.
    pub daily_hour: u32,
    /// Minutes the daily job takes.
    pub daily_minutes: u32,
    /// Region size of the daily job in bytes (a multiple of the block size).
    pub region_bytes: u64,
    /// One-off address space in blocks.
    pub blocks: u64,
    /// Volume name.
    pub volume: String,
    /// Seed, block size, background rate, write ratio of one-offs.
    pub common: Common,
}

impl Default for BonfireConfig {
    fn default() -> Self {
        Self {
            days: 7.0,
            start_hour: 17,
            hourly: 0.6,
            hourly_mean_age_s: 600.0,
            daily_regions: 64,
            daily_hour: 2,
            daily_minutes: 30,
            region_bytes: 1 << 20,
            blocks: 1 << 28,
            volume: "bonfire".into(),
            common: Common { rate: 2.0, ..Common::default() },
        }
    }
}

/// The trace of `c`, sorted by time.
pub fn bonfire(c: &BonfireConfig) -> Result<Trace, TraceError> {
    c.common.validate(c.blocks)?;
    let bad = |m: String| Err(TraceError::Invalid(m));
    if !(c.days > 0.0 && c.days.is_finite()) {
        return bad(format!("days must be positive, got {}", c.days));
    }
    if !(0.0..=1.0).contains(&c.hourly) {
        return bad(format!("the hourly share must be in [0, 1], got {}", c.hourly));
    }
    if c.hourly_mean_age_s.is_nan() || c.hourly_mean_age_s <= 0.0 {
        return bad(format!("the hourly mean age must be positive, got {}", c.hourly_mean_age_s));
    }
    if c.start_hour > 23 || c.daily_hour > 23 {
        return bad("hours must be in 0..=23".into());
    }
    let bs = c.common.block_size;
    if c.region_bytes < bs || !c.region_bytes.is_multiple_of(bs) {
        return bad(format!(
            "region size {} is not a multiple of the block size {bs}",
            c.region_bytes
        ));
    }
    if c.daily_regions > 0 && c.daily_minutes == 0 {
        return bad("the daily job needs at least one minute".into());
    }
    let bpr = c.region_bytes / bs;
    let t0 = MSR_START_DAY_NS + c.start_hour as u64 * HOUR_NS;
    let span_ns = (c.days * 24.0 * HOUR_NS as f64) as u64;
    let (mut rng, ops_rng) = c.common.rngs();
    let mut ops = OpMix::new(c.common.write_ratio, ops_rng);
    let scramble = Scramble::new(c.blocks, c.common.seed);
    // Daily job regions: distinct random regions among 4x as many past the one-off space.
    let first_region = c.blocks.div_ceil(bpr);
    let pool = Scramble::new(4 * c.daily_regions.max(1), c.common.seed ^ 0xda11);
    let mut regions: Vec<u64> =
        (0..c.daily_regions).map(|i| first_region + pool.apply(i)).collect();
    regions.sort_unstable();
    let job_blocks: Vec<u64> = regions.iter().flat_map(|&r| r * bpr..(r + 1) * bpr).collect();

    let n_bg = (span_ns as f64 / 1e9 * c.common.rate) as u64;
    let mut bg = Vec::with_capacity(n_bg as usize);
    let mut recent: VecDeque<(u64, u64)> = VecDeque::new();
    let mut next_new = 0u64;
    for i in 0..n_bg {
        let t = c.common.time_ns(i);
        while recent.front().is_some_and(|&(rt, _)| rt + HOUR_NS < t) {
            recent.pop_front();
        }
        let hourly = !recent.is_empty() && rng.gen_bool(c.hourly);
        let (block, op) = if hourly {
            let u: f64 = rng.gen::<f64>();
            let age =
                (-u.max(1e-300).ln() * c.hourly_mean_age_s * 1e9).min((HOUR_NS - 1) as f64) as u64;
            let target = t.saturating_sub(age);
            // The newest access at or before `target` (or the oldest one kept).
            let idx = recent.partition_point(|&(rt, _)| rt <= target);
            (recent[idx.saturating_sub(1)].1, Op::Read)
        } else {
            let b = scramble.apply(next_new % c.blocks);
            next_new += 1;
            (b, ops.next_op())
        };
        recent.push_back((t, block));
        bg.push(one_block(t0 + t, 0, op, block, bs));
    }
    // The daily job, at daily_hour every day the trace covers.
    let mut job = Vec::new();
    if !job_blocks.is_empty() {
        let first_day_start = MSR_START_DAY_NS;
        let mut day = 0u64;
        loop {
            let start = first_day_start + day * 24 * HOUR_NS + c.daily_hour as u64 * HOUR_NS;
            if start >= t0 + span_ns {
                break;
            }
            let step = c.daily_minutes as u64 * 60_000_000_000 / job_blocks.len() as u64;
            for (j, &b) in job_blocks.iter().enumerate() {
                let t = start + j as u64 * step.max(1);
                if t >= t0 && t < t0 + span_ns {
                    job.push(one_block(t, 0, Op::Read, b, bs));
                }
            }
            day += 1;
        }
    }
    let mut requests = Vec::with_capacity(bg.len() + job.len());
    let (mut a, mut b) = (bg.into_iter().peekable(), job.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.time_ns <= y.time_ns,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let r: Option<Request> = if take_a { a.next() } else { b.next() };
        requests.extend(r);
    }
    Ok(Trace::new(requests, single_volume(&c.volume)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(hourly: f64, daily_regions: u64) -> BonfireConfig {
        BonfireConfig {
            days: 3.0,
            hourly,
            daily_regions,
            common: Common { rate: 0.5, seed: 3, ..Common::default() },
            ..BonfireConfig::default()
        }
    }

    #[test]
    fn hourly_reaccesses_reuse_recent_blocks_and_one_offs_are_new() {
        let t = bonfire(&small(0.7, 0)).unwrap();
        let n = t.requests.len();
        assert_eq!(n, (3.0 * 86400.0 * 0.5) as usize);
        let mut last = std::collections::HashMap::new();
        let (mut re, mut within_hour) = (0, 0);
        for r in &t.requests {
            if let Some(prev) = last.insert(r.offset, r.time_ns) {
                re += 1;
                within_hour += (r.time_ns - prev <= HOUR_NS) as usize;
            }
        }
        let share = re as f64 / n as f64;
        assert!((share - 0.7).abs() < 0.02, "reaccess share {share}");
        assert_eq!(within_hour, re);
        assert!(t.requests.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        assert_eq!(t.requests[0].time_ns, MSR_START_DAY_NS + 17 * HOUR_NS);
    }

    #[test]
    fn the_daily_job_reads_the_same_regions_at_the_same_hour_every_day() {
        let c = small(0.0, 4);
        let t = bonfire(&c).unwrap();
        let bs = 4096;
        let job: Vec<&Request> = t.requests.iter().filter(|r| r.offset / bs >= c.blocks).collect();
        // 3 days from 17:00: the job runs at 02:00 on days 2, 3 and 4 (1-based) = 3 times.
        assert_eq!(job.len(), 3 * 4 * 256);
        assert!(job.iter().all(|r| (r.time_ns / HOUR_NS) % 24 == 2));
        let day = |r: &Request| r.time_ns / (24 * HOUR_NS);
        let first: Vec<u64> =
            job.iter().filter(|r| day(r) == day(job[0])).map(|r| r.offset).collect();
        let last: Vec<u64> =
            job.iter().filter(|r| day(r) == day(job[job.len() - 1])).map(|r| r.offset).collect();
        assert_eq!(first, last);
        assert!(bonfire(&BonfireConfig { hourly: 2.0, ..c }).is_err());
    }
}
