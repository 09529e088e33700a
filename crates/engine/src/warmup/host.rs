//! What the warmup threads need of the engine they run in ([`Host`]), and nothing more: the
//! hooks the engine holds for them, the cache's geometry, the served volumes, and the two
//! operations that take the engine's locks (a preload run filled as a read miss fills its
//! blocks, a clean cached block copied for the snapshot). The engine's core implements it
//! beside its request flows (`io/warmup_host.rs`), so nothing in `warmup/` imports the core
//! or a flow: the core holds [`Hooks`], and warmup reaches the engine only through here.

use super::Hooks;
use crate::layout::Geometry;
use crate::volume_info::VolumeInfo;
use std::sync::Arc;

/// The engine as the warmup threads see it (the monitor, the log writer, the preloader).
pub(crate) trait Host: Send + Sync + 'static {
    /// The warmup hooks the engine holds (monitor, log sink, counters, running threads).
    fn hooks(&self) -> &Hooks;

    /// The cache device's geometry.
    fn geometry(&self) -> &Geometry;

    /// The served volumes now, in configuration and attach order.
    fn volumes(&self) -> Arc<Vec<Arc<VolumeInfo>>>;

    /// Client requests in flight now (the preload lets them finish first).
    fn requests_in_flight(&self) -> u64;

    /// Preload one run of `n` blocks from `first` of volume `volume`, from `data` (its
    /// blocks' bytes, from the snapshot) or else from backing, exactly as a read miss fills
    /// its blocks: under their stripe locks, only into blocks not cached, not fenced, and
    /// only while the cache has free room. `Ok(false)`: the cache is full.
    fn preload_run(
        &self,
        volume: u32,
        first: u64,
        n: u64,
        data: Option<&[u8]>,
    ) -> Result<bool, String>;

    /// Read the cached copy of block `block` of volume `volume` into `buf`, if it is clean,
    /// under the block's stripe lock. `Ok(false)`: not cached (or dirty). `Err`: the engine
    /// is shutting down or the read failed.
    fn read_clean(&self, volume: u32, block: u64, buf: &mut [u8]) -> Result<bool, ()>;

    /// The cache block size in bytes.
    fn block_size(&self) -> u64 {
        self.geometry().block_size as u64
    }

    /// The served volume with superblock index `id`.
    fn volume_by_id(&self, id: u32) -> Option<Arc<VolumeInfo>> {
        self.volumes().iter().find(|v| v.id == id).cloned()
    }
}
