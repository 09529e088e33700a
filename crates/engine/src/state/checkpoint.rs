//! The map to and from checkpoint entries: a checkpoint loaded at open, the whole map for a
//! checkpoint written at shutdown, and whether the checkpoint the superblock names still
//! holds the map exactly (`checkpoint_version`). A load under write-back persist also fills
//! the persisted dirty map (`persisted`, `prefs`). Calls the index, the dirty map and the
//! replacement policy.
//!
//! Lock: every method runs under `Inner::state` (`core.rs`: … → `state` → nothing else); none
//! takes another lock or does I/O.

use super::{CacheState, Persisted};
use crate::layout::checkpoint::{dirty_flags, flags_epoch, unwrap_dirty};
use crate::layout::MapEntry;
use ember_trace::Op;

impl CacheState {
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
}
