//! The shared core: what the engine handle, every volume handle, the flusher and the barriers
//! hold (`Arc<Inner>`). It imports nothing above it, so every flow can import it: only the
//! device, the layout, the cache state, the counters, the gate, the stripe locks, the write
//! policy in force (`write_policy.rs`), the served volumes' record (`volume_info.rs`) and
//! warmup's [`Hooks`] and the cell of cleaning control (`cleaning_cell.rs`). Nothing in
//! `warmup/` imports the
//! core: the warmup threads reach the engine through `warmup::host::Host`, which the core
//! implements beside the request flows (`io/warmup_host.rs`). `wb/` holds flows above it.

use crate::cleaning_cell::LiveCleaning;
use crate::device::Device;
use crate::gate::Gate;
use crate::health::Health;
use crate::layout::{key_volume, Geometry, Superblock};
use crate::state::CacheState;
use crate::stats::Counters;
use crate::stripes::Stripes;
use crate::volume_info::VolumeInfo;
use crate::volume_set::VolumeSet;
use crate::warmup::Hooks;
use crate::write_policy::PolicyCell;
use parking_lot::{Condvar, Mutex, RwLock};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Shared by the engine handle and every volume handle.
///
/// Lock order (a thread holding one of these takes only later ones): `volume_change` (a
/// change of the volume set) → `switch` (a live policy
/// switch or its drain's end, `live/`) → `ordered_direct` (ordered write-back) → the stripe
/// locks of a chunk (`stripes`, ascending) → `persist` (the journal cursor; a FUA write under
/// write-back persist runs its barrier with its stripes held) → `state` → nothing else;
/// `persist` → `superblock` (a checkpoint commit); `seq_cutoff` → `state` (a change of the
/// cutoff; `status` takes `seq_cutoff` alone). `state` and `superblock` are never held
/// together. A request enters the gate, then the policy's phase (`policy`), before any of
/// them and leaves after; `cv` waits on `state`. The flusher holds its batch's stripes only
/// to pin, mark and read it, none across its backing I/O (`wb/flusher.rs`), and while it holds
/// in-flight marks not yet synced it only tries them (`wb/sync_group.rs`). No request takes
/// `switch`, so a switch waiting for the requests of the old policy holds nothing they need
/// (except `persist`, which a switch into write-back persist holds so that no barrier
/// commits before its checkpoint; the old policy's requests never take it). A replacement
/// of the failed cache device (`live/replace.rs`) takes `volume_change` → `switch`, pauses the
/// gate (no request inside), then takes `health.sink`, then `persist` → `superblock` and `state`.
pub(crate) struct Inner {
    /// The cache device: `watched`, seen as a device.
    pub cache: Arc<dyn Device>,
    /// The cache device's slot, refilled only by a replacement of a failed device
    /// (`live/replace.rs`).
    pub watched: Arc<crate::device::watched::Watched>,
    /// The cache device's health: its errors, degraded mode, the lost list
    /// (`health/`, `io/degraded.rs`).
    pub health: Arc<Health>,
    pub geometry: Geometry,
    /// The write policy in force, read by every write, FLUSH and discard.
    pub policy: PolicyCell,
    /// Serializes live switches of the write policy and the end of their drains.
    pub switch: Mutex<()>,
    pub state: Mutex<CacheState>,
    /// The state's occupancy counters by volume, read without its lock (`status`).
    pub occupancy: Arc<crate::state::Occupancy>,
    /// A copy of the sequential cutoff's settings the state holds, read without the state
    /// lock (`live/seq_cutoff.rs` writes both).
    pub seq_cutoff: Mutex<ember_policy::seq_cutoff::SeqCutoffConfig>,
    pub stripes: Stripes,
    pub gate: Gate,
    /// Served volumes, in configuration and attach order (`volume_set.rs`).
    pub volumes: VolumeSet,
    /// Counters by superblock volume index, one for every slot of the table.
    pub counters: Vec<Counters>,
    pub superblock: Mutex<Superblock>,
    /// Names of every volume of the superblock, by slot (served or not; empty: a free slot),
    /// kept beside the superblock so the counters are read without its lock.
    pub volume_names: RwLock<Vec<String>>,
    /// Serializes the changes of the volume set (`live/volumes.rs`): attach, uncache,
    /// recache, remove. Taken before everything else, like `switch`.
    pub volume_change: Mutex<()>,
    /// Write-back limits (max/min dirty, epochs, batch, flush order), changed while serving
    /// by `Engine::set_writeback`.
    pub limits: LiveLimits,
    /// Cleaning control (flush rate cap, idle policy), changed while serving by
    /// `Engine::set_cleaning`; the flusher reports its rate here.
    pub cleaning: LiveCleaning,
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
    pub fn volume_by_id(&self, id: u32) -> Option<Arc<VolumeInfo>> {
        self.volumes.by_id(id)
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

/// [`Limits`] as atomics, so the flusher and the write paths read the limits in force without
/// a lock, and a live change stores new ones. A reader may see some fields before a change
/// and some after it: every combination is a valid tuning.
pub(crate) struct LiveLimits {
    max_dirty: AtomicUsize,
    min_dirty: AtomicUsize,
    max_epochs: AtomicUsize,
    batch: AtomicUsize,
    lru: AtomicBool,
}

impl LiveLimits {
    pub fn new(l: Limits) -> LiveLimits {
        LiveLimits {
            max_dirty: AtomicUsize::new(l.max_dirty),
            min_dirty: AtomicUsize::new(l.min_dirty),
            max_epochs: AtomicUsize::new(l.max_epochs),
            batch: AtomicUsize::new(l.batch),
            lru: AtomicBool::new(l.lru),
        }
    }

    /// The limits now.
    pub fn get(&self) -> Limits {
        Limits {
            max_dirty: self.max_dirty.load(Relaxed),
            min_dirty: self.min_dirty.load(Relaxed),
            max_epochs: self.max_epochs.load(Relaxed),
            batch: self.batch.load(Relaxed),
            lru: self.lru.load(Relaxed),
        }
    }

    /// Put `l` in force.
    pub fn set(&self, l: Limits) {
        self.max_dirty.store(l.max_dirty, Relaxed);
        self.min_dirty.store(l.min_dirty, Relaxed);
        self.max_epochs.store(l.max_epochs, Relaxed);
        self.batch.store(l.batch, Relaxed);
        self.lru.store(l.lru, Relaxed);
    }
}

/// Where the journal stands (write-back persist), under its own lock, which also
/// serializes barriers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cursor {
    /// The device is in write-back persist's regime (its superblock says so, or a checkpoint
    /// saying so is owed: `need_checkpoint`): barriers commit the persisted dirty map. False
    /// under every other policy, and once a switch out of it finished its drain.
    pub active: bool,
    /// Next free journal block.
    pub next_block: u64,
    /// Generation of the checkpoint the journal extends.
    pub base: u64,
    /// Generation of the last commit (journal or checkpoint).
    pub generation: u64,
    /// A barrier failed half-way: the next one writes a checkpoint.
    pub need_checkpoint: bool,
}
