//! The write flow of write-through and write-around: the write goes to backing, and a whole
//! block already cached (or, under write-through, admitted) is written to the cache device
//! too; a partial write to a cached block drops the cached copy.

use super::ctx::{adjacent, runs, Plan, Volume};
use crate::core::now_ns;
use crate::device::io_context;
use crate::error::EngineError;
use crate::layout::{block_key, key_volume, WriteMode};
use ember_trace::Op;
use std::io;
use std::sync::atomic::Ordering::Relaxed;

impl Volume {
    pub(super) fn write_chunk(
        &self,
        first: u64,
        n: u64,
        start: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<(), EngineError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let _held = inner.stripes.lock(vol.id, first..first + n);
        let now = now_ns();
        let end = start + data.len() as u64;
        let mut plans = Vec::with_capacity(n as usize);
        {
            let mut st = inner.state.lock();
            for b in first..first + n {
                let key = block_key(vol.id, b);
                let whole = self.cacheable(b) && b * bs >= start && (b + 1) * bs <= end;
                if !self.cacheable(b) {
                    plans.push(Plan::Pass);
                    ctr.write_misses.fetch_add(1, Relaxed);
                    continue;
                }
                let acc = st.access(key, Op::Write, now);
                if st.get(key).is_some() {
                    ctr.write_hits.fetch_add(1, Relaxed);
                    if whole {
                        if let Some(c) = st.hit_pin(&acc) {
                            st.admission.observe(&acc, true);
                            plans.push(Plan::Hit(c));
                            continue;
                        }
                    }
                    // A partial write to a cached block: drop the cached copy.
                    st.admission.observe(&acc, true);
                    st.invalidate(key);
                    ctr.invalidations.fetch_add(1, Relaxed);
                    plans.push(Plan::Pass);
                    continue;
                }
                ctr.write_misses.fetch_add(1, Relaxed);
                st.admission.observe(&acc, false);
                if !whole || inner.mode != WriteMode::WriteThrough || !st.admit(&acc) {
                    plans.push(Plan::Pass);
                    continue;
                }
                let a = st.allocate(&acc);
                if let Some(v) = a.evicted {
                    if let Some(c) = inner.counters.get(key_volume(v) as usize) {
                        c.evictions.fetch_add(1, Relaxed);
                    }
                }
                match a.cache_block {
                    Some(c) => plans.push(Plan::Fill(c)),
                    None => {
                        ctr.allocations_skipped.fetch_add(1, Relaxed);
                        plans.push(Plan::Pass);
                    }
                }
            }
        }
        inner.count_evictions(&mut inner.state.lock());
        let mut written = vec![false; plans.len()];
        let result = self.write_io(first, start, data, fua, &plans, &mut written);
        {
            let mut st = inner.state.lock();
            for (i, p) in plans.iter().enumerate() {
                if let Some(c) = p.cache_block() {
                    if !written[i] && st.invalidate_if(block_key(vol.id, first + i as u64), c) {
                        ctr.invalidations.fetch_add(1, Relaxed);
                    }
                    st.unpin(c);
                }
            }
        }
        result.map_err(|e| self.fail(e))
    }

    pub(super) fn write_io(
        &self,
        first: u64,
        start: u64,
        data: &[u8],
        fua: bool,
        plans: &[Plan],
        written: &mut [bool],
    ) -> io::Result<()> {
        let inner = &self.inner;
        let bs = inner.block_size() as usize;
        let ctr = self.counters();
        let vol = self.vol();
        vol.backing
            .write_at(start, data)
            .map_err(|e| self.backing_io_error("write", start, data.len() as u64, e))?;
        ctr.backing_write_bytes.fetch_add(data.len() as u64, Relaxed);
        let mut cache_written = false;
        for (i, j) in runs(plans, adjacent, |p| p.cache_block().is_some()) {
            let Some(c) = plans[i].cache_block() else { continue };
            let lo = ((first + i as u64) * bs as u64 - start) as usize;
            let off = inner.geometry.block_offset(c);
            inner
                .cache
                .write_at(off, &data[lo..lo + (j - i) * bs])
                .map_err(|e| self.cache_io_error("write", c, j - i, e))?;
            written[i..j].fill(true);
            cache_written = true;
            let fills = plans[i..j].iter().filter(|p| matches!(p, Plan::Fill(_))).count();
            ctr.allocation_writes.fetch_add(fills as u64, Relaxed);
            ctr.cache_write_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
        }
        if fua {
            vol.backing.sync().map_err(|e| self.backing_io_error("sync (FUA)", 0, 0, e))?;
            if cache_written {
                inner
                    .cache
                    .sync()
                    .map_err(|e| io_context(inner.cache.as_ref(), "sync (FUA)", 0, 0, e))?;
            }
        }
        Ok(())
    }
}
