//! The engine as the warmup threads' [`Host`]: their view of the core, and the two operations
//! they run under the engine's locks, each exactly as a request flow would. A preload run is
//! filled as a read miss fills its blocks (Bonfire section 5.2: never stale): it holds the
//! stripe locks of the run from the lookup to the last cache write, and allocates only blocks
//! that are not cached, not fenced, and only into free room. A copy for the performance
//! snapshot reads a clean cached block under its stripe lock and pin.
//!
//! Lock order: the gate, then the run's stripe locks, then `state` for the lookups and the
//! releases only (none across the I/O), as in `core.rs`.

use super::fill::fill;
use crate::clock::now_ns;
use crate::core::Inner;
use crate::layout::{block_key, Geometry};
use crate::volume_info::VolumeInfo;
use crate::warmup::host::Host;
use crate::warmup::Hooks;
use ember_trace::Op;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

impl Host for Inner {
    fn hooks(&self) -> &Hooks {
        &self.warmup
    }

    fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    fn volumes(&self) -> Arc<Vec<Arc<VolumeInfo>>> {
        self.volumes.snapshot()
    }

    fn requests_in_flight(&self) -> u64 {
        self.gate.active()
    }

    fn preload_run(
        &self,
        volume: u32,
        first: u64,
        n: u64,
        data: Option<&[u8]>,
    ) -> Result<bool, String> {
        preload_run(self, volume, first, n, data)
    }

    fn read_clean(&self, volume: u32, block: u64, buf: &mut [u8]) -> Result<bool, ()> {
        copy_block(self, volume, block, buf)
    }
}

/// Preload one run, from `data` (its blocks' bytes, from the snapshot) or else from backing.
/// `Ok(false)`: the cache is full (or the engine is shutting down).
fn preload_run(
    inner: &Inner,
    vol_id: u32,
    first: u64,
    n: u64,
    data: Option<&[u8]>,
) -> Result<bool, String> {
    let Some(_pass) = inner.gate.enter() else {
        return Err("the cache is shutting down".into());
    };
    if !inner.health.is_healthy() {
        return Err("the cache device was given up (degraded mode)".into());
    }
    let Some(vol) = inner.volume_by_id(vol_id) else { return Ok(true) };
    let bs = inner.block_size();
    let n = n.min((vol.size / bs).saturating_sub(first));
    if n == 0 {
        return Ok(true);
    }
    let _held = inner.stripes.lock(vol_id, first..first + n).map_err(|e| e.to_string())?;
    let c = &inner.warmup.counters;
    let mut fills: Vec<Option<u32>> = vec![None; n as usize];
    let mut full = false;
    {
        let mut st = inner.state.lock();
        let now = now_ns();
        for i in 0..n {
            let key = block_key(vol_id, first + i);
            if !vol.caching() || st.get(key).is_some() || st.fenced(key) {
                c.skipped_blocks.fetch_add(1, Relaxed);
                continue;
            }
            // Only into room the cache has: the preload evicts nothing a client brought in.
            if st.len() as u64 >= inner.geometry.data_blocks {
                full = true;
                break;
            }
            let acc = st.access(key, Op::Read, now);
            let a = st.allocate(&acc);
            if a.cache_block.is_none() {
                full = true;
                break;
            }
            fills[i as usize] = a.cache_block;
        }
        inner.count_evictions(&mut st);
    }
    let result = fill(inner, &vol, first, &fills, data);
    let mut st = inner.state.lock();
    for (i, f) in fills.iter().enumerate() {
        if let Some(cb) = *f {
            if result.is_err() {
                st.invalidate_if(block_key(vol_id, first + i as u64), cb);
            } else {
                st.mark_preloaded(cb);
            }
            st.unpin(cb);
        }
    }
    drop(st);
    let filled = result?;
    if data.is_some() {
        c.preloaded_snapshot_blocks.fetch_add(filled, Relaxed);
    }
    c.preloaded_blocks.fetch_add(filled, Relaxed);
    c.preloaded_bytes.fetch_add(filled * bs, Relaxed);
    Ok(!full)
}

/// Read the cached copy of block `b` of volume `id` into `buf`, under the block's stripe lock
/// (no request on it runs meanwhile). `Ok(false)`: not cached. `Err`: the engine is
/// shutting down or the read failed.
fn copy_block(inner: &Inner, id: u32, b: u64, buf: &mut [u8]) -> Result<bool, ()> {
    let Some(_pass) = inner.gate.enter() else { return Err(()) };
    let Ok(_held) = inner.stripes.lock(id, b..b + 1) else { return Err(()) };
    let cb = {
        let mut st = inner.state.lock();
        // Clean copies only: a dirty block (write-back) is not on backing yet, and a copy of
        // it could outlive a crash that loses it there.
        match st.slot(block_key(id, b)) {
            Some(slot) if slot.dirty.is_none() => {
                st.pin(slot.cache_block);
                slot.cache_block
            }
            _ => return Ok(false),
        }
    };
    let r = inner.cache.read_at(inner.geometry.block_offset(cb), buf);
    inner.state.lock().unpin(cb);
    r.map(|()| true).map_err(|_| ())
}
