//! A latency histogram with fixed logarithmic buckets, cheap enough to record every request
//! from many threads at once, and shaped for a Prometheus histogram (cumulative buckets with
//! upper bounds in seconds, a sum and a count).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Number of finite buckets: upper bounds 1 µs · 2^k for k = 0..=24 (1 µs … ≈ 16.8 s).
pub const FINITE_BUCKETS: usize = 25;

/// Upper bound (inclusive) of finite bucket `k`, in nanoseconds.
pub const fn bucket_bound_ns(k: usize) -> u64 {
    1_000u64 << k
}

/// Counts of observed latencies per bucket; the last bucket (index [`FINITE_BUCKETS`]) holds
/// everything above ≈ 16.8 s.
#[derive(Debug)]
pub struct LatencyHistogram {
    buckets: [AtomicU64; FINITE_BUCKETS + 1],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// The bucket an observation of `ns` nanoseconds falls in.
    pub fn bucket_of(ns: u64) -> usize {
        if ns <= bucket_bound_ns(0) {
            return 0;
        }
        // Smallest k with 1000 << k >= ns, i.e. k = ceil(log2(ns / 1000)).
        let units = ns.div_ceil(1_000);
        let k = (64 - (units - 1).leading_zeros()) as usize;
        k.min(FINITE_BUCKETS)
    }

    /// Add every observation of `other` to this histogram (folding per-thread shards).
    pub fn add(&self, other: &LatencyHistogram) {
        for (mine, theirs) in self.buckets.iter().zip(&other.buckets) {
            mine.fetch_add(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.count.fetch_add(other.count(), Ordering::Relaxed);
        self.sum_ns.fetch_add(other.sum_ns(), Ordering::Relaxed);
    }

    /// Record one observation.
    pub fn record(&self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.record_ns(ns);
    }

    /// Record one observation given in nanoseconds.
    pub fn record_ns(&self, ns: u64) {
        self.buckets[Self::bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Sum of all observations in nanoseconds (saturates only after ≈ 584 years in total).
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns.load(Ordering::Relaxed)
    }

    /// Per-bucket counts (not cumulative), `FINITE_BUCKETS + 1` entries.
    pub fn counts(&self) -> Vec<u64> {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }

    /// Prometheus-style buckets: `(upper bound in seconds, cumulative count)`, the last one
    /// with bound `f64::INFINITY`.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        self.counts()
            .into_iter()
            .enumerate()
            .map(|(k, n)| {
                total += n;
                let bound = if k < FINITE_BUCKETS {
                    bucket_bound_ns(k) as f64 / 1e9
                } else {
                    f64::INFINITY
                };
                (bound, total)
            })
            .collect()
    }

    /// Upper bound of the bucket holding the `q`-quantile (0 ≤ q ≤ 1); `None` when empty or
    /// when that bucket is the unbounded last one.
    pub fn quantile_upper_bound(&self, q: f64) -> Option<Duration> {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (k, n) in counts.into_iter().enumerate() {
            seen += n;
            if seen >= rank {
                return (k < FINITE_BUCKETS).then(|| Duration::from_nanos(bucket_bound_ns(k)));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_microseconds() {
        assert_eq!(LatencyHistogram::bucket_of(0), 0);
        assert_eq!(LatencyHistogram::bucket_of(1_000), 0);
        assert_eq!(LatencyHistogram::bucket_of(1_001), 1);
        assert_eq!(LatencyHistogram::bucket_of(2_000), 1);
        assert_eq!(LatencyHistogram::bucket_of(2_001), 2);
        assert_eq!(LatencyHistogram::bucket_of(1_000_000), 10); // 1 ms <= 1.024 ms
        assert_eq!(LatencyHistogram::bucket_of(bucket_bound_ns(24)), 24);
        assert_eq!(LatencyHistogram::bucket_of(bucket_bound_ns(24) + 1), FINITE_BUCKETS);
        assert_eq!(LatencyHistogram::bucket_of(u64::MAX), FINITE_BUCKETS);
    }

    #[test]
    fn records_count_sum_and_cumulative_buckets() {
        let h = LatencyHistogram::new();
        h.record(Duration::from_micros(1));
        h.record(Duration::from_micros(3));
        h.record(Duration::from_micros(3));
        h.record(Duration::from_secs(100));
        assert_eq!(h.count(), 4);
        assert_eq!(h.sum_ns(), 1_000 + 3_000 + 3_000 + 100_000_000_000);
        let cumulative = h.cumulative();
        assert_eq!(cumulative.len(), FINITE_BUCKETS + 1);
        assert_eq!(cumulative[0], (1e-6, 1));
        assert_eq!(cumulative[1].1, 1);
        assert_eq!(cumulative[2], (4e-6, 3));
        assert_eq!(cumulative[FINITE_BUCKETS - 1].1, 3);
        assert_eq!(cumulative[FINITE_BUCKETS].1, 4);
        assert!(cumulative[FINITE_BUCKETS].0.is_infinite());
    }

    #[test]
    fn quantiles_report_bucket_bounds() {
        let h = LatencyHistogram::new();
        assert_eq!(h.quantile_upper_bound(0.5), None);
        for _ in 0..90 {
            h.record_ns(500);
        }
        for _ in 0..10 {
            h.record_ns(10_000);
        }
        assert_eq!(h.quantile_upper_bound(0.5), Some(Duration::from_micros(1)));
        assert_eq!(h.quantile_upper_bound(0.9), Some(Duration::from_micros(1)));
        assert_eq!(h.quantile_upper_bound(0.95), Some(Duration::from_micros(16)));
    }
}
