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
        let mut dirty = vec![false; n as usize];
        {
            let mut st = inner.state.lock();
            for b in first..first + n {
                let key = block_key(vol.id, b);
                if !self.cacheable(b) {
                    plans.push(Plan::Pass);
                    continue;
                }
                let acc = st.access(key, Op::Read, now);
                dirty[(b - first) as usize] = st.slot(key).is_some_and(|s| s.dirty.is_some());
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
        inner.count_evictions(&mut inner.state.lock());
        let hits = plans.iter().filter(|p| matches!(p, Plan::Hit(_))).count() as u64;
        ctr.read_hits.fetch_add(hits, Relaxed);
        ctr.read_misses.fetch_add(n - hits, Relaxed);
        let span = ((first + n) * bs).min(vol.size) - first * bs;
        // Aligned, so an O_DIRECT cache device reads and fills without a bounce copy.
        let mut scratch = crate::device::AlignedBuf::new((n * bs) as usize);
        let mut filled = vec![false; plans.len()];
        let mut bad = vec![false; plans.len()];
        let result = self.read_io(
            first,
            span,
            &plans,
            scratch.as_mut_slice(),
            &mut filled,
            (&dirty, &mut bad),
        );
        {
            let mut st = inner.state.lock();
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
                    ctr.cache_read_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
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

    /// A write under a write-back policy (thesis table 4.2): every block of the chunk gets a
    /// new cache block (no-overwrite), written before the map names it dirty in the current
    /// epoch. A block only partly written is merged with its newest cached version, or with
    /// backing. The chunk is written through to backing instead (dropping every cached
    /// version once backing has it) when max_dirty is reached, no block can be freed, FUA
    /// asks for it under write-back flush, or it holds the volume's partial last block.
    fn write_chunk_wb(
        &self,
        first: u64,
        n: u64,
        start: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<(), ExportError> {
        let inner = &self.inner;
        let mode = inner.mode;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let _held = inner.stripes.lock(vol.id, first..first + n);
        let now = now_ns();
        let end = start + data.len() as u64;
        let span_start = first * bs;
        let span_end = ((first + n) * bs).min(vol.size);
        let partial = |b: u64| b * bs < start || (b + 1) * bs > end;
        let mut reserved: Vec<u32> = Vec::with_capacity(n as usize);
        let mut sources: Vec<(usize, u32)> = Vec::new();
        let mut through;
        {
            let mut st = inner.state.lock();
            for b in first..first + n {
                let key = block_key(vol.id, b);
                let hit = st.get(key).is_some();
                if hit {
                    ctr.write_hits.fetch_add(1, Relaxed);
                } else {
                    ctr.write_misses.fetch_add(1, Relaxed);
                }
                let acc = st.access(key, Op::Write, now);
                st.admission.observe(&acc, hit);
            }
            through = (first..first + n).any(|b| !self.cacheable(b))
                || (fua && mode == WriteMode::WriteBackFlush)
                || st.dirty_len() + n as usize > inner.limits.max_dirty;
            if !through {
                while reserved.len() < n as usize {
                    match st.reserve() {
                        Some(c) => reserved.push(c),
                        None => break,
                    }
                }
                if reserved.len() < n as usize {
                    for c in reserved.drain(..) {
                        st.unpin(c);
                    }
                    ctr.allocations_skipped.fetch_add(n, Relaxed);
                    through = true;
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
        }
        inner.count_evictions(&mut inner.state.lock());
        if through {
            ctr.write_through_fallbacks.fetch_add(n, Relaxed);
        }
        let result = self.write_wb_io(
            (span_start, span_end),
            start,
            data,
            &sources,
            through.then_some(fua).ok_or(&reserved[..]),
        );
        {
            let mut st = inner.state.lock();
            for &(_, c) in &sources {
                st.unpin(c);
            }
            match (&result, through) {
                (Ok(()), true) => {
                    for b in first..first + n {
                        if st.drop_all_versions(block_key(vol.id, b)) > 0 {
                            ctr.invalidations.fetch_add(1, Relaxed);
                        }
                    }
                    inner.cv.notify_all();
                }
                (Ok(()), false) => {
                    for (i, &c) in reserved.iter().enumerate() {
                        let key = block_key(vol.id, first + i as u64);
                        st.commit_dirty(key, c, now, mode == WriteMode::WriteBackFlush);
                    }
                    ctr.dirty_writes.fetch_add(n, Relaxed);
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
                (Err(_), false) => {
                    for &c in &reserved {
                        st.unpin(c);
                    }
                }
            }
        }
        result.map_err(|e| self.fail(e))?;
        if fua && mode == WriteMode::WriteBackPersist {
            crate::writeback::barrier_persist(inner).map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    /// The I/O of a write-back chunk: merge partial blocks, then write the chunk to its
    /// reserved cache blocks (`Err(reserved)`) or through to backing (`Ok(fua)`).
    fn write_wb_io(
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

    /// TRIM or WRITE_ZEROES under a write-back policy: a partly covered block with a dirty
    /// version is written back first (its other bytes must survive), then the request goes
    /// down, then every version of the covered blocks is dropped.
    fn discard_wb(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        zeroes: bool,
    ) -> Result<(), ExportError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let ctr = self.counters();
        let first = offset / bs;
        let last = (offset + len).div_ceil(bs);
        let _held = inner.stripes.lock(vol.id, first..last);
        let mut edges: Vec<(u64, u32)> = Vec::new();
        {
            let mut st = inner.state.lock();
            for b in [first, last - 1] {
                let whole = b * bs >= offset && (b + 1) * bs <= offset + len;
                if whole || edges.iter().any(|&(x, _)| x == b) {
                    continue;
                }
                if let Some(slot) = st.slot(block_key(vol.id, b)) {
                    if slot.dirty.is_some() {
                        st.pin(slot.cache_block);
                        edges.push((b, slot.cache_block));
                    }
                }
            }
        }
        let result = (|| -> io::Result<()> {
            let mut buf = crate::device::AlignedBuf::new(bs as usize);
            for &(b, c) in &edges {
                let off = inner.geometry.block_offset(c);
                inner
                    .cache
                    .read_at(off, buf.as_mut_slice())
                    .map_err(|e| self.cache_io_error("read (write back)", c, 1, e))?;
                vol.backing
                    .write_at(b * bs, buf.as_slice())
                    .map_err(|e| self.backing_io_error("write back", b * bs, bs, e))?;
            }
            if zeroes {
                vol.backing.write_zeroes(offset, len)
            } else {
                vol.backing.trim(offset, len)
            }
            .map_err(|e| {
                self.backing_io_error(if zeroes { "write-zeroes" } else { "trim" }, offset, len, e)
            })?;
            if fua {
                vol.backing.sync().map_err(|e| self.backing_io_error("sync (FUA)", 0, 0, e))?;
            }
            Ok(())
        })();
        {
            let mut st = inner.state.lock();
            for &(_, c) in &edges {
                st.unpin(c);
            }
            let id = vol.id;
            let in_range = |k: u64| {
                ember_trace::key_volume(k) == id
                    && (first..last).contains(&ember_trace::key_block(k))
            };
            let mut dropped = if last - first > st.len() as u64 {
                st.invalidate_where(in_range)
            } else {
                (first..last).filter(|&b| st.invalidate(block_key(id, b))).count() as u64
            };
            if result.is_ok() {
                for k in st.dirty_keys_where(in_range) {
                    dropped += u64::from(st.drop_all_versions(k) > 0);
                }
                inner.cv.notify_all();
            }
            ctr.invalidations.fetch_add(dropped, Relaxed);
        }
        result.map_err(|e| self.fail(e))
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
        if inner.mode.is_write_back() {
            return self.discard_wb(offset, len, fua, zeroes);
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
        if self.inner.mode == WriteMode::WriteBackFlush {
            // Thesis 4.4.2: at most max_epochs dirty epochs; beyond, writes wait (before
            // taking any block lock, so the flusher can always proceed).
            let mut st = self.inner.state.lock();
            while st.open_epochs() > self.inner.limits.max_epochs && !st.stop {
                self.inner.cv.wait_for(&mut st, std::time::Duration::from_millis(100));
            }
        }
        let bs = self.inner.block_size();
        let end = offset + data.len() as u64;
        let mut pos = offset;
        while pos < end {
            let first = pos / bs;
            let stop = (first + CHUNK_BLOCKS).min(end.div_ceil(bs));
            let chunk_end = end.min(stop * bs);
            let piece = &data[(pos - offset) as usize..(chunk_end - offset) as usize];
            // FUA applies to the whole request: sync once, after the last chunk.
            let fua = fua && chunk_end == end;
            if self.inner.mode.is_write_back() {
                self.write_chunk_wb(first, stop - first, pos, piece, fua)?;
            } else {
                self.write_chunk(first, stop - first, pos, piece, fua)?;
            }
            pos = chunk_end;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), ExportError> {
        let _pass = self.enter()?;
        self.counters().flushes.fetch_add(1, Relaxed);
        match self.inner.mode {
            WriteMode::WriteBackFlush => {
                return crate::writeback::barrier_flush(&self.inner).map_err(|e| self.fail(e))
            }
            WriteMode::WriteBackPersist => {
                return crate::writeback::barrier_persist(&self.inner).map_err(|e| self.fail(e))
            }
            // Ignores barriers, as its name says (thesis table 3.1, last row).
            WriteMode::UnsafeWriteBack => return Ok(()),
            WriteMode::WriteThrough | WriteMode::WriteAround => {}
        }
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
