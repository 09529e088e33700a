//! The engine handle's side of degraded mode (`health/`, `io/degraded.rs`): the rules that
//! give the cache device up, the sink its record goes to, the lost list as the operator sees
//! it (restored at a restart, cleared by `ember ctl clear-lost`), and the way back to
//! caching: a new device in place of the failed one (`live/replace.rs`).

use crate::device::Device;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::health::{DegradeCause, DegradedRecord, DegradedSink, HealthConfig, HealthStatus};
use crate::io::{settle, write_record};
use crate::live::ReplaceReport;
use std::sync::Arc;

impl Engine {
    /// Put `config` in force: the error limit and half-life judge the next error, the I/O
    /// timeout applies to the next cache-device I/O.
    pub fn set_health(&self, config: HealthConfig) {
        self.inner.health.configure(config);
    }

    /// The rules in force.
    pub fn health_config(&self) -> HealthConfig {
        self.inner.health.config()
    }

    /// The cache's health now (a cache that tripped is switched first).
    pub fn health(&self) -> HealthStatus {
        settle(&self.inner);
        self.inner.health.status()
    }

    /// Where the [`DegradedRecord`] goes when the cache goes degraded and whenever the lost
    /// list changes afterwards. The engine calls it with no lock of a request held and serves
    /// degraded only after it returned.
    pub fn set_degraded_sink(&self, sink: DegradedSink) {
        *self.inner.health.sink.lock() = Some(sink);
    }

    /// Give the cache device up now, as a failure would (`reason` says why): the operator's
    /// way out of a device that misbehaves without failing, and the tests'. True if this call
    /// decided it (false: already degraded).
    pub fn degrade(&self, reason: &str) -> bool {
        let decided = self.inner.health.trip(DegradeCause::Operator, reason.to_string());
        settle(&self.inner);
        decided
    }

    /// Replace the cache device given up with `device`, while serving (`ember ctl
    /// replace-cache`): the cache is healthy again, cold, with the lost list unchanged.
    ///
    /// - MUST refuse ([`EngineError::Refused`], nothing changed) unless the cache is
    ///   degraded; a device smaller than the cache's layout; one that holds an ember cache
    ///   unless `format`; a memory device under a policy it cannot hold.
    /// - The new device MUST be laid out (the running volume table, geometry and policy; no
    ///   map) and synced, and the record of the cache as it will be (healthy, the lost list,
    ///   the new device) MUST have been written durably by `sink`, which becomes the sink, all
    ///   before the first request uses it: a crash at any point restarts either on the failed
    ///   device's record or on the new device, never trusting the failed one.
    /// - Requests in flight against backing MUST finish first (new ones wait, at most
    ///   `live::replace::DRAIN_WAIT` in all, else it refuses); new requests see the new, empty
    ///   cache. Nothing of the failed device is read again.
    /// - The lost list MUST stay as it is: its blocks read EIO until [`Engine::clear_lost`],
    ///   and a volume refused at start stays refused.
    /// - Bonfire's preload runs from the warmup log when the log is its own file (not the
    ///   failed device's region), as at a start without a map ([`ReplaceReport::warmup`]).
    pub fn replace_cache(
        &self,
        device: Arc<dyn Device>,
        format: bool,
        sink: DegradedSink,
    ) -> Result<ReplaceReport, EngineError> {
        let mut report = crate::live::replace::replace(&self.inner, device, format, sink)?;
        // The device is in service: a preload that cannot start is said, not an error.
        report.warmup = crate::warmup::preload_again(&self.inner)
            .unwrap_or_else(|e| Some(format!("no preload: {e}")));
        Ok(report)
    }

    /// The record as it stands: degraded or not, why, the lost blocks by volume.
    pub fn degraded_record(&self) -> DegradedRecord {
        crate::io::degraded_record(&self.inner)
    }

    /// The superblock index of volume `name`.
    fn volume_id(&self, name: &str) -> Result<u32, EngineError> {
        self.inner
            .volume_names
            .read()
            .iter()
            .position(|n| n == name)
            .map(|i| i as u32)
            .ok_or_else(|| EngineError::Invalid(format!("no volume {name:?} on this cache")))
    }

    /// Restore volume `name`'s lost list from an earlier run's record (`block_size`, the
    /// byte offsets of its blocks): the volume is refused whole ([`Engine::is_refused`])
    /// until [`Engine::clear_lost`]. Returns how many of this cache's blocks are listed.
    pub fn restore_lost(
        &self,
        name: &str,
        block_size: u32,
        offsets: &[u64],
    ) -> Result<u64, EngineError> {
        let id = self.volume_id(name)?;
        let bs = self.inner.block_size();
        Ok(self.inner.health.lost_mut(|lost| {
            for &o in offsets {
                for b in o / bs..(o + u64::from(block_size)).div_ceil(bs) {
                    lost.insert(id, b);
                }
            }
            lost.volumes.entry(id).or_default().refused = true;
            lost.count(id)
        }))
    }

    /// Accept backing's version of every listed block of volume `name` (the operator's
    /// `ember ctl clear-lost`): the blocks leave the list, a refused volume is served again,
    /// and the record is written again. Returns how many blocks were listed. An error from
    /// the sink is returned (the list is cleared in memory either way).
    pub fn clear_lost(&self, name: &str) -> Result<u64, EngineError> {
        let id = self.volume_id(name)?;
        let n = self.inner.health.lost_mut(|l| l.clear(id));
        write_record(&self.inner).map_err(EngineError::Io)?;
        Ok(n)
    }

    /// Whether volume `name` is refused whole (a lost list restored at start, not cleared).
    pub fn is_refused(&self, name: &str) -> bool {
        self.volume_id(name).is_ok_and(|id| self.inner.health.lost.lock().refused(id))
    }

    /// [`EngineError::Refused`] saying the cache is degraded and `what` cannot be done, if
    /// it is not healthy.
    pub(crate) fn refuse_degraded(&self, what: &str) -> Result<(), EngineError> {
        if self.inner.health.is_healthy() {
            return Ok(());
        }
        settle(&self.inner);
        Err(EngineError::Refused(format!(
            "cannot {what}: the cache device was given up (degraded mode: {})",
            self.inner.health.status().reason
        )))
    }

    /// Blocks of volume `name` on the lost list.
    pub fn lost_blocks(&self, name: &str) -> u64 {
        self.volume_id(name).map_or(0, |id| self.inner.health.lost.lock().count(id))
    }
}
