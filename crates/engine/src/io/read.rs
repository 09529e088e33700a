//! The read flow: a chunk's blocks are looked up, hits pinned, admitted misses allocated (the
//! replacement policy picks the victims), then hits are read from the cache device, misses
//! from backing, and the allocated blocks filled.

use super::ctx::{adjacent, runs, Adopted, OwnBlocks, Plan, Volume, CHUNK_BLOCKS};
use crate::clock::now_ns;
use crate::error::EngineError;
use crate::layout::{block_key, key_volume};
use crate::state::{CacheState, TakenBlock};
use ember_policy::Access;
use ember_trace::Op;
use std::io;
use std::sync::atomic::Ordering::Relaxed;

impl Volume {
    /// Read `buf.len()` bytes at `offset`: hits from the cache device, misses from backing
    /// (filling the blocks the admission policy admits).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), EngineError> {
        let _pass = self.enter()?;
        self.check(offset, buf.len() as u64)?;
        self.count_read(offset, buf.len() as u64);
        if self.degraded() {
            return self.read_degraded(offset, buf);
        }
        let bs = self.inner.block_size();
        let end = offset + buf.len() as u64;
        // Blocks lost with a replaced device read EIO until `clear-lost` (`io/degraded.rs`).
        if let Some(b) = self.inner.health.first_lost(self.vol().id, offset / bs..end.div_ceil(bs))
        {
            return Err(self.lost_error(b));
        }
        let mut pos = offset;
        while pos < end {
            let first = pos / bs;
            let stop = (first + CHUNK_BLOCKS).min(end.div_ceil(bs));
            let chunk_end = end.min(stop * bs);
            let out = &mut buf[(pos - offset) as usize..(chunk_end - offset) as usize];
            self.read_chunk(first, stop - first, pos, out, false)?;
            pos = chunk_end;
        }
        Ok(())
    }

    /// The hit path: read `buf.len()` bytes at `offset` if every block is resident now, in
    /// one state-lock section that both checks and pins (no separate probe), with no heap
    /// allocation. `None`: some block is not resident (or the range is empty, longer than
    /// one chunk, or outside the volume) and nothing was done, no counter and no replacement
    /// update; the caller then calls [`Volume::read`] (where it may wait on backing). In
    /// degraded mode the same holds of backing: served if backing has the bytes in memory
    /// and none is on the lost list, else `None`.
    pub fn read_if_resident(&self, offset: u64, buf: &mut [u8]) -> Option<Result<(), EngineError>> {
        let bs = self.inner.block_size();
        let len = buf.len() as u64;
        let end = offset.checked_add(len)?;
        if len == 0 || end > self.vol().size {
            return None;
        }
        let first = offset / bs;
        let stop = end.div_ceil(bs);
        if stop - first > CHUNK_BLOCKS {
            return None;
        }
        if !self.inner.health.is_healthy() {
            // Degraded: a pass-through to backing, at once when backing has the bytes in
            // memory (`io/degraded.rs`).
            return self.read_degraded_at_once(offset, buf);
        }
        if self.inner.health.first_lost(self.vol().id, first..stop).is_some() {
            return None;
        }
        let _pass = match self.enter() {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        match self.read_chunk(first, stop - first, offset, buf, true) {
            Ok(false) => None,
            Ok(true) => Some(Ok(())),
            Err(e) => Some(Err(e)),
        }
    }

    /// Whether a hit is served from memory (the cache device is not read with O_DIRECT), so
    /// [`Volume::read_if_resident`] never waits on a medium.
    pub fn hits_from_memory(&self) -> bool {
        self.inner.cache.reads_from_memory()
    }

    /// Count one READ request of `len` bytes at `offset` (and tell the warmup monitor).
    pub(super) fn count_read(&self, offset: u64, len: u64) {
        let hot = self.counters().hot.mine();
        hot.read_requests.fetch_add(1, Relaxed);
        hot.read_bytes.fetch_add(len, Relaxed);
        let bs = self.inner.block_size();
        self.inner.warmup.record(self.vol().id, false, offset, len, bs);
    }

    /// Read one chunk (`n` <= [`CHUNK_BLOCKS`] blocks from `first`; the bytes from `start`
    /// into `out`). With `only_hits`, the chunk is a whole request: unless every block is
    /// resident it returns `Ok(false)` having changed nothing; otherwise it counts the
    /// request and serves it. Fixed-size arrays, no heap allocation for a whole-block chunk.
    pub(super) fn read_chunk(
        &self,
        first: u64,
        n: u64,
        start: u64,
        out: &mut [u8],
        only_hits: bool,
    ) -> Result<bool, EngineError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let _held = inner.stripes.lock(vol.id, first..first + n).map_err(|e| self.fail(e))?;
        let now = now_ns();
        let nb = n as usize;
        let mut plan_buf = [Plan::Pass; CHUNK_BLOCKS as usize];
        let mut dirty_buf = [false; CHUNK_BLOCKS as usize];
        let plans = &mut plan_buf[..nb];
        let dirty = &mut dirty_buf[..nb];
        // Client tier: (evicted key, its cache block) to DEMOTE before reading backing.
        let mut demotes = Vec::new();
        // Hits whose block a later miss of this request took (read from backing instead),
        // and allocations a later miss took before their fill (see `OwnBlocks`).
        let (mut adopted_hits, mut adopted_fills) = (0u64, 0u64);
        let mut own = OwnBlocks::new();
        // Fills of blocks taken from victims that requests in flight still pin
        // (`CacheState::allocate_fill`): (index in the chunk, cache block).
        let mut late: Vec<(usize, u32)> = Vec::new();
        {
            let mut st = inner.state.lock();
            if only_hits {
                // Every block resident, or nothing changes; the lookup also gives `dirty`,
                // so the loop below does not look the block up again for it.
                for (i, b) in (first..first + n).enumerate() {
                    let slot = if self.cacheable(b) { st.slot(block_key(vol.id, b)) } else { None };
                    let Some(slot) = slot else { return Ok(false) };
                    dirty[i] = slot.dirty.is_some();
                }
            }
            for (i, b) in (first..first + n).enumerate() {
                let key = block_key(vol.id, b);
                if !self.cacheable(b) {
                    plans[i] = Plan::Pass;
                    continue;
                }
                let acc = st.access(key, Op::Read, now);
                if !only_hits {
                    dirty[i] = st.slot(key).is_some_and(|s| s.dirty.is_some());
                }
                if let Some(c) = st.hit_pin(&acc) {
                    self.note_hit(&mut st, &acc, c);
                    own.push(c);
                    plans[i] = Plan::Hit(c);
                    continue;
                }
                st.observe(&acc, false);
                // Inside a TRIM's fence nothing is allocated: the fill could hold the bytes
                // backing is discarding. A block past the sequential cutoff is read from
                // backing only.
                if st.fenced(key) || self.cut(&mut st, &acc) || !st.admit(&acc) {
                    plans[i] = Plan::Pass;
                    continue;
                }
                // This request's hits and allocations so far: the policy may pick one as the
                // victim (see `CacheState::allocate_within`); that block then takes this
                // fill, and the earlier block is read from backing instead (it was clean, or
                // not filled yet), still counted a hit or an allocation.
                let a = st.allocate_fill(&acc, own.as_slice());
                let adopted = own.adopted(a.cache_block, &mut plans[..i]);
                match adopted {
                    Adopted::Hit => adopted_hits += 1,
                    Adopted::Fill => adopted_fills += 1,
                    Adopted::No => {}
                }
                if let Some(v) = a.evicted {
                    if let Some(c) = inner.counters.get(key_volume(v) as usize) {
                        c.evictions.fetch_add(1, Relaxed);
                    }
                }
                if let (Some(v), Some(c)) = (a.evicted.or(a.reclaimed), a.cache_block) {
                    // The victim's data is still in the block this fill reuses: DEMOTE it
                    // before the fill overwrites it. The victim is the policy's, or the
                    // oldest clean block when dirty blocks hold the rest (write-back). (A
                    // victim whose block a reader still pins went elsewhere, and one this
                    // request allocated was never filled; neither is demoted.)
                    if a.victim_block == Some(c)
                        && adopted != Adopted::Fill
                        && self.demotes_to_backing(v)
                    {
                        demotes.push((v, c));
                    }
                }
                match a.cache_block {
                    // The victim's block, still pinned by its requests: read from backing
                    // like a pass, filled below once they let go.
                    Some(c) if a.after_pins => {
                        own.push(c);
                        late.push((i, c));
                    }
                    Some(c) => {
                        own.push(c);
                        plans[i] = Plan::Fill(c);
                    }
                    None => {
                        ctr.allocations_skipped.fetch_add(1, Relaxed);
                        plans[i] = Plan::Pass;
                    }
                }
            }
            inner.count_evictions(&mut st);
        }
        if only_hits {
            self.count_read(start, out.len() as u64);
        }
        if adopted_fills > 0 {
            ctr.allocation_writes.fetch_add(adopted_fills, Relaxed);
        }
        // Before the backing READ, as Wong & Wilkes' client does ("it first tries to return
        // the block to the array"): the DEMOTE goes out on the wire ahead of the READ.
        for (v, c) in demotes {
            self.send_demote(v, c);
        }
        let plans = &*plans;
        let hits = plans.iter().filter(|p| matches!(p, Plan::Hit(_))).count() as u64 + adopted_hits;
        let hot = ctr.hot.mine();
        hot.read_hits.fetch_add(hits, Relaxed);
        if n > hits {
            hot.read_misses.fetch_add(n - hits, Relaxed);
        }
        let span = ((first + n) * bs).min(vol.size) - first * bs;
        // A request covering its blocks whole is read (and its fills written) straight from
        // the caller's buffer; a partial one goes through a block-aligned scratch buffer
        // (aligned, so an O_DIRECT cache device needs no bounce copy) and is copied out.
        let whole = start == first * bs && out.len() as u64 == n * bs;
        let mut scratch = (!whole).then(|| crate::device::AlignedBuf::new((n * bs) as usize));
        let mut filled_buf = [false; CHUNK_BLOCKS as usize];
        let mut bad_buf = [false; CHUNK_BLOCKS as usize];
        let (filled, bad) = (&mut filled_buf[..nb], &mut bad_buf[..nb]);
        let result = {
            let buf: &mut [u8] = match scratch.as_mut() {
                Some(s) => s.as_mut_slice(),
                None => &mut *out,
            };
            self.read_io(first, span, plans, buf, filled, (dirty, bad))
        };
        if result.is_ok() && !late.is_empty() {
            let buf: &[u8] = match scratch.as_ref() {
                Some(s) => s.as_slice(),
                None => &*out,
            };
            self.fill_after_pins(first, &late, buf);
        }
        {
            let mut st = inner.state.lock();
            for &(i, c) in &late {
                if result.is_err() {
                    // Its turn as the block's taker ends unfilled.
                    st.taken_block_ready(c, block_key(vol.id, first + i as u64), true);
                }
                st.unpin(c);
            }
            for (i, p) in plans.iter().enumerate() {
                match *p {
                    Plan::Hit(c) => {
                        if bad[i] && st.invalidate_if(block_key(vol.id, first + i as u64), c) {
                            ctr.invalidations.fetch_add(1, Relaxed);
                        }
                        st.unpin(c)
                    }
                    Plan::Fill(c) => {
                        if !filled[i] && st.invalidate_if(block_key(vol.id, first + i as u64), c) {
                            ctr.invalidations.fetch_add(1, Relaxed);
                        }
                        st.unpin(c);
                    }
                    Plan::Pass => {}
                }
            }
        }
        result.map_err(|e| self.fail(e))?;
        if let Some(scratch) = &scratch {
            let skip = (start - first * bs) as usize;
            out.copy_from_slice(&scratch.as_slice()[skip..skip + out.len()]);
        }
        Ok(true)
    }

    /// Fill the cache blocks of `late` (chunk index from `first`, cache block), taken from
    /// victims that requests in flight still pin, with their bytes in `buf` (read from
    /// backing at the chunk's start), each once those requests let it go. A block they hold
    /// too long, or whose write fails, is dropped. The caller unpins them.
    fn fill_after_pins(&self, first: u64, late: &[(usize, u32)], buf: &[u8]) {
        let inner = &self.inner;
        let bs = inner.block_size() as usize;
        let ctr = self.counters();
        for &(i, c) in late {
            let key = block_key(self.vol().id, first + i as u64);
            match self.taken_turn(c, key) {
                TakenBlock::Write => {
                    let written = buf.get(i * bs..(i + 1) * bs).is_some_and(|data| {
                        inner.cache.write_at(inner.geometry.block_offset(c), data).is_ok()
                    });
                    if written {
                        ctr.allocation_writes.fetch_add(1, Relaxed);
                        ctr.cache_write_bytes.fetch_add(bs as u64, Relaxed);
                    } else if inner.state.lock().invalidate_if(key, c) {
                        ctr.invalidations.fetch_add(1, Relaxed);
                    }
                }
                // Allocated, and evicted since by the scheme (before its bytes landed).
                TakenBlock::Gone => {
                    ctr.allocation_writes.fetch_add(1, Relaxed);
                }
                TakenBlock::GaveUp | TakenBlock::Wait => {}
            }
        }
    }

    /// A read hit's bookkeeping, under the state lock, once `hit_pin` pinned cache block
    /// `c` for `acc`: the admission sieve sees the hit, a preloaded block's first hit and a
    /// demoted block's hit are counted. Shared by [`Volume::read_chunk`] and the batched hits
    /// of `read_hits.rs`, so both count the same.
    pub(super) fn note_hit(&self, st: &mut CacheState, acc: &Access, c: u32) {
        let ctr = self.counters();
        st.observe(acc, true);
        if st.take_preloaded(c) {
            self.inner.warmup.preloaded_hit();
        }
        if st.replacement.takes_demotes() {
            let origin = if st.demoted_origin(c) {
                &ctr.read_hits_demoted
            } else {
                &ctr.read_hits_read_placed
            };
            origin.fetch_add(1, Relaxed);
        }
    }

    pub(super) fn read_io(
        &self,
        first: u64,
        span: u64,
        plans: &[Plan],
        scratch: &mut [u8],
        filled: &mut [bool],
        (dirty, bad): (&[bool], &mut [bool]),
    ) -> io::Result<()> {
        let inner = &self.inner;
        let bs = inner.block_size() as usize;
        let ctr = self.counters();
        let vol = self.vol();
        for (i, j) in runs(plans, adjacent, |p| matches!(p, Plan::Hit(_))) {
            let Some(c) = plans[i].cache_block() else { continue };
            let off = inner.geometry.block_offset(c);
            match inner.cache.read_at(off, &mut scratch[i * bs..j * bs]) {
                Ok(()) => {
                    ctr.hot.mine().cache_read_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
                }
                Err(e) if dirty[i..j].iter().any(|&d| d) => {
                    // The only copy of a dirty block: the client must see the error.
                    return Err(self.cache_io_error("read", c, j - i, e));
                }
                Err(_) => {
                    // Clean blocks: backing holds the same data (and the copies are dropped).
                    ctr.cache_read_errors.fetch_add((j - i) as u64, Relaxed);
                    let boff = (first + i as u64) * bs as u64;
                    vol.backing.read_at(boff, &mut scratch[i * bs..j * bs]).map_err(|e| {
                        self.backing_io_error("read", boff, ((j - i) * bs) as u64, e)
                    })?;
                    ctr.backing_read_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
                    bad[i..j].fill(true);
                }
            }
        }
        for (i, j) in runs(plans, |_, _| true, |p| !matches!(p, Plan::Hit(_))) {
            let lo = i * bs;
            let hi = (j * bs).min(span as usize);
            let off = (first + i as u64) * bs as u64;
            vol.backing
                .read_at(off, &mut scratch[lo..hi])
                .map_err(|e| self.backing_io_error("read", off, (hi - lo) as u64, e))?;
            ctr.backing_read_bytes.fetch_add((hi - lo) as u64, Relaxed);
        }
        for (i, j) in runs(plans, adjacent, |p| matches!(p, Plan::Fill(_))) {
            let Some(c) = plans[i].cache_block() else { continue };
            let off = inner.geometry.block_offset(c);
            if inner.cache.write_at(off, &scratch[i * bs..j * bs]).is_err() {
                // The client's bytes came from backing: the blocks stay unfilled (and are
                // dropped); the device's health counts the error.
                ctr.cache_write_errors.fetch_add((j - i) as u64, Relaxed);
                continue;
            }
            filled[i..j].fill(true);
            ctr.allocation_writes.fetch_add((j - i) as u64, Relaxed);
            ctr.cache_write_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
        }
        Ok(())
    }
}
