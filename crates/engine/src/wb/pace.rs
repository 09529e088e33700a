//! The pace of background cleaning: which rate applies now (the cap, full speed once the
//! foreground is idle, or the controller's rate while requests come: `cleaning.rs`,
//! `rate.rs`), and when the next background batch may start at that rate. Time and the
//! foreground's request count are passed in; the flusher (`flusher.rs`) asks before each
//! background batch and waits, on the engine's condition variable, as long as it is told, so
//! a FLUSH or a stop ends the wait at once.
//!
//! A batch of B bytes at rate r keeps the next one from starting before B / r seconds after
//! it started: the batches started in any interval of T seconds hold at most r × T bytes plus
//! one batch. A pause (nothing to clean) earns no credit: the next batch starts at once, and
//! the schedule runs from there. The rate is read afresh for every batch, so a lower cap or
//! a controller that lowers its rate slows the very next one.

use super::rate::{RateController, Steer};
use crate::cleaning_cell::{Cleaning, CleaningState};
use std::time::Duration;

/// A batch under a rate covers about this much time, so the backing sees a steady trickle
/// rather than bursts.
const PACED_BATCH: f64 = 0.1;

/// Lateness the flusher may show and still count as keeping up (bcache's 1 ms).
const KEEPING_UP_SLACK_NS: u64 = 1_000_000;

/// The pacer's state, owned by the flusher thread.
#[derive(Debug, Default)]
pub(crate) struct Pacer {
    controller: RateController,
    /// The last background batch: start (ns), bytes, and the rate it ran under.
    last: Option<(u64, u64, f64)>,
    /// The foreground's request count last seen, and when it last changed (ns).
    seen: Option<(u64, u64)>,
}

/// What the foreground and the dirty map look like now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Load {
    /// Foreground requests served since the start (any count that grows with each one).
    pub requests: u64,
    /// A foreground request is in flight.
    pub busy: bool,
    /// Dirty bytes.
    pub dirty: f64,
    /// The cache's block size.
    pub block_size: u64,
}

impl Pacer {
    /// The rate of background cleaning at `now_ns` (None: unlimited) and what it is.
    pub fn rate(&mut self, now_ns: u64, load: &Load, c: &Cleaning) -> (CleaningState, Option<f64>) {
        if load.busy || self.seen.is_none_or(|(n, _)| n != load.requests) {
            self.seen = Some((load.requests, now_ns));
        }
        let quiet = self.seen.map_or(0, |(_, t)| now_ns.saturating_sub(t));
        let cap = (c.cap > 0).then_some(c.cap as f64);
        if c.idle.is_zero() || quiet >= c.idle.as_nanos() as u64 {
            self.controller.pause(now_ns);
            return (CleaningState::Full, cap);
        }
        let keeping_up = match self.last {
            Some((t, b, r)) => {
                now_ns <= t.saturating_add(nanos(b, r)).saturating_add(KEEPING_UP_SLACK_NS)
            }
            None => true,
        };
        let s = Steer {
            dirty: load.dirty,
            target: c.target_blocks as f64 * load.block_size as f64,
            min_rate: c.min_rate as f64,
            cap: cap.unwrap_or(f64::INFINITY),
            keeping_up,
        };
        (CleaningState::Steering, Some(self.controller.update(now_ns, &s)))
    }

    /// How long a batch of `bytes` must wait at `rate` before it starts; zero when it may
    /// start now, and then it is counted as started.
    pub fn admit(&mut self, now_ns: u64, bytes: u64, rate: Option<f64>) -> Duration {
        let r = rate.unwrap_or(f64::INFINITY);
        if let Some((t, b, _)) = self.last {
            let next = t.saturating_add(nanos(b, r));
            if now_ns < next {
                return Duration::from_nanos(next - now_ns);
            }
        }
        self.last = Some((now_ns, bytes, r));
        Duration::ZERO
    }

    /// How long to wait before asking again, when told to wait `d` (a shorter wait when the
    /// idle policy needs to see the foreground go quiet).
    pub fn tick(d: Duration, c: &Cleaning) -> Duration {
        let mut t = d.min(Duration::from_millis(100));
        if !c.idle.is_zero() {
            t = t.min(c.idle / 2);
        }
        t.max(Duration::from_millis(1))
    }
}

/// Blocks of a background batch at `rate`: about [`PACED_BATCH`] seconds of it, at least one
/// block, at most `max`.
pub(crate) fn batch_blocks(rate: Option<f64>, block_size: u64, max: usize) -> usize {
    match rate {
        None => max,
        Some(r) => ((r * PACED_BATCH / block_size as f64) as usize).clamp(1, max.max(1)),
    }
}

/// Nanoseconds `bytes` take at `rate` bytes a second.
fn nanos(bytes: u64, rate: f64) -> u64 {
    if rate.is_infinite() || bytes == 0 {
        return 0;
    }
    let ns = bytes as f64 / rate.max(1e-9) * 1e9;
    ns.min(u64::MAX as f64 / 2.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn cleaning(cap: u64, idle_ms: u64) -> Cleaning {
        Cleaning { cap, idle: Duration::from_millis(idle_ms), target_blocks: 100, min_rate: 4096 }
    }

    fn load(requests: u64, dirty_blocks: u64) -> Load {
        Load { requests, busy: false, dirty: (dirty_blocks * 4096) as f64, block_size: 4096 }
    }

    #[test]
    fn batches_under_a_cap_start_no_sooner_than_their_bytes_allow() {
        let mut p = Pacer::default();
        let c = cleaning(1 << 20, 0);
        let (state, rate) = p.rate(0, &load(0, 1000), &c);
        assert_eq!((state, rate), (CleaningState::Full, Some(1048576.0)));
        assert_eq!(p.admit(0, 262144, rate), Duration::ZERO);
        // 256 KiB at 1 MiB/s: the next starts 250 ms later.
        assert_eq!(p.admit(100 * MS, 262144, rate), Duration::from_millis(150));
        assert_eq!(p.admit(250 * MS, 262144, rate), Duration::ZERO);
        // Over any run of batches: at most rate × time plus one batch.
        let mut started = 0u64;
        let mut now = 250 * MS;
        let (begin, mut bytes) = (now, 262144u64);
        while now < 10_000 * MS {
            if p.admit(now, 65536, rate).is_zero() {
                bytes += 65536;
                started += 1;
                let allowed = (now - begin) as f64 / 1e9 * 1048576.0 + 262144.0;
                assert!(bytes as f64 <= allowed + 65536.0, "{bytes} at {now}");
            }
            now += 7 * MS;
        }
        assert!(started > 100);
        // No cap: nothing waits.
        assert_eq!(p.admit(now, 1 << 30, None), Duration::ZERO);
        assert_eq!(p.admit(now, 1 << 30, None), Duration::ZERO);
    }

    #[test]
    fn full_speed_only_once_the_foreground_is_idle() {
        let mut p = Pacer::default();
        let c = cleaning(0, 50);
        // Requests keep coming: the controller's rate (200 blocks dirty, target 100).
        for (i, t) in (0..40u64).map(|i| (i, i * 10 * MS)) {
            let (state, rate) = p.rate(t, &load(i, 200), &c);
            assert_eq!(state, CleaningState::Steering);
            assert!(rate.unwrap() >= 4096.0 && rate.unwrap() < 1e6, "{rate:?}");
        }
        // Quiet for 40 ms: still steering; for 50 ms: full speed.
        assert_eq!(p.rate(430 * MS, &load(39, 200), &c).0, CleaningState::Steering);
        assert_eq!(p.rate(440 * MS, &load(39, 200), &c), (CleaningState::Full, None));
        // A request in flight, or a new one, ends the idle time.
        let busy = Load { busy: true, ..load(39, 200) };
        assert_eq!(p.rate(500 * MS, &busy, &c).0, CleaningState::Steering);
        assert_eq!(p.rate(600 * MS, &load(40, 200), &c).0, CleaningState::Steering);
        // The policy off: full speed whatever comes.
        assert_eq!(p.rate(610 * MS, &load(41, 200), &cleaning(0, 0)).0, CleaningState::Full);
    }

    #[test]
    fn a_paced_batch_covers_a_tenth_of_a_second() {
        assert_eq!(batch_blocks(None, 4096, 64), 64);
        assert_eq!(batch_blocks(Some(4096.0), 4096, 64), 1);
        assert_eq!(batch_blocks(Some(409600.0 * 10.0), 4096, 64), 64);
        assert_eq!(batch_blocks(Some(40960.0 * 10.0), 4096, 64), 10);
        assert_eq!(
            Pacer::tick(Duration::from_secs(5), &cleaning(0, 50)),
            Duration::from_millis(25)
        );
    }
}
