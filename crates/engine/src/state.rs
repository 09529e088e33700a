//! The in-memory cache state under the engine's one global lock (thesis 5.2 uses one global
//! lock too; here no I/O is done while holding it): the clean and dirty maps, per-cache-block
//! references, pins and persist marks, the free list, and the replacement and admission
//! policies.
//!
//! - `map` holds the newest version of every cached block: clean, or dirty with its epoch.
//!   Clean entries are in the replacement policy (only clean blocks are evicted, thesis 4.1);
//!   dirty entries are not.
//! - `dirty` is the dirty map (thesis 4.2.2), ordered by (epoch, key): every dirty version,
//!   so the flusher takes the oldest epoch first in ascending block order (4.4.1, 4.4.2).
//!   Under write-back flush a block rewritten after its epoch closed keeps its old version
//!   here until that version reached backing: the closed epoch's FLUSH needs it.
//! - `dirty_by_key` indexes the same versions by (key, epoch), so the versions of a block
//!   range (a TRIM) are found without scanning the whole dirty map.
//! - `fences` are the block ranges of TRIM / WRITE_ZEROES requests in progress: no block in
//!   a fence is allocated (read fill, write allocation, dirty write) or flushed, so the
//!   discard can pass down to backing without holding the range's stripe locks. Under
//!   ordered write-back a fence carries the discard's epoch and the flusher may still write
//!   the versions of older epochs in it (the discard waits for them).
//! - `holds` (ordered write-back) count the requests of each epoch that go to backing
//!   directly (a discard, a write the sieve refused): the flusher takes no version of a
//!   later epoch while one is held, so backing receives epochs in order.
//! - A cache block is *referenced* by `map` and/or `dirty`, *pinned* by every request or the
//!   flusher doing I/O on it (thesis 5.1's reference count), and *persisted* while the last
//!   persisted dirty map names it (the persist bitmap, 4.3). It returns to the free list only
//!   when none of the three holds.

use crate::layout::checkpoint::dirty_flags;
use crate::layout::epoch::{of_flags, Unwrap};
use crate::layout::MapEntry;
use ember_policy::{Access, Admission, Replacement, NEVER};
use ember_trace::Op;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// One map entry in memory (the newest version of a block).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    /// Cache block holding the data.
    pub cache_block: u32,
    /// Virtual time of the last access (orders checkpoint entries and clean LRU eviction).
    pub last: u64,
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
    map: HashMap<u64, Slot>,
    dirty: BTreeMap<(u64, u64), u32>,
    dirty_by_key: BTreeSet<(u64, u64)>,
    fences: Vec<Fence>,
    holds: BTreeMap<u64, usize>,
    next_fence: u64,
    epochs: BTreeMap<u64, usize>,
    clean_lru: BTreeMap<u64, u64>,
    refs: Vec<u8>,
    pins: Vec<u32>,
    prefs: Vec<u32>,
    free: Vec<u32>,
    /// The replacement order; holds exactly the clean keys of the map.
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
    /// Per cache block: installed by the warmup preload and not hit or reallocated since.
    preloaded: Vec<bool>,
    /// Per cache block: its block was stored by a DEMOTE (array tier), not placed by a READ.
    demoted: Vec<bool>,
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
}

/// A TRIM's or WRITE_ZEROES' fence over block keys.
struct Fence {
    id: u64,
    keys: std::ops::Range<u64>,
    /// Ordered write-back: the discard's epoch; dirty versions of older epochs in the fence
    /// may still be flushed (they must reach backing before the discard). None: none may.
    epoch: Option<u64>,
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
        Self {
            map: HashMap::new(),
            dirty: BTreeMap::new(),
            dirty_by_key: BTreeSet::new(),
            fences: Vec::new(),
            holds: BTreeMap::new(),
            next_fence: 0,
            epochs: BTreeMap::new(),
            clean_lru: BTreeMap::new(),
            refs: vec![0; n],
            pins: vec![0; n],
            prefs: vec![0; n],
            free: (0..blocks).rev().collect(),
            replacement,
            admission,
            vtime: 0,
            current_epoch: 1,
            persisted: HashMap::new(),
            touched: HashSet::new(),
            preloaded: vec![false; n],
            demoted: vec![false; n],
            persist_tracking: false,
            flush_target: 0,
            drain: false,
            stop: false,
            closing: false,
            flush_error_gen: 0,
            last_flush_error: String::new(),
            evicted_log: Vec::new(),
        }
    }

    fn rebuild_free(&mut self) {
        let n = self.refs.len() as u32;
        self.free = (0..n).rev().filter(|&c| self.unused(c)).collect();
    }

    fn unused(&self, c: u32) -> bool {
        let i = c as usize;
        self.refs[i] == 0 && self.pins[i] == 0 && self.prefs[i] == 0
    }

    fn release_if_unused(&mut self, c: u32) {
        if self.unused(c) {
            self.free.push(c);
        }
    }

    fn deref_block(&mut self, c: u32) {
        self.refs[c as usize] -= 1;
        self.release_if_unused(c);
    }

    /// Load checkpoint entries (coldest first), already validated: clean ones join the
    /// replacement policy, dirty ones (flag bit 0, epoch in bits 16..32) the dirty map. With
    /// `persisted`, the dirty ones are also the persisted dirty map (their blocks are marked
    /// in the persist bitmap). Rebuilds the free list.
    pub fn load(&mut self, entries: &[MapEntry], time_ns: u64, persisted: bool) {
        // Stored epochs are 16 bits; order them across the wrap.
        let unwrap = Unwrap::of_entries(entries);
        for e in entries {
            let acc = self.access(e.key, Op::Read, time_ns);
            if e.flags & crate::layout::checkpoint::ENTRY_DIRTY != 0 {
                let epoch = unwrap.epoch(of_flags(e.flags));
                self.map.insert(
                    e.key,
                    Slot { cache_block: e.cache_block, last: acc.vtime, dirty: Some(epoch) },
                );
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
            if let Some(victim) = self.replacement.insert(&acc) {
                // Only if the policy holds fewer blocks than the device: drop the victim.
                self.unmap(victim);
            }
            self.map
                .insert(e.key, Slot { cache_block: e.cache_block, last: acc.vtime, dirty: None });
            self.clean_lru.insert(acc.vtime, e.key);
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
        self.map.len()
    }

    /// Dirty versions (all epochs).
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }

    /// Cache block of `key`, if resident (no side effects).
    pub fn get(&self, key: u64) -> Option<u32> {
        self.map.get(&key).map(|s| s.cache_block)
    }

    /// The newest version of `key`, if resident.
    pub fn slot(&self, key: u64) -> Option<Slot> {
        self.map.get(&key).copied()
    }

    /// On a miss: ask the admission sieve, telling it the occupancy first (OCF's nhit
    /// promotes everything below its trigger occupancy).
    pub fn admit(&mut self, acc: &Access) -> bool {
        self.admission.set_occupancy(self.map.len(), self.pins.len());
        self.admission.admit(acc)
    }

    /// A hit: tell the replacement policy (clean blocks), pin and return the cache block.
    pub fn hit_pin(&mut self, acc: &Access) -> Option<u32> {
        let slot = self.map.get_mut(&acc.key)?;
        let old = slot.last;
        slot.last = acc.vtime;
        let c = slot.cache_block;
        if slot.dirty.is_none() {
            self.clean_lru.remove(&old);
            self.clean_lru.insert(acc.vtime, acc.key);
            self.replacement.lookup(acc);
        }
        self.pins[c as usize] += 1;
        Some(c)
    }

    /// The warmup preload filled cache block `c`.
    pub fn mark_preloaded(&mut self, c: u32) {
        if let Some(p) = self.preloaded.get_mut(c as usize) {
            *p = true;
        }
    }

    /// A read hit on `c`: true if the preload installed it and this is its first hit.
    pub fn take_preloaded(&mut self, c: u32) -> bool {
        self.preloaded.get_mut(c as usize).is_some_and(std::mem::take)
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
        if self.free.is_empty() {
            self.evict_clean(8);
        }
        let c = self.free.pop()?;
        self.pins[c as usize] = 1;
        self.preloaded[c as usize] = false;
        self.demoted[c as usize] = false;
        Some(c)
    }

    /// Evict up to `tries` clean blocks, oldest first, until one block is free. Returns the
    /// number evicted.
    pub fn evict_clean(&mut self, tries: usize) -> u64 {
        let mut n = 0;
        while self.free.is_empty() && (n as usize) < tries {
            let Some((_, key)) = self.clean_lru.pop_first() else { break };
            self.evicted_log.push(key);
            self.replacement.remove(key);
            if let Some(s) = self.map.remove(&key) {
                self.deref_block(s.cache_block);
            }
            n += 1;
        }
        n
    }

    /// Allocate a cache block for the missed `acc.key` (a clean block: a fill, or a
    /// write-through allocation), evicting if the policy says so. The block comes back mapped
    /// and pinned; its content is written by the caller before it releases the block's stripe
    /// lock.
    pub fn allocate(&mut self, acc: &Access) -> Allocation {
        let evicted = self.replacement.insert(acc);
        let victim_block = evicted.and_then(|v| self.map.get(&v)).map(|s| s.cache_block);
        if let Some(v) = evicted {
            self.unmap(v);
        }
        if self.free.is_empty() && evicted.is_none() {
            // The policy is not full (dirty blocks live outside it): evict clean blocks.
            self.evict_clean(8);
        }
        match self.free.pop() {
            Some(c) => {
                self.map.insert(acc.key, Slot { cache_block: c, last: acc.vtime, dirty: None });
                self.clean_lru.insert(acc.vtime, acc.key);
                self.refs[c as usize] += 1;
                self.pins[c as usize] = 1;
                self.preloaded[c as usize] = false;
                self.demoted[c as usize] = false;
                Allocation { cache_block: Some(c), evicted, victim_block }
            }
            None => {
                // Every free block is still pinned by readers of evicted keys, or holds dirty
                // or persisted data.
                self.replacement.remove(acc.key);
                Allocation { cache_block: None, evicted, victim_block }
            }
        }
    }

    /// A DEMOTE of `acc.key` (array tier): the replacement policy places it as its scheme
    /// says; a stored block gets a cache block, mapped clean and pinned, like
    /// [`CacheState::allocate`]'s.
    pub fn demote_install(&mut self, acc: &Access) -> (DemoteStep, Option<u64>) {
        if !self.replacement.takes_demotes() {
            return (DemoteStep::NotTaken, None);
        }
        if let Some(slot) = self.map.get(&acc.key) {
            if slot.dirty.is_none() {
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
        if let Some(v) = evicted {
            self.unmap(v);
        }
        if self.free.is_empty() && evicted.is_none() {
            self.evict_clean(8);
        }
        match self.free.pop() {
            Some(c) => {
                self.map.insert(acc.key, Slot { cache_block: c, last: acc.vtime, dirty: None });
                self.clean_lru.insert(acc.vtime, acc.key);
                self.refs[c as usize] += 1;
                self.pins[c as usize] = 1;
                self.preloaded[c as usize] = false;
                self.demoted[c as usize] = true;
                (DemoteStep::Stored(c), evicted)
            }
            None => {
                self.replacement.remove(acc.key);
                (DemoteStep::NoRoom, evicted)
            }
        }
    }

    /// True if cache block `c` holds a block a DEMOTE stored (array tier).
    pub fn demoted_origin(&self, c: u32) -> bool {
        self.demoted.get(c as usize).copied().unwrap_or(false)
    }

    /// Drop the newest version of `key` from the map (clean: also from the policy). A dirty
    /// version stays in the dirty map; callers that drop dirty data use
    /// [`CacheState::drop_all_versions`].
    fn unmap(&mut self, key: u64) -> bool {
        match self.map.remove(&key) {
            Some(s) => {
                if s.dirty.is_none() {
                    self.clean_lru.remove(&s.last);
                }
                self.deref_block(s.cache_block);
                true
            }
            None => false,
        }
    }

    /// Drop a clean `key` from the map and the policy (TRIM, partial overwrite, failed I/O).
    /// A dirty key is left alone (returns false): dirty data is dropped only by
    /// [`CacheState::drop_all_versions`], once backing holds something newer.
    pub fn invalidate(&mut self, key: u64) -> bool {
        match self.map.get(&key) {
            Some(s) if s.dirty.is_none() => {
                self.unmap(key);
                self.replacement.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Invalidate every clean resident key in `keys`; returns how many. Costs the smaller of
    /// the range and the map.
    pub fn invalidate_range(&mut self, keys: std::ops::Range<u64>) -> u64 {
        let list: Vec<u64> = if keys.end.saturating_sub(keys.start) > self.map.len() as u64 {
            self.map.keys().copied().filter(|k| keys.contains(k)).collect()
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
        if let Some(s) = self.map.get(&key).copied() {
            if s.dirty.is_none() {
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
    }

    fn dirty_remove(&mut self, epoch: u64, key: u64) -> Option<u32> {
        self.dirty_by_key.remove(&(key, epoch));
        self.dirty.remove(&(epoch, key))
    }

    /// Raise a fence over the block keys `keys` (a TRIM or WRITE_ZEROES in progress): until
    /// it is lowered, no key in it is allocated or flushed (with `epoch`, ordered
    /// write-back: no version of that epoch or a later one is flushed). Returns its id.
    pub fn raise_fence(&mut self, keys: std::ops::Range<u64>, epoch: Option<u64>) -> u64 {
        self.next_fence += 1;
        self.fences.push(Fence { id: self.next_fence, keys, epoch });
        self.next_fence
    }

    /// Lower the fence `id`.
    pub fn lower_fence(&mut self, id: u64) {
        self.fences.retain(|f| f.id != id);
    }

    /// Is `key` inside a fence?
    pub fn fenced(&self, key: u64) -> bool {
        self.fences.iter().any(|f| f.keys.contains(&key))
    }

    /// May the flusher not write the version of `key` of `epoch` now (a fence over it that
    /// is not an ordered fence of a later epoch)?
    pub fn fenced_for_flush(&self, key: u64, epoch: u64) -> bool {
        self.fences.iter().any(|f| f.keys.contains(&key) && f.epoch.is_none_or(|e| epoch >= e))
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
        let acc = self.access(key, Op::Write, time_ns);
        let epoch = self.current_epoch;
        if let Some(old) = self.map.remove(&key) {
            match old.dirty {
                None => {
                    self.clean_lru.remove(&old.last);
                    self.replacement.remove(key);
                    self.deref_block(old.cache_block);
                }
                Some(e) if e == epoch || !keep_closed_epochs => {
                    self.dirty_remove(e, key);
                    self.dec_epoch(e);
                    self.refs[old.cache_block as usize] -= 1;
                    self.deref_block(old.cache_block);
                }
                Some(_) => self.deref_block(old.cache_block),
            }
        }
        self.map.insert(key, Slot { cache_block: c, last: acc.vtime, dirty: Some(epoch) });
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
        let mut by_age: Vec<(u64, (u64, u64, u32))> = versions
            .map(|v| {
                let last = match self.map.get(&v.1) {
                    Some(s) if s.cache_block == v.2 => s.last,
                    _ => 0,
                };
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
    /// newest version it becomes clean (joins the replacement policy), otherwise its block is
    /// released. The caller still holds its pin.
    pub fn flushed(&mut self, epoch: u64, key: u64, c: u32, time_ns: u64) {
        if self.dirty.get(&(epoch, key)) != Some(&c) {
            return;
        }
        self.dirty_remove(epoch, key);
        self.dec_epoch(epoch);
        self.touch(key);
        let newest = matches!(self.map.get(&key), Some(s) if s.cache_block == c);
        if !newest {
            self.deref_block(c);
            return;
        }
        self.refs[c as usize] -= 1;
        // It keeps its last-access time (thesis 4.4.1, 5.1): clean and dirty blocks form one
        // global LRU, so a block written long ago is evicted soon after its flush.
        let Some(slot) = self.map.get_mut(&key) else { return };
        slot.dirty = None;
        let last = slot.last;
        let acc = Access { key, time_ns, op: Op::Read, vtime: last, next_vtime: NEVER };
        let younger = self.clean_lru.range(last + 1..).next().map(|(_, &k)| k);
        self.clean_lru.insert(last, key);
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
            let cur = match self.map.get(&key) {
                Some(Slot { cache_block, dirty: Some(e), .. }) => {
                    Some(Persisted { cache_block: *cache_block, epoch: *e })
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
        self.prefs.iter_mut().for_each(|p| *p = 0);
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
    /// carry [`dirty_flags`].
    pub fn entries(&self) -> Vec<MapEntry> {
        let mut v: Vec<(u64, MapEntry)> = self
            .map
            .iter()
            .map(|(&key, s)| {
                let flags = s.dirty.map_or(0, dirty_flags);
                (s.last, MapEntry { key, cache_block: s.cache_block, flags })
            })
            .collect();
        v.sort_unstable_by_key(|&(last, e)| (last, e.key));
        v.into_iter().map(|(_, e)| e).collect()
    }

    /// Free cache blocks (for tests and invariants).
    #[cfg(test)]
    pub fn free_len(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_policy::admission::Aod;
    use ember_policy::replacement::Lru;

    fn state(n: u32) -> CacheState {
        CacheState::new(n, Box::new(Lru::new(n as usize)), Box::new(Aod))
    }

    #[test]
    fn eviction_of_a_pinned_block_defers_its_reuse() {
        let mut st = state(2);
        let a = st.access(1, Op::Read, 0);
        let ca = st.allocate(&a).cache_block.unwrap();
        st.unpin(ca);
        let b = st.access(2, Op::Read, 0);
        let cb = st.allocate(&b).cache_block.unwrap();
        st.unpin(cb);
        // A reader pins key 1's block; then key 3 evicts key 1 (LRU).
        let r = st.access(2, Op::Read, 0);
        st.hit_pin(&r).unwrap(); // key 2 becomes most recent, pinned
        let r1 = st.access(1, Op::Read, 0);
        let pinned = st.hit_pin(&r1).unwrap();
        assert_eq!(pinned, ca);
        let c = st.access(3, Op::Read, 0);
        let alloc = st.allocate(&c);
        assert_eq!(alloc.evicted, Some(2), "LRU victim is key 2 (key 1 was touched after it)");
        // Key 2's block is pinned too, so nothing is free: the allocation is refused.
        assert_eq!(alloc.cache_block, None);
        assert!(!st.replacement.contains(3));
        assert_eq!(st.free_len(), 0);
        st.unpin(cb); // the key-2 reader finishes: its block is free now
        assert_eq!(st.free_len(), 1);
        let c = st.access(3, Op::Read, 0);
        let alloc = st.allocate(&c);
        assert_eq!(alloc.evicted, None, "key 2's eviction already made room in the policy");
        assert_eq!(alloc.cache_block, Some(cb), "the freed block, not key 1's pinned one");
        st.unpin(cb);
        st.unpin(pinned);
        assert_eq!(st.free_len(), 0, "key 1 is still mapped, so its block stays in use");
        assert_eq!(st.len(), 2);
        let d = st.access(4, Op::Read, 0);
        let alloc = st.allocate(&d);
        assert_eq!(alloc.evicted, Some(1));
        assert_eq!(alloc.cache_block, Some(ca), "key 1's block, unpinned now, is reused");
    }

    #[test]
    fn entries_are_coldest_first_and_load_round_trips() {
        let mut st = state(4);
        for k in [10u64, 20, 30] {
            let a = st.access(k, Op::Read, 0);
            let c = st.allocate(&a).cache_block.unwrap();
            st.unpin(c);
        }
        let a = st.access(10, Op::Read, 0);
        let c = st.hit_pin(&a).unwrap();
        st.unpin(c);
        let e = st.entries();
        assert_eq!(e.iter().map(|e| e.key).collect::<Vec<_>>(), vec![20, 30, 10]);
        let mut st2 = state(4);
        st2.load(&e, 0, false);
        assert_eq!(st2.len(), 3);
        assert_eq!(st2.free_len(), 1);
        assert_eq!(st2.get(10), st.get(10));
        // LRU order survived: the next eviction takes key 20.
        let a = st2.access(40, Op::Read, 0);
        let c = st2.allocate(&a).cache_block.unwrap();
        st2.unpin(c);
        let a = st2.access(50, Op::Read, 0);
        assert_eq!(st2.allocate(&a).evicted, Some(20));
    }

    #[test]
    fn a_rewrite_after_its_epoch_closed_keeps_the_old_version_for_the_flusher() {
        let mut st = state(8);
        let c1 = st.reserve().unwrap();
        st.commit_dirty(5, c1, 0, true);
        st.current_epoch += 1; // a FLUSH closed epoch 1
        let c2 = st.reserve().unwrap();
        st.commit_dirty(5, c2, 0, true);
        assert_eq!(st.get(5), Some(c2), "reads see the newest version");
        assert_eq!(st.dirty_len(), 2, "epoch 1's version still has to reach backing");
        assert_eq!(st.flush_batch(10, false), vec![(1, 5, c1)], "oldest epoch first");
        st.pin(c1);
        st.flushed(1, 5, c1, 0);
        st.unpin(c1);
        assert_eq!(st.dirty_len(), 1);
        assert_eq!(st.get(5), Some(c2), "still dirty in epoch 2");
        assert_eq!(st.free_len(), 7, "the old version's block is free again");
        // Within one epoch (or under persist) a rewrite replaces the version.
        let c3 = st.reserve().unwrap();
        st.commit_dirty(5, c3, 0, true);
        assert_eq!(st.dirty_len(), 1);
        assert_eq!(st.free_len(), 7);
        st.pin(c3);
        st.flushed(2, 5, c3, 0);
        st.unpin(c3);
        assert_eq!(st.dirty_len(), 0);
        assert!(st.replacement.contains(5), "a flushed newest version is clean");
    }

    #[test]
    fn flush_order_is_ascending_or_lru() {
        let mut st = state(8);
        for k in [30u64, 10, 20] {
            let c = st.reserve().unwrap();
            st.commit_dirty(k, c, 0, true);
        }
        let keys = |b: Vec<(u64, u64, u32)>| b.into_iter().map(|v| v.1).collect::<Vec<_>>();
        assert_eq!(keys(st.flush_batch(2, false)), vec![10, 20], "ascending: lowest blocks");
        // LRU (thesis 4.4.1): the two least recently written, 30 and 10, sent in block order.
        assert_eq!(keys(st.flush_batch(2, true)), vec![10, 30]);
    }

    #[test]
    fn the_persist_bitmap_keeps_a_persisted_block_from_reuse() {
        let mut st = state(3);
        st.persist_tracking = true;
        let c1 = st.reserve().unwrap();
        st.commit_dirty(7, c1, 0, false);
        let (changes, release) = st.persist_snapshot();
        assert_eq!(changes, vec![(7, Some(Persisted { cache_block: c1, epoch: 1 }))]);
        st.persist_done(&release);
        // Rewritten: the persisted map still names c1, so c1 is not reused...
        let c2 = st.reserve().unwrap();
        st.commit_dirty(7, c2, 0, false);
        assert_eq!(st.free_len(), 1);
        let c3 = st.reserve().unwrap();
        assert_ne!(c3, c1);
        st.unpin(c3);
        // ...until the next persist no longer names it.
        let (changes, release) = st.persist_snapshot();
        assert_eq!(changes, vec![(7, Some(Persisted { cache_block: c2, epoch: 1 }))]);
        assert_eq!(st.free_len(), 1);
        st.persist_done(&release);
        assert_eq!(st.free_len(), 2, "c1 is free once the new map is durable");
        // Flushed and persisted again: the entry is deleted, c2 stays clean and mapped.
        st.pin(c2);
        st.flushed(1, 7, c2, 0);
        st.unpin(c2);
        let (changes, release) = st.persist_snapshot();
        assert_eq!(changes, vec![(7, None)]);
        st.persist_done(&release);
        assert_eq!(st.persisted_len(), 0);
        assert_eq!(st.free_len(), 2);
        assert_eq!(st.get(7), Some(c2));
    }

    #[test]
    fn only_clean_blocks_are_evicted() {
        let mut st = state(2);
        let c1 = st.reserve().unwrap();
        st.commit_dirty(1, c1, 0, true);
        let a = st.access(2, Op::Read, 0);
        let c2 = st.allocate(&a).cache_block.unwrap();
        st.unpin(c2);
        let b = st.access(3, Op::Read, 0);
        let got = st.allocate(&b).cache_block;
        assert_eq!(got, Some(c2), "clean key 2 evicted, dirty key 1 kept");
        assert_eq!(st.get(1), Some(c1));
        assert_eq!(st.get(2), None);
        st.unpin(c2);
        // Nothing clean and unpinned left but key 3: a reserve evicts it.
        assert_eq!(st.reserve(), Some(c2));
        assert_eq!(st.reserve(), None, "a dirty block is never evicted");
    }

    /// The key index of the dirty map (TRIM looks up a range through it) stays equal to the
    /// dirty map itself through writes, epoch changes, flushes and drops.
    #[test]
    fn the_dirty_key_index_follows_the_dirty_map() {
        let mut st = state(64);
        let brute = |st: &CacheState, r: std::ops::Range<u64>| {
            let mut v: Vec<u64> =
                st.dirty.keys().map(|&(_, k)| k).filter(|k| r.contains(k)).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        for k in [5u64, 9, 10, 11, 40] {
            let c = st.reserve().unwrap();
            st.commit_dirty(k, c, 0, true);
        }
        st.current_epoch += 1;
        for k in [10u64, 12] {
            let c = st.reserve().unwrap();
            st.commit_dirty(k, c, 0, true); // 10 now has versions in epochs 1 and 2
        }
        assert_eq!(st.dirty_keys_in(9..13), vec![9, 10, 11, 12]);
        assert_eq!(st.dirty_keys_in(0..100), brute(&st, 0..100));
        assert_eq!(st.dirty_len(), 7);
        // Flush epoch 1's version of 10: the key stays (epoch 2's version).
        let (_, _, c10) = st.flush_batch(64, false).into_iter().find(|v| v.1 == 10).unwrap();
        st.pin(c10);
        st.flushed(1, 10, c10, 0);
        st.unpin(c10);
        assert_eq!(st.dirty_keys_in(10..11), vec![10]);
        // The newest version counts twice: its map entry and its dirty-map version.
        assert_eq!(st.drop_all_versions(10), 2);
        assert_eq!(st.drop_all_versions(11), 2);
        assert_eq!(st.dirty_keys_in(9..13), vec![9, 12]);
        assert_eq!(st.dirty_keys_in(0..100), brute(&st, 0..100));
        assert_eq!(st.dirty_keys_in(41..100), Vec::<u64>::new());
    }

    #[test]
    fn fences_cover_their_key_range_until_lowered() {
        let mut st = state(4);
        let a = st.raise_fence(10..20, None);
        let b = st.raise_fence(15..30, None);
        assert!(st.fenced(10) && st.fenced(19) && st.fenced(29));
        assert!(!st.fenced(9) && !st.fenced(30));
        st.lower_fence(a);
        assert!(!st.fenced(10) && st.fenced(15));
        st.lower_fence(b);
        assert!(!st.fenced(15));
    }

    /// Thesis 4.4.1 and 5.1: the clean and dirty lists act as one global LRU, so a block that
    /// was written long ago and then flushed is next in line for eviction, not the newest.
    #[test]
    fn a_flushed_block_keeps_its_last_access_time() {
        let mut st = state(3);
        let w = st.access(1, Op::Write, 0);
        let c1 = st.reserve().unwrap();
        st.commit_dirty(w.key, c1, 0, false);
        for k in [2, 3] {
            let r = st.access(k, Op::Read, 0);
            let c = st.allocate(&r).cache_block.unwrap();
            st.unpin(c);
        }
        let epoch = st.current_epoch;
        st.pin(c1);
        st.flushed(epoch, 1, c1, 0);
        st.unpin(c1);
        let r = st.access(4, Op::Read, 0);
        let a = st.allocate(&r);
        assert_eq!(a.evicted, Some(1), "key 1 was accessed before keys 2 and 3");
        // The fallback path (no free block) evicts in the same order.
        let mut st = state(2);
        let w = st.access(1, Op::Write, 0);
        let c1 = st.reserve().unwrap();
        st.commit_dirty(w.key, c1, 0, false);
        let r = st.access(2, Op::Read, 0);
        let c = st.allocate(&r).cache_block.unwrap();
        st.unpin(c);
        let epoch = st.current_epoch;
        st.pin(c1);
        st.flushed(epoch, 1, c1, 0);
        st.unpin(c1);
        assert_eq!(st.evict_clean(1), 1);
        assert!(st.get(1).is_none() && st.get(2).is_some(), "the oldest access leaves first");
    }
}
