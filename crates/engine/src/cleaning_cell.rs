//! The cell of cleaning control the core holds (`core.rs`): the settings in force, resolved
//! against the cache (`wb/cleaning.rs` resolves them), and the flusher's report of what
//! background cleaning does, for `status`. Imports nothing of the crate.

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::time::Duration;

/// bcache's `writeback_percent` default: the dirty target is a tenth of the cache.
pub(crate) const DEFAULT_TARGET_PERCENT: f64 = 10.0;

/// bcache's `writeback_rate_minimum` (8 sectors a second).
pub const DEFAULT_MIN_RATE: u64 = 4096;

/// `wb::CleaningConfig` resolved against the cache: the target in blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cleaning {
    /// Bytes per second; 0: no cap.
    pub cap: u64,
    pub idle: Duration,
    pub target_blocks: u64,
    pub min_rate: u64,
}

/// What background cleaning is doing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CleaningState {
    /// Nothing to clean in the background (at or below min dirty).
    Resting,
    /// Full speed, up to the cap (no idle policy, or the foreground is idle).
    Full,
    /// Requests come: the controller's rate.
    Steering,
}

impl CleaningState {
    fn from_u8(v: u8) -> CleaningState {
        match v {
            1 => CleaningState::Full,
            2 => CleaningState::Steering,
            _ => CleaningState::Resting,
        }
    }
}

/// The settings in force and what the flusher does with them, as `status` shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleaningStatus {
    /// Cap on background cleaning, bytes per second (0: none).
    pub flush_rate: u64,
    /// Idle time before full speed, milliseconds (0: the idle policy is off).
    pub flush_idle_ms: u64,
    /// The dirty count the controller steers toward, in blocks.
    pub dirty_target_blocks: u64,
    /// The controller's lowest rate, bytes per second.
    pub min_rate: u64,
    /// What background cleaning does now.
    pub state: CleaningState,
    /// Its rate now, bytes per second (None: unlimited).
    pub rate: Option<u64>,
}

/// The settings in force, changed while serving, and the flusher's report of its rate.
pub(crate) struct LiveCleaning {
    settings: Mutex<Cleaning>,
    /// Bytes per second; `u64::MAX`: unlimited.
    rate: AtomicU64,
    state: AtomicU8,
}

impl LiveCleaning {
    /// The defaults ([`CleaningConfig::default`]) for a cache of `data_blocks` data blocks.
    pub fn new(data_blocks: u64) -> LiveCleaning {
        LiveCleaning {
            settings: Mutex::new(Cleaning {
                cap: 0,
                idle: Duration::ZERO,
                target_blocks: (data_blocks as f64 * DEFAULT_TARGET_PERCENT / 100.0) as u64,
                min_rate: DEFAULT_MIN_RATE,
            }),
            rate: AtomicU64::new(u64::MAX),
            state: AtomicU8::new(0),
        }
    }

    /// The settings now.
    pub fn get(&self) -> Cleaning {
        *self.settings.lock()
    }

    /// Put `c` in force.
    pub fn set(&self, c: Cleaning) {
        *self.settings.lock() = c;
    }

    /// The flusher's report: what it does, at what rate (None: unlimited).
    pub fn report(&self, state: CleaningState, rate: Option<f64>) {
        self.state.store(state as u8, Relaxed);
        self.rate.store(rate.map_or(u64::MAX, |r| r.min(u64::MAX as f64 / 2.0) as u64), Relaxed);
    }

    /// Settings and state, for `status`.
    pub fn status(&self) -> CleaningStatus {
        let c = self.get();
        let rate = self.rate.load(Relaxed);
        CleaningStatus {
            flush_rate: c.cap,
            flush_idle_ms: c.idle.as_millis() as u64,
            dirty_target_blocks: c.target_blocks,
            min_rate: c.min_rate,
            state: CleaningState::from_u8(self.state.load(Relaxed)),
            rate: (rate != u64::MAX).then_some(rate),
        }
    }
}
