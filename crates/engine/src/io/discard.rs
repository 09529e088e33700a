//! TRIM and WRITE_ZEROES. A discard may cover gigabytes and its backing call may take
//! seconds, so it does not hold the stripe locks of its range across that call (that would
//! stall every request on the volume). Instead it raises a *fence* over its blocks (see
//! `state`): while the fence stands no block in it is allocated (a read fill or a
//! write-through allocation is skipped), a write-back write to one of its blocks waits until
//! it is lowered (`io/back.rs`: written through, it would merge the block's dirty version and
//! could put back bytes this discard removed), and the flusher leaves its dirty versions
//! alone. Then:
//!
//! 1. it waits out every request that began before the fence, taking and releasing each
//!    stripe of the range once, one at a time (`Stripes::wait_range`), and every flusher
//!    write of a block of the range in flight (the flusher writes to backing without its
//!    stripe locks, `wb/flusher.rs`);
//! 2. drops every clean cached copy in the range (none can appear any more);
//! 3. under write-back, writes back the dirty version of a partly covered edge block (its
//!    other bytes must survive), under that block's stripe lock;
//! 4. passes the request down to backing in pieces of at most [`DISCARD_PIECE`] bytes,
//!    holding no lock (a shutdown that begins meanwhile stops it between pieces);
//! 5. under write-back, once backing succeeded, drops every dirty version in the range
//!    (found through the dirty map's key index, so the cost does not grow with the number
//!    of dirty blocks elsewhere);
//! 6. lowers the fence (also on error or panic: the fence is a guard).
//!
//! Under ordered write-back the discard first holds its epoch and waits until every older
//! epoch reached backing (`io/ordered.rs`), its fence lets the flusher write older epochs'
//! versions in the range, and backing is synced after step 4 before the hold is released.
//!
//! Requests racing with the discard on its bytes are concurrent with it, so NBD leaves
//! their order undefined; what the fence guarantees is that afterwards no cached copy in the
//! range holds bytes from before the discard, and that a write to other bytes of one of its
//! blocks does not bring the discarded bytes back.

use super::ctx::Volume;
use crate::core::Inner;
use crate::error::EngineError;
use crate::layout::block_key;
use crate::wb::barrier::barrier_persist;
use crate::wb::flusher::wait_not_flushing;
use std::io;
use std::sync::atomic::Ordering::Relaxed;

/// Largest piece of a discard passed to backing in one call.
pub const DISCARD_PIECE: u64 = 256 << 20;

/// A raised fence; lowered on drop (whatever way the request ends).
struct Fence<'a> {
    inner: &'a Inner,
    id: u64,
}

impl<'a> Fence<'a> {
    fn raise(inner: &'a Inner, keys: std::ops::Range<u64>, epoch: Option<u64>) -> Self {
        let id = inner.state.lock().raise_fence(keys, epoch);
        Self { inner, id }
    }
}

impl Drop for Fence<'_> {
    fn drop(&mut self) {
        let mut st = self.inner.state.lock();
        st.lower_fence(self.id);
        // The flusher may be waiting for the fenced versions.
        self.inner.cv.notify_all();
    }
}

impl Volume {
    /// Discard `len` bytes at `offset` (cached copies are dropped first); with `fua`, durable
    /// before returning.
    pub fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), EngineError> {
        self.discard_logged(offset, len, fua, false)
    }

    /// Write `len` zero bytes at `offset` (cached copies are dropped first); with `fua`,
    /// durable before returning. `may_trim` (false for NBD_CMD_FLAG_NO_HOLE) is accepted
    /// for the NBD adapter; the backing is asked to write zeroes either way.
    pub fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        _may_trim: bool,
    ) -> Result<(), EngineError> {
        self.discard_logged(offset, len, fua, true)
    }

    /// A discard is logged for warmup as a write (after it is done, as a write is), so no
    /// older snapshot copy of its blocks is preloaded; with FUA the log is synced.
    fn discard_logged(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        zero: bool,
    ) -> Result<(), EngineError> {
        let result = self.discard(offset, len, fua, zero);
        if offset.checked_add(len).is_some_and(|e| e <= self.vol().size) {
            let bs = self.inner.block_size();
            self.inner.warmup.record(self.vol().id, true, offset, len, bs);
        }
        result?;
        if fua {
            self.sync_warmup_log()?;
        }
        Ok(())
    }

    /// Under write-back: the newest version of a partly covered block `b` is dirty, so it is
    /// written to backing first (the bytes outside the discard must survive). Under the
    /// block's stripe lock, so no request on it interleaves.
    fn write_back_edge(&self, b: u64) -> Result<(), EngineError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let _held = inner.stripes.lock(vol.id, b..b + 1).map_err(|e| self.fail(e))?;
        let c = {
            let mut st = inner.state.lock();
            match st.slot(block_key(vol.id, b)) {
                Some(slot) if slot.dirty.is_some() => {
                    st.pin(slot.cache_block);
                    slot.cache_block
                }
                _ => return Ok(()),
            }
        };
        let result = (|| -> io::Result<()> {
            let mut buf = crate::device::AlignedBuf::new(bs as usize);
            let off = inner.geometry.block_offset(c);
            inner
                .cache
                .read_at(off, buf.as_mut_slice())
                .map_err(|e| self.cache_io_error("read (write back)", c, 1, e))?;
            vol.backing
                .write_at(b * bs, buf.as_slice())
                .map_err(|e| self.backing_io_error("write back", b * bs, bs, e))
        })();
        inner.state.lock().unpin(c);
        result.map_err(|e| self.fail(e))
    }

    /// TRIM or WRITE_ZEROES (see the module comment for the steps).
    pub(super) fn discard(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        zeroes: bool,
    ) -> Result<(), EngineError> {
        let (_pass, policy) = self.enter_policy()?;
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
        if self.degraded() {
            return self.discard_degraded(offset, len, fua, zeroes);
        }
        let end = offset + len;
        let first = offset / bs;
        let last = end.div_ceil(bs);
        let keys = block_key(vol.id, first)..block_key(vol.id, last);
        // Ordered write-back: the discard reaches backing after every older epoch
        // (`io/ordered.rs`); the flusher may still write their versions inside the fence.
        // Write-through or write-around leaving ordered write-back: after its whole drain.
        if policy.waits_for_drain() {
            self.wait_ordered_drain()?;
        }
        let ordered = policy.ordered();
        let hold = if ordered { Some(self.hold_ordered()?) } else { None };
        let _fence = Fence::raise(inner, keys.clone(), hold.as_ref().map(|h| h.epoch));
        inner.stripes.wait_range(vol.id, first..last).map_err(|e| self.fail(e))?;
        // Dirty versions in the range: none can appear once the fence stands and the requests
        // before it are done, so none now means none until the fence is lowered (under
        // write-through and write-around there are some while a switch drains a write-back
        // policy, or when a write read the policy before a switch into write-back).
        let (dropped, dirty) = {
            let mut st = inner.state.lock();
            // The flusher's copy of a block of the range, taken before the fence, lands
            // before the discard (`wb/flusher.rs`); the fence keeps it from taking another.
            wait_not_flushing(inner, &mut st, keys.clone()).map_err(|e| self.fail(e))?;
            (st.invalidate_range(keys.clone()), st.any_dirty_in(keys.clone()))
        };
        ctr.invalidations.fetch_add(dropped, Relaxed);
        if dirty {
            let mut edges = vec![first, last - 1];
            edges.dedup();
            for b in edges {
                let whole = b * bs >= offset && (b + 1) * bs <= end;
                if !whole {
                    self.write_back_edge(b)?;
                }
            }
        }
        let op = if zeroes { "write-zeroes" } else { "trim" };
        let mut pos = offset;
        while pos < end {
            if inner.state.lock().closing {
                return Err(EngineError::ShutDown);
            }
            let n = DISCARD_PIECE.min(end - pos);
            if zeroes { vol.backing.write_zeroes(pos, n) } else { vol.backing.trim(pos, n) }
                .map_err(|e| self.fail(self.backing_io_error(op, pos, n, e)))?;
            pos += n;
        }
        // Ordered write-back: durable before a later epoch may follow it to backing.
        if fua || ordered {
            vol.backing
                .sync()
                .map_err(|e| self.fail(self.backing_io_error("sync (FUA)", 0, 0, e)))?;
        }
        if dirty {
            let mut st = inner.state.lock();
            let mut dropped = 0;
            for k in st.dirty_keys_in(keys) {
                dropped += u64::from(st.drop_all_versions(k) > 0);
            }
            inner.cv.notify_all();
            ctr.invalidations.fetch_add(dropped, Relaxed);
        }
        // Under write-back persist the device may name a dirty version of the range: a FUA
        // discard is durable only once a commit forgets it (a crash would otherwise replay
        // the old data over the discarded range).
        if fua && policy.persisting() {
            barrier_persist(inner).map_err(|e| self.fail(e))?;
        }
        Ok(())
    }
}
