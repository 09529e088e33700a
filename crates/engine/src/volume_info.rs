//! One served volume as the engine's core and its threads see it. Imports only the device
//! and the layout's `WriteMode`.

use crate::device::Device;
use crate::layout::WriteMode;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// One served volume.
pub(crate) struct VolumeInfo {
    /// Index in the superblock's volume table: the volume number in block keys.
    pub id: u32,
    pub name: String,
    pub size: u64,
    pub backing: Arc<dyn Device>,
    /// Misses may allocate (false while `uncache` or `remove` drops its blocks, and once
    /// uncached): read under the state lock by every allocation decision, stored under it.
    pub caching: AtomicBool,
    /// Its export stopped (`remove`): new requests end with [`crate::EngineError::ShutDown`].
    pub closed: AtomicBool,
    /// Requests of this volume inside the gate now (`remove` waits for them to finish).
    pub active: AtomicUsize,
    /// Its own write policy's code + 1 (0: the cache-wide one), read by every write, FLUSH
    /// and discard (`live/volume_settings.rs`).
    own_mode: AtomicU32,
}

impl VolumeInfo {
    /// A served volume, cached or not as `caching` says.
    pub fn new(id: u32, name: String, size: u64, backing: Arc<dyn Device>, caching: bool) -> Self {
        VolumeInfo {
            id,
            name,
            size,
            backing,
            caching: AtomicBool::new(caching),
            closed: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            own_mode: AtomicU32::new(0),
        }
    }

    /// Its own write policy, if it has one.
    pub fn own_mode(&self) -> Option<WriteMode> {
        match self.own_mode.load(SeqCst) {
            0 => None,
            c => WriteMode::from_code(c - 1),
        }
    }

    /// Give it the write policy `mode` of its own (`None`: the cache-wide one).
    pub fn set_own_mode(&self, mode: Option<WriteMode>) {
        self.own_mode.store(mode.map_or(0, |m| m.code() + 1), SeqCst);
    }

    /// Misses of this volume may be allocated.
    pub fn caching(&self) -> bool {
        self.caching.load(SeqCst)
    }

    /// Its export is stopped.
    pub fn closed(&self) -> bool {
        self.closed.load(SeqCst)
    }
}
