//! `ember ctl replace-cache PATH [--format]`: back to caching without a restart after the
//! cache device was given up (docs/reference/degraded.md). The new device is opened as the
//! cache device is (`--direct` as configured), the state file records the replacement under
//! way, and the engine lays the device out, records it as in service through the sink this
//! makes (synced) and swaps it in: a kill at any point restarts either on the failed
//! device's record (refused, as after any failure) or on the new device. The lost list is
//! untouched. Runs under the lock `set`, `reload` and the volume commands hold.

use std::path::PathBuf;
use std::sync::Arc;

use ember_engine::device::{FileDevice, FileOptions};
use serde_json::{json, Value};

use super::Control;
use crate::degraded::InService;

impl Control {
    pub(super) fn replace_cache(&self, path: &str, format: bool) -> Result<Value, String> {
        let _changing = self.changing.lock();
        let health = self.engine.health();
        if health.state != "degraded" {
            return Err(format!(
                "the cache device is {}: replace-cache puts a new device in place of one that \
                 was given up (degraded mode); to move a healthy cache, stop the server and \
                 start it on the new device",
                health.state
            ));
        }
        let service = self.book.in_service();
        let new = PathBuf::from(path);
        if path.is_empty() || path.starts_with("mem:") {
            return Err(format!("{path:?}: give the path of a file or a block device"));
        }
        if new == service.device || service.replaced.contains(&new) {
            return Err(format!(
                "{path} is a cache device that failed: it is never trusted again (a restart \
                 with --reformat-failed-cache reformats it); give another device"
            ));
        }
        let direct = self.state.lock().config.cache.direct;
        let dev =
            FileDevice::open(&new, FileOptions { direct, create_size: None, exclusive: true })
                .map_err(|e| format!("opening {path}: {e:#}"))?;
        self.book.record_replacing(&self.engine.degraded_record(), &new).map_err(|e| {
            format!("recording the replacement in the state file: {e}; nothing was changed")
        })?;
        let mut replaced = service.replaced.clone();
        replaced.push(service.device.clone());
        let next = InService { device: new.clone(), replaced };
        let report =
            match self.engine.replace_cache(Arc::new(dev), format, self.book.sink(Some(next))) {
                Ok(r) => r,
                Err(e) => {
                    // The failed device's record, without the replacement that did not happen.
                    if let Err(w) = self.book.write(&self.engine.degraded_record()) {
                        tracing::warn!(error = %w, "rewriting the state file");
                    }
                    tracing::warn!(path, error = %e, "replace-cache refused");
                    return Err(e.to_string());
                }
            };
        self.state.lock().config.cache.device = new.clone();
        tracing::info!(
            old = %service.device.display(),
            new = path,
            lost_blocks = report.lost_blocks,
            "cache device replaced: caching again, cold"
        );
        if let Some(w) = &report.warmup {
            tracing::info!("warmup: {w}");
        }
        Ok(json!({
            "old": service.device,
            "new": new,
            "device_bytes": report.device_bytes,
            "data_blocks": report.data_blocks,
            "unused_bytes": report.unused_bytes,
            "lost_blocks": report.lost_blocks,
            "reformatted": report.reformatted,
            "warmup": report.warmup,
            "seconds": report.seconds,
        }))
    }
}
