//! What a replaced cache device leaves of the state (`live/replace.rs`): nothing of its map.
//! Every version, clean or dirty, and the persisted dirty map are forgotten, every cache
//! block is free again; the policies (replacement order, emptied; admission sieves, the
//! sequential cutoff) and the epoch counter stay, so no version of the new device can be
//! mistaken for one of the old.
//!
//! Lock: runs under `Inner::state` (`core.rs`: … → `state` → nothing else), takes no other
//! lock and does no I/O.

use super::CacheState;

impl CacheState {
    /// Does any request or the flusher hold a cache block (a pin, an in-flight mark of the
    /// flusher, a fence or a hold of ordered write-back)? The map is forgotten only when
    /// none does.
    pub fn busy(&self) -> bool {
        self.pins.iter().any(|&p| p > 0)
            || self.in_flight.any_in(0..u64::MAX)
            || !self.holds.is_empty()
            || self.fences.covers_any()
    }

    /// Forget the whole map: the cache is empty, as on a freshly formatted device. Returns
    /// how many keys had a version. Call only when not [`CacheState::busy`].
    pub fn forget_all(&mut self) -> u64 {
        let mut keys: Vec<u64> = self.lists.oldest_first().map(|c| self.keys[c as usize]).collect();
        keys.extend(self.dirty_by_key.iter().map(|&(k, _)| k));
        keys.sort_unstable();
        keys.dedup();
        for &k in &keys {
            self.drop_all_versions(k);
        }
        self.persisted.clear();
        self.touched.clear();
        self.prefs.fill(0);
        self.flags.fill(0);
        self.in_flight.clear();
        self.end_drain();
        self.checkpoint_version = None;
        self.evicted_log.clear();
        self.last_flush_error.clear();
        self.rebuild_free();
        keys.len() as u64
    }
}
