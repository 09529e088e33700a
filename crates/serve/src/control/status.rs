//! `ember ctl status`: a snapshot of the server (its name, configuration file, limits and
//! connections) and of every volume (backing, policies, counters, errors), serializable as
//! the control reply. It reads counters and the map's sizes, never walks the index, so it
//! is cheap enough to ask every 100 ms while serving at full rate.

use std::path::PathBuf;

use ember_engine::{Engine, VolumeStats, WarmupStats};
use ember_nbd::server::ShutdownHandle;
use serde::{Deserialize, Serialize};

use super::health_view::HealthView;
use crate::config::ServeConfig;

/// The server and every volume.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    /// The server's name (names the default control socket).
    pub name: Option<String>,
    /// The server's process id.
    pub pid: u32,
    /// Seconds since it started serving.
    pub uptime_secs: f64,
    /// The config file, if it was started from one.
    pub config_file: Option<PathBuf>,
    /// The cache device.
    pub cache: CacheStatus,
    /// The policies in force.
    pub write_policy: String,
    /// The replacement policy.
    pub policy: String,
    /// The admission sieve.
    pub admission: String,
    /// The sequential cutoff in force: policy, thresholds in bytes, streams per volume.
    #[serde(default)]
    pub seq_cutoff: Option<serde_json::Value>,
    /// Cleaning control in force (flush rate cap, idle policy) and what background cleaning
    /// does now.
    #[serde(default)]
    pub cleaning: Option<ember_engine::CleaningStatus>,
    /// Bonfire's warmup: `off`, `monitoring`, `preloading` or `done`, with its counters.
    pub warmup: WarmupStatus,
    /// The cache device's health: errors, degraded mode, lost blocks.
    #[serde(default)]
    pub health: HealthView,
    /// Connections open now and their limit.
    pub connections: usize,
    /// The connection limit.
    pub max_connections: usize,
    /// Bytes of the shared buffer budget held now.
    pub buffer_used: u64,
    /// The shared buffer budget.
    pub buffer_budget: u64,
    /// Read hit ratio over every volume (0 to 1).
    pub hit_ratio: f64,
    /// Every volume, in configuration order.
    pub volumes: Vec<VolumeStatus>,
}

/// The cache device's occupancy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CacheStatus {
    /// Its path (or `mem:SIZE`).
    pub device: PathBuf,
    /// Bytes a block.
    pub block_size: u32,
    /// Data blocks.
    pub capacity_blocks: u64,
    /// Blocks holding data.
    pub resident_blocks: u64,
    /// Dirty blocks (write-back policies).
    pub dirty_blocks: u64,
}

/// Bonfire's warmup at a glance.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WarmupStatus {
    /// off, monitoring, preloading or done.
    pub state: String,
    /// Why there was no preload, or how it ended.
    pub reason: String,
    /// Blocks preloaded so far, of those planned.
    pub preloaded_blocks: u64,
    /// Blocks the preload planned.
    pub planned_blocks: u64,
}

/// One volume.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VolumeStatus {
    /// Its export name.
    pub name: String,
    /// Its backing (path or NBD URI).
    pub backing: String,
    /// `cached`, `uncached` (served from backing, `ember ctl uncache`) or `not served` (the
    /// cache device records it, this run does not export it).
    #[serde(default)]
    pub state: String,
    /// Block reads served from the cache.
    pub read_hits: u64,
    /// Block reads served from backing.
    pub read_misses: u64,
    /// Read hit ratio (0 to 1).
    pub hit_ratio: f64,
    /// Block writes.
    pub writes: u64,
    /// Requests that failed with an I/O error.
    pub io_errors: u64,
    /// Flusher batches that failed.
    pub flush_errors: u64,
    /// Cache-device read errors served from backing instead.
    pub cache_read_errors: u64,
    /// Missed blocks the sequential cutoff kept out of the cache.
    #[serde(default)]
    pub seq_cutoff_bypasses: u64,
    /// Blocks NBD_CMD_CACHE loaded into the cache (prefetches, not hits).
    #[serde(default)]
    pub cache: u64,
    /// Requests served in degraded mode (from backing only).
    #[serde(default)]
    pub degraded_requests: u64,
    /// Blocks lost with a failed cache device (reads of them fail until `clear-lost`).
    #[serde(default)]
    pub lost_blocks: u64,
    /// Refused whole until `ember ctl clear-lost` (lost blocks restored at start).
    #[serde(default)]
    pub refused: bool,
    /// Cache blocks holding the newest version of one of its blocks.
    #[serde(default)]
    pub resident_blocks: u64,
    /// Its own write policy (none: the cache-wide one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_write_policy: Option<String>,
    /// Its own admission sieve (none: the cache-wide one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_admission: Option<String>,
    /// Its own sequential cutoff (none: the cache-wide one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_seq_cutoff: Option<serde_json::Value>,
    /// Its min share of the cache, in blocks (none: no share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_share_blocks: Option<u64>,
    /// Its max share of the cache, in blocks (none: no share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_share_blocks: Option<u64>,
    /// Its clean blocks as the shares count them (with shares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_occupancy: Option<u64>,
}

fn ratio(hits: u64, misses: u64) -> f64 {
    if hits + misses == 0 {
        0.0
    } else {
        hits as f64 / (hits + misses) as f64
    }
}

impl VolumeStatus {
    fn new(name: &str, backing: &str, state: &str, s: &VolumeStats) -> VolumeStatus {
        VolumeStatus {
            name: name.to_string(),
            backing: backing.to_string(),
            state: state.to_string(),
            read_hits: s.read_hits,
            read_misses: s.read_misses,
            hit_ratio: ratio(s.read_hits, s.read_misses),
            writes: s.write_hits + s.write_misses,
            io_errors: s.io_errors,
            flush_errors: s.flush_errors,
            cache_read_errors: s.cache_read_errors,
            seq_cutoff_bypasses: s.seq_cutoff_bypasses,
            cache: s.cache_loads,
            degraded_requests: s.degraded_requests,
            lost_blocks: 0,
            refused: false,
            resident_blocks: 0,
            own_write_policy: None,
            own_admission: None,
            own_seq_cutoff: None,
            min_share_blocks: None,
            max_share_blocks: None,
            share_occupancy: None,
        }
    }
}

impl WarmupStatus {
    fn new(w: &WarmupStats) -> WarmupStatus {
        let state = serde_json::to_value(&w.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        WarmupStatus {
            state,
            reason: w.reason.clone(),
            preloaded_blocks: w.preloaded_blocks,
            planned_blocks: w.preload_planned_blocks,
        }
    }
}

/// What [`Status::read`] reads besides the engine.
pub(crate) struct StatusSources<'a> {
    pub engine: &'a Engine,
    pub nbd: &'a ShutdownHandle,
    pub config: &'a ServeConfig,
    pub name: Option<String>,
    pub config_file: Option<PathBuf>,
    pub uptime_secs: f64,
}

impl Status {
    /// The snapshot now.
    pub(crate) fn read(src: StatusSources<'_>) -> Status {
        // Counters only (atomics): nothing here takes a lock a request takes.
        let stats = src.engine.stats();
        let config = src.config;
        let volumes = stats
            .volumes
            .iter()
            .map(|(name, s)| {
                let backing = config
                    .volumes
                    .iter()
                    .find(|v| &v.name == name)
                    .map(|v| v.backing.as_str())
                    .unwrap_or("");
                let state = src.engine.volume_state(name).map_or("not served", |s| s.name());
                let mut v = VolumeStatus::new(name, backing, state, s);
                v.lost_blocks = src.engine.lost_blocks(name);
                v.refused = src.engine.is_refused(name);
                v.resident_blocks = src.engine.volume_occupancy(name).map_or(0, |o| o.0);
                if let Ok(own) = src.engine.volume_settings(name) {
                    v.own_write_policy = own.write_policy.map(|m| m.name().to_string());
                    v.own_admission = own.admission;
                    v.own_seq_cutoff = own.seq_cutoff.and_then(|c| serde_json::to_value(c).ok());
                    v.min_share_blocks = own.min_share_blocks;
                    v.max_share_blocks = own.max_share_blocks;
                    v.share_occupancy = own.share_occupancy;
                }
                v
            })
            .collect();
        Status {
            name: src.name,
            pid: std::process::id(),
            uptime_secs: src.uptime_secs,
            config_file: src.config_file,
            cache: CacheStatus {
                device: config.cache.device.clone(),
                block_size: stats.block_size,
                capacity_blocks: stats.capacity_blocks,
                resident_blocks: stats.resident_blocks,
                dirty_blocks: src.engine.dirty_blocks(),
            },
            write_policy: src.engine.write_mode().name().to_string(),
            policy: config.live.policy.clone(),
            admission: config.live.admission.clone(),
            seq_cutoff: serde_json::to_value(src.engine.seq_cutoff()).ok(),
            cleaning: Some(src.engine.cleaning()),
            warmup: WarmupStatus::new(&src.engine.warmup_stats()),
            health: HealthView::new(&src.engine.health()),
            connections: src.nbd.connections(),
            max_connections: config.live.limits.max_connections,
            buffer_used: src.nbd.budget_used(),
            buffer_budget: config.live.limits.buffer_budget,
            hit_ratio: stats.read_hit_ratio(),
            volumes,
        }
    }

    /// The one-line summary systemd shows (`STATUS=`): hit ratio, dirty blocks, warmup;
    /// first, when the cache device was given up, that it is degraded and what was lost.
    pub fn summary(&self) -> String {
        let degraded = if self.health.degraded() {
            format!(
                "DEGRADED (cache device given up: {}), {} lost blocks; ",
                self.health.cause.as_deref().unwrap_or("?"),
                self.health.lost_blocks
            )
        } else {
            String::new()
        };
        degraded
            + &format!(
                "hit ratio {:.1}%, {} dirty blocks, warmup {}",
                100.0 * self.hit_ratio,
                self.cache.dirty_blocks,
                self.warmup.state
            )
    }
}
