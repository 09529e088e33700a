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

mod fences;
mod inflight;
mod recency;
#[cfg(test)]
mod tests;

use crate::layout::checkpoint::{dirty_flags, flags_epoch, unwrap_dirty};
use crate::layout::MapEntry;
use ember_policy::keymap::KeyMap;
use ember_policy::replacement::Lru;
use ember_policy::{Access, Admission, Replacement, NEVER};
use ember_trace::Op;
use fences::Fences;
use inflight::InFlight;
use recency::Recency;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Block flag: the block holds the newest version of its key and it is dirty.
const DIRTY: u8 = 1;
/// Block flag: installed by the warmup preload and not hit or reallocated since.
const PRELOADED: u8 = 2;
/// Block flag: its block was stored by a DEMOTE (array tier), not placed by a READ.
const DEMOTED: u8 = 4;

/// The newest version of a block, as [`CacheState::slot`] reports it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    /// Cache block holding the data.
    pub cache_block: u32,
    /// `Some(epoch)` if the block is newer than backing.
    pub dirty: Option<u64>,
}

/// A version of a block in the persisted dirty map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Persisted {
    /// Cache block holding it.
    pub cache_block: u32,
    /// Epoch it was written in.
    pub epoch: u64,
}

/// A change of the persisted dirty map (one journal entry): key → Some(new version) or
/// None (deleted).
pub(crate) type Change = (u64, Option<Persisted>);

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
    /// The admission sieve.
    pub admission: Box<dyn Admission>,
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
}

/// Outcome of an allocation.
pub(crate) struct Allocation {
    /// The cache block, pinned and mapped, or None if no block could be freed.
    pub cache_block: Option<u32>,
    /// Keys evicted to make room.
    pub evicted: Option<u64>,
    /// The cache block the evicted key held (its data stays there until the block is
    /// written again): the client tier reads its DEMOTE's copy from it.
    pub victim_block: Option<u32>,
}

/// What became of a DEMOTE of one block ([`CacheState::demote_install`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DemoteStep {
    /// The replacement policy is not an array scheme that takes DEMOTEs.
    NotTaken,
    /// Aborted: the block is cached already (clean: the policy placed it as demoted).
    Cached,
    /// Aborted: no room (capacity 0, every reclaimable block pinned, a fence).
    NoRoom,
    /// Stored: the block is mapped clean in this cache block, pinned; the caller writes the
    /// data, then unpins (or invalidates on failure).
    Stored(u32),
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
            admission,
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
        };
        st.rebuild_free();
        st
    }

    /// True if the recency list is the replacement policy (LRU, see the module doc).
    #[cfg(test)]
    pub fn recency_policy(&self) -> bool {
        self.recency_policy
    }

    fn rebuild_free(&mut self) {
        self.lists.free_clear();
        for c in (0..self.pins.len() as u32).rev() {
            if self.unused(c) {
                self.lists.free_push(c);
            }
        }
    }

    fn unused(&self, c: u32) -> bool {
        let i = c as usize;
        self.refs[i] == 0 && self.pins[i] == 0 && self.prefs[i] == 0
    }

    fn release_if_unused(&mut self, c: u32) {
        if self.unused(c) {
            self.lists.free_push(c);
        }
    }

    fn deref_block(&mut self, c: u32) {
        self.refs[c as usize] -= 1;
        self.release_if_unused(c);
    }

    fn is_dirty(&self, c: u32) -> bool {
        self.flags[c as usize] & DIRTY != 0
    }

    /// Map `key`'s newest version to unlisted block `c` (accessed now). The caller counts
    /// the reference.
    fn map(&mut self, key: u64, c: u32, dirty: bool) {
        let i = c as usize;
        self.keys[i] = key;
        self.index.insert(key, c);
        self.lists.push_head(c);
        if dirty {
            self.flags[i] |= DIRTY;
        } else {
            self.flags[i] &= !DIRTY;
            self.clean += 1;
        }
    }

    /// Take `key`'s newest version, in block `c`, out of the index and the recency list
    /// (its reference is the caller's to drop).
    fn unlist(&mut self, key: u64, c: u32) {
        self.index.remove(key, c);
        self.lists.remove(c);
        if !self.is_dirty(c) {
            self.clean -= 1;
        }
    }

    /// The epoch of the newest version of `key`, in block `c`, if it is dirty.
    fn newest_epoch(&self, key: u64, c: u32) -> Option<u64> {
        if !self.is_dirty(c) {
            return None;
        }
        let e = self
            .dirty_by_key
            .range((key, 0)..=(key, u64::MAX))
            .rev()
            .map(|&(_, e)| e)
            .find(|&e| self.dirty.get(&(e, key)) == Some(&c));
        debug_assert!(e.is_some(), "dirty block {c} of key {key} is not in the dirty map");
        e
    }

    /// The oldest clean block (the next eviction).
    fn oldest_clean(&mut self) -> Option<u32> {
        let flags = &self.flags;
        self.lists.oldest_where(|c| flags[c as usize] & DIRTY == 0)
    }

    /// Load checkpoint entries (coldest first), already validated: clean ones join the
    /// replacement policy, dirty ones (flag bit 0, epoch in bits 16..32) the dirty map. With
    /// `persisted`, the dirty ones are also the persisted dirty map (their blocks are marked
    /// in the persist bitmap). Rebuilds the free list.
    pub fn load(&mut self, entries: &[MapEntry], time_ns: u64, persisted: bool) {
        // Stored epochs are 16 bits; order them across the wrap.
        let unwrap = unwrap_dirty(entries);
        self.lists.free_clear();
        for e in entries {
            let acc = self.access(e.key, Op::Read, time_ns);
            if e.flags & crate::layout::checkpoint::ENTRY_DIRTY != 0 {
                let epoch = unwrap.epoch(flags_epoch(e.flags));
                self.map(e.key, e.cache_block, true);
                self.dirty_insert(epoch, e.key, e.cache_block);
                *self.epochs.entry(epoch).or_default() += 1;
                self.refs[e.cache_block as usize] += 2;
                if persisted {
                    self.persisted.insert(e.key, Persisted { cache_block: e.cache_block, epoch });
                    self.prefs[e.cache_block as usize] += 1;
                }
                self.current_epoch = self.current_epoch.max(epoch + 1);
                continue;
            }
            if !self.recency_policy {
                if let Some(victim) = self.replacement.insert(&acc) {
                    // Only if the policy holds fewer blocks than the device: drop the victim.
                    self.unmap(victim);
                }
            }
            self.map(e.key, e.cache_block, false);
            self.refs[e.cache_block as usize] += 1;
        }
        self.rebuild_free();
    }

    /// The next access record (advances virtual time).
    pub fn access(&mut self, key: u64, op: Op, time_ns: u64) -> Access {
        let vtime = self.vtime;
        self.vtime += 1;
        Access { key, time_ns, op, vtime, next_vtime: NEVER }
    }

    /// Resident blocks (newest versions).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Dirty versions (all epochs).
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }

    /// Cache block of `key`, if resident (no side effects).
    pub fn get(&self, key: u64) -> Option<u32> {
        let keys = &self.keys;
        self.index.get(key, |c| keys[c as usize])
    }

    /// The newest version of `key`, if resident.
    pub fn slot(&self, key: u64) -> Option<Slot> {
        let c = self.get(key)?;
        Some(Slot { cache_block: c, dirty: self.newest_epoch(key, c) })
    }

    /// True if `key`'s newest version is resident and clean (evictable).
    #[cfg(test)]
    pub fn is_clean(&self, key: u64) -> bool {
        self.get(key).is_some_and(|c| !self.is_dirty(c))
    }

    /// On a miss: ask the admission sieve, telling it the occupancy first (OCF's nhit
    /// promotes everything below its trigger occupancy).
    pub fn admit(&mut self, acc: &Access) -> bool {
        self.admission.set_occupancy(self.index.len(), self.pins.len());
        self.admission.admit(acc)
    }

    /// A hit: tell the replacement policy (clean blocks), pin and return the cache block.
    pub fn hit_pin(&mut self, acc: &Access) -> Option<u32> {
        let c = self.get(acc.key)?;
        self.lists.move_to_head(c);
        if !self.recency_policy && !self.is_dirty(c) {
            self.replacement.lookup(acc);
        }
        self.pins[c as usize] += 1;
        Some(c)
    }

    /// The warmup preload filled cache block `c`.
    pub fn mark_preloaded(&mut self, c: u32) {
        if let Some(f) = self.flags.get_mut(c as usize) {
            *f |= PRELOADED;
        }
    }

    /// A read hit on `c`: true if the preload installed it and this is its first hit.
    pub fn take_preloaded(&mut self, c: u32) -> bool {
        match self.flags.get_mut(c as usize) {
            Some(f) if *f & PRELOADED != 0 => {
                *f &= !PRELOADED;
                true
            }
            _ => false,
        }
    }

    /// Pin a block the caller knows is referenced (the flusher, a read-modify-write source).
    pub fn pin(&mut self, c: u32) {
        self.pins[c as usize] += 1;
    }

    /// Take a free block for a new version, evicting the least recently used clean blocks if
    /// none is free (the replacement policy then forgets them). The block comes back pinned
    /// and unreferenced: [`CacheState::commit_dirty`] maps it once its data is written, or
    /// [`CacheState::unpin`] returns it.
    pub fn reserve(&mut self) -> Option<u32> {
        if self.lists.free_len() == 0 {
            self.evict_clean(8);
        }
        let c = self.lists.free_pop()?;
        self.pins[c as usize] = 1;
        self.flags[c as usize] = 0;
        Some(c)
    }

    /// Evict up to `tries` clean blocks, oldest first, until one block is free. Returns the
    /// number evicted.
    pub fn evict_clean(&mut self, tries: usize) -> u64 {
        let mut n = 0;
        while self.lists.free_len() == 0 && (n as usize) < tries {
            let Some(c) = self.oldest_clean() else { break };
            let key = self.keys[c as usize];
            self.evicted_log.push(key);
            if !self.recency_policy {
                self.replacement.remove(key);
            }
            self.unlist(key, c);
            self.deref_block(c);
            n += 1;
        }
        n
    }

    /// Allocate a cache block for the missed `acc.key` (a clean block: a fill, or a
    /// write-through allocation), evicting if the policy says so. The block comes back mapped
    /// and pinned; its content is written by the caller before it releases the block's stripe
    /// lock.
    pub fn allocate(&mut self, acc: &Access) -> Allocation {
        self.allocate_within(acc, &[])
    }

    /// [`CacheState::allocate`] for a request that holds `own`, the cache blocks it pinned
    /// as hits. If the policy's victim is one of them, pinned by this request alone, its
    /// block goes to `acc.key` at once (the caller then treats that earlier hit as not
    /// cached: its data goes to backing only), as `ember sim`, which has no pins, reuses a
    /// victim's room at once. Without it, a policy that does not move a block on a hit
    /// (FIFO, 2Q's first queue) can pick a block the same request just hit, and the
    /// allocation would be refused for want of a free block.
    pub fn allocate_within(&mut self, acc: &Access, own: &[u32]) -> Allocation {
        let evicted = if self.recency_policy {
            // LRU's insert: when every cache block holds a clean block, the oldest leaves.
            if self.clean >= self.pins.len() && self.clean > 0 {
                self.oldest_clean().map(|c| self.keys[c as usize])
            } else {
                None
            }
        } else {
            self.replacement.insert(acc)
        };
        let victim_block = evicted.and_then(|v| self.get(v));
        let placed = match self.place_clean(acc.key, evicted, false) {
            None => victim_block.filter(|c| own.contains(c)).and_then(|c| self.adopt(acc.key, c)),
            placed => placed,
        };
        match placed {
            Some(c) => Allocation { cache_block: Some(c), evicted, victim_block },
            None => {
                // Every free block is still pinned by readers of evicted keys, or holds dirty
                // or persisted data.
                if !self.recency_policy {
                    self.replacement.remove(acc.key);
                }
                Allocation { cache_block: None, evicted, victim_block }
            }
        }
    }

    /// Map `key` clean to `c`, an unmapped block whose only pin is the caller's (a hit of the
    /// same request whose key was just evicted); the pin carries over. None if anyone else
    /// still holds `c`.
    fn adopt(&mut self, key: u64, c: u32) -> Option<u32> {
        let i = c as usize;
        if self.refs[i] != 0 || self.pins[i] != 1 || self.prefs[i] != 0 {
            return None;
        }
        self.map(key, c, false);
        self.refs[i] += 1;
        self.flags[i] = 0;
        Some(c)
    }

    /// Give `key`, which the policy just placed (evicting `evicted`), a free block: mapped
    /// clean, pinned, flagged `demoted` or not. If the policy evicted nothing and no block is
    /// free (dirty blocks live outside the policy), the oldest clean blocks are evicted.
    /// None if no block could be freed.
    fn place_clean(&mut self, key: u64, evicted: Option<u64>, demoted: bool) -> Option<u32> {
        if let Some(v) = evicted {
            self.unmap(v);
        }
        if self.lists.free_len() == 0 && evicted.is_none() {
            self.evict_clean(8);
        }
        let c = self.lists.free_pop()?;
        self.map(key, c, false);
        let i = c as usize;
        self.refs[i] += 1;
        self.pins[i] = 1;
        self.flags[i] = if demoted { DEMOTED } else { 0 };
        Some(c)
    }

    /// A DEMOTE of `acc.key` (array tier): the replacement policy places it as its scheme
    /// says; a stored block gets a cache block, mapped clean and pinned, like
    /// [`CacheState::allocate`]'s.
    pub fn demote_install(&mut self, acc: &Access) -> (DemoteStep, Option<u64>) {
        if self.recency_policy || !self.replacement.takes_demotes() {
            return (DemoteStep::NotTaken, None);
        }
        if let Some(c) = self.get(acc.key) {
            if !self.is_dirty(c) {
                // Held: the scheme moves it to the demoted position (an aborted DEMOTE).
                self.replacement.demote(acc);
            }
            return (DemoteStep::Cached, None);
        }
        if self.fenced(acc.key) {
            return (DemoteStep::NoRoom, None);
        }
        let Some((outcome, evicted)) = self.replacement.demote(acc) else {
            return (DemoteStep::NotTaken, None);
        };
        if outcome == ember_policy::demote::DemoteOutcome::Aborted {
            return (DemoteStep::NoRoom, None);
        }
        match self.place_clean(acc.key, evicted, true) {
            Some(c) => (DemoteStep::Stored(c), evicted),
            None => {
                self.replacement.remove(acc.key);
                (DemoteStep::NoRoom, evicted)
            }
        }
    }

    /// True if cache block `c` holds a block a DEMOTE stored (array tier).
    pub fn demoted_origin(&self, c: u32) -> bool {
        self.flags.get(c as usize).is_some_and(|f| f & DEMOTED != 0)
    }

    /// Drop the newest version of `key` from the map (clean: also from the recency list). A
    /// dirty version stays in the dirty map; callers that drop dirty data use
    /// [`CacheState::drop_all_versions`].
    fn unmap(&mut self, key: u64) -> bool {
        match self.get(key) {
            Some(c) => {
                self.unlist(key, c);
                self.deref_block(c);
                true
            }
            None => false,
        }
    }

    /// Drop a clean `key` from the map and the policy (TRIM, partial overwrite, failed I/O).
    /// A dirty key is left alone (returns false): dirty data is dropped only by
    /// [`CacheState::drop_all_versions`], once backing holds something newer.
    pub fn invalidate(&mut self, key: u64) -> bool {
        match self.get(key) {
            Some(c) if !self.is_dirty(c) => {
                self.unmap(key);
                if !self.recency_policy {
                    self.replacement.remove(key);
                }
                true
            }
            _ => false,
        }
    }

    /// Invalidate every clean resident key in `keys`; returns how many. Costs the smaller of
    /// the range and the map.
    pub fn invalidate_range(&mut self, keys: std::ops::Range<u64>) -> u64 {
        let list: Vec<u64> = if keys.end.saturating_sub(keys.start) > self.len() as u64 {
            self.lists
                .oldest_first()
                .map(|c| self.keys[c as usize])
                .filter(|k| keys.contains(k))
                .collect()
        } else {
            keys.collect()
        };
        list.iter().filter(|&&k| self.invalidate(k)).count() as u64
    }

    /// Invalidate `key` only if it still maps to `cache_block` (it may have been evicted).
    pub fn invalidate_if(&mut self, key: u64, cache_block: u32) -> bool {
        if self.get(key) == Some(cache_block) {
            self.invalidate(key)
        } else {
            false
        }
    }

    /// Every version of `key`, clean or dirty, is dropped: backing now holds newer data
    /// (a write-through fallback, a TRIM, WRITE_ZEROES). Returns how many versions.
    pub fn drop_all_versions(&mut self, key: u64) -> u64 {
        let mut n = 0;
        if let Some(c) = self.get(key) {
            if !self.recency_policy && !self.is_dirty(c) {
                self.replacement.remove(key);
            }
            self.unmap(key);
            n += 1;
        }
        let epochs: Vec<u64> =
            self.dirty_by_key.range((key, 0)..=(key, u64::MAX)).map(|&(_, e)| e).collect();
        for e in epochs {
            if let Some(c) = self.dirty_remove(e, key) {
                self.dec_epoch(e);
                self.deref_block(c);
                n += 1;
            }
        }
        self.touch(key);
        n
    }

    /// Keys in `keys` with any dirty version, ascending (the index: the cost grows with the
    /// versions in the range, not with the dirty map).
    pub fn dirty_keys_in(&self, keys: std::ops::Range<u64>) -> Vec<u64> {
        let mut v: Vec<u64> =
            self.dirty_by_key.range((keys.start, 0)..(keys.end, 0)).map(|&(k, _)| k).collect();
        v.dedup();
        v
    }

    fn dirty_insert(&mut self, epoch: u64, key: u64, c: u32) {
        self.dirty.insert((epoch, key), c);
        self.dirty_by_key.insert((key, epoch));
        self.in_flight.supersede(key, epoch);
    }

    fn dirty_remove(&mut self, epoch: u64, key: u64) -> Option<u32> {
        self.dirty_by_key.remove(&(key, epoch));
        self.dirty.remove(&(epoch, key))
    }

    /// Raise a fence over the block keys `keys` (a TRIM or WRITE_ZEROES in progress): until
    /// it is lowered, no key in it is allocated or flushed (with `epoch`, ordered
    /// write-back: no version of that epoch or a later one is flushed). Returns its id.
    pub fn raise_fence(&mut self, keys: std::ops::Range<u64>, epoch: Option<u64>) -> u64 {
        self.fences.raise(keys, epoch)
    }

    /// Lower the fence `id`.
    pub fn lower_fence(&mut self, id: u64) {
        self.fences.lower(id);
    }

    /// Is `key` inside a fence?
    pub fn fenced(&self, key: u64) -> bool {
        self.fences.covers(key)
    }

    /// May the flusher not write the version of `key` of `epoch` now (a fence over it that
    /// is not an ordered fence of a later epoch)?
    pub fn fenced_for_flush(&self, key: u64, epoch: u64) -> bool {
        self.fences.bars_flush(key, epoch)
    }

    /// The flusher is about to write `key`'s dirty version of `epoch` to backing, holding
    /// neither its stripe lock nor (once it has read it) its pin (see [`inflight`]).
    pub fn mark_flushing(&mut self, key: u64, epoch: u64) {
        self.in_flight.mark(key, epoch);
    }

    /// The flusher's write of `key` ended (flushed or failed). Returns whether a newer
    /// version of `key` in the same epoch was committed meanwhile: then the flusher must not
    /// call [`CacheState::flushed`] for it (the version it wrote may not be the one the dirty
    /// map names now, even in the same cache block).
    pub fn unmark_flushing(&mut self, key: u64) -> bool {
        self.in_flight.unmark(key)
    }

    /// Forget every in-flight mark (a flusher panic; the engine is poisoned).
    pub fn clear_flushing(&mut self) {
        self.in_flight.clear();
    }

    /// Is the flusher writing the dirty version of any key in `keys` to backing now?
    pub fn flushing_in(&self, keys: std::ops::Range<u64>) -> bool {
        self.in_flight.any_in(keys)
    }

    /// Ordered write-back: a request of the current epoch will go to backing directly;
    /// until [`CacheState::release_hold`], no version of a later epoch is flushed. Returns
    /// the epoch.
    pub fn hold(&mut self) -> u64 {
        let e = self.current_epoch;
        *self.holds.entry(e).or_default() += 1;
        e
    }

    /// The request holding `epoch` is done.
    pub fn release_hold(&mut self, epoch: u64) {
        if let Some(n) = self.holds.get_mut(&epoch) {
            *n -= 1;
            if *n == 0 {
                self.holds.remove(&epoch);
            }
        }
    }

    /// Ordered write-back: has every epoch older than `epoch` reached backing (no dirty
    /// version and no request holding one)?
    pub fn older_epochs_done(&self, epoch: u64) -> bool {
        self.oldest_dirty_epoch().is_none_or(|e| e >= epoch)
            && self.holds.first_key_value().is_none_or(|(&h, _)| h >= epoch)
    }

    fn touch(&mut self, key: u64) {
        if self.persist_tracking {
            self.touched.insert(key);
        }
    }

    fn dec_epoch(&mut self, e: u64) {
        if let Some(n) = self.epochs.get_mut(&e) {
            *n -= 1;
            if *n == 0 {
                self.epochs.remove(&e);
            }
        }
    }

    /// A new version of `key`, written to the reserved (pinned) block `c`, becomes the
    /// newest, dirty in the current epoch (no-overwrite write, thesis 4.1). The previous
    /// newest version is released unless it is a dirty version of an older epoch that must
    /// still be flushed (`keep_closed_epochs`, write-back flush: 4.4.2).
    pub fn commit_dirty(&mut self, key: u64, c: u32, time_ns: u64, keep_closed_epochs: bool) {
        self.access(key, Op::Write, time_ns);
        let epoch = self.current_epoch;
        if let Some(old) = self.get(key) {
            let old_epoch = self.newest_epoch(key, old);
            self.unlist(key, old);
            match old_epoch {
                None => {
                    if !self.recency_policy {
                        self.replacement.remove(key);
                    }
                    self.deref_block(old);
                }
                Some(e) if e == epoch || !keep_closed_epochs => {
                    self.dirty_remove(e, key);
                    self.dec_epoch(e);
                    self.refs[old as usize] -= 1;
                    self.deref_block(old);
                }
                Some(_) => self.deref_block(old),
            }
        }
        self.map(key, c, true);
        self.dirty_insert(epoch, key, c);
        *self.epochs.entry(epoch).or_default() += 1;
        self.refs[c as usize] += 2;
        self.touch(key);
        self.unpin(c);
    }

    /// The flusher's next batch: up to `max` versions of the oldest dirty epoch, as
    /// (epoch, key, cache block) in ascending block order. `lru` picks the least recently
    /// written versions of the epoch (thesis 4.4.1's LRU order; superseded versions first),
    /// otherwise the lowest blocks (ascending order).
    /// Nothing while a request holds an older epoch (ordered write-back).
    pub fn flush_batch(&self, max: usize, lru: bool) -> Vec<(u64, u64, u32)> {
        let Some((&e, _)) = self.epochs.first_key_value() else { return Vec::new() };
        if self.holds.first_key_value().is_some_and(|(&h, _)| h < e) {
            return Vec::new();
        }
        let versions = self.dirty.range((e, 0)..=(e, u64::MAX)).map(|(&(e, k), &c)| (e, k, c));
        if !lru {
            return versions.take(max).collect();
        }
        let mut by_age: Vec<(u32, (u64, u64, u32))> = versions
            .map(|v| {
                let last = if self.get(v.1) == Some(v.2) { self.lists.last(v.2) } else { 0 };
                (last, v)
            })
            .collect();
        by_age.sort_unstable_by_key(|&(last, v)| (last, v.1));
        let mut out: Vec<(u64, u64, u32)> = by_age.into_iter().take(max).map(|x| x.1).collect();
        out.sort_unstable_by_key(|v| v.1);
        out
    }

    /// Is (epoch, key) still the dirty version in block `c`?
    pub fn is_dirty_version(&self, epoch: u64, key: u64, c: u32) -> bool {
        self.dirty.get(&(epoch, key)) == Some(&c)
    }

    /// A dirty version reached backing (durably): it leaves the dirty map; if it is the
    /// newest version it becomes clean (evictable), otherwise its block is released. The
    /// caller still holds its pin.
    pub fn flushed(&mut self, epoch: u64, key: u64, c: u32, time_ns: u64) {
        if self.dirty.get(&(epoch, key)) != Some(&c) {
            return;
        }
        self.dirty_remove(epoch, key);
        self.dec_epoch(epoch);
        self.touch(key);
        if self.get(key) != Some(c) {
            self.deref_block(c);
            return;
        }
        self.refs[c as usize] -= 1;
        // It keeps its last-access time (thesis 4.4.1, 5.1): clean and dirty blocks form one
        // global LRU, so a block written long ago is evicted soon after its flush. In the
        // recency list it already stands there.
        self.flags[c as usize] &= !DIRTY;
        self.clean += 1;
        self.lists.became_evictable(c);
        if self.recency_policy {
            // LRU would evict only if every block were clean before this one: not possible.
            return;
        }
        let last = self.lists.last(c);
        // Only LRU places a block by age; the walk passes the dirty blocks accessed since.
        let younger = if self.replacement.name() == "lru" {
            let flags = &self.flags;
            self.lists
                .newer_where(c, |b| flags[b as usize] & DIRTY == 0)
                .map(|b| self.keys[b as usize])
        } else {
            None
        };
        let acc = Access { key, time_ns, op: Op::Read, vtime: u64::from(last), next_vtime: NEVER };
        if let Some(victim) = self.replacement.insert_aged(&acc, younger) {
            if victim != key && self.unmap(victim) {
                self.evicted_log.push(victim);
            }
        }
    }

    /// The oldest epoch holding dirty versions.
    pub fn oldest_dirty_epoch(&self) -> Option<u64> {
        self.epochs.first_key_value().map(|(&e, _)| e)
    }

    /// Keys evicted since the last call (see `evicted_log`).
    pub fn take_evicted(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.evicted_log)
    }

    /// Epochs holding dirty versions, with their counts (oldest first).
    pub fn dirty_epochs(&self) -> Vec<(u64, u64)> {
        self.epochs.iter().map(|(&e, &n)| (e, n as u64)).collect()
    }

    /// Number of epochs with dirty versions, counting the current one.
    pub fn open_epochs(&self) -> usize {
        self.epochs.len() + usize::from(!self.epochs.contains_key(&self.current_epoch))
    }

    /// Release one pin; the block is freed if nothing else holds it.
    pub fn unpin(&mut self, cache_block: u32) {
        self.pins[cache_block as usize] -= 1;
        self.release_if_unused(cache_block);
    }

    /// Write-back persist, at a barrier: the changes of the dirty map since the last
    /// snapshot. The new versions are marked persisted at once (they may be on the device
    /// from now on); the replaced ones stay marked until [`CacheState::persist_done`].
    /// Returns the changes and the blocks to release after the commit.
    pub fn persist_snapshot(&mut self) -> (Vec<Change>, Vec<u32>) {
        let mut keys: Vec<u64> = self.touched.drain().collect();
        keys.sort_unstable();
        let mut changes = Vec::new();
        let mut release = Vec::new();
        for key in keys {
            let cur = match self.slot(key) {
                Some(Slot { cache_block, dirty: Some(epoch), .. }) => {
                    Some(Persisted { cache_block, epoch })
                }
                _ => None,
            };
            let old = self.persisted.get(&key).copied();
            if cur == old {
                continue;
            }
            if let Some(o) = old {
                release.push(o.cache_block);
            }
            match cur {
                Some(p) => {
                    self.prefs[p.cache_block as usize] += 1;
                    self.persisted.insert(key, p);
                }
                None => {
                    self.persisted.remove(&key);
                }
            }
            changes.push((key, cur));
        }
        (changes, release)
    }

    /// The persisted dirty map is durable: the blocks it no longer names are released.
    pub fn persist_done(&mut self, release: &[u32]) {
        for &c in release {
            self.prefs[c as usize] -= 1;
            self.release_if_unused(c);
        }
    }

    /// After a checkpoint of exactly [`CacheState::persisted_entries`]: the persist marks
    /// are recomputed from it (forgetting any left by failed persists).
    pub fn persist_reset(&mut self) {
        self.prefs.fill(0);
        for p in self.persisted.values() {
            self.prefs[p.cache_block as usize] += 1;
        }
        self.rebuild_free();
    }

    /// The persisted dirty map as checkpoint entries, ascending by key.
    pub fn persisted_entries(&self) -> Vec<MapEntry> {
        let mut v: Vec<MapEntry> = self
            .persisted
            .iter()
            .map(|(&key, p)| MapEntry {
                key,
                cache_block: p.cache_block,
                flags: dirty_flags(p.epoch),
            })
            .collect();
        v.sort_unstable_by_key(|e| e.key);
        v
    }

    /// Size of the persisted dirty map.
    pub fn persisted_len(&self) -> usize {
        self.persisted.len()
    }

    /// The whole map (newest versions) as checkpoint entries, coldest first; dirty entries
    /// carry [`dirty_flags`]. One walk of the recency list, no sorting.
    pub fn entries(&self) -> Vec<MapEntry> {
        let mut v = Vec::with_capacity(self.len());
        v.extend(self.lists.oldest_first().map(|c| {
            let key = self.keys[c as usize];
            let flags = self.newest_epoch(key, c).map_or(0, dirty_flags);
            MapEntry { key, cache_block: c, flags }
        }));
        v
    }

    /// The checkpoint the superblock names holds exactly this map, in this order, with these
    /// blocks dirty (the caller knows: a warm start loaded all of it). Until the map changes,
    /// [`CacheState::checkpoint_current`] says so.
    pub fn mark_checkpoint_current(&mut self) {
        self.checkpoint_version = Some(self.lists.version());
    }

    /// Nothing was mapped, unmapped, accessed or flushed since
    /// [`CacheState::mark_checkpoint_current`]: [`CacheState::entries`] would write the
    /// same checkpoint again.
    pub fn checkpoint_current(&self) -> bool {
        self.checkpoint_version == Some(self.lists.version())
    }

    /// Free cache blocks (for tests and invariants).
    #[cfg(test)]
    pub fn free_len(&self) -> usize {
        self.lists.free_len()
    }

    /// Renumber the recency stamps whenever `limit` is reached (tests).
    #[cfg(test)]
    pub fn set_stamp_limit(&mut self, limit: u32) {
        self.lists.set_tick_limit(limit);
    }

    /// Bytes of the per-cache-block state (index, keys, lists, flags, references, pins) and
    /// of the replacement policy's own structures, divided by the cache blocks.
    #[cfg(test)]
    pub fn bytes_per_block(&self) -> f64 {
        let arrays = self.keys.capacity() * 8
            + self.flags.capacity()
            + self.refs.capacity()
            + self.prefs.capacity()
            + self.pins.capacity() * 4
            + self.lists.memory_bytes();
        let total = self.index.memory_bytes() + arrays + self.replacement.memory_bytes();
        total as f64 / self.pins.len() as f64
    }
}
