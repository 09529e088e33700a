//! Bonfire's warmup as configured (docs/design/warmup.md), with
//! `ember serve`'s defaults.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units;

/// Bonfire's warmup: monitoring, the warmup log, preload. Without a log, none of it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct WarmupSettings {
    /// The warmup log (`--warmup-log`): a file, a block device, or `cache:` for the region
    /// `ember cache format --warmup-log SIZE` reserved on the cache device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
    /// The selector (`--warmup`): last-k, first-k, top-k, random-k, auto, or none.
    pub selector: String,
    /// How much to preload (`--warmup-size`): PCT% of the cache or a size.
    pub size: String,
    /// Region bytes, 4K to 1M (`--warmup-region`).
    #[serde(with = "units::size")]
    pub region: u64,
    /// Bytes of records the circular log keeps (`--warmup-log-size`).
    #[serde(with = "units::size")]
    pub log_size: u64,
    /// Bytes of the metadata staging buffer (`--warmup-staging`).
    #[serde(with = "units::size")]
    pub staging: u64,
    /// How often the log writer drains the staging buffer (`--warmup-log-interval`).
    #[serde(with = "units::dur")]
    pub log_interval: Duration,
    /// Also keep the performance snapshot in `LOG.snapshot` (`--warmup-snapshot`).
    pub snapshot: bool,
    /// Bytes of the snapshot's staging buffer (`--warmup-snapshot-staging`).
    #[serde(with = "units::size")]
    pub snapshot_staging: u64,
    /// Bytes of the snapshot file (`--warmup-snapshot-size`).
    #[serde(with = "units::size")]
    pub snapshot_size: u64,
}

impl Default for WarmupSettings {
    fn default() -> Self {
        WarmupSettings {
            log: None,
            selector: "last-k".into(),
            size: "100%".into(),
            region: 1 << 20,
            log_size: 64 << 20,
            staging: 256 << 10,
            log_interval: Duration::from_millis(10),
            snapshot: false,
            snapshot_staging: 128 << 20,
            snapshot_size: 1 << 30,
        }
    }
}
