//! The write flow of the write-back policies (thesis table 4.2): no-overwrite writes to fresh
//! cache blocks named dirty in the current epoch, or a write-through fallback.

use super::ctx::Volume;
use crate::clock::now_ns;
use crate::error::EngineError;
use crate::layout::{block_key, WriteMode};
use crate::state::CacheState;
use crate::wb::barrier::barrier_persist;
use crate::wb::flusher::wait_not_flushing;
use crate::write_policy::Policy;
use ember_trace::Op;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Where a run of a write-back chunk goes.
pub(super) enum RunTarget<'a> {
    /// To fresh cache blocks reserved now, or through to backing when the sieve refused it
    /// or a fallback applies (max_dirty, no free block, FUA under write-back flush, the
    /// partial last block).
    Policy,
    /// To these cache blocks, reserved beforehand, one per block (ordered write-back).
    Cache(&'a [u32]),
    /// Through to backing (ordered write-back's direct runs; with `fua`, synced).
    Backing,
}

impl Volume {
    /// A write under a write-back policy (thesis table 4.2): every block of the chunk gets a
    /// new cache block (no-overwrite), written before the map names it dirty in the current
    /// epoch. A block only partly written is merged with its newest cached version, or with
    /// backing. The chunk is written through to backing instead (dropping every cached
    /// version once backing has it) when max_dirty is reached, no block can be freed, FUA
    /// asks for it under write-back flush, or it holds the volume's partial last block.
    ///
    /// A chunk with a block inside a TRIM / WRITE_ZEROES fence waits until the fence is
    /// lowered, holding no lock. Written through inside the fence, a partial block would be
    /// merged with its dirty version, whose bytes outside this write may be the very bytes
    /// the discard is removing; landing after the discard's backing call, the merged block
    /// would put them back (an acknowledged WRITE_ZEROES undone by a write to the other half
    /// of the block, `tests/discard_write_race.rs`).
    ///
    /// Under ordered write-back (`io/ordered.rs`) the chunk's cache blocks are reserved
    /// before any lock is taken (waiting for the flusher instead of falling back), and the
    /// runs that must go to backing directly are written after the chunk's stripe locks are
    /// released, each once the epochs before it reached backing.
    pub(super) fn write_chunk_wb(
        &self,
        first: u64,
        n: u64,
        start: u64,
        data: &[u8],
        fua: bool,
        policy: Policy,
    ) -> Result<(), EngineError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let ordered = policy.ordered();
        // Ordered write-back: a chunk larger than max_dirty goes to backing directly; so does
        // a FUA chunk under write-back flush while ordered write-back's epochs drain (it is
        // written through, as write-back flush writes FUA, behind the older epochs).
        let direct_all = ordered
            && (n as usize > inner.limits.get().max_dirty
                || (fua && policy.mode == WriteMode::WriteBackFlush));
        let mut reserved = if ordered && !direct_all {
            self.reserve_ordered(first, n as usize)?
        } else {
            Vec::new()
        };
        // The stripes, and the state with no fence over the chunk: a fence raised after the
        // wait may have passed these stripes already (its wait for older requests), so then
        // everything is let go and the wait starts again.
        let (held, mut st) = loop {
            if let Err(e) = self.wait_unfenced(first, n) {
                self.unpin_all(&reserved);
                return Err(e);
            }
            let held = match inner.stripes.lock(vol.id, first..first + n) {
                Ok(h) => h,
                Err(e) => {
                    self.unpin_all(&reserved);
                    return Err(self.fail(e));
                }
            };
            let st = inner.state.lock();
            if !self.any_fenced(&st, first, n) {
                break (held, st);
            }
        };
        let now = now_ns();
        // The admission sieve decides every write miss, as in `ember sim` (SieveStore: a
        // block the sieve refuses is not allocated): a refused miss goes around the cache,
        // to backing, like write-around; FLUSH makes it durable (the barriers sync backing).
        let mut around = vec![false; n as usize];
        {
            for b in first..first + n {
                let key = block_key(vol.id, b);
                let hit = st.get(key).is_some();
                if hit {
                    ctr.write_hits.fetch_add(1, Relaxed);
                } else {
                    ctr.write_misses.fetch_add(1, Relaxed);
                }
                let acc = st.access(key, Op::Write, now);
                st.observe(&acc, hit);
                // A miss past the sequential cutoff goes around like a refused one: written
                // through to backing, never left dirty.
                if !hit
                    && self.cacheable(b)
                    && !st.fenced(key)
                    && (self.cut(&mut st, &acc) || !st.admit(&acc))
                {
                    around[(b - first) as usize] = true;
                }
            }
        }
        // Ordered write-back: which blocks go to backing directly (refused by the sieve, the
        // partial last block, or all of a chunk larger than max_dirty); their reserved
        // blocks are returned.
        let direct: Vec<bool> = (first..first + n)
            .map(|b| ordered && (direct_all || around[(b - first) as usize] || !self.cacheable(b)))
            .collect();
        if ordered {
            for (i, c) in reserved.iter_mut().enumerate() {
                if direct[i] {
                    st.unpin(*c);
                    *c = u32::MAX;
                }
            }
        }
        drop(st);
        let end = start + data.len() as u64;
        let mut deferred = Vec::new();
        let mut result = Ok(());
        let mut i = 0usize;
        while i < around.len() {
            let mut j = i + 1;
            while j < around.len() && around[j] == around[i] && direct[j] == direct[i] {
                j += 1;
            }
            let (b0, b1) = (first + i as u64, first + j as u64);
            let (lo, hi) = (start.max(b0 * bs), end.min(b1 * bs));
            let part = &data[(lo - start) as usize..(hi - start) as usize];
            if around[i] {
                ctr.admission_refusals.fetch_add((j - i) as u64, Relaxed);
            }
            if direct[i] {
                deferred.push((b0, b1 - b0, lo, part, around[i]));
            } else if result.is_ok() {
                let target =
                    if ordered { RunTarget::Cache(&reserved[i..j]) } else { RunTarget::Policy };
                result = self.write_run_wb(b0, b1 - b0, lo, part, fua, around[i], target, policy);
            } else {
                // Only ordered write-back reserved blocks (`reserved` is empty otherwise).
                self.unpin_all(reserved.get(i..j).unwrap_or(&[]));
            }
            i = j;
        }
        result?;
        drop(held);
        for (b0, nb, lo, part, around) in deferred {
            self.write_direct_ordered(b0, nb, lo, part, around, policy)?;
        }
        Ok(())
    }

    /// Return reserved blocks never used.
    fn unpin_all(&self, reserved: &[u32]) {
        if reserved.is_empty() {
            return;
        }
        let mut st = self.inner.state.lock();
        for &c in reserved.iter().filter(|&&c| c != u32::MAX) {
            st.unpin(c);
        }
    }

    /// One run of a write-back chunk whose blocks the sieve treated alike, under the chunk's
    /// stripe locks: to fresh dirty cache blocks, or through to backing (`around`: the sieve
    /// refused its misses; or a fallback). `target` says where (see [`RunTarget`]).
    /// Write-through and write-around send a chunk that still has dirty versions here too,
    /// with [`RunTarget::Backing`] (`io/through.rs`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_run_wb(
        &self,
        first: u64,
        n: u64,
        start: u64,
        data: &[u8],
        fua: bool,
        around: bool,
        target: RunTarget<'_>,
        policy: Policy,
    ) -> Result<(), EngineError> {
        let inner = &self.inner;
        let mode = policy.mode;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let now = now_ns();
        let end = start + data.len() as u64;
        let span_start = first * bs;
        let span_end = ((first + n) * bs).min(vol.size);
        let partial = |b: u64| b * bs < start || (b + 1) * bs > end;
        let mut reserved: Vec<u32> = Vec::with_capacity(n as usize);
        // Client tier: (clean key ejected for a new block, that block) to DEMOTE first.
        let mut demotes: Vec<(u64, u32)> = Vec::new();
        let mut sources: Vec<(usize, u32)> = Vec::new();
        let mut through;
        let misses;
        {
            let mut st = inner.state.lock();
            misses = (first..first + n).filter(|&b| st.get(block_key(vol.id, b)).is_none()).count();
            // No fence stands over the chunk (waited for in `write_chunk_wb`), so a dirty
            // version may appear; the volume's partial last block is never cached.
            through = match target {
                RunTarget::Policy => {
                    around
                        || (first..first + n).any(|b| !self.cacheable(b))
                        || (fua && mode == WriteMode::WriteBackFlush)
                        || st.dirty_len() + n as usize > inner.limits.get().max_dirty
                }
                RunTarget::Cache(blocks) => {
                    reserved.extend_from_slice(blocks);
                    false
                }
                RunTarget::Backing => true,
            };
            if !through && reserved.is_empty() {
                demotes =
                    self.reserve_new_versions(&mut st, (vol.id, first, n as usize), &mut reserved);
                if reserved.len() < n as usize {
                    demotes.clear();
                    for c in reserved.drain(..) {
                        st.unpin(c);
                    }
                    ctr.allocations_skipped.fetch_add(n, Relaxed);
                    through = true;
                }
            }
            // Going to backing directly: the flusher may be writing an older copy of one of
            // these blocks without their stripe locks; it must land first (`wb/flusher.rs`).
            if through {
                let keys = block_key(vol.id, first)..block_key(vol.id, first + n);
                if let Err(e) = wait_not_flushing(inner, &mut st, keys) {
                    drop(st);
                    return Err(self.fail(e));
                }
            }
            for b in [first, first + n - 1] {
                let i = (b - first) as usize;
                if !partial(b) || sources.iter().any(|&(j, _)| j == i) {
                    continue;
                }
                if let Some(slot) = st.slot(block_key(vol.id, b)) {
                    // Written through, a clean block is merged from backing (the same data).
                    if !through || slot.dirty.is_some() {
                        st.pin(slot.cache_block);
                        sources.push((i, slot.cache_block));
                    }
                }
            }
            inner.count_evictions(&mut st);
            drop(st);
        }
        if through && !around {
            ctr.write_through_fallbacks.fetch_add(n, Relaxed);
        }
        // Wong & Wilkes 1.1: a clean block ejected for a new version goes down as a DEMOTE
        // before the new version is written over its data, as a READ miss's victim does.
        for (v, c) in demotes {
            self.send_demote(v, c);
        }
        let result = self.write_wb_io(
            (span_start, span_end),
            start,
            data,
            &sources,
            through.then_some(fua).ok_or(&reserved[..]),
        );
        // The cache device was given up while this run was written to it: its dirty map is
        // frozen into the lost list (`io/degraded.rs`), so nothing more is committed there.
        // Checked under the state lock, which the freeze takes after the trip.
        let frozen;
        {
            let mut st = inner.state.lock();
            for &(_, c) in &sources {
                st.unpin(c);
            }
            frozen = result.is_ok() && !through && !inner.health.is_healthy();
            match (&result, through) {
                (Ok(()), true) => {
                    for b in first..first + n {
                        if st.drop_all_versions(block_key(vol.id, b)) > 0 {
                            ctr.invalidations.fetch_add(1, Relaxed);
                        }
                    }
                    inner.cv.notify_all();
                }
                (Ok(()), false) if !frozen => {
                    for (i, &c) in reserved.iter().enumerate() {
                        let key = block_key(vol.id, first + i as u64);
                        st.commit_dirty(key, c, now, policy.keeps_closed_epochs());
                    }
                    ctr.dirty_writes.fetch_add(n, Relaxed);
                    ctr.allocation_writes.fetch_add(misses as u64, Relaxed);
                    inner.cv.notify_all();
                }
                (Err(_), true) => {
                    // Backing may hold part of the write: clean copies may be stale now.
                    for b in first..first + n {
                        if st.invalidate(block_key(vol.id, b)) {
                            ctr.invalidations.fetch_add(1, Relaxed);
                        }
                    }
                }
                (_, false) => {
                    for &c in &reserved {
                        st.unpin(c);
                    }
                }
            }
        }
        result.map_err(|e| self.fail(e))?;
        if frozen {
            return Err(self.fail(io::Error::other(format!(
                "{}: the cache device failed while this write was written to it (degraded mode)",
                inner.cache.describe()
            ))));
        }
        // A FUA write is durable once the persisted dirty map no longer names an older
        // version of its blocks: under write-back persist and while it drains. (Not by the
        // policy in force now: a switch into write-back persist holds the journal cursor
        // while it waits for the requests of the old policy.)
        if fua && policy.persisting() {
            barrier_persist(inner).map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    /// Is any block of the chunk `[first, first + n)` inside a discard's fence?
    pub(super) fn any_fenced(&self, st: &CacheState, first: u64, n: u64) -> bool {
        let vol = self.vol().id;
        (first..first + n).any(|b| st.fenced(block_key(vol, b)))
    }

    /// Wait, holding no lock, until no discard's fence covers a block of the chunk
    /// `[first, first + n)`. Ends with an error when a shutdown begins or a panic poisoned
    /// the engine meanwhile.
    pub(super) fn wait_unfenced(&self, first: u64, n: u64) -> Result<(), EngineError> {
        let inner = &self.inner;
        let mut st = inner.state.lock();
        while self.any_fenced(&st, first, n) {
            if st.closing || st.stop {
                return Err(EngineError::ShutDown);
            }
            if inner.stripes.is_poisoned() {
                drop(st);
                return Err(self.fail(crate::stripes::poisoned_error()));
            }
            // A fence wakes `cv` when it is lowered.
            inner.cv.wait_for(&mut st, Duration::from_millis(10));
        }
        Ok(())
    }

    /// The I/O of a write-back chunk: merge partial blocks, then write the chunk to its
    /// reserved cache blocks (`Err(reserved)`) or through to backing (`Ok(fua)`).
    pub(super) fn write_wb_io(
        &self,
        (span_start, span_end): (u64, u64),
        start: u64,
        data: &[u8],
        sources: &[(usize, u32)],
        target: Result<bool, &[u32]>,
    ) -> io::Result<()> {
        let inner = &self.inner;
        let bs = inner.block_size() as usize;
        let ctr = self.counters();
        let vol = self.vol();
        let len = (span_end - span_start) as usize;
        let mut buf = crate::device::AlignedBuf::new(len);
        let b = buf.as_mut_slice();
        let lo = (start - span_start) as usize;
        let hi = lo + data.len();
        let n = len.div_ceil(bs);
        for &(i, c) in sources {
            let off = inner.geometry.block_offset(c);
            inner
                .cache
                .read_at(off, &mut b[i * bs..(i + 1) * bs])
                .map_err(|e| self.cache_io_error("read (merge)", c, 1, e))?;
            ctr.cache_read_bytes.fetch_add(bs as u64, Relaxed);
        }
        // Written through with nothing dirty to merge, only the client's bytes go down.
        if !(target.is_ok() && sources.is_empty()) {
            let edges: &[usize] = if n > 1 { &[0, n - 1] } else { &[0] };
            for &i in edges {
                let (blo, bhi) = (i * bs, ((i + 1) * bs).min(len));
                if (blo >= lo && bhi <= hi) || sources.iter().any(|&(j, _)| j == i) {
                    continue;
                }
                let off = span_start + blo as u64;
                vol.backing.read_at(off, &mut b[blo..bhi]).map_err(|e| {
                    self.backing_io_error("read (merge)", off, (bhi - blo) as u64, e)
                })?;
                ctr.backing_read_bytes.fetch_add((bhi - blo) as u64, Relaxed);
            }
        }
        b[lo..hi].copy_from_slice(data);
        match target {
            Ok(fua) => {
                // Written through: only the client's bytes, unless a dirty block was merged.
                let (off, bytes) =
                    if sources.is_empty() { (start, data) } else { (span_start, &b[..]) };
                vol.backing
                    .write_at(off, bytes)
                    .map_err(|e| self.backing_io_error("write", off, bytes.len() as u64, e))?;
                ctr.backing_write_bytes.fetch_add(bytes.len() as u64, Relaxed);
                if fua {
                    vol.backing.sync().map_err(|e| self.backing_io_error("sync (FUA)", 0, 0, e))?;
                }
            }
            Err(reserved) => {
                let mut i = 0;
                while i < reserved.len() {
                    let mut j = i + 1;
                    while j < reserved.len() && reserved[j] == reserved[j - 1].wrapping_add(1) {
                        j += 1;
                    }
                    let off = inner.geometry.block_offset(reserved[i]);
                    inner
                        .cache
                        .write_at(off, &b[i * bs..j * bs])
                        .map_err(|e| self.cache_io_error("write", reserved[i], j - i, e))?;
                    ctr.cache_write_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
                    i = j;
                }
            }
        }
        Ok(())
    }
}
