//! One backing volume as an NBD export: the read path (hits from the cache device, misses
//! from backing, allocation by the admission sieve, eviction by the replacement policy) and
//! the write path (write-through or write-around), FLUSH, FUA, TRIM and WRITE_ZEROES.
//!
//! Requests are cut into chunks of at most [`CHUNK_BLOCKS`] blocks. A chunk holds the stripe
//! locks of all its blocks while it does its I/O, so every block sees requests one at a time;
//! the global state lock is held only to look up, allocate, pin and release.

use crate::engine::{Inner, VolumeInfo};
use crate::layout::WriteMode;
use crate::stats::Counters;
use ember_nbd::{Export, ExportError, ExportFlags};
use ember_trace::{block_key, Op};
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Largest number of blocks one chunk of a request covers.
pub const CHUNK_BLOCKS: u64 = 64;

/// Export handle of one volume.
pub(crate) struct VolumeExport {
    inner: Arc<Inner>,
    index: usize,
}

/// What a chunk does with one of its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Resident: read from (or, on a write, update) this cache block.
    Hit(u32),
    /// Allocated on this miss: fill this cache block.
    Fill(u32),
    /// Not cached and not allocated: backing only.
    Pass,
}

impl Plan {
    fn cache_block(self) -> Option<u32> {
        match self {
            Plan::Hit(c) | Plan::Fill(c) => Some(c),
            Plan::Pass => None,
        }
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Maximal runs `[i, j)` of consecutive plan indices for which `pred(plan i .. plan j)` holds
/// pairwise between neighbours.
fn runs(
    plans: &[Plan],
    same: impl Fn(Plan, Plan) -> bool,
    want: impl Fn(Plan) -> bool,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < plans.len() {
        if !want(plans[i]) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < plans.len() && want(plans[j]) && same(plans[j - 1], plans[j]) {
            j += 1;
        }
        out.push((i, j));
        i = j;
    }
    out
}

/// True if `b` follows `a` on the cache device.
fn adjacent(a: Plan, b: Plan) -> bool {
    matches!((a.cache_block(), b.cache_block()), (Some(x), Some(y)) if x.checked_add(1) == Some(y))
}

impl VolumeExport {
    pub fn new(inner: Arc<Inner>, index: usize) -> Self {
        Self { inner, index }
    }

    fn vol(&self) -> &VolumeInfo {
        &self.inner.volumes[self.index]
    }

    fn counters(&self) -> &Counters {
        &self.inner.counters[self.vol().id as usize]
    }

    fn enter(&self) -> Result<crate::gate::Pass<'_>, ExportError> {
        self.inner.gate.enter().ok_or(ExportError::Shutdown)
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), ExportError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.vol().size => Ok(()),
            _ => Err(ExportError::Invalid(format!(
                "{len} bytes at {offset} exceed volume {:?} of {} bytes",
                self.vol().name,
                self.vol().size
            ))),
        }
    }

    /// Count and return an I/O error with its context.
    fn fail(&self, e: io::Error) -> ExportError {
        self.counters().io_errors.fetch_add(1, Relaxed);
        ExportError::Io(e)
    }

    fn cache_io_error(&self, op: &str, c: u32, n: usize, e: io::Error) -> io::Error {
        let off = self.inner.geometry.block_offset(c);
        crate::device::io_context(
            self.inner.cache.as_ref(),
            op,
            off,
            (n as u64) * self.inner.block_size(),
            e,
        )
    }

    fn backing_io_error(&self, op: &str, off: u64, len: u64, e: io::Error) -> io::Error {
        crate::device::io_context(self.vol().backing.as_ref(), op, off, len, e)
    }

    /// Is block `b` of this volume cacheable (a whole block inside the volume)?
    fn cacheable(&self, b: u64) -> bool {
        (b + 1) * self.inner.block_size() <= self.vol().size
    }

    fn read_chunk(
        &self,
        first: u64,
        n: u64,
        start: u64,
        out: &mut [u8],
    ) -> Result<(), ExportError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let _held = inner.stripes.lock(vol.id, first..first + n);
        let now = now_ns();
        let mut plans = Vec::with_capacity(n as usize);
        {
            let mut st = inner.state.lock();
            for b in first..first + n {
                let key = block_key(vol.id, b);
                if !self.cacheable(b) {
                    plans.push(Plan::Pass);
                    continue;
                }
                let acc = st.access(key, Op::Read, now);
                if let Some(c) = st.hit_pin(&acc) {
                    st.admission.observe(&acc, true);
                    plans.push(Plan::Hit(c));
                    continue;
                }
                st.admission.observe(&acc, false);
                if !st.admit(&acc) {
                    plans.push(Plan::Pass);
                    continue;
                }
                let a = st.allocate(&acc);
                if let Some(v) = a.evicted {
                    if let Some(c) = inner.counters.get(ember_trace::key_volume(v) as usize) {
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
        let hits = plans.iter().filter(|p| matches!(p, Plan::Hit(_))).count() as u64;
        ctr.read_hits.fetch_add(hits, Relaxed);
        ctr.read_misses.fetch_add(n - hits, Relaxed);
        let span = ((first + n) * bs).min(vol.size) - first * bs;
        // Aligned, so an O_DIRECT cache device reads and fills without a bounce copy.
        let mut scratch = crate::device::AlignedBuf::new((n * bs) as usize);
        let mut filled = vec![false; plans.len()];
        let result = self.read_io(first, span, &plans, scratch.as_mut_slice(), &mut filled);
        {
            let mut st = inner.state.lock();
            for (i, p) in plans.iter().enumerate() {
                match *p {
                    Plan::Hit(c) => st.unpin(c),
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
        let skip = (start - first * bs) as usize;
        out.copy_from_slice(&scratch.as_slice()[skip..skip + out.len()]);
        Ok(())
    }

    fn read_io(
        &self,
        first: u64,
        span: u64,
        plans: &[Plan],
        scratch: &mut [u8],
        filled: &mut [bool],
    ) -> io::Result<()> {
        let inner = &self.inner;
        let bs = inner.block_size() as usize;
        let ctr = self.counters();
        let vol = self.vol();
        for (i, j) in runs(plans, adjacent, |p| matches!(p, Plan::Hit(_))) {
            let Some(c) = plans[i].cache_block() else { continue };
            let off = inner.geometry.block_offset(c);
            inner
                .cache
                .read_at(off, &mut scratch[i * bs..j * bs])
                .map_err(|e| self.cache_io_error("read", c, j - i, e))?;
            ctr.cache_read_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
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
            inner
                .cache
                .write_at(off, &scratch[i * bs..j * bs])
                .map_err(|e| self.cache_io_error("allocation-write", c, j - i, e))?;
            filled[i..j].fill(true);
            ctr.allocation_writes.fetch_add((j - i) as u64, Relaxed);
            ctr.cache_write_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
        }
        Ok(())
    }

    fn write_chunk(
        &self,
        first: u64,
        n: u64,
        start: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<(), ExportError> {
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
                    if let Some(c) = inner.counters.get(ember_trace::key_volume(v) as usize) {
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

    fn write_io(
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
                inner.cache.sync().map_err(|e| {
                    crate::device::io_context(inner.cache.as_ref(), "sync (FUA)", 0, 0, e)
                })?;
            }
        }
        Ok(())
    }

    /// TRIM or WRITE_ZEROES: invalidate every overlapped block, then pass down, all under the
    /// blocks' locks.
    fn discard(&self, offset: u64, len: u64, fua: bool, zeroes: bool) -> Result<(), ExportError> {
        let _pass = self.enter()?;
        self.check(offset, len)?;
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        if zeroes {
            ctr.write_zeroes.fetch_add(1, Relaxed);
        } else {
            ctr.trims.fetch_add(1, Relaxed);
        }
        if len == 0 {
            return Ok(());
        }
        let first = offset / bs;
        let last = (offset + len).div_ceil(bs);
        let _held = inner.stripes.lock(vol.id, first..last);
        {
            let mut st = inner.state.lock();
            let dropped = if last - first > st.len() as u64 {
                let id = vol.id;
                st.invalidate_where(|k| {
                    ember_trace::key_volume(k) == id
                        && (first..last).contains(&ember_trace::key_block(k))
                })
            } else {
                (first..last).filter(|&b| st.invalidate(block_key(vol.id, b))).count() as u64
            };
            ctr.invalidations.fetch_add(dropped, Relaxed);
        }
        let r = if zeroes {
            vol.backing.write_zeroes(offset, len)
        } else {
            vol.backing.trim(offset, len)
        };
        r.map_err(|e| {
            self.fail(self.backing_io_error(
                if zeroes { "write-zeroes" } else { "trim" },
                offset,
                len,
                e,
            ))
        })?;
        if fua {
            vol.backing
                .sync()
                .map_err(|e| self.fail(self.backing_io_error("sync (FUA)", 0, 0, e)))?;
        }
        Ok(())
    }
}

impl Export for VolumeExport {
    fn size(&self) -> u64 {
        self.vol().size
    }

    fn preferred_block_size(&self) -> u32 {
        self.inner.geometry.block_size
    }

    fn flags(&self) -> ExportFlags {
        ExportFlags {
            read_only: false,
            can_flush: true,
            can_fua: true,
            can_trim: true,
            can_write_zeroes: true,
            can_multi_conn: true,
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        let _pass = self.enter()?;
        self.check(offset, buf.len() as u64)?;
        let ctr = self.counters();
        ctr.read_requests.fetch_add(1, Relaxed);
        ctr.read_bytes.fetch_add(buf.len() as u64, Relaxed);
        let bs = self.inner.block_size();
        let end = offset + buf.len() as u64;
        let mut pos = offset;
        while pos < end {
            let first = pos / bs;
            let stop = (first + CHUNK_BLOCKS).min(end.div_ceil(bs));
            let chunk_end = end.min(stop * bs);
            let out = &mut buf[(pos - offset) as usize..(chunk_end - offset) as usize];
            self.read_chunk(first, stop - first, pos, out)?;
            pos = chunk_end;
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ExportError> {
        let _pass = self.enter()?;
        self.check(offset, data.len() as u64)?;
        let ctr = self.counters();
        ctr.write_requests.fetch_add(1, Relaxed);
        ctr.write_bytes.fetch_add(data.len() as u64, Relaxed);
        let bs = self.inner.block_size();
        let end = offset + data.len() as u64;
        let mut pos = offset;
        while pos < end {
            let first = pos / bs;
            let stop = (first + CHUNK_BLOCKS).min(end.div_ceil(bs));
            let chunk_end = end.min(stop * bs);
            let piece = &data[(pos - offset) as usize..(chunk_end - offset) as usize];
            // FUA applies to the whole request: sync once, after the last chunk.
            self.write_chunk(first, stop - first, pos, piece, fua && chunk_end == end)?;
            pos = chunk_end;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), ExportError> {
        let _pass = self.enter()?;
        self.counters().flushes.fetch_add(1, Relaxed);
        let vol = self.vol();
        vol.backing
            .sync()
            .map_err(|e| self.fail(self.backing_io_error("sync (FLUSH)", 0, 0, e)))?;
        let cache = self.inner.cache.as_ref();
        cache
            .sync()
            .map_err(|e| self.fail(crate::device::io_context(cache, "sync (FLUSH)", 0, 0, e)))
    }

    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), ExportError> {
        self.discard(offset, len, fua, false)
    }

    fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        _may_trim: bool,
    ) -> Result<(), ExportError> {
        self.discard(offset, len, fua, true)
    }
}
