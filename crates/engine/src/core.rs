//! The shared core: what the engine handle, every volume handle, the flusher and the barriers
//! hold (`Arc<Inner>`). It imports nothing above it, so every flow can import it: only the
//! device, the layout, the cache state, the counters, the gate, the stripe locks, the served
//! volumes' record (`volume_info.rs`) and warmup's [`Hooks`]. Nothing in `warmup/` imports the
//! core: the warmup threads reach the engine through `warmup::host::Host`, which the core
//! implements beside the request flows (`io/warmup_host.rs`). `wb/` holds flows above it.

use crate::device::Device;
use crate::gate::Gate;
use crate::layout::{key_volume, Geometry, Superblock, WriteMode};
use crate::state::CacheState;
use crate::stats::Counters;
use crate::stripes::Stripes;
use crate::volume_info::VolumeInfo;
use crate::warmup::Hooks;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

/// Shared by the engine handle and every volume handle.
///
/// Lock order (a thread holding one of these takes only later ones): `ordered_direct`
/// (ordered write-back) → the stripe locks of a chunk (`stripes`, ascending) → `persist` (the
/// journal cursor; a FUA write under write-back persist runs its barrier with its stripes
/// held) → `state` → nothing else; `persist` → `superblock` (a checkpoint commit). `state`
/// and `superblock` are never held together. A request enters the gate before any of them
/// and leaves it after; `cv` waits on `state`. The flusher holds its batch's stripes only
/// to pin, mark and read it, none across its backing I/O (`wb/flusher.rs`).
pub(crate) struct Inner {
    pub cache: Arc<dyn Device>,
    pub geometry: Geometry,
    pub mode: WriteMode,
    pub state: Mutex<CacheState>,
    pub stripes: Stripes,
    pub gate: Gate,
    /// Served volumes, in configuration order.
    pub volumes: Vec<VolumeInfo>,
    /// Counters by superblock volume index.
    pub counters: Vec<Counters>,
    pub superblock: Mutex<Superblock>,
    /// Names of every volume of the superblock, by index (served or not).
    pub volume_names: Vec<String>,
    /// Write-back limits (max/min dirty, epochs, batch).
    pub limits: Limits,
    /// Signals dirty-map progress: the flusher waits on it, FLUSH and writes over the epoch
    /// limit wait for the flusher.
    pub cv: Condvar,
    /// The journal cursor (write-back persist); also serializes barriers.
    pub persist: Mutex<Cursor>,
    /// Ordered write-back: one request at a time goes to backing directly (a discard, a
    /// write the sieve refused); it waits for the older epochs to drain holding this, and
    /// nothing the flusher needs (`io/ordered.rs`).
    pub ordered_direct: Mutex<()>,
    /// Bonfire's monitor, log writer and preloader.
    pub warmup: Hooks,
}

impl Inner {
    pub fn block_size(&self) -> u64 {
        self.geometry.block_size as u64
    }

    /// Count the evictions the state logged (clean-LRU evictions under write-back).
    pub fn count_evictions(&self, st: &mut CacheState) {
        for k in st.take_evicted() {
            if let Some(c) = self.counters.get(key_volume(k) as usize) {
                c.evictions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// The served volume with superblock index `id`.
    pub fn volume_by_id(&self, id: u32) -> Option<&VolumeInfo> {
        self.volumes.iter().find(|v| v.id == id)
    }
}

/// The write-back limits resolved against the cache size ([`crate::WritebackConfig`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub max_dirty: usize,
    pub min_dirty: usize,
    pub max_epochs: usize,
    pub batch: usize,
    pub lru: bool,
}

/// Where the journal stands (write-back persist), under its own lock, which also
/// serializes barriers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cursor {
    /// Next free journal block.
    pub next_block: u64,
    /// Generation of the checkpoint the journal extends.
    pub base: u64,
    /// Generation of the last commit (journal or checkpoint).
    pub generation: u64,
    /// A barrier failed half-way: the next one writes a checkpoint.
    pub need_checkpoint: bool,
}
