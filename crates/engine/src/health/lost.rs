//! The lost list: the blocks whose only current copy was on a cache device that failed
//! (their dirty versions, under a write-back policy), by volume. A read of a listed block
//! fails with EIO rather than return the older bytes backing holds; a write that covers a
//! listed block whole makes backing's copy current again; the operator's `clear-lost`
//! accepts backing's version of every block of a volume. A volume whose list was restored at
//! start (the failure happened before a restart) is refused whole until it is cleared.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One volume's listed blocks.
#[derive(Clone, Debug, Default)]
pub(crate) struct LostVolume {
    /// Block numbers (cache blocks of the volume).
    pub blocks: BTreeSet<u64>,
    /// Restored at start: the whole volume is refused until cleared.
    pub refused: bool,
}

/// Every volume's listed blocks, by superblock volume index.
#[derive(Clone, Debug, Default)]
pub(crate) struct LostList {
    pub volumes: BTreeMap<u32, LostVolume>,
}

impl LostList {
    /// The first listed block of volume `vol` in `blocks`, if any.
    pub fn first_in(&self, vol: u32, blocks: std::ops::Range<u64>) -> Option<u64> {
        let v = self.volumes.get(&vol)?;
        v.blocks.range(blocks).next().copied()
    }

    /// List `block` of volume `vol`.
    pub fn insert(&mut self, vol: u32, block: u64) {
        self.volumes.entry(vol).or_default().blocks.insert(block);
    }

    /// Unlist the blocks of `vol` in `blocks`; how many were listed.
    pub fn remove_range(&mut self, vol: u32, blocks: std::ops::Range<u64>) -> u64 {
        let Some(v) = self.volumes.get_mut(&vol) else { return 0 };
        let gone: Vec<u64> = v.blocks.range(blocks).copied().collect();
        for b in &gone {
            v.blocks.remove(b);
        }
        if v.blocks.is_empty() && !v.refused {
            self.volumes.remove(&vol);
        }
        gone.len() as u64
    }

    /// Forget volume `vol`'s list (and its refusal); how many blocks it held.
    pub fn clear(&mut self, vol: u32) -> u64 {
        self.volumes.remove(&vol).map_or(0, |v| v.blocks.len() as u64)
    }

    /// Listed blocks of `vol`.
    pub fn count(&self, vol: u32) -> u64 {
        self.volumes.get(&vol).map_or(0, |v| v.blocks.len() as u64)
    }

    /// Listed blocks in all.
    pub fn total(&self) -> u64 {
        self.volumes.values().map(|v| v.blocks.len() as u64).sum()
    }

    /// Is volume `vol` refused whole?
    pub fn refused(&self, vol: u32) -> bool {
        self.volumes.get(&vol).is_some_and(|v| v.refused)
    }
}

/// What is written outside the cache device when it fails, and again whenever the list
/// changes: whether the cache is degraded, why, and the lost blocks by volume name as byte
/// offsets of whole blocks. The server writes it to its state directory (synced, atomically)
/// before a request is served degraded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DegradedRecord {
    /// The cache device failed and is not used any more.
    pub degraded: bool,
    /// Why it was given up (empty when not degraded).
    #[serde(default)]
    pub reason: String,
    /// When, in milliseconds since the Unix epoch (0 when not degraded).
    #[serde(default)]
    pub since_unix_ms: u64,
    /// The cache device, as the engine describes it.
    #[serde(default)]
    pub cache: String,
    /// Bytes a block.
    pub block_size: u32,
    /// Lost blocks: volume name → byte offsets, ascending.
    #[serde(default)]
    pub lost: BTreeMap<String, Vec<u64>>,
}

impl DegradedRecord {
    /// Lost blocks in all.
    pub fn lost_blocks(&self) -> u64 {
        self.lost.values().map(|v| v.len() as u64).sum()
    }
}

/// Where the engine hands its [`DegradedRecord`] (the server's state file). It MUST return
/// only once the record is durable: the engine serves degraded only after it returned.
pub type DegradedSink = Box<dyn Fn(&DegradedRecord) -> std::io::Result<()> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_blocks_are_found_removed_and_cleared() {
        let mut l = LostList::default();
        l.insert(1, 10);
        l.insert(1, 12);
        l.insert(2, 3);
        assert_eq!(l.first_in(1, 0..11), Some(10));
        assert_eq!(l.first_in(1, 11..12), None);
        assert_eq!(l.first_in(0, 0..100), None);
        assert_eq!(l.total(), 3);
        assert_eq!(l.remove_range(1, 10..11), 1);
        assert_eq!(l.count(1), 1);
        assert_eq!(l.clear(1), 1);
        assert_eq!(l.count(1), 0);
        assert_eq!(l.total(), 1);
        assert!(!l.refused(2));
    }
}
