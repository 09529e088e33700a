//! The cache device's health: its I/O errors counted with a half-life (`decay.rs`), the
//! decision that the device is gone, and the blocks lost with it (`lost.rs`).
//!
//! The cache goes *degraded* on an error that shows the device is gone (ENODEV, ENXIO,
//! ESHUTDOWN, ENOTCONN, an I/O that did not complete within the timeout), on any failed sync
//! of the cache device, or once the decayed error count reaches the limit. The decision is
//! one-way for the device: a degraded cache never uses it again (its dirty map is stale
//! against the writes served while degraded); a new device ends it, put in while serving
//! (`live/replace.rs`, [`Health::recover`]) or at a restart with a new or reformatted one.
//!
//! Three states, one atomic word: healthy; *tripped* (decided, the switch not yet made:
//! requests wait for it); degraded (every request goes to backing, `io/degraded.rs`). The
//! switch itself (freeze the dirty map into the lost list, hand the record to the
//! [`DegradedSink`], then serve degraded) is `io::degraded::settle`: this module imports
//! nothing of the engine's core.

mod decay;
pub mod lost;

pub use lost::{DegradedRecord, DegradedSink};

use decay::Decaying;
use lost::LostList;
use parking_lot::Mutex;
use serde::Serialize;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::SeqCst};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const HEALTHY: u8 = 0;
const TRIPPED: u8 = 1;
const DEGRADED: u8 = 2;

/// When the cache device is given up (`ember serve --io-error-limit`, `--io-error-halflife`,
/// `--io-timeout`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HealthConfig {
    /// Degraded once the decayed error count reaches this (0: never by count; bcache's
    /// default is 8).
    pub error_limit: u32,
    /// The count halves every this long (zero: errors are never forgotten).
    pub error_halflife: Duration,
    /// A cache-device I/O not complete after this long fails with ETIMEDOUT and degrades
    /// the cache (a hung device). `None`: no timeout (no I/O is handed to a helper thread).
    pub io_timeout: Option<Duration>,
}

impl Default for HealthConfig {
    /// bcache's limit of 8 errors, a half-life of a minute, no timeout.
    fn default() -> Self {
        HealthConfig { error_limit: 8, error_halflife: Duration::from_secs(60), io_timeout: None }
    }
}

/// Why the cache went degraded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DegradeCause {
    /// An error that shows the device is gone.
    Gone,
    /// A sync of the cache device failed.
    SyncFailed,
    /// An I/O did not complete within the timeout.
    Timeout,
    /// The decayed error count reached the limit.
    ErrorLimit,
    /// The operator asked for it (`Engine::degrade`).
    Operator,
}

/// The health of the cache, for `ember ctl status`, metrics and the systemd status line.
#[derive(Clone, Debug, Serialize)]
pub struct HealthStatus {
    /// `healthy`, `degrading` (decided, the lost list being written) or `degraded`.
    pub state: &'static str,
    /// What decided it, when not healthy.
    pub cause: Option<DegradeCause>,
    /// The error that decided it (empty when healthy).
    pub reason: String,
    /// When, in milliseconds since the Unix epoch (0 when healthy).
    pub since_unix_ms: u64,
    /// Cache-device I/O errors since the start.
    pub errors_total: u64,
    /// The decayed error count now.
    pub errors_decayed: f64,
    /// The limit of the decayed count (0: none).
    pub error_limit: u32,
    /// The half-life of the count, in seconds.
    pub error_halflife_secs: f64,
    /// The I/O timeout in milliseconds (0: none).
    pub io_timeout_ms: u64,
    /// Blocks on the lost list, over every volume.
    pub lost_blocks: u64,
    /// Whether writing the lost list outside the cache device failed (it then lives only
    /// in memory: say so loudly).
    pub record_failed: bool,
}

/// The decision, once made.
#[derive(Clone, Debug)]
pub(crate) struct Tripped {
    pub cause: DegradeCause,
    pub reason: String,
    pub since_unix_ms: u64,
}

/// Shared by the engine's core and the cache device's wrapper (`device/watched.rs`).
pub struct Health {
    state: AtomicU8,
    error_limit: AtomicU32,
    halflife_ms: AtomicU64,
    timeout_ms: AtomicU64,
    errors_total: AtomicU64,
    count: Mutex<Decaying>,
    pub(crate) tripped: Mutex<Option<Tripped>>,
    /// Read under its lock; changed only through [`Health::lost_mut`], which keeps
    /// `lost_none` current.
    pub(crate) lost: Mutex<LostList>,
    /// No block is listed: a degraded read skips the list's lock.
    lost_none: std::sync::atomic::AtomicBool,
    pub(crate) sink: Mutex<Option<DegradedSink>>,
    /// Held while the switch is made; requests that find the cache tripped wait on it.
    pub(crate) switching: Mutex<()>,
    pub(crate) record_failed: std::sync::atomic::AtomicBool,
}

impl Default for Health {
    fn default() -> Self {
        Health::new(HealthConfig::default())
    }
}

impl Health {
    /// A healthy cache under `config`.
    pub fn new(config: HealthConfig) -> Health {
        let h = Health {
            state: AtomicU8::new(HEALTHY),
            error_limit: AtomicU32::new(0),
            halflife_ms: AtomicU64::new(0),
            timeout_ms: AtomicU64::new(0),
            errors_total: AtomicU64::new(0),
            count: Mutex::new(Decaying::new()),
            tripped: Mutex::new(None),
            lost: Mutex::new(LostList::default()),
            lost_none: std::sync::atomic::AtomicBool::new(true),
            sink: Mutex::new(None),
            switching: Mutex::new(()),
            record_failed: std::sync::atomic::AtomicBool::new(false),
        };
        h.configure(config);
        h
    }

    /// Put `config` in force (the next error is judged by it).
    pub fn configure(&self, config: HealthConfig) {
        self.error_limit.store(config.error_limit, SeqCst);
        self.halflife_ms.store(config.error_halflife.as_millis() as u64, SeqCst);
        let t = config.io_timeout.map_or(0, |t| (t.as_millis() as u64).max(1));
        self.timeout_ms.store(t, SeqCst);
    }

    /// The configuration in force.
    pub fn config(&self) -> HealthConfig {
        let t = self.timeout_ms.load(SeqCst);
        HealthConfig {
            error_limit: self.error_limit.load(SeqCst),
            error_halflife: Duration::from_millis(self.halflife_ms.load(SeqCst)),
            io_timeout: (t > 0).then(|| Duration::from_millis(t)),
        }
    }

    /// The I/O timeout in force, if any.
    pub fn io_timeout(&self) -> Option<Duration> {
        let t = self.timeout_ms.load(SeqCst);
        (t > 0).then(|| Duration::from_millis(t))
    }

    /// Healthy: neither tripped nor degraded. One atomic load (the hit path asks it).
    #[inline]
    pub fn is_healthy(&self) -> bool {
        self.state.load(SeqCst) == HEALTHY
    }

    /// Degraded, the switch made.
    pub fn is_degraded(&self) -> bool {
        self.state.load(SeqCst) == DEGRADED
    }

    /// Mark the switch made (`io::degraded::settle`).
    pub(crate) fn set_degraded(&self) {
        self.state.store(DEGRADED, SeqCst);
    }

    /// A cache-device I/O failed with `e` (`sync`: it was a sync): count it, and decide
    /// whether the device is gone. Returns true if this error tripped the cache.
    pub fn io_failed(&self, sync: bool, e: &io::Error) -> bool {
        self.errors_total.fetch_add(1, SeqCst);
        if !self.is_healthy() {
            return false;
        }
        if e.kind() == io::ErrorKind::TimedOut {
            return self.trip(DegradeCause::Timeout, e.to_string());
        }
        if matches!(
            e.raw_os_error(),
            Some(libc::ENODEV | libc::ENXIO | libc::ESHUTDOWN | libc::ENOTCONN | libc::ENOMEDIUM)
        ) {
            return self.trip(DegradeCause::Gone, e.to_string());
        }
        if sync {
            return self.trip(DegradeCause::SyncFailed, e.to_string());
        }
        let halflife = Duration::from_millis(self.halflife_ms.load(SeqCst));
        let n = self.count.lock().add(Instant::now(), halflife);
        let limit = self.error_limit.load(SeqCst);
        // Errors close together decay a little between them: within a thousandth of an
        // error, the limit is reached.
        if limit > 0 && n + 1e-3 >= f64::from(limit) {
            return self.trip(
                DegradeCause::ErrorLimit,
                format!("{n:.1} errors (limit {limit}); the last: {e}"),
            );
        }
        false
    }

    /// Decide that the device is gone (once: later calls change nothing). True if this
    /// call decided it.
    pub fn trip(&self, cause: DegradeCause, reason: String) -> bool {
        let mut t = self.tripped.lock();
        if t.is_some() {
            return false;
        }
        let since_unix_ms =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        *t = Some(Tripped { cause, reason, since_unix_ms });
        // Under the same lock as the record, so a reader that sees the state sees why.
        self.state.store(TRIPPED, SeqCst);
        true
    }

    /// A new cache device replaced the failed one: healthy again, with no decision and no
    /// error counted against it (the total since the start stays). The lost list is kept.
    /// Only while no I/O reaches the device (the replacement holds every request back).
    pub(crate) fn recover(&self) {
        let mut t = self.tripped.lock();
        *self.count.lock() = Decaying::new();
        self.record_failed.store(false, SeqCst);
        *t = None;
        self.state.store(HEALTHY, SeqCst);
    }

    /// Change the lost list with `f` (under its lock).
    pub(crate) fn lost_mut<R>(&self, f: impl FnOnce(&mut LostList) -> R) -> R {
        let mut l = self.lost.lock();
        let r = f(&mut l);
        self.lost_none.store(l.total() == 0, SeqCst);
        r
    }

    /// The first listed block of volume `vol` in `blocks`, if any (no lock while the list
    /// is empty).
    pub(crate) fn first_lost(&self, vol: u32, blocks: std::ops::Range<u64>) -> Option<u64> {
        if self.lost_none.load(SeqCst) {
            return None;
        }
        self.lost.lock().first_in(vol, blocks)
    }

    /// The status now.
    pub fn status(&self) -> HealthStatus {
        let t = self.tripped.lock().clone();
        let config = self.config();
        let state = match self.state.load(SeqCst) {
            HEALTHY => "healthy",
            TRIPPED => "degrading",
            _ => "degraded",
        };
        HealthStatus {
            state,
            cause: t.as_ref().map(|t| t.cause.clone()),
            reason: t.as_ref().map(|t| t.reason.clone()).unwrap_or_default(),
            since_unix_ms: t.as_ref().map_or(0, |t| t.since_unix_ms),
            errors_total: self.errors_total.load(SeqCst),
            errors_decayed: self.count.lock().value_at(Instant::now(), config.error_halflife),
            error_limit: config.error_limit,
            error_halflife_secs: config.error_halflife.as_secs_f64(),
            io_timeout_ms: config.io_timeout.map_or(0, |d| d.as_millis() as u64),
            lost_blocks: self.lost.lock().total(),
            record_failed: self.record_failed.load(SeqCst),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eio() -> io::Error {
        io::Error::from_raw_os_error(libc::EIO)
    }

    #[test]
    fn read_and_write_errors_trip_at_the_limit() {
        let h = Health::new(HealthConfig { error_limit: 3, ..HealthConfig::default() });
        assert!(!h.io_failed(false, &eio()));
        assert!(!h.io_failed(false, &eio()));
        assert!(h.is_healthy());
        assert!(h.io_failed(false, &eio()));
        assert!(!h.is_healthy());
        assert_eq!(h.status().cause, Some(DegradeCause::ErrorLimit));
        assert_eq!(h.status().state, "degrading");
        assert_eq!(h.status().errors_total, 3);
    }

    #[test]
    fn a_gone_device_a_failed_sync_and_a_timeout_trip_at_once() {
        for (sync, e, cause) in [
            (false, io::Error::from_raw_os_error(libc::ENODEV), DegradeCause::Gone),
            (false, io::Error::from_raw_os_error(libc::ENXIO), DegradeCause::Gone),
            (true, eio(), DegradeCause::SyncFailed),
            (false, io::Error::new(io::ErrorKind::TimedOut, "hung"), DegradeCause::Timeout),
        ] {
            let h = Health::default();
            assert!(h.io_failed(sync, &e), "{e}");
            assert_eq!(h.status().cause, Some(cause));
            assert!(!h.io_failed(sync, &e), "decided once");
        }
    }

    #[test]
    fn a_recovered_cache_is_healthy_and_judged_afresh() {
        let h = Health::new(HealthConfig { error_limit: 2, ..HealthConfig::default() });
        h.lost_mut(|l| l.insert(0, 7));
        assert!(!h.io_failed(false, &eio()));
        assert!(h.io_failed(false, &eio()));
        h.set_degraded();
        h.recover();
        assert!(h.is_healthy());
        let s = h.status();
        assert_eq!((s.state, s.cause, s.reason.as_str()), ("healthy", None, ""));
        assert!(s.errors_decayed < 1e-9, "the failed device's errors are not counted");
        assert_eq!(s.errors_total, 2, "the total since the start stays");
        assert_eq!(s.lost_blocks, 1, "the lost list is kept");
        assert!(!h.io_failed(false, &eio()), "one error of the new device is below the limit");
        assert!(h.trip(DegradeCause::Operator, "again".into()), "it can be given up again");
    }

    #[test]
    fn no_limit_counts_without_tripping() {
        let h = Health::new(HealthConfig { error_limit: 0, ..HealthConfig::default() });
        for _ in 0..100 {
            assert!(!h.io_failed(false, &eio()));
        }
        assert!(h.is_healthy());
        assert!(h.status().errors_decayed > 90.0);
    }
}
