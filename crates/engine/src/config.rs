//! What `Engine::open` and `Engine::format` are given.

use crate::device::Device;
use crate::layout::WriteMode;
use ember_policy::{Admission, Replacement};
use std::sync::Arc;

/// Builds the replacement policy once the cache's capacity (in blocks) is known from the
/// superblock, e.g. `Box::new(|cap| ember_policy::replacement::build(Kind::Lru, cap))`.
pub type ReplacementFactory = Box<dyn FnOnce(usize) -> Box<dyn Replacement> + Send>;

/// One backing volume to serve.
pub struct VolumeConfig {
    /// Export name. A name the cache device's volume table does not record is recorded at
    /// open, in a free slot, and served cold (`OpenReport::attached`).
    pub name: String,
    /// The backing device.
    pub backing: Arc<dyn Device>,
}

/// Everything needed to open a formatted cache device for service.
pub struct EngineConfig {
    /// The cache device.
    pub cache: Arc<dyn Device>,
    /// Backing volumes to serve, any order: recorded ones, and new ones recorded at open; a
    /// recorded volume not named stays recorded, unserved.
    pub volumes: Vec<VolumeConfig>,
    /// Write policy: write-through or write-around in this version.
    pub write_mode: WriteMode,
    /// Replacement policy (evicts when an allocation needs room).
    pub replacement: ReplacementFactory,
    /// Admission sieve (decides allocation on each miss).
    pub admission: Box<dyn Admission>,
}

/// One volume to record at format time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeSpec {
    /// Export name (1 to 64 bytes of UTF-8).
    pub name: String,
    /// Size of its backing device in bytes.
    pub size: u64,
}

/// How to format a cache device.
#[derive(Clone, Debug)]
pub struct FormatSpec {
    /// Cache block size (power of two, at least 4096).
    pub block_size: u32,
    /// Bytes reserved for the logical journal of write-back persist (thesis 5.3: 4 MiB).
    pub journal_bytes: u64,
    /// Bytes reserved for Bonfire's warmup log (0: none).
    pub warmup_log_bytes: u64,
    /// The backing volumes (at most 32).
    pub volumes: Vec<VolumeSpec>,
}

impl FormatSpec {
    /// 4 KiB blocks, a 4 MiB journal, no warmup log.
    pub fn new(volumes: Vec<VolumeSpec>) -> Self {
        Self { block_size: 4096, journal_bytes: 4 << 20, warmup_log_bytes: 0, volumes }
    }
}

/// A dirty-block threshold of the write-back policies (thesis 4.1): a number of blocks, or a
/// percentage of the cache's data blocks, which the engine resolves against the superblock
/// when it opens the cache.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DirtyLimit {
    /// This many blocks.
    Blocks(u64),
    /// This percentage (0 to 100) of the cache's data blocks, rounded down.
    Percent(f64),
}

/// Which of the two dirty thresholds a [`DirtyLimitError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirtyThreshold {
    /// `max_dirty`: writes fall back to write-through at it.
    Max,
    /// `min_dirty`: the flusher idles at or below it.
    Min,
    /// `dirty_target`: background cleaning steers toward it while requests come.
    Target,
}

impl std::fmt::Display for DirtyThreshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DirtyThreshold::Max => "max dirty",
            DirtyThreshold::Min => "min dirty",
            DirtyThreshold::Target => "dirty target",
        })
    }
}

/// Why the dirty thresholds do not fit the cache being opened.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DirtyLimitError {
    /// A percentage outside 0 to 100.
    #[error("{threshold} {percent}%: a percentage from 0 to 100")]
    Percent {
        /// The threshold.
        threshold: DirtyThreshold,
        /// The percentage given.
        percent: f64,
    },
    /// A number of blocks above the cache's data blocks.
    #[error("{threshold} {blocks}: more than the cache's {data_blocks} data blocks")]
    AboveCache {
        /// The threshold.
        threshold: DirtyThreshold,
        /// The blocks given.
        blocks: u64,
        /// The cache's data blocks.
        data_blocks: u64,
    },
    /// Both thresholds given, the lower one above the upper one.
    #[error("min dirty ({min} blocks) is above max dirty ({max} blocks)")]
    MinAboveMax {
        /// `min_dirty` in blocks.
        min: u64,
        /// `max_dirty` in blocks.
        max: u64,
    },
}

impl DirtyLimit {
    /// The limit in blocks for a cache of `data_blocks` data blocks: a percentage outside 0
    /// to 100 or a number of blocks above `data_blocks` is refused.
    pub fn blocks(
        self,
        threshold: DirtyThreshold,
        data_blocks: u64,
    ) -> Result<u64, DirtyLimitError> {
        match self {
            DirtyLimit::Percent(percent) => {
                if !(0.0..=100.0).contains(&percent) {
                    return Err(DirtyLimitError::Percent { threshold, percent });
                }
                Ok((data_blocks as f64 * percent / 100.0) as u64)
            }
            DirtyLimit::Blocks(blocks) if blocks > data_blocks => {
                Err(DirtyLimitError::AboveCache { threshold, blocks, data_blocks })
            }
            DirtyLimit::Blocks(blocks) => Ok(blocks),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_limits_resolve_against_the_cache() {
        let max = DirtyThreshold::Max;
        assert_eq!(DirtyLimit::Percent(25.0).blocks(max, 1000), Ok(250));
        assert_eq!(DirtyLimit::Percent(12.5).blocks(max, 9), Ok(1), "rounded down");
        assert_eq!(DirtyLimit::Blocks(10).blocks(max, 1000), Ok(10));
        assert_eq!(DirtyLimit::Blocks(1000).blocks(max, 1000), Ok(1000));
        let e = DirtyLimit::Blocks(2000).blocks(max, 1000).unwrap_err();
        assert_eq!(e.to_string(), "max dirty 2000: more than the cache's 1000 data blocks");
        let e = DirtyLimit::Percent(200.0).blocks(DirtyThreshold::Min, 1000).unwrap_err();
        assert_eq!(e.to_string(), "min dirty 200%: a percentage from 0 to 100");
        assert!(DirtyLimit::Percent(f64::NAN).blocks(max, 1000).is_err());
    }

    #[test]
    fn writeback_limits_in_blocks_or_percent() {
        use crate::wb::WritebackConfig;
        let wb = WritebackConfig {
            max_dirty: Some(DirtyLimit::Percent(25.0)),
            min_dirty: Some(DirtyLimit::Blocks(10)),
            ..WritebackConfig::default()
        };
        let l = wb.resolve(1000).unwrap();
        assert_eq!((l.max_dirty, l.min_dirty), (250, 10));
        let l = WritebackConfig::default().resolve(1000).unwrap();
        assert_eq!((l.max_dirty, l.min_dirty), (500, 125), "half and an eighth of the cache");
        let bad = WritebackConfig { min_dirty: Some(DirtyLimit::Blocks(300)), ..wb };
        let e = bad.resolve(1000).unwrap_err();
        assert_eq!(e, DirtyLimitError::MinAboveMax { min: 300, max: 250 });
        assert_eq!(e.to_string(), "min dirty (300 blocks) is above max dirty (250 blocks)");
        let bad = WritebackConfig { max_dirty: Some(DirtyLimit::Blocks(2000)), ..wb };
        assert!(matches!(bad.resolve(1000), Err(DirtyLimitError::AboveCache { .. })));
    }
}
