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
    /// Export name; must match a volume the cache device was formatted with.
    pub name: String,
    /// The backing device.
    pub backing: Arc<dyn Device>,
}

/// Everything needed to open a formatted cache device for service.
pub struct EngineConfig {
    /// The cache device.
    pub cache: Arc<dyn Device>,
    /// Backing volumes to serve (a subset of the formatted ones, any order).
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
