//! The write-back tuning (thesis 4.1, 4.4) and its resolution against the cache size into the
//! `Limits` the engine's core holds. Imports only the core's `Limits`.

use crate::core::Limits;

use crate::config::{DirtyLimit, DirtyLimitError, DirtyThreshold};

/// Tuning of the write-back policies (thesis 4.1, 4.4).
#[derive(Clone, Copy, Debug)]
pub struct WritebackConfig {
    /// At this many dirty blocks, writes fall back to write-through (None: half the cache).
    pub max_dirty: Option<DirtyLimit>,
    /// The flusher idles at or below this many dirty blocks unless a FLUSH or a clean stop
    /// needs it (None: an eighth of the cache).
    pub min_dirty: Option<DirtyLimit>,
    /// Concurrent dirty epochs under write-back flush; beyond, writes wait (thesis 4.4.2).
    pub max_epochs: usize,
    /// Blocks per flusher batch.
    pub batch_blocks: usize,
    /// Flush the least recently written dirty blocks first instead of the lowest block
    /// numbers (thesis 4.4.1; ascending order is the default, kinder to a disk).
    pub lru_flush_order: bool,
}

impl Default for WritebackConfig {
    fn default() -> Self {
        Self {
            max_dirty: None,
            min_dirty: None,
            max_epochs: 4,
            batch_blocks: 64,
            lru_flush_order: false,
        }
    }
}

impl WritebackConfig {
    /// The limits for a cache of `data_blocks` data blocks: percentages resolved, a threshold
    /// above the cache or a `min_dirty` above the `max_dirty` given refused.
    pub(crate) fn resolve(&self, data_blocks: u64) -> Result<Limits, DirtyLimitError> {
        let max = self.max_dirty.map(|m| m.blocks(DirtyThreshold::Max, data_blocks)).transpose()?;
        let min = self.min_dirty.map(|m| m.blocks(DirtyThreshold::Min, data_blocks)).transpose()?;
        if let (Some(max), Some(min)) = (max, min) {
            if min > max {
                return Err(DirtyLimitError::MinAboveMax { min, max });
            }
        }
        let max_dirty = max.unwrap_or(data_blocks / 2).min(data_blocks) as usize;
        let min_dirty = (min.unwrap_or(data_blocks / 8) as usize).min(max_dirty / 2);
        Ok(Limits {
            max_dirty,
            min_dirty,
            max_epochs: self.max_epochs.max(1),
            batch: self.batch_blocks.clamp(1, 1024),
            lru: self.lru_flush_order,
        })
    }
}
