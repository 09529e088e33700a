//! The in-memory cache state under the engine's one global lock (thesis 5.2 uses one global
//! lock too; here no I/O is done while holding it): the block index, the clean and dirty
//! versions, per-cache-block references, pins and persist marks, the free list, and the
//! replacement and admission policies.
//!
//! Memory is laid out per cache block (the "slot" of the index is the cache block):
//! - `index` maps a block key to the cache block of its newest version: a
//!   [`KeyMap`](ember_policy::keymap::KeyMap), the simulator's group-hashed index, sized once
//!   for every cache block (16 bytes a block); the key itself is in `keys` (8 bytes);
//! - `lists` ([`recency`]) threads every mapped newest version, clean or dirty, into one
//!   list by last access, and the unused blocks into the free list (12 bytes a block);
//! - `flags` (dirty, preloaded, demoted), `refs`, `prefs` (one byte each) and `pins` (4).
//!
//! That is 43 bytes a cache block. When the replacement policy is LRU (it says so through
//! [`Replacement::recency_only`]), the recency list *is* the policy: eviction takes its oldest
//! clean block, exactly the block the simulator's [`Lru`] would evict, and the policy keeps no
//! index of its own. Any other policy keeps its own order and index (its bytes per block are
//! `ember sim`'s), and the recency list serves the fallback eviction of the oldest clean block
//! when the policy is not full but dirty blocks took the free ones.
//!
//! - The newest version of every cached block is in `index`: clean, or dirty (its epoch is
//!   the newest of its key in the dirty map). Clean blocks are evictable (thesis 4.1); dirty
//!   ones are not.
//! - `dirty` is the dirty map (thesis 4.2.2), ordered by (epoch, key): every dirty version,
//!   so the flusher takes the oldest epoch first in ascending block order (4.4.1, 4.4.2).
//!   Under write-back flush a block rewritten after its epoch closed keeps its old version
//!   here until that version reached backing: the closed epoch's FLUSH needs it.
//! - `dirty_by_key` indexes the same versions by (key, epoch), so the versions of a block
//!   range (a TRIM) are found without scanning the whole dirty map.
//! - `fences` ([`fences`]) are the block ranges of TRIM / WRITE_ZEROES requests in progress:
//!   no block in a fence is allocated or flushed.
//! - `in_flight` ([`inflight`]) are the keys whose dirty version the flusher is writing to
//!   backing now, without their stripe locks: a request that writes one of them to backing
//!   directly waits for its mark to clear.
//! - `holds` (ordered write-back) count the requests of each epoch that go to backing
//!   directly (a discard, a write the sieve refused): the flusher takes no version of a
//!   later epoch while one is held, so backing receives epochs in order.
//! - A cache block is *referenced* by `index` and/or `dirty`, *pinned* by every request or
//!   the flusher doing I/O on it (thesis 5.1's reference count), and *persisted* while the
//!   last persisted dirty map names it (the persist bitmap, 4.3). It returns to the free list
//!   only when none of the three holds.
//!
//! The methods are split by concern, one `impl CacheState` a file over this one struct; each
//! file's header names the fields it owns:
//! - `index.rs`: the block index and the per-block arrays and lists (the bottom);
//! - `dirty.rs`: the dirty map and its epochs;
//! - `flush.rs`: the flusher's batches and what holds it back (fences, in-flight marks, holds);
//! - `alloc.rs`: allocation, eviction and invalidation of clean blocks, and the policies;
//! - `persist.rs`: the persisted dirty map and its persist marks;
//! - `checkpoint.rs`: the map to and from checkpoint entries;
//! - `live.rs`: what live changes need of the state: a switch's drain (`switch_drain`, its hold on
//!   the flusher), a flush on demand's closed epochs (`flush_alls`), a new replacement policy
//!   or admission sieve;
//! - `occupancy.rs`: the occupancy per volume, counters read without the lock;
//! - `forget.rs`: forgetting the whole map when a new cache device replaces a failed one.
//!
//! Lock: all of it is under `Inner::state` (`core.rs`: … → `state` → nothing else); a method
//! runs with that lock held, takes no other lock and does no I/O. The files call downwards
//! only: index ← dirty ← flush ← alloc, and persist, checkpoint and live above them.

mod alloc;
mod checkpoint;
mod dirty;
mod fences;
mod flush;
mod forget;
mod index;
mod inflight;
mod live;
mod occupancy;
mod persist;
mod recency;
#[cfg(test)]
mod tests;

pub(crate) use alloc::{DemoteStep, TakenBlock};
pub(crate) use live::Drain;
pub(crate) use persist::{Change, Persisted};

use ember_policy::admission::VolumeSieves;
use ember_policy::demote::DemoteAdmission;
use ember_policy::keymap::KeyMap;
use ember_policy::replacement::Lru;
use ember_policy::seq_cutoff::{SeqCutoff, SeqCutoffConfig};
use ember_policy::{Admission, Replacement};
use fences::Fences;
use inflight::InFlight;
pub use occupancy::Occupancy;
use recency::Recency;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// Block flag: the block holds the newest version of its key and it is dirty.
const DIRTY: u8 = 1;
/// Block flag: installed by the warmup preload and not hit or reallocated since.
const PRELOADED: u8 = 2;
/// Block flag: its block was stored by a DEMOTE (array tier), not placed by a READ.
const DEMOTED: u8 = 4;

/// The map, the allocator and the policies.
pub(crate) struct CacheState {
    index: KeyMap,
    keys: Vec<u64>,
    flags: Vec<u8>,
    refs: Vec<u8>,
    pins: Vec<u32>,
    prefs: Vec<u8>,
    lists: Recency,
    /// Clean blocks in `index`.
    clean: usize,
    /// The recency list is the replacement policy (LRU over every cache block).
    recency_policy: bool,
    dirty: BTreeMap<(u64, u64), u32>,
    dirty_by_key: BTreeSet<(u64, u64)>,
    fences: Fences,
    in_flight: InFlight,
    holds: BTreeMap<u64, usize>,
    epochs: BTreeMap<u64, usize>,
    /// The replacement order; holds exactly the clean keys of the map. Under an LRU policy
    /// (see the module doc) a zero-capacity placeholder that is never asked to decide.
    pub replacement: Box<dyn Replacement>,
    /// The admission sieves: the cache-wide one and the volumes' own.
    pub admission: VolumeSieves,
    /// The sequential cutoff, asked before the sieve on a miss (off until set).
    pub seq_cutoff: SeqCutoff,
    /// Array tier: whether the sieve decides on DEMOTEs of absent blocks.
    pub demote_admission: DemoteAdmission,
    vtime: u64,
    /// Epoch new writes join; a FLUSH closes it.
    pub current_epoch: u64,
    /// The last persisted dirty map (write-back persist): what recovery would rebuild.
    persisted: HashMap<u64, Persisted>,
    /// Keys whose dirty version changed since the last persist snapshot.
    touched: HashSet<u64>,
    /// Track `touched` (write-back persist only).
    pub persist_tracking: bool,
    /// Flusher control: flush every epoch up to this one, whatever min_dirty says.
    pub flush_target: u64,
    /// Flusher control: flush everything (clean shutdown).
    pub drain: bool,
    /// Flusher control: exit.
    pub stop: bool,
    /// A shutdown began: requests waiting for the flusher (epoch cap, FLUSH) stop waiting.
    pub closing: bool,
    /// Incremented on every failed flusher batch.
    pub flush_error_gen: u64,
    /// The last flusher error, for FLUSH replies.
    pub last_flush_error: String,
    /// Keys evicted outside [`CacheState::allocate`]'s return value (clean-LRU evictions,
    /// victims of blocks turning clean), for the eviction counters.
    evicted_log: Vec<u64>,
    /// The recency list's version when the checkpoint the superblock names held the map
    /// exactly (see [`CacheState::mark_checkpoint_current`]).
    checkpoint_version: Option<u64>,
    /// A persist snapshot names, of each key, its newest dirty version of an epoch up to
    /// this one (all of them, `u64::MAX`, except while a switch drains write-back persist:
    /// then only the former policy's versions, `live.rs`).
    persist_upto: u64,
    /// A live switch's drain, if one runs (`live.rs`).
    pub switch_drain: Drain,
    /// While a switch out of write-back persist drains it, the flusher takes no version of
    /// an epoch after this one (the new policy's data waits for the drain's commit).
    switch_hold: Option<u64>,
    /// `Engine::flush_all` calls in progress: while any runs, a rewrite keeps the version of
    /// a closed epoch (the call waits for it to reach backing).
    pub flush_alls: usize,
    /// Newest versions in the index and dirty versions, by volume (`occupancy.rs`).
    occupancy: Arc<Occupancy>,
    /// Cache blocks taken from victims that requests in flight still pinned (array tier,
    /// `alloc.rs`): how many of the block's pins are its takers', each waiting for the
    /// others to let go before it writes.
    takers: HashMap<u32, u32>,
}

impl CacheState {
    /// An empty cache of `blocks` cache blocks.
    pub fn new(
        blocks: u32,
        replacement: Box<dyn Replacement>,
        admission: Box<dyn Admission>,
    ) -> Self {
        let n = blocks as usize;
        let recency_policy =
            replacement.recency_only() && replacement.capacity() == n && replacement.is_empty();
        let replacement: Box<dyn Replacement> =
            if recency_policy { Box::new(Lru::new(0)) } else { replacement };
        let mut st = Self {
            index: KeyMap::with_entries(n),
            keys: vec![0; n],
            flags: vec![0; n],
            refs: vec![0; n],
            pins: vec![0; n],
            prefs: vec![0; n],
            lists: Recency::new(blocks),
            clean: 0,
            recency_policy,
            dirty: BTreeMap::new(),
            dirty_by_key: BTreeSet::new(),
            fences: Fences::default(),
            in_flight: InFlight::default(),
            holds: BTreeMap::new(),
            epochs: BTreeMap::new(),
            replacement,
            admission: VolumeSieves::new(admission),
            seq_cutoff: SeqCutoff::new(SeqCutoffConfig::default()),
            demote_admission: DemoteAdmission::default(),
            vtime: 0,
            current_epoch: 1,
            persisted: HashMap::new(),
            touched: HashSet::new(),
            persist_tracking: false,
            flush_target: 0,
            drain: false,
            stop: false,
            closing: false,
            flush_error_gen: 0,
            last_flush_error: String::new(),
            evicted_log: Vec::new(),
            checkpoint_version: None,
            persist_upto: u64::MAX,
            switch_drain: Drain::None,
            switch_hold: None,
            flush_alls: 0,
            occupancy: Arc::default(),
            takers: HashMap::new(),
        };
        st.rebuild_free();
        st
    }
}
