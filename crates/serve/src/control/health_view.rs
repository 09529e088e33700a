//! The cache device's health in `ember ctl status` (and the systemd status line): the
//! engine's [`ember_engine::HealthStatus`] in a form the client can read back.

use ember_engine::HealthStatus;
use serde::{Deserialize, Serialize};

/// Healthy or degraded, why, the errors and the lost blocks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HealthView {
    /// `healthy`, `degrading` or `degraded`.
    pub state: String,
    /// What gave the device up: gone, sync-failed, timeout, error-limit or operator.
    pub cause: Option<String>,
    /// The error that decided it.
    pub reason: String,
    /// When, in milliseconds since the Unix epoch.
    pub since_unix_ms: u64,
    /// Cache-device I/O errors since the start.
    pub errors_total: u64,
    /// The decayed error count now.
    pub errors_decayed: f64,
    /// Its limit (0: none).
    pub error_limit: u32,
    /// The I/O timeout in milliseconds (0: none).
    pub io_timeout_ms: u64,
    /// Blocks on the lost list.
    pub lost_blocks: u64,
    /// Writing the lost list to the state file failed.
    pub record_failed: bool,
}

impl HealthView {
    /// The view of `h`.
    pub fn new(h: &HealthStatus) -> HealthView {
        HealthView {
            state: h.state.to_string(),
            cause: h
                .cause
                .as_ref()
                .and_then(|c| serde_json::to_value(c).ok())
                .and_then(|v| v.as_str().map(str::to_string)),
            reason: h.reason.clone(),
            since_unix_ms: h.since_unix_ms,
            errors_total: h.errors_total,
            errors_decayed: h.errors_decayed,
            error_limit: h.error_limit,
            io_timeout_ms: h.io_timeout_ms,
            lost_blocks: h.lost_blocks,
            record_failed: h.record_failed,
        }
    }

    /// Whether the cache device was given up.
    pub fn degraded(&self) -> bool {
        !self.state.is_empty() && self.state != "healthy"
    }

    /// One line for `ember ctl status`.
    pub fn line(&self) -> String {
        let limit = if self.error_limit == 0 {
            "no limit".to_string()
        } else {
            format!("limit {}", self.error_limit)
        };
        if !self.degraded() {
            return format!(
                "cache device healthy: {} I/O errors ({:.1} decayed, {limit})\n",
                self.errors_total, self.errors_decayed
            );
        }
        format!(
            "cache device DEGRADED ({}): {}; every request goes to backing; {} lost blocks{}\n",
            self.cause.as_deref().unwrap_or("?"),
            self.reason,
            self.lost_blocks,
            if self.record_failed { " (NOT written to the state file)" } else { "" }
        )
    }
}
