//! The write flow of write-through and write-around: the write goes to backing, and a block
//! already cached (or, under write-through, admitted) is written to the cache device too; a
//! block the write covers only in part is read-modify-written (the rest of a cached block
//! from the cache device, of a newly allocated one from backing).

use super::back::RunTarget;
use super::ctx::{adjacent, runs, Adopted, OwnBlocks, Plan, Volume};
use crate::clock::now_ns;
use crate::error::EngineError;
use crate::layout::{block_key, key_volume, WriteMode};
use crate::wb::barrier::barrier_persist;
use crate::write_policy::Policy;
use ember_trace::Op;
use std::io;
use std::sync::atomic::Ordering::Relaxed;

impl Volume {
    /// A write chunk under write-through or write-around. A chunk with a block that still has
    /// a dirty version (a switch from a write-back policy drains them; or a write that read
    /// this policy before a switch into write-back stored its own) is written through as a
    /// write-back policy's fallback is: it waits for the flusher's copy of the block to land,
    /// merges a partial block with its dirty version, writes backing and drops every cached
    /// version (`io/back.rs`). Updating the dirty block in place instead could let the
    /// flusher's older copy reach backing after this write, and then mark the block clean.
    pub(super) fn write_chunk(
        &self,
        first: u64,
        n: u64,
        start: u64,
        data: &[u8],
        fua: bool,
        policy: Policy,
    ) -> Result<(), EngineError> {
        let inner = &self.inner;
        let vol = self.vol();
        let ctr = self.counters();
        let keys = block_key(vol.id, first)..block_key(vol.id, first + n);
        // The stripes, and the state with no dirty version in the chunk (none can appear
        // while the stripes are held); or, with one, the write-back fallback, once no
        // discard's fence stands over the chunk (see `Volume::write_chunk_wb`).
        let (_held, mut st) = loop {
            let held = inner.stripes.lock(vol.id, first..first + n).map_err(|e| self.fail(e))?;
            let st = inner.state.lock();
            if st.dirty_len() == 0 || !st.any_dirty_in(keys.clone()) {
                break (held, st);
            }
            if !self.any_fenced(&st, first, n) {
                drop(st);
                let target = RunTarget::Backing;
                return self.write_run_wb(first, n, start, data, fua, false, target, policy);
            }
            drop(st);
            drop(held);
            self.wait_unfenced(first, n)?;
        };
        let now = now_ns();
        let mut plans = Vec::with_capacity(n as usize);
        // Client tier: (evicted key, its cache block) to DEMOTE before this write reuses it.
        let mut demotes = Vec::new();
        let mut own = OwnBlocks::new();
        // Allocations a later miss of this chunk took before the write (see `OwnBlocks`).
        let mut adopted_fills = 0u64;
        {
            for b in first..first + n {
                let key = block_key(vol.id, b);
                if !self.cacheable(b) {
                    plans.push(Plan::Pass);
                    ctr.write_misses.fetch_add(1, Relaxed);
                    continue;
                }
                let acc = st.access(key, Op::Write, now);
                // A block the write covers only in part is read-modify-written like a
                // whole one (the same rule as `ember sim`, which sees one block access
                // either way): a cached block is updated, an admitted miss allocated.
                if let Some(c) = st.hit_pin(&acc) {
                    ctr.write_hits.fetch_add(1, Relaxed);
                    st.observe(&acc, true);
                    own.push(c);
                    plans.push(Plan::Hit(c));
                    continue;
                }
                ctr.write_misses.fetch_add(1, Relaxed);
                st.observe(&acc, false);
                if policy.mode != WriteMode::WriteThrough
                    || st.fenced(key)
                    || self.cut(&mut st, &acc)
                    || !st.admit(&acc)
                {
                    plans.push(Plan::Pass);
                    continue;
                }
                let a = st.allocate_within(&acc, own.as_slice());
                // The victim may be this chunk's own hit (this write rewrites it) or its own
                // allocation (not written yet): no DEMOTE of it then.
                let adopted = own.adopted(a.cache_block, &mut plans);
                adopted_fills += u64::from(adopted == Adopted::Fill);
                if let Some(v) = a.evicted {
                    if let Some(c) = inner.counters.get(key_volume(v) as usize) {
                        c.evictions.fetch_add(1, Relaxed);
                    }
                }
                if let (Some(v), Some(c)) = (a.evicted.or(a.reclaimed), a.cache_block) {
                    // As on a read miss: the clean victim's data is still in the block this
                    // write reuses, so it goes down as a DEMOTE before the write lands.
                    if a.victim_block == Some(c)
                        && adopted == Adopted::No
                        && self.demotes_to_backing(v)
                    {
                        demotes.push((v, c));
                    }
                }
                match a.cache_block {
                    Some(c) => {
                        own.push(c);
                        plans.push(Plan::Fill(c));
                    }
                    None => {
                        ctr.allocations_skipped.fetch_add(1, Relaxed);
                        plans.push(Plan::Pass);
                    }
                }
            }
            drop(st);
        }
        if adopted_fills > 0 {
            ctr.allocation_writes.fetch_add(adopted_fills, Relaxed);
        }
        inner.count_evictions(&mut inner.state.lock());
        for (v, c) in demotes {
            self.send_demote(v, c);
        }
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
        result.map_err(|e| self.fail(e))?;
        // While write-back persist drains, the device may still name an older dirty version
        // of these blocks: a FUA write is durable only once a commit forgets it.
        if fua && policy.persisting() {
            barrier_persist(inner).map_err(|e| self.fail(e))?;
        }
        Ok(())
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
            // Backing has the write: a cache-device error here only loses the copy (the
            // blocks stay unwritten and are dropped), and the device's health counts it.
            if self.write_run_cache(first, start, data, &plans[i..j], i).is_err() {
                ctr.cache_write_errors.fetch_add((j - i) as u64, Relaxed);
                continue;
            }
            written[i..j].fill(true);
            cache_written = true;
            let fills = plans[i..j].iter().filter(|p| matches!(p, Plan::Fill(_))).count();
            ctr.allocation_writes.fetch_add(fills as u64, Relaxed);
            ctr.cache_write_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
        }
        if fua {
            vol.backing.sync().map_err(|e| self.backing_io_error("sync (FUA)", 0, 0, e))?;
            // A failed sync gives the cache device up (`health/`); backing is durable.
            if cache_written && inner.cache.sync().is_err() {
                ctr.cache_write_errors.fetch_add(1, Relaxed);
            }
        }
        Ok(())
    }

    /// Write one run of the chunk's cache blocks (`run`, from index `i` of the chunk) with
    /// the write's bytes: a run the write covers whole directly, else read-modify-written
    /// (a cached block's other bytes from the cache device, an allocated one's from
    /// backing, which already holds this write: the stripe locks keep everyone else out).
    fn write_run_cache(
        &self,
        first: u64,
        start: u64,
        data: &[u8],
        run: &[Plan],
        i: usize,
    ) -> io::Result<()> {
        let inner = &self.inner;
        let bs = inner.block_size() as usize;
        let ctr = self.counters();
        let vol = self.vol();
        let j = i + run.len();
        let Some(c) = run.first().and_then(|p| p.cache_block()) else { return Ok(()) };
        let end = start + data.len() as u64;
        let (span_lo, span_hi) = ((first + i as u64) * bs as u64, (first + j as u64) * bs as u64);
        let off = inner.geometry.block_offset(c);
        if span_lo >= start && span_hi <= end {
            let lo = (span_lo - start) as usize;
            return inner
                .cache
                .write_at(off, &data[lo..lo + (j - i) * bs])
                .map_err(|e| self.cache_io_error("write", c, j - i, e));
        }
        let mut buf = crate::device::AlignedBuf::new((j - i) * bs);
        let b = buf.as_mut_slice();
        for k in i..j {
            let b_lo = (first + k as u64) * bs as u64;
            if b_lo >= start && b_lo + bs as u64 <= end {
                continue;
            }
            let dst = &mut b[(k - i) * bs..(k - i + 1) * bs];
            match run[k - i] {
                Plan::Hit(ck) => {
                    inner
                        .cache
                        .read_at(inner.geometry.block_offset(ck), dst)
                        .map_err(|e| self.cache_io_error("read (merge)", ck, 1, e))?;
                    ctr.cache_read_bytes.fetch_add(bs as u64, Relaxed);
                }
                _ => {
                    vol.backing
                        .read_at(b_lo, dst)
                        .map_err(|e| self.backing_io_error("read (merge)", b_lo, bs as u64, e))?;
                    ctr.backing_read_bytes.fetch_add(bs as u64, Relaxed);
                }
            }
        }
        let (lo, hi) = (span_lo.max(start), span_hi.min(end));
        b[(lo - span_lo) as usize..(hi - span_lo) as usize]
            .copy_from_slice(&data[(lo - start) as usize..(hi - start) as usize]);
        inner.cache.write_at(off, b).map_err(|e| self.cache_io_error("write", c, j - i, e))
    }
}
