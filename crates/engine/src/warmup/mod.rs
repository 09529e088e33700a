//! Bonfire in the real cache (Zhang et al., FAST 2013, section 5): the monitor that records
//! every served request, the warmup log it is written to, and the bulk preload of a cache
//! that starts without a valid map.
//!
//! - [`monitor`]: the lock-free staging buffer the request entry points append to;
//! - [`log_file`]: the circular warmup log on a separate file (format in
//!   `ember_trace::formats::warmup_log`);
//! - [`writer`]: the background thread that drains the staging buffer into the log with
//!   large sequential writes (and copies the logged blocks into the snapshot), and the log
//!   sink a FLUSH syncs;
//! - [`snapshot_file`]: the performance snapshot (the data of recently accessed blocks);
//! - [`snapshot_plan`]: which preloaded blocks may come from the snapshot (never stale);
//! - [`plan`]: from the log to the blocks to preload (selector, dedupe, sort, merge);
//! - [`preload`]: the background preloader, foreground first, never over newer data;
//! - [`start`]: deciding, planning and starting it all on an open engine;
//! - `again`: the preload of a new cache device put in while serving;
//! - [`stats`]: what `ember stats` and the metrics show;
//! - [`options`]: what `ember serve` asks for;
//! - `host`: what the threads need of the engine (`host::Host`).
//!
//! Nothing here imports the engine's core or a request flow, so the core can hold
//! `Hooks`: files here import one another, the device, the layout, the clock, the stripe
//! locks' chunk size, the served volumes' record and the engine's error type. The threads
//! reach the engine only through `host::Host` (implemented in `io/warmup_host.rs`).
//!
//! Not built: a log region inside the cache layout (the log is a separate file).

mod again;
pub(crate) mod host;
pub mod log_file;
pub mod monitor;
pub mod options;
pub mod plan;
pub(crate) mod preload;
pub mod snapshot_file;
pub mod snapshot_plan;
pub(crate) mod start;
pub mod stats;
pub(crate) mod writer;

pub(crate) use again::preload_again;
pub use options::{SnapshotOptions, WarmupOptions, WarmupSize};
pub use start::WarmupStart;
pub use stats::{WarmupState, WarmupStats};

use monitor::Monitor;
use stats::Counters;
use std::sync::{Arc, OnceLock};

/// What the engine core holds for warmup: the monitor once monitoring starts, and the
/// counters.
#[derive(Default)]
pub(crate) struct Hooks {
    pub monitor: OnceLock<Arc<Monitor>>,
    pub sink: OnceLock<Arc<parking_lot::Mutex<writer::LogSink>>>,
    pub counters: Counters,
    pub running: parking_lot::Mutex<Option<start::Running>>,
    /// The options warmup started with (a replaced cache device preloads by them).
    pub options: parking_lot::Mutex<Option<WarmupOptions>>,
}

impl Hooks {
    /// Stop the warmup threads (the log writer drains and syncs the log first).
    pub fn stop(&self) {
        let running = self.running.lock().take();
        if let Some(r) = running {
            r.stop();
        }
    }

    /// A snapshot for the stats.
    pub fn stats(&self) -> WarmupStats {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.counters;
        let m = self.monitor.get();
        WarmupStats {
            state: c.state(),
            reason: c.reason.lock().clone(),
            preloaded_blocks: c.preloaded_blocks.load(Relaxed),
            preloaded_bytes: c.preloaded_bytes.load(Relaxed),
            preload_skipped_blocks: c.skipped_blocks.load(Relaxed),
            preload_planned_blocks: c.planned_blocks.load(Relaxed),
            preload_ns: c.preload_ns(),
            log_bytes_written: c.log_bytes.load(Relaxed),
            staged_requests: m.map_or(0, |m| m.staged()),
            staging_dropped: m.map_or(0, |m| m.dropped()),
            staging_bytes: m.map_or(0, |m| m.capacity_bytes()),
            preloaded_hits: c.preloaded_hits.load(Relaxed),
            preloaded_from_snapshot_blocks: c.preloaded_snapshot_blocks.load(Relaxed),
            preloaded_from_backing_blocks: c
                .preloaded_blocks
                .load(Relaxed)
                .saturating_sub(c.preloaded_snapshot_blocks.load(Relaxed)),
            snapshot_bad_blocks: c.snapshot_bad_blocks.load(Relaxed),
            snapshot_bytes_written: c.snapshot_bytes.load(Relaxed),
            snapshot_copied_blocks: c.snapshot_copied_blocks.load(Relaxed),
            snapshot_uncached_blocks: c.snapshot_uncached_blocks.load(Relaxed),
            snapshot_staging_bytes: c.snapshot_staging_bytes.load(Relaxed),
        }
    }

    /// The FLUSH rule of the performance snapshot: before a FLUSH or a FUA write is
    /// acknowledged, drain the staging buffer into the warmup log and sync the log (so a
    /// write durable on backing is durably logged, and an older snapshot copy of its blocks
    /// is never used). Nothing without a snapshot. An error fails the FLUSH.
    pub fn sync_log(&self) -> std::io::Result<()> {
        // No lock at all without a snapshot (the staging size is set once, at start).
        if self.counters.snapshot_staging_bytes.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let (Some(sink), Some(m)) = (self.sink.get(), self.monitor.get()) else { return Ok(()) };
        let mut g = sink.lock();
        if !g.has_snapshot() {
            return Ok(());
        }
        g.sync(m, &self.counters)
    }

    /// A client read hit cache block `c`, which the preload installed (first hit).
    #[inline]
    pub fn preloaded_hit(&self) {
        self.counters.preloaded_hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Record one served request (the hot path: one lock-free append when monitoring).
    #[inline]
    pub fn record(&self, volume: u32, write: bool, offset: u64, len: u64, block_size: u64) {
        if let Some(m) = self.monitor.get() {
            m.record(volume, write, offset, len, block_size);
        }
    }
}

#[cfg(test)]
mod tests;
