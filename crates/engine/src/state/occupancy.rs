//! The occupancy counters: newest versions in the index and dirty versions, by volume. The
//! index (`index.rs`: `map`, `unlist`) and the dirty map (`dirty.rs`: `dirty_insert`,
//! `dirty_remove`) keep them under the state lock, the only writer; anyone reads them without
//! it (atomics), so `status`, polled while serving, never takes the lock the hit path takes.
//! A reading is each volume's count as of one moment; the totals add the volumes' readings.

use super::CacheState;
use crate::layout::{key_volume, MAX_VOLUMES};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Newest versions and dirty versions, by volume (see the module comment).
#[derive(Debug)]
pub struct Occupancy {
    resident: [AtomicU64; MAX_VOLUMES],
    dirty: [AtomicU64; MAX_VOLUMES],
}

impl Default for Occupancy {
    fn default() -> Self {
        Occupancy {
            resident: std::array::from_fn(|_| AtomicU64::new(0)),
            dirty: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Add `delta` to the count of `key`'s volume (one writer: a load and a store, no locked
/// instruction).
fn bump(counts: &[AtomicU64; MAX_VOLUMES], key: u64, delta: i64) {
    if let Some(n) = counts.get(key_volume(key) as usize) {
        n.store(n.load(Relaxed).wrapping_add_signed(delta), Relaxed);
    }
}

impl Occupancy {
    /// `key`'s newest version entered (+1) or left (-1) the index.
    pub(super) fn resident(&self, key: u64, delta: i64) {
        bump(&self.resident, key, delta);
    }

    /// A dirty version of `key` entered (+1) or left (-1) the dirty map.
    pub(super) fn dirty(&self, key: u64, delta: i64) {
        bump(&self.dirty, key, delta);
    }

    /// Volume `id`'s (resident, dirty) counts.
    pub fn volume(&self, id: u32) -> (u64, u64) {
        let i = id as usize;
        (
            self.resident.get(i).map_or(0, |n| n.load(Relaxed)),
            self.dirty.get(i).map_or(0, |n| n.load(Relaxed)),
        )
    }

    /// Resident blocks, every volume.
    pub fn resident_total(&self) -> u64 {
        self.resident.iter().map(|n| n.load(Relaxed)).sum()
    }

    /// Dirty versions, every volume.
    pub fn dirty_total(&self) -> u64 {
        self.dirty.iter().map(|n| n.load(Relaxed)).sum()
    }
}

impl CacheState {
    /// The occupancy counters, to read without the state lock.
    pub fn occupancy_counters(&self) -> Arc<Occupancy> {
        self.occupancy.clone()
    }

    /// Volume `id`'s (resident, dirty) counts recounted from the index and the dirty map
    /// (a walk of both: for tests that check the counters).
    #[cfg(test)]
    pub fn recount_occupancy(&self, id: u32) -> (u64, u64) {
        let resident = (0..self.keys.len())
            .filter(|&c| {
                let key = self.keys[c];
                key_volume(key) == id && self.get(key) == Some(c as u32)
            })
            .count() as u64;
        let dirty = self.dirty.keys().filter(|&&(_, k)| key_volume(k) == id).count() as u64;
        (resident, dirty)
    }
}
