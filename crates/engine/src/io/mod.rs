//! The request flows of one volume, one file each: [`ctx`] (the handle and shared helpers),
//! [`read`], [`through`] (write-through and write-around), [`back`] (write-back), [`discard`]
//! (TRIM and WRITE_ZEROES), [`ordered`] (what ordered write-back adds), [`probe`] (residency,
//! for a frontend's scheduling), [`load`] (NBD_CMD_CACHE's prefetch), [`fill`] (cache blocks allocated for a run filled in few I/Os)
//! and `warmup_host` (the engine as the warmup threads' host: a preload run, a snapshot copy).
//! This file holds the two entry points that dispatch by policy: `write` and `flush`.
//!
//! Requests are cut into chunks of at most [`CHUNK_BLOCKS`] blocks. A chunk holds the stripe
//! locks of all its blocks while it does its I/O, so every block sees requests one at a time;
//! the global state lock is held only to look up, allocate, pin and release.

mod back;
mod ctx;
mod degraded;
mod demote;
#[cfg(test)]
mod demote_tests;
mod discard;
pub(crate) mod fill;
mod hits_in_flight;
mod load;
mod ordered;
mod probe;
mod read;
mod read_hits;
mod through;
mod warmup_host;

pub use ctx::{Volume, CHUNK_BLOCKS};
pub(crate) use degraded::{record as degraded_record, settle, write_record};
pub use hits_in_flight::HitStart;
pub use read_hits::HitRead;

use crate::device::io_context;
use crate::error::EngineError;
use crate::layout::WriteMode;
use crate::wb::barrier::{barrier_flush, barrier_ordered, barrier_persist};
use crate::write_policy::Policy;
use std::sync::atomic::Ordering::Relaxed;

impl Volume {
    /// Write `data` at `offset` under the engine's write policy; with `fua`, durable before
    /// returning.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), EngineError> {
        let (_pass, policy) = self.enter_policy()?;
        self.check(offset, data.len() as u64)?;
        let ctr = self.counters();
        ctr.write_requests.fetch_add(1, Relaxed);
        ctr.write_bytes.fetch_add(data.len() as u64, Relaxed);
        if self.degraded() {
            let bs = self.inner.block_size();
            let result = self.write_degraded(offset, data, fua);
            self.inner.warmup.record(self.vol().id, true, offset, data.len() as u64, bs);
            return result;
        }
        if policy.waits_for_drain() {
            self.wait_ordered_drain()?;
        }
        if policy.mode == WriteMode::WriteBackFlush {
            self.wait_for_epochs()?;
        }
        let bs = self.inner.block_size();
        // Ordered write-back ignores FUA as it ignores FLUSH (thesis table 3.1, note 3): it
        // promises consistency, not durability.
        let fua = fua && policy.mode != WriteMode::OrderedWriteBack;
        let result = self.write_chunks(offset, data, fua, policy);
        // Staged after the data is in place (also after a failure: part of it may be), so a
        // snapshot copy lacking this write is always tagged below its record
        // (`warmup::snapshot_plan`).
        self.inner.warmup.record(self.vol().id, true, offset, data.len() as u64, bs);
        result?;
        if fua {
            self.sync_warmup_log()?;
        }
        Ok(())
    }

    /// The chunks of a write, in order.
    fn write_chunks(
        &self,
        offset: u64,
        data: &[u8],
        fua: bool,
        policy: Policy,
    ) -> Result<(), EngineError> {
        let bs = self.inner.block_size();
        let end = offset + data.len() as u64;
        let mut pos = offset;
        while pos < end {
            let first = pos / bs;
            let stop = (first + CHUNK_BLOCKS).min(end.div_ceil(bs));
            let chunk_end = end.min(stop * bs);
            let piece = &data[(pos - offset) as usize..(chunk_end - offset) as usize];
            // FUA applies to the whole request. Write-through syncs backing and write-back
            // persist commits the dirty map once, after the last chunk (that covers the
            // chunks before). Write-back flush makes FUA chunks bypass the cache, so there
            // every chunk must be FUA, or all but the last would stay dirty when acknowledged.
            let fua = fua && (chunk_end == end || policy.mode == WriteMode::WriteBackFlush);
            if policy.write_back() {
                self.write_chunk_wb(first, stop - first, pos, piece, fua, policy)?;
            } else {
                self.write_chunk(first, stop - first, pos, piece, fua, policy)?;
            }
            pos = chunk_end;
        }
        Ok(())
    }

    /// Thesis 4.4.2: at most max_epochs dirty epochs; beyond, a write waits for the flusher
    /// (before taking any block lock, so the flusher can always proceed). The wait ends with
    /// an error when a flusher batch fails meanwhile (backing refuses the writes: the client
    /// gets EIO instead of waiting forever), when a shutdown begins, when a panic poisoned
    /// the engine, or when the cache device is given up (the flusher writes nothing more).
    fn wait_for_epochs(&self) -> Result<(), EngineError> {
        let inner = &self.inner;
        let mut st = inner.state.lock();
        let gen0 = st.flush_error_gen;
        while st.open_epochs() > inner.limits.get().max_epochs {
            if st.flush_error_gen != gen0 {
                let e = std::io::Error::other(format!(
                    "write: {} dirty epochs wait for backing (the limit is {}) and writing them \
                     failed: {}",
                    st.open_epochs() - 1,
                    inner.limits.get().max_epochs,
                    st.last_flush_error
                ));
                drop(st);
                return Err(self.fail(e));
            }
            if st.closing || st.stop {
                return Err(EngineError::ShutDown);
            }
            if inner.stripes.is_poisoned() {
                drop(st);
                return Err(self.fail(crate::stripes::poisoned_error()));
            }
            if let Some(e) = crate::wb::flusher::given_up(inner) {
                drop(st);
                return Err(self.fail(e));
            }
            inner.cv.wait_for(&mut st, std::time::Duration::from_millis(100));
        }
        Ok(())
    }

    /// Make every write completed before this call durable (an NBD barrier): under
    /// write-back flush the closed epoch reaches backing, under write-back persist the dirty
    /// map is committed, ordered write-back closes the epoch (and does not wait),
    /// unsafe-write-back ignores it. While a switch drains a former write-back policy the
    /// new policy's promise covers every write acknowledged before the FLUSH: write-through
    /// and write-around wait for the drained epochs as write-back flush does, and while
    /// write-back persist drains the persisted dirty map is committed too
    /// (docs/reference/write-policies.md, "Switching while serving").
    pub fn flush(&self) -> Result<(), EngineError> {
        let (_pass, policy) = self.enter_policy()?;
        self.counters().flushes.fetch_add(1, Relaxed);
        self.sync_warmup_log()?;
        if self.degraded() {
            return self.flush_degraded();
        }
        let inner = &self.inner;
        if policy.flush_waits() {
            barrier_flush(inner, policy.persisting()).map_err(|e| self.fail(e))?;
        }
        if policy.mode == WriteMode::OrderedWriteBack {
            barrier_ordered(inner, policy.persisting());
        }
        if policy.persisting() {
            barrier_persist(inner).map_err(|e| self.fail(e))?;
        }
        // Unsafe write-back ignores barriers, as its name says (thesis table 3.1, last row).
        if policy.write_back() {
            return Ok(());
        }
        let vol = self.vol();
        vol.backing
            .sync()
            .map_err(|e| self.fail(self.backing_io_error("sync (FLUSH)", 0, 0, e)))?;
        let cache = self.inner.cache.as_ref();
        match cache.sync() {
            Ok(()) => Ok(()),
            // Backing holds every acknowledged write (the policy is not write-back): a cache
            // device that cannot sync is given up (`health/`), the FLUSH still succeeds.
            Err(_) if !self.inner.health.is_healthy() => Ok(()),
            Err(e) => Err(self.fail(io_context(cache, "sync (FLUSH)", 0, 0, e))),
        }
    }

    /// With a performance snapshot: every write completed so far is durably in the warmup
    /// log before a FLUSH or a FUA write is acknowledged (`warmup::Hooks::sync_log`).
    pub(crate) fn sync_warmup_log(&self) -> Result<(), EngineError> {
        self.inner.warmup.sync_log().map_err(|e| {
            self.fail(std::io::Error::new(e.kind(), format!("syncing the warmup log: {e}")))
        })
    }
}
