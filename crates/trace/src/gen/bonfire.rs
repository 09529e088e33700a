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
use crate::{Op, Request, Trace, TraceError, VolumeTable};
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

/// The trace of `c`, sorted by time, in memory ([`BonfireStream`] collected).
pub fn bonfire(c: &BonfireConfig) -> Result<Trace, TraceError> {
    let s = BonfireStream::new(c)?;
    let volumes = s.volumes();
    Ok(super::collect(s, volumes))
}

/// The requests of a [`BonfireConfig`], generated one at a time in time order: the
/// background stream and the daily job merged as they come (on a tie, background first).
/// Memory: the background's last hour of accesses (what an hourly reaccess picks from: 16
/// bytes a request, `rate` x 3,600 of them) and the daily job's block list, whatever the
/// number of days.
#[derive(Clone, Debug)]
pub struct BonfireStream {
    // The background stream.
    rng: crate::gen::GenRng,
    ops: OpMix,
    scramble: Scramble,
    recent: VecDeque<(u64, u64)>,
    next_new: u64,
    hourly: f64,
    hourly_mean_age_s: f64,
    blocks: u64,
    common: Common,
    t0: u64,
    bg_next: u64,
    bg_total: u64,
    // The daily job: its blocks, the day and position of its next request.
    job_blocks: Vec<u64>,
    daily_hour: u32,
    daily_minutes: u32,
    span_end: u64,
    day: u64,
    j: usize,
    job_done: bool,
    // The next request of each stream, not yet handed out.
    bg_peek: Option<Request>,
    job_peek: Option<Request>,
    remaining: u64,
    volume: String,
}

impl BonfireStream {
    /// The stream of `c`, or why `c` is invalid.
    pub fn new(c: &BonfireConfig) -> Result<Self, TraceError> {
        c.common.validate(c.blocks)?;
        let bad = |m: String| Err(TraceError::Invalid(m));
        if !(c.days > 0.0 && c.days.is_finite()) {
            return bad(format!("days must be positive, got {}", c.days));
        }
        if !(0.0..=1.0).contains(&c.hourly) {
            return bad(format!("the hourly share must be in [0, 1], got {}", c.hourly));
        }
        if c.hourly_mean_age_s.is_nan() || c.hourly_mean_age_s <= 0.0 {
            return bad(format!(
                "the hourly mean age must be positive, got {}",
                c.hourly_mean_age_s
            ));
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
        let (rng, ops_rng) = c.common.rngs();
        // Daily job regions: distinct random regions among 4x as many past the one-off space.
        let first_region = c.blocks.div_ceil(bpr);
        let pool = Scramble::new(4 * c.daily_regions.max(1), c.common.seed ^ 0xda11);
        let mut regions: Vec<u64> =
            (0..c.daily_regions).map(|i| first_region + pool.apply(i)).collect();
        regions.sort_unstable();
        let job_blocks: Vec<u64> = regions.iter().flat_map(|&r| r * bpr..(r + 1) * bpr).collect();
        let bg_total = (span_ns as f64 / 1e9 * c.common.rate) as u64;
        let mut s = Self {
            rng,
            ops: OpMix::new(c.common.write_ratio, ops_rng),
            scramble: Scramble::new(c.blocks, c.common.seed),
            recent: VecDeque::new(),
            next_new: 0,
            hourly: c.hourly,
            hourly_mean_age_s: c.hourly_mean_age_s,
            blocks: c.blocks,
            common: c.common.clone(),
            t0,
            bg_next: 0,
            bg_total,
            job_done: job_blocks.is_empty(),
            job_blocks,
            daily_hour: c.daily_hour,
            daily_minutes: c.daily_minutes,
            span_end: t0 + span_ns,
            day: 0,
            j: 0,
            bg_peek: None,
            job_peek: None,
            remaining: 0,
            volume: c.volume.clone(),
        };
        s.remaining = bg_total + s.clone().job_count();
        s.bg_peek = s.next_background();
        s.job_peek = s.next_job();
        Ok(s)
    }

    /// The volume table: the one volume, id 0.
    pub fn volumes(&self) -> VolumeTable {
        single_volume(&self.volume)
    }

    /// Requests the daily job has left (counted without keeping them).
    fn job_count(&mut self) -> u64 {
        let mut n = 0;
        while self.next_job().is_some() {
            n += 1;
        }
        n
    }

    /// The background stream's next request.
    fn next_background(&mut self) -> Option<Request> {
        if self.bg_next >= self.bg_total {
            return None;
        }
        let t = self.common.time_ns(self.bg_next);
        self.bg_next += 1;
        while self.recent.front().is_some_and(|&(rt, _)| rt + HOUR_NS < t) {
            self.recent.pop_front();
        }
        let hourly = !self.recent.is_empty() && self.rng.gen_bool(self.hourly);
        let (block, op) = if hourly {
            let u: f64 = self.rng.gen::<f64>();
            let age = (-u.max(1e-300).ln() * self.hourly_mean_age_s * 1e9).min((HOUR_NS - 1) as f64)
                as u64;
            let target = t.saturating_sub(age);
            // The newest access at or before `target` (or the oldest one kept).
            let idx = self.recent.partition_point(|&(rt, _)| rt <= target);
            (self.recent[idx.saturating_sub(1)].1, Op::Read)
        } else {
            let b = self.scramble.apply(self.next_new % self.blocks);
            self.next_new += 1;
            (b, self.ops.next_op())
        };
        self.recent.push_back((t, block));
        Some(one_block(self.t0 + t, 0, op, block, self.common.block_size))
    }

    /// The daily job's next request: at `daily_hour` every day the trace covers, its blocks
    /// spread evenly over `daily_minutes`.
    fn next_job(&mut self) -> Option<Request> {
        while !self.job_done {
            let start =
                MSR_START_DAY_NS + self.day * 24 * HOUR_NS + self.daily_hour as u64 * HOUR_NS;
            if start >= self.span_end {
                self.job_done = true;
                return None;
            }
            if self.j >= self.job_blocks.len() {
                self.day += 1;
                self.j = 0;
                continue;
            }
            let step = self.daily_minutes as u64 * 60_000_000_000 / self.job_blocks.len() as u64;
            let t = start + self.j as u64 * step.max(1);
            let b = self.job_blocks[self.j];
            self.j += 1;
            if t >= self.t0 && t < self.span_end {
                return Some(one_block(t, 0, Op::Read, b, self.common.block_size));
            }
        }
        None
    }
}

impl Iterator for BonfireStream {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        let take_bg = match (&self.bg_peek, &self.job_peek) {
            (Some(x), Some(y)) => x.time_ns <= y.time_ns,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let r = if take_bg {
            let next = self.next_background();
            std::mem::replace(&mut self.bg_peek, next)
        } else {
            let next = self.next_job();
            std::mem::replace(&mut self.job_peek, next)
        };
        self.remaining = self.remaining.saturating_sub(1);
        r
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for BonfireStream {}

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

    /// The requests of a fixed configuration (background, writes and the daily job over
    /// parts of three days), pinned by their digest as the generator that held the whole
    /// trace made them: the streamed generator must write the same trace.
    #[test]
    fn the_trace_of_a_fixed_configuration_is_pinned() {
        let c = BonfireConfig {
            days: 2.6,
            hourly: 0.55,
            daily_regions: 3,
            daily_minutes: 7,
            region_bytes: 64 << 10,
            blocks: 1 << 20,
            common: Common { rate: 0.7, seed: 11, write_ratio: 0.3, ..Common::default() },
            ..BonfireConfig::default()
        };
        let t = bonfire(&c).unwrap();
        assert_eq!(
            crate::gen::test_util::digest(t.requests.iter()),
            (13_795_473_912_414_134_853, 157_392)
        );
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
