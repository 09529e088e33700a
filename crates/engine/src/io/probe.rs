//! A side-effect-free residency probe, so a frontend can tell a request that will be served
//! from the cache device at once from one that may wait on backing.

use super::ctx::{Volume, CHUNK_BLOCKS};
use crate::layout::block_key;

impl Volume {
    /// Whether every block of `[offset, offset + len)` is resident in the cache right now,
    /// on a cache device whose reads come from memory (not O_DIRECT: there a hit waits on the
    /// device like a miss waits on backing, see [`crate::device::Device::reads_from_memory`]).
    /// Nothing changes: no replacement update, no counter. A hint only: the answer may be
    /// stale as soon as it is returned (a request that finds a block evicted simply misses).
    /// Ranges longer than one chunk answer `false`.
    pub fn resident(&self, offset: u64, len: u64) -> bool {
        if !self.inner.cache.reads_from_memory() || !self.inner.health.is_healthy() {
            return false;
        }
        if len == 0 {
            return true;
        }
        let bs = self.inner.block_size();
        let first = offset / bs;
        let Some(end) = offset.checked_add(len) else { return false };
        let stop = end.div_ceil(bs);
        if stop - first > CHUNK_BLOCKS {
            return false;
        }
        let vol = self.vol().id;
        let st = self.inner.state.lock();
        (first..stop).all(|b| self.cacheable(b) && st.get(block_key(vol, b)).is_some())
    }
}
