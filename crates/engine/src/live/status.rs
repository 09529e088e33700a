//! `Engine::status`: a serializable snapshot of the cache and each volume, cheap enough to
//! take every 100 ms while serving at full rate. It reads the counters (atomics; the read
//! path's per-thread shards folded), the occupancy counters (atomics the state keeps: blocks
//! resident and dirty, per volume), the write policy word, and under the state lock only a
//! few fields the state keeps current (the number of dirty epochs, a drain's count, the
//! names of the policies, the last flusher error): it never walks the index or the dirty map.

use super::seq_cutoff::{self, SeqCutoffSettings};
use super::settings::{limits, WritebackLimits};
use super::volume_settings::{of_locked, VolumeSettings};
use crate::cleaning_cell::CleaningStatus;
use crate::core::Inner;
use crate::health::HealthStatus;
use crate::layout::WriteMode;
use crate::warmup::WarmupStats;
use ember_policy::Admission as _;
use serde::Serialize;

/// The whole cache, as of one moment.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// The write policy new writes go through.
    pub write_policy: WriteMode,
    /// A switch whose drain runs: the former write-back policy whose dirty blocks are still
    /// being written back, and how many are left.
    pub draining: Option<Draining>,
    /// The replacement policy.
    pub replacement: String,
    /// The admission sieve.
    pub admission: String,
    /// The write-back tuning in force.
    pub limits: WritebackLimits,
    /// The sequential cutoff in force.
    pub seq_cutoff: SeqCutoffSettings,
    /// Cleaning control in force, and what background cleaning does now.
    pub cleaning: CleaningStatus,
    /// Cache block size in bytes.
    pub block_size: u32,
    /// Cache blocks in the data region.
    pub capacity_blocks: u64,
    /// Cache blocks holding the newest version of a block.
    pub resident_blocks: u64,
    /// Dirty block versions (all epochs).
    pub dirty_blocks: u64,
    /// Epochs holding dirty versions.
    pub dirty_epochs: u64,
    /// Flusher batches that failed since the start (with the failures to end a switch).
    pub flush_failures: u64,
    /// The last flusher error (empty if none).
    pub last_flush_error: String,
    /// Bonfire's warmup: state and counters.
    pub warmup: WarmupStats,
    /// The cache device's health: errors, degraded mode, lost blocks.
    pub health: HealthStatus,
    /// Each served volume, in configuration order.
    pub volumes: Vec<VolumeStatus>,
}

/// A switch's drain in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Draining {
    /// The former write-back policy.
    pub from: WriteMode,
    /// Its dirty block versions still to write back.
    pub blocks_left: u64,
}

/// One served volume.
#[derive(Clone, Debug, Serialize)]
pub struct VolumeStatus {
    /// Export name.
    pub name: String,
    /// The backing device.
    pub backing: String,
    /// Size in bytes.
    pub size: u64,
    /// Cached, or uncached (served from backing, allocating nothing).
    pub state: crate::layout::VolumeState,
    /// Cache blocks holding the newest version of one of its blocks.
    pub resident_blocks: u64,
    /// Its dirty block versions.
    pub dirty_blocks: u64,
    /// Block reads served from the cache device.
    pub read_hits: u64,
    /// Block reads served from backing.
    pub read_misses: u64,
    /// Read hits over block reads (0 when nothing was read).
    pub read_hit_ratio: f64,
    /// Block writes to a cached block.
    pub write_hits: u64,
    /// Block writes to an uncached block.
    pub write_misses: u64,
    /// Requests that failed with an I/O error.
    pub io_errors: u64,
    /// Flusher batches of its blocks that failed.
    pub flush_errors: u64,
    /// Missed blocks the sequential cutoff kept out of the cache.
    pub seq_cutoff_bypasses: u64,
    /// Blocks NBD_CMD_CACHE loaded into the cache.
    pub cache_loads: u64,
    /// Requests served in degraded mode (from backing only).
    pub degraded_requests: u64,
    /// Blocks on the lost list (their only current copy was on a failed cache device).
    pub lost_blocks: u64,
    /// Refused whole until `ember ctl clear-lost` (a lost list restored at start).
    pub refused: bool,
    /// The settings it holds apart from the cache-wide ones.
    pub own: VolumeSettings,
}

/// Take the snapshot.
pub(crate) fn status(inner: &Inner) -> Status {
    let policy = inner.policy.load();
    struct Locked {
        epochs: u64,
        drain_left: u64,
        own: Vec<VolumeSettings>,
        replacement: &'static str,
        admission: &'static str,
        failures: u64,
        error: String,
    }
    let served = inner.volumes.snapshot();
    let l = {
        let st = inner.state.lock();
        Locked {
            epochs: st.dirty_epoch_count() as u64,
            drain_left: st.drain_left(),
            own: served.iter().map(|v| of_locked(&st, inner.block_size(), v)).collect(),
            replacement: st.replacement_name(),
            admission: st.admission.name(),
            failures: st.flush_error_gen,
            error: st.last_flush_error.clone(),
        }
    };
    let lost: Vec<(u64, bool)> = {
        let l = inner.health.lost.lock();
        served.iter().map(|v| (l.count(v.id), l.refused(v.id))).collect()
    };
    let occupancy: Vec<(u64, u64)> = served.iter().map(|v| inner.occupancy.volume(v.id)).collect();
    let volumes = served
        .iter()
        .zip(&occupancy)
        .zip(&lost)
        .zip(l.own)
        .map(|(((v, &(resident_blocks, dirty_blocks)), &lost_of), own)| {
            let s = inner.counters[v.id as usize].snapshot();
            let reads = s.read_hits + s.read_misses;
            VolumeStatus {
                name: v.name.clone(),
                backing: v.backing.describe(),
                size: v.size,
                state: if v.caching() {
                    crate::layout::VolumeState::Cached
                } else {
                    crate::layout::VolumeState::Uncached
                },
                resident_blocks,
                dirty_blocks,
                read_hits: s.read_hits,
                read_misses: s.read_misses,
                read_hit_ratio: if reads == 0 { 0.0 } else { s.read_hits as f64 / reads as f64 },
                write_hits: s.write_hits,
                write_misses: s.write_misses,
                io_errors: s.io_errors,
                flush_errors: s.flush_errors,
                seq_cutoff_bypasses: s.seq_cutoff_bypasses,
                cache_loads: s.cache_loads,
                degraded_requests: s.degraded_requests,
                lost_blocks: lost_of.0,
                refused: lost_of.1,
                own,
            }
        })
        .collect();
    Status {
        write_policy: policy.mode,
        draining: policy.drain.map(|from| Draining { from, blocks_left: l.drain_left }),
        replacement: l.replacement.into(),
        admission: l.admission.into(),
        limits: limits(inner),
        seq_cutoff: seq_cutoff::get(inner),
        cleaning: inner.cleaning.status(),
        block_size: inner.geometry.block_size,
        capacity_blocks: inner.geometry.data_blocks,
        resident_blocks: inner.occupancy.resident_total(),
        dirty_blocks: inner.occupancy.dirty_total(),
        dirty_epochs: l.epochs,
        flush_failures: l.failures,
        last_flush_error: l.error,
        warmup: inner.warmup.stats(),
        health: inner.health.status(),
        volumes,
    }
}
