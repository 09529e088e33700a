//! One served volume as the engine's core and its threads see it. Imports only the device.

use crate::device::Device;
use std::sync::Arc;

/// One served volume.
pub(crate) struct VolumeInfo {
    /// Index in the superblock's volume table: the volume number in block keys.
    pub id: u32,
    pub name: String,
    pub size: u64,
    pub backing: Arc<dyn Device>,
}
