//! NBD_CMD_CACHE's flow, a prefetch: the missing blocks of a range are allocated and filled
//! from backing, a chunk at a time, exactly as a read miss fills them (`read.rs`), but with
//! no client buffer and without asking the admission sieve or the sequential cutoff (the
//! client asked for these blocks by name). Resident blocks are left alone; nothing is
//! counted as a hit or a miss, and the loaded blocks are counted in `cache_loads`.
//!
//! Memory is one chunk's scratch buffer ([`CHUNK_BLOCKS`] blocks) whatever the range's
//! length. Each chunk holds its blocks' stripe locks from allocation to the fill's end, as a
//! read miss does, so a WRITE to one of them waits and lands after the loaded copy: a loaded
//! block never overwrites a later write. A block inside a TRIM's fence is not loaded. A
//! client tier's victim evicted by a load is not demoted (as when the DEMOTE queue is full).

use super::ctx::{Plan, Volume, CHUNK_BLOCKS};
use crate::clock::now_ns;
use crate::device::AlignedBuf;
use crate::error::EngineError;
use crate::layout::{block_key, key_volume};
use ember_trace::Op;
use std::sync::atomic::Ordering::Relaxed;

impl Volume {
    /// Load the blocks of `len` bytes at `offset` into the cache (NBD_CMD_CACHE). Returns
    /// the blocks loaded (those not resident before and allocated now).
    pub fn load(&self, offset: u64, len: u64) -> Result<u64, EngineError> {
        let _pass = self.enter()?;
        self.check(offset, len)?;
        // Degraded: nothing is allocated; the prefetch is a no-op.
        if self.degraded() {
            return Ok(0);
        }
        let bs = self.inner.block_size();
        let (first, stop) = (offset / bs, (offset + len).div_ceil(bs));
        let mut scratch = AlignedBuf::new((CHUNK_BLOCKS.min(stop - first) * bs) as usize);
        let mut loaded = 0;
        let mut b = first;
        while b < stop {
            let n = CHUNK_BLOCKS.min(stop - b);
            loaded += self.load_chunk(b, n, &mut scratch)?;
            b += n;
        }
        Ok(loaded)
    }

    /// Load one chunk of `n` blocks from `first`, through `scratch`.
    fn load_chunk(&self, first: u64, n: u64, scratch: &mut AlignedBuf) -> Result<u64, EngineError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let _held = inner.stripes.lock(vol.id, first..first + n).map_err(|e| self.fail(e))?;
        let nb = n as usize;
        let mut plan_buf = [Plan::Pass; CHUNK_BLOCKS as usize];
        let plans = &mut plan_buf[..nb];
        let now = now_ns();
        {
            let mut st = inner.state.lock();
            for (i, b) in (first..first + n).enumerate() {
                let key = block_key(vol.id, b);
                if !vol.caching() || !self.cacheable(b) || st.get(key).is_some() || st.fenced(key) {
                    continue;
                }
                let acc = st.access(key, Op::Read, now);
                let a = st.allocate_within(&acc, &[]);
                if let Some(v) = a.evicted {
                    if let Some(c) = inner.counters.get(key_volume(v) as usize) {
                        c.evictions.fetch_add(1, Relaxed);
                    }
                }
                match a.cache_block {
                    Some(c) => plans[i] = Plan::Fill(c),
                    None => {
                        ctr.allocations_skipped.fetch_add(1, Relaxed);
                    }
                }
            }
            inner.count_evictions(&mut st);
        }
        let fills = plans.iter().filter(|p| matches!(p, Plan::Fill(_))).count() as u64;
        if fills == 0 {
            return Ok(0);
        }
        let span = ((first + n) * bs).min(vol.size) - first * bs;
        let mut filled_buf = [false; CHUNK_BLOCKS as usize];
        let mut bad_buf = [false; CHUNK_BLOCKS as usize];
        let dirty = [false; CHUNK_BLOCKS as usize];
        let (filled, bad) = (&mut filled_buf[..nb], &mut bad_buf[..nb]);
        let buf = &mut scratch.as_mut_slice()[..(n * bs) as usize];
        let result = self.read_io(first, span, plans, buf, filled, (&dirty[..nb], bad));
        {
            let mut st = inner.state.lock();
            for (i, p) in plans.iter().enumerate() {
                if let Plan::Fill(c) = *p {
                    if !filled[i] && st.invalidate_if(block_key(vol.id, first + i as u64), c) {
                        ctr.invalidations.fetch_add(1, Relaxed);
                    }
                    st.unpin(c);
                }
            }
        }
        result.map_err(|e| self.fail(e))?;
        let loaded = filled.iter().filter(|&&f| f).count() as u64;
        ctr.cache_loads.fetch_add(loaded, Relaxed);
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use crate::device::MemDevice;
    use crate::wb::tests::{block, format, open, BS, VOL};
    use crate::{DirtyLimit, WriteMode, WritebackConfig};
    use std::sync::Arc;

    #[test]
    fn a_load_fills_what_is_missing_and_never_replaces_a_newer_version() {
        let cache = Arc::new(MemDevice::new(1 << 20));
        format(cache.as_ref());
        let backing = Arc::new(MemDevice::from_bytes(vec![7u8; VOL as usize]));
        let wb = WritebackConfig {
            max_dirty: Some(DirtyLimit::Blocks(200)),
            min_dirty: Some(DirtyLimit::Blocks(100)),
            max_epochs: 8,
            batch_blocks: 4,
            lru_flush_order: false,
        };
        let e = open(cache, backing, WriteMode::WriteBackFlush, wb).unwrap();
        let v = e.volume("v").unwrap();
        v.write(5 * BS, &block(9), false).unwrap();
        // Not block-aligned: blocks 0..16 (the last one in part).
        assert_eq!(v.load(100, 16 * BS - 200).unwrap(), 15, "block 5 was resident (dirty)");
        assert_eq!(v.load(0, 16 * BS).unwrap(), 0, "nothing left to load");
        let s = e.stats().total;
        assert_eq!((s.cache_loads, s.read_hits, s.read_misses), (15, 0, 0));
        let mut got = vec![0u8; (16 * BS) as usize];
        v.read(0, &mut got).unwrap();
        let mut want = vec![7u8; (16 * BS) as usize];
        want[(5 * BS) as usize..(6 * BS) as usize].fill(9);
        assert!(got == want, "the dirty block keeps its newer bytes");
        let s = e.stats().total;
        assert_eq!((s.read_hits, s.read_misses), (16, 0));
        assert!(v.load(VOL, 1).is_err(), "beyond the volume");
    }
}
