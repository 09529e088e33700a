//! Temporal reaccess behaviour (Bonfire section 3.2).
//!
//! For every reaccess (a read of a block accessed before), the gap since the block's previous
//! access puts it in a class: *hourly* (gap ≤ 1 h), *daily* (23 h ≤ gap ≤ 25 h), *other*
//! (1 h < gap < 23 h, or gap > 25 h). A block belongs to every class one of its reaccesses
//! falls in, so a block can be in several (Figure 1a). Figure 1b is the recency profile of
//! hourly reaccesses (share of them by gap, in 10-minute bins); Figure 2 counts daily
//! reaccesses by wall-clock hour of day (UTC of the time stamps) for each day of the trace.

use crate::Accesses;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// One hour in nanoseconds.
pub const HOUR_NS: u64 = 3_600_000_000_000;
/// One day in nanoseconds.
pub const DAY_NS: u64 = 24 * HOUR_NS;
/// Width of a Figure 1b bin: 10 minutes.
pub const RECENCY_BIN_NS: u64 = HOUR_NS / 6;

/// A temporal reaccess class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Within one hour of the previous access.
    Hourly,
    /// 23 to 25 hours after the previous access.
    Daily,
    /// Anything else: between 1 and 23 hours, or over 25 hours.
    Other,
}

impl Class {
    /// All classes, in the paper's order.
    pub const ALL: [Class; 3] = [Class::Hourly, Class::Daily, Class::Other];

    /// The class of a reaccess `gap_ns` after the previous access.
    pub fn of_gap(gap_ns: u64) -> Self {
        if gap_ns <= HOUR_NS {
            Class::Hourly
        } else if (23 * HOUR_NS..=25 * HOUR_NS).contains(&gap_ns) {
            Class::Daily
        } else {
            Class::Other
        }
    }

    /// Bit of this class in a block's class mask.
    pub fn bit(self) -> u8 {
        match self {
            Class::Hourly => 1,
            Class::Daily => 2,
            Class::Other => 4,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Class::Hourly => "hourly",
            Class::Daily => "daily",
            Class::Other => "other",
        }
    }
}

/// Per reaccessed block, the mask of the classes ([`Class::bit`]) its reaccesses fall in.
pub type BlockClasses = FxHashMap<u64, u8>;

/// Bonfire Figures 1a, 1b and 2 for one trace or volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Temporal {
    /// Blocks reaccessed at least once.
    pub reaccessed_blocks: u64,
    /// Reaccessed blocks with at least one hourly / daily / other reaccess.
    pub class_blocks: [u64; 3],
    /// Figure 1a: `100 * class_blocks / reaccessed_blocks` (may sum above 100).
    pub class_percent: [f64; 3],
    /// Reaccesses in each class.
    pub class_reaccesses: [u64; 3],
    /// Figure 1b: share (%) of hourly reaccesses whose gap is in each 10-minute bin
    /// (0–10 min, ..., 50–60 min; the last bin includes exactly 60 min).
    pub hourly_recency_percent: [f64; 6],
    /// Figure 2: `daily_by_hour[d][h]` is the number of daily reaccesses on day `d` of the
    /// trace (days counted from the first access) at wall-clock hour `h`.
    pub daily_by_hour: Vec<[u64; 24]>,
}

impl Temporal {
    /// Figures 1a, 1b and 2 of `a`, and each reaccessed block's class mask.
    pub fn compute(a: &Accesses) -> (Self, BlockClasses) {
        let mut p = TemporalPass::default();
        for i in 0..a.len() {
            p.push(a.keys[i], a.times[i], a.writes[i]);
        }
        p.finish()
    }
}

/// [`Temporal`] gathered access by access: per distinct block its last access time, and per
/// reaccessed block its classes.
#[derive(Clone, Debug, Default)]
pub struct TemporalPass {
    last: FxHashMap<u64, u64>,
    classes: BlockClasses,
    t: Temporal,
    recency: [u64; 6],
    /// Time of the first access (days count from it).
    t0: Option<u64>,
}

impl TemporalPass {
    /// Count one block access of `k` at `now` (`w`: a write).
    #[inline]
    pub fn push(&mut self, k: u64, now: u64, w: bool) {
        let t0 = *self.t0.get_or_insert(now);
        let prev = self.last.insert(k, now);
        let Some(prev) = prev else { return };
        if w {
            return;
        }
        let t = &mut self.t;
        let gap = now.saturating_sub(prev);
        let c = Class::of_gap(gap);
        *self.classes.entry(k).or_insert(0) |= c.bit();
        t.class_reaccesses[c as usize] += 1;
        match c {
            Class::Hourly => {
                self.recency[((gap / RECENCY_BIN_NS) as usize).min(5)] += 1;
            }
            Class::Daily => {
                let day = ((now - t0.min(now)) / DAY_NS) as usize;
                if t.daily_by_hour.len() <= day {
                    t.daily_by_hour.resize(day + 1, [0; 24]);
                }
                t.daily_by_hour[day][((now / HOUR_NS) % 24) as usize] += 1;
            }
            Class::Other => {}
        }
    }

    /// The figures, and each reaccessed block's classes (for [`crate::spatial`]).
    pub fn finish(self) -> (Temporal, BlockClasses) {
        let (mut t, classes, recency) = (self.t, self.classes, self.recency);
        t.reaccessed_blocks = classes.len() as u64;
        for mask in classes.values() {
            for c in Class::ALL {
                t.class_blocks[c as usize] += (mask & c.bit() != 0) as u64;
            }
        }
        for c in 0..3 {
            t.class_percent[c] = percent(t.class_blocks[c], t.reaccessed_blocks);
        }
        let hourly: u64 = recency.iter().sum();
        for (b, &n) in recency.iter().enumerate() {
            t.hourly_recency_percent[b] = percent(n, hourly);
        }
        (t, classes)
    }
}

pub(crate) fn percent(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::{Op, Request};

    const MIN: u64 = 60_000_000_000;

    fn acc(list: &[(u64, u64, Op)]) -> Accesses {
        let reqs: Vec<Request> = list
            .iter()
            .map(|&(t, b, op)| Request {
                time_ns: t,
                volume: 0,
                op,
                offset: b * 4096,
                length: 4096,
            })
            .collect();
        Accesses::from_requests(reqs.iter(), 4096)
    }

    #[test]
    fn bonfire_figure1a_30_min_is_hourly_24_h_is_daily_5_h_is_other() {
        let a = acc(&[
            (0, 1, Op::Read),
            (30 * MIN, 1, Op::Read), // hourly (30 min)
            (0, 2, Op::Write),
            (24 * 60 * MIN, 2, Op::Read), // daily (24 h, read after write)
            (0, 3, Op::Read),
            (5 * 60 * MIN, 3, Op::Read),            // other (5 h)
            (5 * 60 * MIN + 10 * MIN, 3, Op::Read), // hourly again: block 3 in two classes
            (0, 4, Op::Read),
            (26 * 60 * MIN, 4, Op::Write), // a write is not a reaccess
            (0, 5, Op::Read),
        ]);
        let (t, classes) = Temporal::compute(&a);
        assert_eq!(t.reaccessed_blocks, 3);
        assert_eq!(t.class_blocks, [2, 1, 1]);
        assert_eq!(t.class_reaccesses, [2, 1, 1]);
        assert_eq!(classes[&1], Class::Hourly.bit());
        assert_eq!(classes[&2], Class::Daily.bit());
        assert_eq!(classes[&3], Class::Hourly.bit() | Class::Other.bit());
        assert!((t.class_percent[0] - 200.0 / 3.0).abs() < 1e-9);
        // Figure 1b: one hourly gap of 30 min (bin 3), one of 10 min (bin 1).
        assert_eq!(t.hourly_recency_percent, [0.0, 50.0, 0.0, 50.0, 0.0, 0.0]);
        // Figure 2: the daily reaccess is on day 1 at wall-clock hour 0 (t = 24 h).
        assert_eq!(t.daily_by_hour.len(), 2);
        assert_eq!(t.daily_by_hour[1][0], 1);
    }

    #[test]
    fn class_boundaries() {
        assert_eq!(Class::of_gap(HOUR_NS), Class::Hourly);
        assert_eq!(Class::of_gap(HOUR_NS + 1), Class::Other);
        assert_eq!(Class::of_gap(23 * HOUR_NS - 1), Class::Other);
        assert_eq!(Class::of_gap(23 * HOUR_NS), Class::Daily);
        assert_eq!(Class::of_gap(25 * HOUR_NS), Class::Daily);
        assert_eq!(Class::of_gap(25 * HOUR_NS + 1), Class::Other);
    }
}
