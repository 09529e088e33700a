//! One served volume as the engine's core and its threads see it. Imports only the device.

use crate::device::Device;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
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
        }
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
