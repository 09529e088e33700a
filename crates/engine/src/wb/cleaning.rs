//! Cleaning control: how fast background cleaning may write, and when it writes at full
//! speed. The settings ([`CleaningConfig`]) and their resolution against the cache into the
//! core's cell (`cleaning_cell.rs`), which the flusher reads them from while they change live.
//!
//! - `flush_rate`: a cap on background cleaning, in bytes per second (bcache's
//!   `writeback_rate` set by hand, dm-cache's `migration_threshold`). What someone waits
//!   for (a FLUSH, a flush on demand, a switch's drain, a clean stop) ignores it.
//! - `flush_idle`: the idle policy (bcache's writeback at the maximum rate once the cache set
//!   is idle; Open CAS's ACP and ALRU, which clean when the core is idle). Background
//!   cleaning writes at full speed (up to the cap) only once no foreground request came for
//!   this long; while requests come, the rate is the PI controller's (`rate.rs`), steering
//!   the dirty count toward `dirty_target`, never below `min_rate`. Zero: the policy is off,
//!   background cleaning always writes at full speed (up to the cap).

use crate::cleaning_cell::{Cleaning, DEFAULT_MIN_RATE, DEFAULT_TARGET_PERCENT};
use crate::config::{DirtyLimit, DirtyLimitError, DirtyThreshold};
use std::time::Duration;

/// The cleaning settings (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleaningConfig {
    /// Cap on background cleaning, bytes per second (0: none).
    pub flush_rate: u64,
    /// The idle policy: full speed only after this long without a foreground request
    /// (zero: off, always full speed).
    pub flush_idle: Duration,
    /// The dirty count the controller steers toward while requests come (None: a tenth of
    /// the cache).
    pub dirty_target: Option<DirtyLimit>,
    /// The controller's lowest rate, bytes per second.
    pub min_rate: u64,
}

impl Default for CleaningConfig {
    /// No cap, no idle policy: background cleaning at full speed.
    fn default() -> Self {
        CleaningConfig {
            flush_rate: 0,
            flush_idle: Duration::ZERO,
            dirty_target: None,
            min_rate: DEFAULT_MIN_RATE,
        }
    }
}

/// Why cleaning settings do not fit the cache.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CleaningError {
    /// The dirty target does not fit the cache.
    #[error(transparent)]
    Target(#[from] DirtyLimitError),
    /// A minimum rate above the cap.
    #[error("flush min rate {min_rate} B/s is above the flush rate cap {cap} B/s")]
    MinAboveCap {
        /// The minimum rate.
        min_rate: u64,
        /// The cap.
        cap: u64,
    },
}

impl CleaningConfig {
    /// Resolve against a cache of `data_blocks` data blocks.
    pub(crate) fn resolve(&self, data_blocks: u64) -> Result<Cleaning, CleaningError> {
        let target = self.dirty_target.unwrap_or(DirtyLimit::Percent(DEFAULT_TARGET_PERCENT));
        let target_blocks = target.blocks(DirtyThreshold::Target, data_blocks)?;
        if self.flush_rate > 0 && self.min_rate > self.flush_rate {
            return Err(CleaningError::MinAboveCap {
                min_rate: self.min_rate,
                cap: self.flush_rate,
            });
        }
        Ok(Cleaning {
            cap: self.flush_rate,
            idle: self.flush_idle,
            target_blocks,
            min_rate: self.min_rate.max(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cleaning_cell::{CleaningState, LiveCleaning};

    #[test]
    fn settings_resolve_against_the_cache() {
        let c = CleaningConfig::default().resolve(1000).unwrap();
        assert_eq!((c.cap, c.target_blocks, c.min_rate), (0, 100, 4096), "a tenth of the cache");
        let c = CleaningConfig {
            flush_rate: 1 << 20,
            dirty_target: Some(DirtyLimit::Blocks(30)),
            ..Default::default()
        };
        assert_eq!(c.resolve(1000).unwrap().target_blocks, 30);
        let bad = CleaningConfig { min_rate: 2 << 20, ..c };
        assert_eq!(
            bad.resolve(1000).unwrap_err().to_string(),
            "flush min rate 2097152 B/s is above the flush rate cap 1048576 B/s"
        );
        let bad = CleaningConfig { dirty_target: Some(DirtyLimit::Blocks(2000)), ..c };
        assert_eq!(
            bad.resolve(1000).unwrap_err().to_string(),
            "dirty target 2000: more than the cache's 1000 data blocks"
        );
    }

    #[test]
    fn the_status_shows_the_reported_rate() {
        let l = LiveCleaning::new(1000);
        assert_eq!(l.status().dirty_target_blocks, 100);
        l.set(
            CleaningConfig { flush_idle: Duration::from_millis(50), ..Default::default() }
                .resolve(1000)
                .unwrap(),
        );
        assert_eq!(l.status().rate, None);
        l.report(CleaningState::Steering, Some(8192.0));
        let s = l.status();
        assert_eq!((s.state, s.rate, s.flush_idle_ms), (CleaningState::Steering, Some(8192), 50));
    }
}
