//! The engine handle: opens a formatted cache device in front of its backing volumes, hands
//! out volume handles ([`Volume`]) that serve block requests under the configured write
//! policy, reports counters, and shuts down cleanly (drain, checkpoint, clean flag) so the
//! next start is warm.
//!
//! Crash safety in version 1: the first thing `open` writes is a superblock with the clean
//! flag cleared, synced before any other write. After a crash (no clean shutdown) the flag is
//! clear and the cache starts cold (or, under write-back persist, recovers its persisted
//! dirty map); it is never warm from a map that may not match the data region.
//!
//! The work is done elsewhere: [`crate::open`] (open and recovery), [`crate::admin`] (format,
//! inspect, shutdown), [`crate::io`] (the request flows), [`crate::wb`] (flusher, barriers).

use crate::admin::{self, ShutdownReport};
use crate::config::{EngineConfig, FormatSpec};
use crate::core::Inner;
use crate::device::Device;
use crate::error::EngineError;
use crate::io::Volume;
use crate::layout::{Geometry, Superblock, WriteMode};
use crate::open::{self, OpenReport};
use crate::report::Report;
use crate::stats::Stats;
use crate::wb::flusher;
use crate::wb::WritebackConfig;
use parking_lot::Mutex;
use std::sync::Arc;

/// A cache in service. Serve its volumes through [`Engine::volume`] handles (the NBD adapter,
/// `ember-serve`, wraps them as exports), call
/// [`Engine::shutdown`] on SIGTERM/SIGINT. Dropping it without shutdown is a crash: the next
/// start is cold.
pub struct Engine {
    inner: Arc<Inner>,
    open_report: OpenReport,
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
    batch: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Engine {
    /// Dropping without [`Engine::shutdown`] is a crash: the flusher stops where it is.
    fn drop(&mut self) {
        self.inner.warmup.stop();
        self.stop_flusher();
    }
}

impl Engine {
    /// Format `cache` for the volumes of `spec`: superblock (clean, no checkpoint), empty
    /// journal. Everything previously cached is forgotten.
    pub fn format(cache: &dyn Device, spec: &FormatSpec) -> Result<Superblock, EngineError> {
        admin::format(cache, spec)
    }

    /// Read what `cache` holds: geometry, volumes, last shutdown, and occupancy when the last
    /// shutdown was clean. Does not modify the device.
    pub fn inspect(cache: &dyn Device) -> Result<Report, EngineError> {
        admin::inspect(cache)
    }

    /// Open a formatted cache device for service with the default write-back tuning
    /// ([`WritebackConfig::default`]); see [`Engine::open_with`].
    pub fn open(config: EngineConfig) -> Result<Engine, EngineError> {
        Self::open_with(config, WritebackConfig::default())
    }

    /// Open a formatted cache device for service: resolve `wb`'s dirty thresholds against
    /// the cache's data blocks ([`crate::DirtyLimit`]; one that does not fit is
    /// [`EngineError::DirtyLimit`]); check the volumes; load the map if the last shutdown was
    /// clean; if the cache last ran write-back persist and crashed, recover its persisted
    /// dirty map (checkpoint + journal, thesis 5.3). Dirty blocks recovered under another
    /// policy are written to backing first. Then, before anything else is written to the
    /// cache device, clear the clean flag (synced; under write-back persist together with a
    /// fresh checkpoint of the dirty map), and start the flusher.
    pub fn open_with(config: EngineConfig, wb: WritebackConfig) -> Result<Engine, EngineError> {
        let (inner, open_report) = open::open(config, wb)?;
        let flusher = if inner.mode.is_write_back() {
            let i = inner.clone();
            Some(
                std::thread::Builder::new()
                    .name("ember-flusher".into())
                    .spawn(move || flusher::flusher(i))
                    .map_err(EngineError::Io)?,
            )
        } else {
            None
        };
        Ok(Engine { inner, open_report, flusher: Mutex::new(flusher), batch: Mutex::new(None) })
    }

    fn stop_flusher(&self) {
        {
            let mut st = self.inner.state.lock();
            st.stop = true;
            self.inner.cv.notify_all();
        }
        if let Some(h) = self.flusher.lock().take() {
            let _ = h.join();
        }
        if let Some(h) = self.batch.lock().take() {
            let _ = h.join();
        }
    }

    /// Start the batch mover of a discrete sieve (the admission policy is an
    /// `ember_policy::admission::EpochAdmission`): every `epoch_ns` from the first access,
    /// the sieve's choice becomes the cache's contents (`batch.rs`). Only under
    /// write-through and write-around.
    pub fn start_batch_sieve(&self, epoch_ns: u64) -> Result<(), EngineError> {
        if self.inner.mode.is_write_back() {
            return Err(EngineError::Io(std::io::Error::other(
                "a discrete sieve replaces the cache's contents at each epoch's end, which                  dirty blocks cannot follow: use write-through or write-around",
            )));
        }
        if epoch_ns == 0 {
            return Err(EngineError::Io(std::io::Error::other("the epoch must be longer than 0")));
        }
        let mut slot = self.batch.lock();
        if slot.is_none() {
            let i = self.inner.clone();
            *slot = Some(
                std::thread::Builder::new()
                    .name("ember-batch".into())
                    .spawn(move || crate::batch::epoch_thread(i, epoch_ns))
                    .map_err(EngineError::Io)?,
            );
        }
        Ok(())
    }

    /// How this start went (fresh, warm with N blocks, or cold and why).
    pub fn open_report(&self) -> &OpenReport {
        &self.open_report
    }

    /// The handle of volume `name` (cheap to clone; every clone serves the same volume).
    pub fn volume(&self, name: &str) -> Option<Volume> {
        let index = self.inner.volumes.iter().position(|v| v.name == name)?;
        Some(Volume::new(self.inner.clone(), index))
    }

    /// Names of the served volumes, in configuration order.
    pub fn volume_names(&self) -> Vec<String> {
        self.inner.volumes.iter().map(|v| v.name.clone()).collect()
    }

    /// The cache's geometry.
    pub fn geometry(&self) -> Geometry {
        self.inner.geometry
    }

    /// The write policy in force.
    pub fn write_mode(&self) -> WriteMode {
        self.inner.mode
    }

    /// The dirty map now: dirty block versions, in total and per epoch (0 under
    /// write-through and write-around).
    pub fn dirty_stats(&self) -> crate::stats::DirtyStats {
        let st = self.inner.state.lock();
        crate::stats::DirtyStats {
            dirty_blocks: st.dirty_len() as u64,
            dirty_epochs: st.dirty_epochs(),
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let resident = self.inner.state.lock().len() as u64;
        let mut total = crate::stats::VolumeStats::default();
        let volumes = self
            .inner
            .volume_names
            .iter()
            .zip(&self.inner.counters)
            .map(|(n, c)| {
                let s = c.snapshot();
                total.add(&s);
                (n.clone(), s)
            })
            .collect();
        Stats {
            block_size: self.inner.geometry.block_size,
            capacity_blocks: self.inner.geometry.data_blocks,
            resident_blocks: resident,
            volumes,
            total,
        }
    }

    /// Clean shutdown: refuse new requests, wait for those in flight, make backing and cache
    /// durable, write the map to the free checkpoint slot, then a superblock with the clean
    /// flag pointing at it. If any step fails the cache simply starts cold next time.
    ///
    /// Write-back flush and unsafe write-back first write every dirty block to backing;
    /// write-back persist keeps them and writes them with the map (dirty flag and epoch), so
    /// the next start resumes flushing them.
    pub fn shutdown(&self) -> Result<ShutdownReport, EngineError> {
        let report = admin::shutdown(&self.inner, || self.stop_flusher());
        // After the drain: the preloader has left the gate, the log gets every request.
        self.inner.warmup.stop();
        report
    }

    /// Start Bonfire's warmup (issue 11): monitor every request into the warmup log
    /// `opts.log`, and, if this start loaded no map (cold or fresh), preload from the log
    /// in the background. A log that is missing, damaged, truncated or from another cache
    /// means no preload (the returned line says why), never an error; an error means the
    /// log cannot be created or written at all.
    pub fn start_warmup(
        &self,
        opts: &crate::warmup::WarmupOptions,
    ) -> Result<crate::warmup::WarmupStart, EngineError> {
        let warm = self.open_report.start == crate::open::StartKind::Warm;
        crate::warmup::start::start(&self.inner, warm, opts)
    }

    /// Warmup's state and counters.
    pub fn warmup_stats(&self) -> crate::warmup::WarmupStats {
        self.inner.warmup.stats()
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
