//! The block index and the per-cache-block bookkeeping of [`CacheState`]: which key a cache
//! block holds (`index`, `keys`), its flags, references, pins and persist marks (`flags`,
//! `refs`, `pins`, `prefs`: the arrays of the module doc), the recency and free lists
//! (`lists`), the count of clean blocks (`clean`) and virtual time (`vtime`). A block
//! returns to the free list only when no reference, pin or persist mark holds it. The
//! bottom of the state: it calls nothing of the other files.
//!
//! Lock: every method runs under `Inner::state` (`core.rs`: … → `state` → nothing else); none
//! takes another lock or does I/O.

use super::{CacheState, DEMOTED, DIRTY, PRELOADED};
use ember_policy::{Access, NEVER};
use ember_trace::Op;

impl CacheState {
    /// True if the recency list is the replacement policy (LRU, see the module doc).
    #[cfg(test)]
    pub fn recency_policy(&self) -> bool {
        self.recency_policy
    }

    pub(super) fn rebuild_free(&mut self) {
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

    pub(super) fn release_if_unused(&mut self, c: u32) {
        if self.unused(c) {
            self.lists.free_push(c);
        }
    }

    pub(super) fn deref_block(&mut self, c: u32) {
        self.refs[c as usize] -= 1;
        self.release_if_unused(c);
    }

    pub(super) fn is_dirty(&self, c: u32) -> bool {
        self.flags[c as usize] & DIRTY != 0
    }

    /// Map `key`'s newest version to unlisted block `c` (accessed now). The caller counts
    /// the reference.
    pub(super) fn map(&mut self, key: u64, c: u32, dirty: bool) {
        let i = c as usize;
        self.keys[i] = key;
        self.index.insert(key, c);
        self.occupancy.resident(key, 1);
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
    pub(super) fn unlist(&mut self, key: u64, c: u32) {
        self.index.remove(key, c);
        self.occupancy.resident(key, -1);
        self.lists.remove(c);
        if !self.is_dirty(c) {
            self.clean -= 1;
        }
    }

    /// The oldest clean block (the next eviction).
    pub(super) fn oldest_clean(&mut self) -> Option<u32> {
        let flags = &self.flags;
        self.lists.oldest_where(|c| flags[c as usize] & DIRTY == 0)
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

    /// Cache block of `key`, if resident (no side effects).
    pub fn get(&self, key: u64) -> Option<u32> {
        let keys = &self.keys;
        self.index.get(key, |c| keys[c as usize])
    }

    /// True if `key`'s newest version is resident and clean (evictable).
    #[cfg(test)]
    pub fn is_clean(&self, key: u64) -> bool {
        self.get(key).is_some_and(|c| !self.is_dirty(c))
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

    /// True if cache block `c` holds a block a DEMOTE stored (array tier).
    pub fn demoted_origin(&self, c: u32) -> bool {
        self.flags.get(c as usize).is_some_and(|f| f & DEMOTED != 0)
    }

    /// Drop the newest version of `key` from the map (clean: also from the recency list). A
    /// dirty version stays in the dirty map; callers that drop dirty data use
    /// [`CacheState::drop_all_versions`].
    pub(super) fn unmap(&mut self, key: u64) -> bool {
        match self.get(key) {
            Some(c) => {
                self.unlist(key, c);
                self.deref_block(c);
                true
            }
            None => false,
        }
    }

    /// Release one pin; the block is freed if nothing else holds it.
    pub fn unpin(&mut self, cache_block: u32) {
        self.pins[cache_block as usize] -= 1;
        self.release_if_unused(cache_block);
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
