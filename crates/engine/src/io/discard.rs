//! TRIM and WRITE_ZEROES: every overlapped block is invalidated (under write-back, a dirty
//! partly covered edge block is written back first) and the request passes down to backing.

use super::ctx::Volume;
use crate::error::EngineError;
use crate::layout::{block_key, key_block, key_volume};
use std::io;
use std::sync::atomic::Ordering::Relaxed;

impl Volume {
    /// Discard `len` bytes at `offset` (cached copies are dropped first); with `fua`, durable
    /// before returning.
    pub fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), EngineError> {
        self.discard(offset, len, fua, false)
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
        self.discard(offset, len, fua, true)
    }

    /// TRIM or WRITE_ZEROES under a write-back policy: a partly covered block with a dirty
    /// version is written back first (its other bytes must survive), then the request goes
    /// down, then every version of the covered blocks is dropped.
    pub(super) fn discard_wb(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        zeroes: bool,
    ) -> Result<(), EngineError> {
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
            let in_range = |k: u64| key_volume(k) == id && (first..last).contains(&key_block(k));
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
    pub(super) fn discard(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        zeroes: bool,
    ) -> Result<(), EngineError> {
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
                    key_volume(k) == id && (first..last).contains(&key_block(k))
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
