//! Warmup's counters and state, for `ember stats` and the metrics.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Where warmup is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarmupState {
    /// No warmup log configured.
    Off,
    /// Monitoring; no preload this start (the reason says why).
    Monitoring,
    /// Preloading in the background (and monitoring).
    Preloading,
    /// Preload finished (and monitoring).
    Done,
}

impl WarmupState {
    /// The state's number in the metrics (0 off, 1 monitoring, 2 preloading, 3 done).
    pub fn code(&self) -> u8 {
        match self {
            WarmupState::Off => 0,
            WarmupState::Monitoring => 1,
            WarmupState::Preloading => 2,
            WarmupState::Done => 3,
        }
    }
}

/// A snapshot of warmup.
#[derive(Clone, Debug, Serialize)]
pub struct WarmupStats {
    /// Where warmup is.
    pub state: WarmupState,
    /// Why there was no preload, or how it ended.
    pub reason: String,
    /// Blocks the preload inserted.
    pub preloaded_blocks: u64,
    /// Bytes the preload read from backing and wrote into the cache.
    pub preloaded_bytes: u64,
    /// Blocks the preload skipped because they were already cached (a client got there first).
    pub preload_skipped_blocks: u64,
    /// Blocks the preload planned.
    pub preload_planned_blocks: u64,
    /// Nanoseconds the preload ran (so far, while it runs).
    pub preload_ns: u64,
    /// Bytes of records written to the warmup log.
    pub log_bytes_written: u64,
    /// Requests staged by the monitor.
    pub staged_requests: u64,
    /// Requests dropped because the staging buffer was full.
    pub staging_dropped: u64,
    /// The staging buffer's size in bytes.
    pub staging_bytes: u64,
    /// Client read hits on blocks the preload installed, counted once per block (its first
    /// hit; a block a client reallocated no longer counts).
    pub preloaded_hits: u64,
    /// Blocks the preload took from the performance snapshot (the rest of
    /// `preloaded_blocks` came from backing).
    pub preloaded_from_snapshot_blocks: u64,
    /// Blocks the preload read from backing.
    pub preloaded_from_backing_blocks: u64,
    /// Snapshot copies whose data failed its checksum at preload (read from backing instead).
    pub snapshot_bad_blocks: u64,
    /// Bytes of segments written to the performance snapshot.
    pub snapshot_bytes_written: u64,
    /// Blocks copied into the snapshot's staging buffer.
    pub snapshot_copied_blocks: u64,
    /// Logged blocks not copied because they were not cached when the writer reached them.
    pub snapshot_uncached_blocks: u64,
    /// The snapshot's staging buffer size in bytes (0: no snapshot).
    pub snapshot_staging_bytes: u64,
}

/// The live counters.
#[derive(Default)]
pub(crate) struct Counters {
    pub state: AtomicU64,
    pub reason: parking_lot::Mutex<String>,
    pub preloaded_blocks: AtomicU64,
    pub preloaded_bytes: AtomicU64,
    pub skipped_blocks: AtomicU64,
    pub planned_blocks: AtomicU64,
    pub preload_start_ns: AtomicU64,
    pub preload_end_ns: AtomicU64,
    pub log_bytes: AtomicU64,
    pub preloaded_hits: AtomicU64,
    pub preloaded_snapshot_blocks: AtomicU64,
    pub snapshot_bad_blocks: AtomicU64,
    pub snapshot_bytes: AtomicU64,
    pub snapshot_copied_blocks: AtomicU64,
    pub snapshot_uncached_blocks: AtomicU64,
    pub snapshot_staging_bytes: AtomicU64,
}

impl Counters {
    pub fn set_state(&self, s: WarmupState) {
        self.state.store(s.code() as u64, Relaxed);
    }

    pub fn set_reason(&self, r: String) {
        *self.reason.lock() = r;
    }

    pub fn state(&self) -> WarmupState {
        match self.state.load(Relaxed) {
            1 => WarmupState::Monitoring,
            2 => WarmupState::Preloading,
            3 => WarmupState::Done,
            _ => WarmupState::Off,
        }
    }

    /// Nanoseconds the preload has run.
    pub fn preload_ns(&self) -> u64 {
        let start = self.preload_start_ns.load(Relaxed);
        if start == 0 {
            return 0;
        }
        let end = match self.preload_end_ns.load(Relaxed) {
            0 => crate::clock::now_ns(),
            e => e,
        };
        end.saturating_sub(start)
    }
}

impl WarmupStats {
    /// Prometheus text lines.
    pub fn prometheus(&self) -> String {
        let mut o = String::new();
        let mut g = |name: &str, help: &str, kind: &str, v: f64| {
            o += &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n");
        };
        g(
            "ember_warmup_state",
            "0 off, 1 monitoring, 2 preloading, 3 preload done",
            "gauge",
            self.state.code() as f64,
        );
        g(
            "ember_warmup_preloaded_blocks_total",
            "Blocks the preload inserted",
            "counter",
            self.preloaded_blocks as f64,
        );
        g(
            "ember_warmup_preloaded_bytes_total",
            "Bytes the preload read from backing into the cache",
            "counter",
            self.preloaded_bytes as f64,
        );
        g(
            "ember_warmup_preload_skipped_blocks_total",
            "Planned blocks already cached when the preload reached them",
            "counter",
            self.preload_skipped_blocks as f64,
        );
        g(
            "ember_warmup_preload_planned_blocks",
            "Blocks the preload planned",
            "gauge",
            self.preload_planned_blocks as f64,
        );
        g(
            "ember_warmup_preload_seconds",
            "Time the preload ran",
            "gauge",
            self.preload_ns as f64 / 1e9,
        );
        g(
            "ember_warmup_log_bytes_written_total",
            "Record bytes written to the warmup log",
            "counter",
            self.log_bytes_written as f64,
        );
        g(
            "ember_warmup_staged_requests_total",
            "Requests staged by the monitor",
            "counter",
            self.staged_requests as f64,
        );
        g(
            "ember_warmup_staging_dropped_total",
            "Requests dropped because the staging buffer was full",
            "counter",
            self.staging_dropped as f64,
        );
        g(
            "ember_warmup_staging_bytes",
            "Size of the metadata staging buffer",
            "gauge",
            self.staging_bytes as f64,
        );
        g(
            "ember_warmup_preloaded_hits_total",
            "Client read hits on preloaded blocks (first hit per block)",
            "counter",
            self.preloaded_hits as f64,
        );
        g(
            "ember_warmup_preloaded_from_snapshot_blocks_total",
            "Blocks the preload took from the performance snapshot",
            "counter",
            self.preloaded_from_snapshot_blocks as f64,
        );
        g(
            "ember_warmup_preloaded_from_backing_blocks_total",
            "Blocks the preload read from backing",
            "counter",
            self.preloaded_from_backing_blocks as f64,
        );
        g(
            "ember_warmup_snapshot_bad_blocks_total",
            "Snapshot copies that failed their checksum at preload",
            "counter",
            self.snapshot_bad_blocks as f64,
        );
        g(
            "ember_warmup_snapshot_bytes_written_total",
            "Bytes of segments written to the performance snapshot",
            "counter",
            self.snapshot_bytes_written as f64,
        );
        g(
            "ember_warmup_snapshot_copied_blocks_total",
            "Blocks copied into the snapshot's staging buffer",
            "counter",
            self.snapshot_copied_blocks as f64,
        );
        g(
            "ember_warmup_snapshot_uncached_blocks_total",
            "Logged blocks not copied into the snapshot (not cached)",
            "counter",
            self.snapshot_uncached_blocks as f64,
        );
        g(
            "ember_warmup_snapshot_staging_bytes",
            "Size of the snapshot's staging buffer (0: no snapshot)",
            "gauge",
            self.snapshot_staging_bytes as f64,
        );
        o
    }
}
