//! Write-back persist (thesis 4.2.2, 4.3, 5.3): the last persisted dirty map (`persisted`),
//! the keys changed since (`touched`), and the persist marks (`prefs`, the persist bitmap)
//! that keep a block the persisted map names from reuse until a later commit no longer names
//! it. Calls the dirty map and the index.
//!
//! Lock: every method runs under `Inner::state` (`core.rs`: … → `state` → nothing else); none
//! takes another lock or does I/O.

use super::CacheState;
use crate::layout::checkpoint::dirty_flags;
use crate::layout::MapEntry;

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

impl CacheState {
    /// Write-back persist, at a barrier: the changes of the dirty map since the last
    /// snapshot (of each key, its newest dirty version, or while a switch drains write-back
    /// persist its newest of the drained epochs: `live.rs`). The new versions are marked persisted at once (they may be on the device
    /// from now on); the replaced ones stay marked until [`CacheState::persist_done`].
    /// Returns the changes and the blocks to release after the commit.
    pub fn persist_snapshot(&mut self) -> (Vec<Change>, Vec<u32>) {
        let mut keys: Vec<u64> = self.touched.drain().collect();
        keys.sort_unstable();
        let mut changes = Vec::new();
        let mut release = Vec::new();
        for key in keys {
            let cur = self.persistable(key);
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
}
