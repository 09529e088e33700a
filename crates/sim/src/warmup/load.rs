//! Server load reduction, Bonfire eq. 2 (section 4.1), and the pre-load time estimate
//! (section 4.3.2).
//!
//! The reduction is the share of the data that the cache serves out of all the data issued
//! during the warmup period; Bonfire measures every scheme over the *cold* cache's
//! convergence period so they compare. ember counts read block accesses (the read hit rate
//! is what eq. 1 compares): `sum read hits / sum reads` over the intervals `0..T_cold`.

/// Read hits and reads of one timeline interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadPoint {
    /// Read block accesses.
    pub reads: u64,
    /// Of which hits.
    pub read_hits: u64,
}

impl ReadPoint {
    /// The read hit rate, `None` without reads.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.reads > 0).then(|| self.read_hits as f64 / self.reads as f64)
    }
}

/// Eq. 2 over intervals `0..upto` of `timeline` (as a fraction), `None` when they hold no
/// read (a cold convergence time of 0 leaves nothing to measure).
pub fn server_load_reduction(timeline: &[ReadPoint], upto: usize) -> Option<f64> {
    let (mut h, mut r) = (0u64, 0u64);
    for p in &timeline[..upto.min(timeline.len())] {
        h += p.read_hits;
        r += p.reads;
    }
    (r > 0).then(|| h as f64 / r as f64)
}

/// Seconds to pre-load `bytes` at `bandwidth` bytes per second (Bonfire: 100 MB/s).
pub fn preload_seconds(bytes: u64, bandwidth: f64) -> f64 {
    if bandwidth > 0.0 {
        bytes as f64 / bandwidth
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq2_over_the_cold_convergence_period() {
        let t = [
            ReadPoint { reads: 10, read_hits: 0 },
            ReadPoint { reads: 10, read_hits: 5 },
            ReadPoint { reads: 0, read_hits: 0 },
            ReadPoint { reads: 10, read_hits: 10 },
        ];
        assert_eq!(server_load_reduction(&t, 2), Some(0.25));
        assert_eq!(server_load_reduction(&t, 99), Some(0.5));
        assert_eq!(server_load_reduction(&t, 0), None);
        assert_eq!(t[2].hit_rate(), None);
    }

    #[test]
    fn bonfire_table3_preload_time_at_100_mb_per_s() {
        // 25 % of a 124.8 GB WSS at 100 MB/s is 5.2 minutes (Table 3's T_preload).
        let s = preload_seconds(31_200_000_000, 100e6);
        assert!((s / 60.0 - 5.2).abs() < 1e-9);
    }
}
