//! What `ember serve` asks of warmup: where the log is, how large its staging buffer and its
//! file are, and how to preload.

use ember_policy::warmup::SelectorKind;
use std::path::PathBuf;

/// How much to preload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WarmupSize {
    /// A percentage (0 to 100) of the cache's data blocks.
    Percent(f64),
    /// Bytes.
    Bytes(u64),
}

impl WarmupSize {
    /// Blocks to preload in a cache of `capacity` blocks of `block_size` bytes (at most all).
    pub fn blocks(self, capacity: u64, block_size: u64) -> u64 {
        let b = match self {
            WarmupSize::Percent(p) => (capacity as f64 * p.clamp(0.0, 100.0) / 100.0) as u64,
            WarmupSize::Bytes(n) => n / block_size,
        };
        b.min(capacity)
    }
}

/// The performance snapshot as configured (`--warmup-snapshot`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotOptions {
    /// Bytes of the staging buffer (one segment; Bonfire: 128 MiB).
    pub staging_bytes: u64,
    /// Bytes of the snapshot file (its segments are written circularly).
    pub size_bytes: u64,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        SnapshotOptions { staging_bytes: 128 << 20, size_bytes: 1 << 30 }
    }
}

/// Warmup as configured.
#[derive(Clone, Debug)]
pub struct WarmupOptions {
    /// The warmup log: a file or a block device; with `in_cache`, the cache device's path.
    pub log: PathBuf,
    /// The log lives in the region of the cache device's layout that `ember cache format
    /// --warmup-log SIZE` reserved (`--warmup-log cache:`); `log_bytes` is then the region's.
    pub in_cache: bool,
    /// Bytes of the log's record area (32 bytes a record; the file adds a 4 KiB header).
    pub log_bytes: u64,
    /// Bytes of the metadata staging buffer (Bonfire: 256 KiB).
    pub staging_bytes: u64,
    /// The selector that picks regions to preload; `None`: monitor only, never preload.
    pub selector: Option<SelectorKind>,
    /// How much to preload.
    pub size: WarmupSize,
    /// Bytes of a warmup region (4 KiB to 1 MiB; Bonfire's default 1 MiB).
    pub region_bytes: u64,
    /// Seed of Random-K.
    pub seed: u64,
    /// The performance snapshot (none: metadata only).
    pub snapshot: Option<SnapshotOptions>,
    /// How often the writer drains the staging buffer (Bonfire: 10 ms here).
    pub log_interval: std::time::Duration,
}

impl WarmupOptions {
    /// Bonfire's defaults with `log`: a 64 MiB log, 256 KiB staging, Last-K, all of the
    /// cache, 1 MiB regions.
    pub fn new(log: PathBuf) -> Self {
        WarmupOptions {
            log,
            in_cache: false,
            log_bytes: 64 << 20,
            staging_bytes: 256 << 10,
            selector: Some(SelectorKind::LastK),
            size: WarmupSize::Percent(100.0),
            region_bytes: 1 << 20,
            seed: 1,
            snapshot: None,
            log_interval: std::time::Duration::from_millis(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_blocks() {
        assert_eq!(WarmupSize::Percent(50.0).blocks(1000, 4096), 500);
        assert_eq!(WarmupSize::Percent(150.0).blocks(1000, 4096), 1000);
        assert_eq!(WarmupSize::Bytes(1 << 20).blocks(1000, 4096), 256);
        assert_eq!(WarmupSize::Bytes(1 << 40).blocks(1000, 4096), 1000);
    }
}
