//! The cache device layout, version 2 (docs/reference/layout.md has the picture, the reasons
//! and the version rules; `upgrade.rs` turns a version-1 cache into version 2 in place).
//!
//! ```text
//! offset 0            superblock slot 0 (4 KiB)
//! offset 4 KiB        superblock slot 1 (4 KiB)      written alternately, newest valid wins
//! checkpoint A        header block + 16-byte map entries, room for every data block
//! checkpoint B        the same; a checkpoint is written to the slot not in use
//! journal             logical journal (thesis 5.3), then the volume records at its tail (v2)
//! warmup log          Bonfire's warmup log, reserved (may be empty)
//! data                the cached blocks
//! ```

pub mod checkpoint;
pub mod entry_check;
pub mod epoch;
pub mod geometry;
pub mod journal;
pub mod key;
pub mod recover;
pub mod superblock;
pub mod upgrade;
pub mod volume_records;
pub mod volume_records_io;
pub mod volume_state;
pub mod volume_table;
pub mod write_mode;

pub use checkpoint::{Checkpoint, MapEntry};
pub use geometry::Geometry;
pub use key::{block_key, key_block, key_volume};
pub use recover::{epochs_of, recover, Recovered};
pub use superblock::{Superblock, VolumeRecord, WriteMode};
pub use volume_records::BackingRecord;
pub use volume_state::VolumeState;

/// Layout version written by this code (it reads version 1 too, and upgrades it in place at
/// the first open for service).
pub const VERSION: u32 = 2;
/// Size of one superblock slot.
pub const SUPERBLOCK_SIZE: u64 = 4096;
/// Most backing volumes one cache device serves.
pub const MAX_VOLUMES: usize = 32;
/// Longest volume name in bytes (UTF-8).
pub const MAX_NAME: usize = 64;
/// Size of one map entry in a checkpoint (and of one journal entry, thesis table 5.1).
pub const ENTRY_SIZE: u64 = 16;

/// Errors reading or writing the layout.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// The device could not be read or written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Neither superblock slot holds an ember superblock.
    #[error("{device}: not an ember cache device (no valid superblock: {detail}); run `ember cache format`")]
    NotFormatted {
        /// The device.
        device: String,
        /// What was found in each slot.
        detail: String,
    },
    /// The superblock is from a layout version this code cannot read.
    #[error("{device}: cache layout version {found} is not supported (this ember reads versions 1 to {VERSION})")]
    Version {
        /// The device.
        device: String,
        /// The version found.
        found: u32,
    },
    /// A structure failed validation.
    #[error("{device}: corrupt {what}: {detail}")]
    Corrupt {
        /// The device.
        device: String,
        /// Which structure.
        what: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The requested format does not fit or is invalid.
    #[error("invalid format request: {0}")]
    Invalid(String),
}

/// Little-endian field access on a byte buffer.
pub(crate) struct Le<'a>(pub &'a [u8]);

impl Le<'_> {
    pub fn u32(&self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.0[at..at + 4]);
        u32::from_le_bytes(b)
    }
    pub fn u64(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[at..at + 8]);
        u64::from_le_bytes(b)
    }
}

pub(crate) fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
