//! Degraded mode's request flows: the cache device was given up (`health/`), so every
//! request goes to backing and nothing is allocated. The switch (`settle`) is made once,
//! before the first request is served degraded: the dirty map becomes the lost list (the
//! blocks whose only current copy was on the failed device), the waiters for the flusher are
//! woken with an error, and the record is handed to the sink (the server's state file,
//! synced) before any request goes on.
//!
//! A read that touches a listed block fails with EIO, never returning the older bytes on
//! backing; so it does once a new device replaced the failed one (`live/replace.rs`), until
//! `clear-lost`: the healthy read paths look at the list too (one atomic load while it is
//! empty), and the hit paths decline such a read to the ordinary one, which fails it. A write goes to backing; a listed block it covers whole becomes current again
//! once backing has it durably (synced) and leaves the list; one it covers in part stays
//! listed (its other bytes are still lost). TRIM and WRITE_ZEROES follow the same rule.
//! Every flow holds the stripe locks of its chunk, so it is ordered with the requests that
//! were in flight when the device failed.
//!
//! Lock order: `health.switching` → `state` → `health.lost`; the flows take `stripes` →
//! `health.lost`, never with `state`.

use super::ctx::{Volume, CHUNK_BLOCKS};
use crate::core::Inner;
use crate::error::EngineError;
use crate::health::DegradedRecord;
use crate::layout::{key_block, key_volume};
use std::io;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

/// Make the switch into degraded mode if the cache tripped and it is not made yet; return
/// once it is (a caller that finds it being made waits for it).
pub(crate) fn settle(inner: &Inner) {
    let h = &inner.health;
    if h.is_healthy() || h.is_degraded() {
        return;
    }
    let _switching = h.switching.lock();
    if h.is_degraded() {
        return;
    }
    {
        // The dirty map as of now is what the device took with it. A write-back write that
        // commits after this sees the cache tripped (`io/back.rs`) and fails instead.
        let mut st = inner.state.lock();
        let keys = st.dirty_keys_in(0..u64::MAX);
        h.lost_mut(|lost| {
            for k in keys {
                lost.insert(key_volume(k), key_block(k));
            }
        });
        st.flush_error_gen += 1;
        st.last_flush_error = "the cache device failed (degraded mode)".into();
        inner.cv.notify_all();
    }
    // A failure is kept for the status (`record_failed`) and said by the sink; degraded
    // serving goes on either way: the device is gone.
    let _ = write_record(inner);
    h.set_degraded();
}

/// The record of the cache's health and lost list now.
pub(crate) fn record(inner: &Inner) -> DegradedRecord {
    let h = &inner.health;
    let tripped = h.tripped.lock().clone();
    let bs = inner.block_size();
    let lost = h
        .lost
        .lock()
        .volumes
        .iter()
        .filter(|(_, v)| !v.blocks.is_empty() || v.refused)
        .map(|(&id, v)| {
            let name = inner.volume_names.read().get(id as usize).cloned().unwrap_or_default();
            (name, v.blocks.iter().map(|b| b * bs).collect())
        })
        .collect();
    DegradedRecord {
        degraded: tripped.is_some(),
        reason: tripped.as_ref().map(|t| t.reason.clone()).unwrap_or_default(),
        since_unix_ms: tripped.as_ref().map_or(0, |t| t.since_unix_ms),
        cache: inner.cache.describe(),
        block_size: inner.geometry.block_size,
        lost,
    }
}

/// Hand the record to the sink, if one is set; a failure is kept for the status.
pub(crate) fn write_record(inner: &Inner) -> io::Result<()> {
    let rec = record(inner);
    let sink = inner.health.sink.lock();
    let Some(sink) = sink.as_ref() else { return Ok(()) };
    let r = sink(&rec);
    inner.health.record_failed.store(r.is_err(), SeqCst);
    r
}

impl Volume {
    /// Whether the cache device was given up: every request goes to backing, and a READ
    /// may be answered at once from backing's memory ([`Volume::read_if_resident`]).
    pub fn passes_through(&self) -> bool {
        !self.inner.health.is_healthy()
    }

    /// Is the cache no longer healthy? Then the switch is made (or waited for) and the
    /// caller serves the request degraded.
    #[inline]
    pub(super) fn degraded(&self) -> bool {
        if self.inner.health.is_healthy() {
            return false;
        }
        settle(&self.inner);
        true
    }

    /// The error of a read of listed block `b`.
    pub(super) fn lost_error(&self, b: u64) -> EngineError {
        self.counters().lost_reads.fetch_add(1, Relaxed);
        let bs = self.inner.block_size();
        self.fail(io::Error::other(format!(
            "volume {:?}: the block at byte {} was lost with the cache device (its only current \
             copy was there); `ember ctl clear-lost {}` makes backing's older version current",
            self.vol().name,
            b * bs,
            self.vol().name
        )))
    }

    /// The chunks of `[offset, offset + len)`: (first block, block count, start, end).
    fn degraded_chunks(&self, offset: u64, len: u64) -> Vec<(u64, u64, u64, u64)> {
        let bs = self.inner.block_size();
        let end = offset + len;
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < end {
            let first = pos / bs;
            let stop = (first + CHUNK_BLOCKS).min(end.div_ceil(bs));
            let chunk_end = end.min(stop * bs);
            out.push((first, stop - first, pos, chunk_end));
            pos = chunk_end;
        }
        out
    }

    /// READ, degraded: from backing, unless a block is on the lost list.
    pub(super) fn read_degraded(&self, offset: u64, buf: &mut [u8]) -> Result<(), EngineError> {
        let inner = &self.inner;
        let vol = self.vol();
        let ctr = self.counters();
        ctr.degraded_requests.fetch_add(1, Relaxed);
        for (first, n, lo, hi) in self.degraded_chunks(offset, buf.len() as u64) {
            let _held = inner.stripes.lock(vol.id, first..first + n).map_err(|e| self.fail(e))?;
            if let Some(b) = inner.health.first_lost(vol.id, first..first + n) {
                return Err(self.lost_error(b));
            }
            let out = &mut buf[(lo - offset) as usize..(hi - offset) as usize];
            vol.backing
                .read_at(lo, out)
                .map_err(|e| self.fail(self.backing_io_error("read", lo, hi - lo, e)))?;
            ctr.backing_read_bytes.fetch_add(hi - lo, Relaxed);
        }
        Ok(())
    }

    /// READ, degraded, answered at once on the caller's thread (the connection's reader):
    /// a pass-through to backing that waits on nothing. Served only when the switch is made,
    /// the range is one chunk, its stripes are free, no block of it is listed, and backing
    /// has the bytes in memory ([`crate::device::Device::read_if_cached`]). `None`: nothing
    /// was done, no counter; the caller serves it the ordinary way ([`Volume::read`]), which
    /// also reports a listed block and a failed read.
    pub(super) fn read_degraded_at_once(
        &self,
        offset: u64,
        buf: &mut [u8],
    ) -> Option<Result<(), EngineError>> {
        let inner = &self.inner;
        if !inner.health.is_degraded() {
            return None;
        }
        let bs = inner.block_size();
        let len = buf.len() as u64;
        let end = offset.checked_add(len)?;
        if len == 0 || end > self.vol().size {
            return None;
        }
        let (first, stop) = (offset / bs, end.div_ceil(bs));
        if stop - first > CHUNK_BLOCKS {
            return None;
        }
        let _pass = match self.enter() {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let vol = self.vol();
        // Free stripes only: a write of these blocks in flight is waited for on the ordinary
        // path, never on this thread.
        let _held = inner.stripes.try_lock(vol.id, first..stop)?;
        if inner.health.first_lost(vol.id, first..stop).is_some() {
            return None;
        }
        vol.backing.read_if_cached(offset, buf)?.ok()?;
        self.count_read(offset, len);
        let ctr = self.counters();
        ctr.degraded_requests.fetch_add(1, Relaxed);
        ctr.backing_read_bytes.fetch_add(len, Relaxed);
        Some(Ok(()))
    }

    /// WRITE, degraded: to backing (synced with `fua`).
    pub(super) fn write_degraded(
        &self,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<(), EngineError> {
        let vol = self.vol();
        let ctr = self.counters();
        ctr.degraded_requests.fetch_add(1, Relaxed);
        for (first, n, lo, hi) in self.degraded_chunks(offset, data.len() as u64) {
            let _held =
                self.inner.stripes.lock(vol.id, first..first + n).map_err(|e| self.fail(e))?;
            let piece = &data[(lo - offset) as usize..(hi - offset) as usize];
            vol.backing
                .write_at(lo, piece)
                .map_err(|e| self.fail(self.backing_io_error("write", lo, hi - lo, e)))?;
            ctr.backing_write_bytes.fetch_add(hi - lo, Relaxed);
            self.unlist_covered(lo, hi)?;
        }
        if fua {
            self.sync_backing_degraded("sync (FUA)")?;
        }
        Ok(())
    }

    /// TRIM or WRITE_ZEROES, degraded: to backing.
    pub(super) fn discard_degraded(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        zeroes: bool,
    ) -> Result<(), EngineError> {
        let vol = self.vol();
        self.counters().degraded_requests.fetch_add(1, Relaxed);
        for (first, n, lo, hi) in self.degraded_chunks(offset, len) {
            let _held =
                self.inner.stripes.lock(vol.id, first..first + n).map_err(|e| self.fail(e))?;
            let r = if zeroes {
                vol.backing.write_zeroes(lo, hi - lo)
            } else {
                vol.backing.trim(lo, hi - lo)
            };
            let op = if zeroes { "write-zeroes" } else { "trim" };
            r.map_err(|e| self.fail(self.backing_io_error(op, lo, hi - lo, e)))?;
            self.unlist_covered(lo, hi)?;
        }
        if fua {
            self.sync_backing_degraded("sync (FUA)")?;
        }
        Ok(())
    }

    /// FLUSH, degraded: backing synced.
    pub(super) fn flush_degraded(&self) -> Result<(), EngineError> {
        self.counters().degraded_requests.fetch_add(1, Relaxed);
        self.sync_backing_degraded("sync (FLUSH)")
    }

    fn sync_backing_degraded(&self, op: &str) -> Result<(), EngineError> {
        self.vol().backing.sync().map_err(|e| self.fail(self.backing_io_error(op, 0, 0, e)))
    }

    /// After `[lo, hi)` reached backing (under its chunk's stripe locks): the listed blocks
    /// it covers whole leave the list, once backing is synced (so a crash cannot bring the
    /// older bytes back unlisted).
    fn unlist_covered(&self, lo: u64, hi: u64) -> Result<(), EngineError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let whole = lo.div_ceil(bs)..hi / bs;
        if whole.start >= whole.end
            || inner.health.first_lost(self.vol().id, whole.clone()).is_none()
        {
            return Ok(());
        }
        self.sync_backing_degraded("sync (lost blocks rewritten)")?;
        let n = inner.health.lost_mut(|l| l.remove_range(self.vol().id, whole));
        if n > 0 {
            // Best effort: a record still naming them only refuses reads of good bytes.
            let _ = write_record(inner);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "degraded_tests.rs"]
mod tests;
