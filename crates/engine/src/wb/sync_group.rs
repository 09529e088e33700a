//! A sync group: flusher batches written to backing one after the other and synced once
//! (thesis 4.4: the flusher writes in batches; a batch is clean only once backing holds it
//! durably). A backing sync costs about as much for one batch as for many, so when someone
//! waits for the flusher (a FLUSH, `ember ctl flush`, a switch's drain, a clean stop) its
//! batches share one sync, up to [`GROUP_BYTES`]; background cleaning, paced batch by batch,
//! syncs after each.
//!
//! - No version of the group is marked clean before the sync returned: a power cut between
//!   the writes and the sync leaves every one of them dirty, and a failed write or sync
//!   leaves every one of them dirty (the flusher retries them).
//! - A group holds versions of one epoch: the flusher's batches come from the oldest dirty
//!   epoch only (`CacheState::flush_batch`), which stays the oldest while any of its versions
//!   is in flight; so ordered write-back's epoch order is kept, as with one sync a batch.
//! - Its versions stay marked in flight until the sync returned: a request that writes one
//!   of their blocks to backing directly waits for that ([`super::flusher::wait_not_flushing`]),
//!   so the group is ended whenever the flusher would otherwise wait (a stripe lock taken, no
//!   batch ready, a batch all fenced, background cleaning next).

use super::flush_batch::{abandon, finish_live, sync_volumes};
use crate::core::Inner;
use std::io;

/// Bytes of batches that share one backing sync (at least one batch).
pub(crate) const GROUP_BYTES: u64 = 8 << 20;

/// Batches written to backing, not yet synced, their versions still marked in flight.
#[derive(Default)]
pub(crate) struct SyncGroup {
    /// Each batch's versions, (epoch, key, cache block), in the order written.
    batches: Vec<Vec<(u64, u64, u32)>>,
    /// The volumes they touched, ascending.
    touched: Vec<u32>,
    /// Versions in the group.
    blocks: u64,
}

impl SyncGroup {
    /// No batch waits for the sync.
    pub(crate) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// A batch of `live` versions was written to backing (volumes `touched`), not synced.
    pub(crate) fn push(&mut self, live: Vec<(u64, u64, u32)>, touched: &[u32]) {
        self.blocks += live.len() as u64;
        self.batches.push(live);
        self.touched.extend_from_slice(touched);
        self.touched.sort_unstable();
        self.touched.dedup();
    }

    /// Whether the group holds [`GROUP_BYTES`] or more, at `block_size` bytes a version.
    pub(crate) fn is_full(&self, block_size: u64) -> bool {
        self.blocks.saturating_mul(block_size) >= GROUP_BYTES
    }

    /// Sync the backing the group touched, then mark its versions clean; if the sync fails,
    /// leave every one of them dirty. Either way the marks go and the group is empty after.
    /// Returns how many versions were written (0 for an empty group).
    pub(crate) fn end(&mut self, inner: &Inner) -> io::Result<usize> {
        if self.is_empty() {
            return Ok(0);
        }
        let synced = sync_volumes(inner, &self.touched);
        self.finish(inner, synced)
    }

    /// A write of the group's latest batch, or of the batch that was to join it, failed
    /// (`e`): every version of the group stays dirty; the group is empty after. Returns the
    /// error.
    pub(crate) fn fail(&mut self, inner: &Inner, e: io::Error) -> io::Error {
        let kind = e.kind();
        let text = e.to_string();
        let _ = self.finish(inner, Err(e));
        io::Error::new(kind, text)
    }

    /// The flusher stops: the versions stay dirty, their marks go.
    pub(crate) fn abandon(&mut self, inner: &Inner) {
        for live in self.batches.drain(..) {
            abandon(inner, &live);
        }
        self.touched.clear();
        self.blocks = 0;
    }

    /// Phase 3 of every batch (`flush_batch.rs`) with `result`.
    fn finish(&mut self, inner: &Inner, result: io::Result<()>) -> io::Result<usize> {
        let mut total = 0;
        let mut failed = None;
        for live in self.batches.drain(..) {
            let r = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            match finish_live(inner, live, r) {
                Ok(n) => total += n,
                Err(e) => failed = Some(e),
            }
        }
        self.touched.clear();
        self.blocks = 0;
        match failed {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }
}
