//! The error count of the cache device, decaying with a half-life: bcache's
//! `io_error_halflife` idea, measured in time rather than in I/Os, so the hit path pays for
//! no shared counter. Each error adds one; between errors the count halves every half-life;
//! the cache is given up when the count reaches the limit (`--io-error-limit`).

use std::time::{Duration, Instant};

/// A count of errors that halves every half-life.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Decaying {
    value: f64,
    at: Option<Instant>,
}

impl Decaying {
    /// No errors yet.
    pub const fn new() -> Decaying {
        Decaying { value: 0.0, at: None }
    }

    /// The count at `now`, decayed since the last error by `halflife` (zero: never decays).
    pub fn value_at(&self, now: Instant, halflife: Duration) -> f64 {
        let Some(at) = self.at else { return 0.0 };
        if halflife.is_zero() {
            return self.value;
        }
        let elapsed = now.saturating_duration_since(at).as_secs_f64();
        self.value * 0.5f64.powf(elapsed / halflife.as_secs_f64())
    }

    /// Add one error at `now`; returns the count after it.
    pub fn add(&mut self, now: Instant, halflife: Duration) -> f64 {
        self.value = self.value_at(now, halflife) + 1.0;
        self.at = Some(now);
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_add_up_and_halve_every_halflife() {
        let t0 = Instant::now();
        let h = Duration::from_secs(10);
        let mut d = Decaying::new();
        assert_eq!(d.value_at(t0, h), 0.0);
        assert_eq!(d.add(t0, h), 1.0);
        assert_eq!(d.add(t0, h), 2.0);
        let later = t0 + Duration::from_secs(10);
        assert!((d.value_at(later, h) - 1.0).abs() < 1e-9, "halved after one half-life");
        assert!((d.add(later, h) - 2.0).abs() < 1e-9);
        let much_later = later + Duration::from_secs(100);
        assert!(d.value_at(much_later, h) < 0.01);
    }

    #[test]
    fn a_zero_halflife_never_forgets() {
        let t0 = Instant::now();
        let mut d = Decaying::new();
        d.add(t0, Duration::ZERO);
        d.add(t0 + Duration::from_secs(3600), Duration::ZERO);
        assert_eq!(d.value_at(t0 + Duration::from_secs(86_400), Duration::ZERO), 2.0);
    }
}
