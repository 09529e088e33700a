//! The served volumes, a set that `attach` grows and `remove` shrinks while requests run.
//! Readers take a snapshot (an `Arc` of the list) under a short read lock and never hold the
//! lock across anything else; a volume handle holds its own `Arc<VolumeInfo>`, so the hot
//! paths never look the set up. Imports only the volume record.

use crate::volume_info::VolumeInfo;
use parking_lot::RwLock;
use std::sync::Arc;

/// The served volumes, in the order they were configured or attached.
pub(crate) struct VolumeSet {
    list: RwLock<Arc<Vec<Arc<VolumeInfo>>>>,
}

impl VolumeSet {
    /// A set of `volumes`.
    pub fn new(volumes: Vec<VolumeInfo>) -> VolumeSet {
        VolumeSet { list: RwLock::new(Arc::new(volumes.into_iter().map(Arc::new).collect())) }
    }

    /// The volumes now.
    pub fn snapshot(&self) -> Arc<Vec<Arc<VolumeInfo>>> {
        self.list.read().clone()
    }

    /// The volumes now, as an owned iterator.
    pub fn iter(&self) -> std::vec::IntoIter<Arc<VolumeInfo>> {
        self.snapshot().as_ref().clone().into_iter()
    }

    /// The served volume with superblock index `id`.
    pub fn by_id(&self, id: u32) -> Option<Arc<VolumeInfo>> {
        self.list.read().iter().find(|v| v.id == id).cloned()
    }

    /// The served volume named `name`.
    pub fn by_name(&self, name: &str) -> Option<Arc<VolumeInfo>> {
        self.list.read().iter().find(|v| v.name == name).cloned()
    }

    /// Serve `v` too.
    pub fn add(&self, v: Arc<VolumeInfo>) {
        let mut list = self.list.write();
        let mut next = list.as_ref().clone();
        next.push(v);
        *list = Arc::new(next);
    }

    /// Stop serving the volume with index `id` (its handles keep their record).
    pub fn remove(&self, id: u32) {
        let mut list = self.list.write();
        let next: Vec<_> = list.iter().filter(|v| v.id != id).cloned().collect();
        *list = Arc::new(next);
    }
}

impl IntoIterator for &VolumeSet {
    type Item = Arc<VolumeInfo>;
    type IntoIter = std::vec::IntoIter<Arc<VolumeInfo>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}
