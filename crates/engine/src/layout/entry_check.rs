//! The checks every map entry read back from the cache device passes before it is loaded:
//! a checkpoint's entries at a warm start (`open::validate`) and the persisted dirty map
//! recovered after a crash under write-back persist ([`super::recover`], thesis 5.3). An
//! entry's volume is in the superblock, its block within that volume and its cache block
//! within the data region; its flags are known (dirty, the epoch in bits 16..32; or clean,
//! all zero); and no two entries name one key or one cache block.

use super::checkpoint::{MapEntry, ENTRY_DIRTY};
use super::key::{key_block, key_volume};
use super::Superblock;

/// What an entry naming a key or a cache block named before is reported as.
pub const DUPLICATE: &str = "duplicate cache block or key";

/// Checks entries one at a time against the superblock and the entries checked before.
pub struct EntryCheck<'a> {
    sb: &'a Superblock,
    /// One bit per cache block of the data region: set once an entry names it.
    blocks: Vec<u64>,
}

impl<'a> EntryCheck<'a> {
    /// A check against `sb`, no entry seen yet.
    pub fn new(sb: &'a Superblock) -> Self {
        Self { sb, blocks: vec![0u64; sb.geometry.data_blocks.div_ceil(64) as usize] }
    }

    /// Check `e` (and remember its cache block): its volume, or what is wrong with it.
    pub fn check(&mut self, e: &MapEntry) -> Result<u32, String> {
        let vol = key_volume(e.key);
        let Some(rec) = self.sb.volumes.get(vol as usize) else {
            return Err(format!("volume {vol} is not in the superblock"));
        };
        if key_block(e.key) >= rec.size / self.sb.geometry.block_size as u64 {
            return Err(format!("block {} beyond volume {:?}", key_block(e.key), rec.name));
        }
        if e.cache_block as u64 >= self.sb.geometry.data_blocks {
            return Err(format!("cache block {} beyond the data region", e.cache_block));
        }
        if e.flags & !ENTRY_DIRTY & 0xFFFF != 0 {
            return Err(format!("unknown flags {:#x}", e.flags));
        }
        if e.flags & ENTRY_DIRTY == 0 && e.flags != 0 {
            return Err(format!("an epoch on a clean entry ({:#x})", e.flags));
        }
        let (word, bit) = (e.cache_block as usize / 64, 1u64 << (e.cache_block % 64));
        if self.blocks[word] & bit != 0 {
            return Err(DUPLICATE.into());
        }
        self.blocks[word] |= bit;
        Ok(vol)
    }
}

/// The position of an entry that names a key an earlier entry named (the second entry of
/// the smallest such key), if any. Sorts the keys once: no per-entry hashing.
pub fn duplicate_key(entries: &[MapEntry]) -> Option<usize> {
    let mut keys: Vec<u64> = entries.iter().map(|e| e.key).collect();
    keys.sort_unstable();
    let key = keys.windows(2).find(|w| w[0] == w[1])?[0];
    entries.iter().enumerate().filter(|(_, e)| e.key == key).nth(1).map(|(i, _)| i)
}
