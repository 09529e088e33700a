//! The rate of background cleaning while foreground requests come: a PI controller that
//! steers the dirty count toward a target, in the form of bcache's writeback rate
//! (`drivers/md/bcache/writeback.c`, the controller of 2017; bcache's admin guide,
//! `writeback_rate_*`). Time is passed in; nothing here does I/O or reads a clock.
//!
//! With `error` = dirty bytes − target bytes:
//!
//! - the proportional term asks for `error / P_TERM_INVERSE` bytes per second (bcache's
//!   `writeback_rate_p_term_inverse`, 40: an excess is cleaned at a fortieth a second);
//! - the integral term adds `∫ error dt / I_TERM_INVERSE` (bcache's
//!   `writeback_rate_i_term_inverse`, 10 000), so an excess that the proportional rate does
//!   not shrink (the foreground keeps dirtying) raises the rate over time;
//! - the sum is clamped to at least the minimum rate (bcache's `writeback_rate_minimum`: the
//!   dirty count keeps moving however small the excess) and at most the cap.
//!
//! The integral does not wind up: it grows only while the flusher keeps up with the rate it
//! was given (bcache's rule: a backing that cannot take more is not asked for more) and the
//! output is below the cap; and it is reset to zero whenever the target is met (the dirty
//! count at or below it), so a later excess starts from the proportional rate alone.

/// bcache's `writeback_rate_p_term_inverse`: seconds over which the proportional term
/// alone would clean an excess.
pub(crate) const P_TERM_INVERSE: f64 = 40.0;

/// bcache's `writeback_rate_i_term_inverse`, in seconds squared.
pub(crate) const I_TERM_INVERSE: f64 = 10_000.0;

/// What the controller steers by, at one moment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Steer {
    /// Dirty bytes now.
    pub dirty: f64,
    /// The dirty bytes aimed at.
    pub target: f64,
    /// The rate never goes below this (bytes per second).
    pub min_rate: f64,
    /// The rate never goes above this (bytes per second; infinite: no cap).
    pub cap: f64,
    /// The flusher kept to the schedule of the last rate (it was not behind it).
    pub keeping_up: bool,
}

/// The controller's state: the integral and the time of the last update.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RateController {
    /// ∫ error dt, in byte-seconds; never negative.
    integral: f64,
    /// When the last update ran (ns), if one did.
    last_ns: Option<u64>,
}

impl RateController {
    /// The rate (bytes per second) at `now_ns` for `s`; integrates the error since the last
    /// update (see the module comment for when it does).
    pub fn update(&mut self, now_ns: u64, s: &Steer) -> f64 {
        let dt = self.last_ns.map_or(0.0, |t| now_ns.saturating_sub(t) as f64 / 1e9);
        self.last_ns = Some(now_ns);
        let error = s.dirty - s.target;
        let floor = s.min_rate.min(s.cap);
        if error <= 0.0 {
            self.integral = 0.0;
            return floor;
        }
        let p = error / P_TERM_INVERSE;
        let below_cap = p + self.integral / I_TERM_INVERSE < s.cap;
        if s.keeping_up && below_cap {
            self.integral += error * dt;
        }
        (p + self.integral / I_TERM_INVERSE).max(floor).min(s.cap)
    }

    /// No steering now (the foreground is idle, or the policy is off): the time passes
    /// without integrating, so a later update does not count it.
    pub fn pause(&mut self, now_ns: u64) {
        self.last_ns = Some(now_ns);
    }

    /// ∫ error dt so far, in byte-seconds.
    #[cfg(test)]
    pub fn integral(&self) -> f64 {
        self.integral
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1048576.0;
    const SEC: u64 = 1_000_000_000;

    fn steer(dirty: f64, target: f64) -> Steer {
        Steer { dirty, target, min_rate: 4096.0, cap: f64::INFINITY, keeping_up: true }
    }

    /// A plant: the foreground dirties `inflow` bytes a second, the flusher cleans at the
    /// controller's rate; steps of 100 ms.
    fn run(c: &mut RateController, dirty: &mut f64, s: Steer, inflow: f64, secs: u64) -> f64 {
        let mut rate = 0.0;
        for step in 0..secs * 10 {
            let now = step * SEC / 10;
            rate = c.update(now, &Steer { dirty: *dirty, ..s });
            *dirty = (*dirty + (inflow - rate) * 0.1).max(0.0);
        }
        rate
    }

    #[test]
    fn the_proportional_term_alone_cleans_an_excess_at_a_fortieth_a_second() {
        let mut c = RateController::default();
        let r = c.update(0, &steer(140.0 * MIB, 100.0 * MIB));
        assert_eq!(r, 1.0 * MIB, "40 MiB over the target: 1 MiB/s");
    }

    #[test]
    fn converges_to_the_target_against_a_steady_inflow() {
        // 1 MiB/s of new dirty data: the proportional term alone settles 40 MiB above the
        // target; the integral takes that offset away.
        let mut c = RateController::default();
        let mut dirty = 500.0 * MIB;
        let s = steer(0.0, 100.0 * MIB);
        let rate = run(&mut c, &mut dirty, s, 1.0 * MIB, 3000);
        assert!((dirty - 100.0 * MIB).abs() < 2.0 * MIB, "dirty {:.1} MiB", dirty / MIB);
        assert!((rate - MIB).abs() < 0.05 * MIB, "rate {:.3} MiB/s", rate / MIB);
    }

    #[test]
    fn never_below_the_minimum_rate_nor_above_the_cap() {
        let mut c = RateController::default();
        let s = Steer { cap: 8.0 * MIB, min_rate: 64.0 * 1024.0, ..steer(0.0, 100.0 * MIB) };
        for (i, dirty) in [0.0, 50.0, 100.0, 100.001, 101.0, 500.0, 5000.0, 1e6].iter().enumerate()
        {
            for t in 0..50 {
                let now = (i as u64 * 50 + t) * SEC;
                let r = c.update(now, &Steer { dirty: dirty * MIB, ..s });
                assert!(r >= s.min_rate && r <= s.cap, "dirty {dirty} MiB: rate {r}");
            }
        }
        // A cap below the minimum wins: never above the cap.
        let low = Steer { cap: 1000.0, min_rate: 4096.0, ..s };
        assert_eq!(c.update(10_000 * SEC, &Steer { dirty: 0.0, ..low }), 1000.0);
    }

    #[test]
    fn the_integral_resets_when_the_target_is_met_and_does_not_wind_up() {
        let mut c = RateController::default();
        let s = steer(200.0 * MIB, 100.0 * MIB);
        for t in 0..100 {
            c.update(t * SEC, &s);
        }
        assert!(c.integral() > 0.0);
        c.update(101 * SEC, &Steer { dirty: 100.0 * MIB, ..s });
        assert_eq!(c.integral(), 0.0, "target met: reset");
        // Behind schedule (the backing takes no more): the integral does not grow.
        let behind = Steer { keeping_up: false, ..s };
        for t in 102..200 {
            c.update(t * SEC, &behind);
        }
        assert_eq!(c.integral(), 0.0);
        // At the cap: it does not grow either.
        let capped = Steer { cap: 1.0, ..s };
        for t in 200..300 {
            assert_eq!(c.update(t * SEC, &capped), 1.0);
        }
        assert_eq!(c.integral(), 0.0);
        // A pause does not count as time steered.
        c.pause(10_000 * SEC);
        c.update(10_000 * SEC, &s);
        assert_eq!(c.integral(), 0.0);
    }
}
