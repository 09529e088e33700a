//! Recovery of the persisted dirty map (thesis 5.3): the checkpoint named by the superblock,
//! with the journal's committed barriers replayed over its dirty entries. Only decodes and
//! validates; opening the engine decides what to do with the result.

use super::checkpoint::{dirty_flags, flags_epoch, unwrap_dirty, ENTRY_DIRTY};
use super::entry_check::{duplicate_key, EntryCheck, DUPLICATE};
use super::journal::{self, JournalEntry};
use super::superblock::NO_CHECKPOINT;
use super::{Checkpoint, LayoutError, MapEntry, Superblock, WriteMode};
use crate::device::Device;
use std::collections::BTreeMap;

/// The persisted dirty map read back from a device (thesis 5.3): the checkpoint's dirty
/// entries with the journal's committed barriers replayed over them.
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    /// Dirty entries (flags: dirty, epoch in bits 16..32), ascending by key.
    pub dirty: Vec<MapEntry>,
    /// Clean entries of the checkpoint (only meaningful after a clean shutdown), coldest
    /// first.
    pub clean: Vec<MapEntry>,
    /// Generation of the checkpoint.
    pub checkpoint_generation: u64,
    /// Generation of the last journal commit replayed (= the checkpoint's if none).
    pub last_generation: u64,
    /// Journal commits replayed.
    pub journal_commits: u64,
    /// Journal blocks they occupy.
    pub journal_blocks: u64,
}

/// Read the checkpoint named by `sb` and, if the cache last ran write-back persist, replay
/// the journal over its dirty entries. Validates every entry against the superblock.
pub fn recover(cache: &dyn Device, sb: &Superblock) -> Result<Recovered, LayoutError> {
    let corrupt = |detail: String| LayoutError::Corrupt {
        device: cache.describe(),
        what: "persisted dirty map",
        detail,
    };
    let mut out = Recovered {
        checkpoint_generation: sb.checkpoint_generation,
        last_generation: sb.checkpoint_generation,
        ..Default::default()
    };
    let mut dirty: BTreeMap<u64, MapEntry> = BTreeMap::new();
    if sb.checkpoint_slot != NO_CHECKPOINT {
        let cp = Checkpoint::read_named(cache, sb)?;
        // Two entries for one key: which holds the data is unknown (the map keeps one).
        if let Some(i) = duplicate_key(&cp.entries) {
            return Err(corrupt(format!("checkpoint entry #{i}: {DUPLICATE}")));
        }
        for e in cp.entries {
            if e.flags & ENTRY_DIRTY != 0 {
                dirty.insert(e.key, e);
            } else if sb.is_clean() {
                out.clean.push(e);
            }
        }
    }
    if !sb.is_clean() && sb.write_mode == WriteMode::WriteBackPersist {
        let r = journal::replay(cache, &sb.geometry, sb.checkpoint_generation)?;
        out.journal_blocks = r.blocks_used;
        out.journal_commits = r.commits.len() as u64;
        for (generation, entries) in r.commits {
            out.last_generation = generation;
            for e in entries {
                match e {
                    JournalEntry::Insert { key, cache_block, epoch } => {
                        dirty.insert(
                            key,
                            MapEntry { key, cache_block, flags: dirty_flags(epoch as u64) },
                        );
                    }
                    JournalEntry::Delete { key } => {
                        dirty.remove(&key);
                    }
                    JournalEntry::Commit { .. } => {}
                }
            }
        }
    }
    let mut check = EntryCheck::new(sb);
    for e in dirty.values().chain(out.clean.iter()) {
        check.check(e).map_err(|detail| corrupt(format!("key {:#x}: {detail}", e.key)))?;
    }
    out.dirty = dirty.into_values().collect();
    Ok(out)
}

/// Per-epoch counts of dirty entries (epochs unwrapped past the 16-bit wrap, see
/// [`super::epoch`]), oldest first.
pub fn epochs_of(entries: &[MapEntry]) -> Vec<(u64, u64)> {
    let unwrap = unwrap_dirty(entries);
    let mut m: BTreeMap<u64, u64> = BTreeMap::new();
    for e in entries {
        if e.flags & ENTRY_DIRTY != 0 {
            *m.entry(unwrap.epoch(flags_epoch(e.flags))).or_default() += 1;
        }
    }
    m.into_iter().collect()
}
