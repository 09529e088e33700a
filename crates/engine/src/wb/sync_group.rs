//! A sync group: flusher batches written to backing one after the other and synced once
//! (thesis 4.4: the flusher writes in batches; a batch is clean only once backing holds it
//! durably). A backing sync costs about as much for one batch as for many, so when someone
//! waits for the flusher (a FLUSH, `ember ctl flush`, a switch's drain, a clean stop) its
//! batches share one sync, up to [`GROUP_BYTES`]; background cleaning, paced batch by batch,
//! syncs after each.
//!
//! A full group's sync runs on a thread of its own while the flusher reads the next group's
//! batches from the cache device and writes them to backing: the backing medium takes the
//! one group while the cache device is read for the other, as the thesis' flusher keeps its
//! asynchronous I/O in flight. At most one group syncs so: the next one to fill waits for
//! it first.
//!
//! - No version of a group is marked clean before the sync that covers it returned (a sync
//!   covers the writes completed before it began): a power cut between the writes and the
//!   sync leaves every one of them dirty, and a failed write or sync leaves every one of them
//!   dirty (the flusher retries them).
//! - A failed sync also leaves the group written meanwhile dirty, whatever its own sync
//!   would say: after a failed sync a file system may have dropped the pages it could not
//!   write, and a later sync would not tell.
//! - A group holds versions of one epoch: the flusher's batches come from the oldest dirty
//!   epoch only (`CacheState::flush_batch`), which stays the oldest while any of its versions
//!   is in flight, the syncing group's included; so ordered write-back's epoch order is kept,
//!   and a batch of another epoch is never written before the syncing group's sync returned
//!   ([`SyncGroup::before_write`] checks it).
//! - Its versions stay marked in flight until its sync returned and they were marked: a
//!   request that writes one of their blocks to backing directly waits for that
//!   ([`super::flusher::wait_not_flushing`]), so the groups are ended whenever the flusher
//!   would otherwise wait (a stripe lock taken, no batch ready, a batch all fenced,
//!   background cleaning next), and a syncing group is marked as soon as its sync returned.

use super::flush_batch::{abandon, finish_live, sync_volumes};
use crate::core::Inner;
use crate::device::io_context;
use std::io;
use std::thread::JoinHandle;

/// Bytes of batches that share one backing sync (at least one batch). Each sync also
/// flushes the backing device's write cache, a cost paid per group, so fewer larger groups
/// flush faster. The price: a request that writes a block of a syncing group to backing
/// directly waits for that group's sync, up to one group's write time.
pub(crate) const GROUP_BYTES: u64 = 32 << 20;

/// A version a batch marked in flight: (epoch, key, cache block).
type Version = (u64, u64, u32);

/// Batches written to backing, not yet synced, their versions still marked in flight; and
/// the full group before them, its sync under way.
#[derive(Default)]
pub(crate) struct SyncGroup {
    /// Each batch's versions, in the order written.
    batches: Vec<Vec<Version>>,
    /// The volumes they touched, ascending.
    touched: Vec<u32>,
    /// Versions in the group.
    blocks: u64,
    /// The group before, full, its sync on a thread of its own.
    syncing: Option<Syncing>,
}

/// A full group whose backing sync runs on a thread of its own.
struct Syncing {
    /// Its batches' versions.
    batches: Vec<Vec<Version>>,
    /// The epoch of its versions.
    epoch: u64,
    /// The sync of every volume it touched.
    sync: JoinHandle<io::Result<()>>,
}

impl SyncGroup {
    /// No version waits for a sync (neither in the open group nor in a syncing one).
    pub(crate) fn is_empty(&self) -> bool {
        self.batches.is_empty() && self.syncing.is_none()
    }

    /// A batch of `live` versions was written to backing (volumes `touched`), not synced.
    pub(crate) fn push(&mut self, live: Vec<Version>, touched: &[u32]) {
        self.blocks += live.len() as u64;
        self.batches.push(live);
        self.touched.extend_from_slice(touched);
        self.touched.sort_unstable();
        self.touched.dedup();
    }

    /// Whether the open group holds [`GROUP_BYTES`] or more, at `block_size` bytes a version.
    pub(crate) fn is_full(&self, block_size: u64) -> bool {
        self.blocks.saturating_mul(block_size) >= GROUP_BYTES
    }

    /// Before a batch of `epoch` is written: if the syncing group holds another epoch, wait
    /// for its sync and mark it (see the module comment); if that sync failed, the open
    /// group fails too. Returns how many versions were marked clean, or the error.
    pub(crate) fn before_write(&mut self, inner: &Inner, epoch: u64) -> io::Result<usize> {
        match &self.syncing {
            Some(s) if s.epoch != epoch => self.settle_or_fail(inner),
            _ => Ok(0),
        }
    }

    /// After a batch joined the open group: if the syncing group's sync has returned, mark
    /// its versions now (their blocks' requests may wait for the marks); if it failed, the
    /// open group fails too. Returns how many versions were marked clean, or the error.
    pub(crate) fn poll(&mut self, inner: &Inner) -> io::Result<usize> {
        match &self.syncing {
            Some(s) if s.sync.is_finished() => self.settle_or_fail(inner),
            _ => Ok(0),
        }
    }

    /// The open group is full: wait for the syncing group (if any) and mark it, then start
    /// the open group's sync on a thread of its own; the next batches form a new group.
    /// Returns how many versions were marked clean. If the syncing group's sync failed, the
    /// open group stays dirty too, and the error is returned.
    pub(crate) fn rotate(&mut self, inner: &Inner) -> io::Result<usize> {
        let before = self.settle_or_fail(inner)?;
        let Some(epoch) = self.batches.first().and_then(|b| b.first()).map(|v| v.0) else {
            return Ok(before);
        };
        let volumes: Vec<_> = self.touched.iter().filter_map(|&v| inner.volume_by_id(v)).collect();
        let spawned =
            std::thread::Builder::new().name("ember-flush-sync".into()).spawn(move || {
                volumes.iter().try_for_each(|vol| {
                    vol.backing
                        .sync()
                        .map_err(|e| io_context(vol.backing.as_ref(), "flusher sync", 0, 0, e))
                })
            });
        match spawned {
            Ok(sync) => {
                let batches = std::mem::take(&mut self.batches);
                self.touched.clear();
                self.blocks = 0;
                self.syncing = Some(Syncing { batches, epoch, sync });
                Ok(before)
            }
            // No thread: synced here.
            Err(_) => self.end(inner).map(|n| n + before),
        }
    }

    /// Sync the backing the open group touched, then mark its versions clean; if the sync
    /// fails, leave every one of them dirty. The syncing group is waited for and marked
    /// first (if its sync failed, the open group stays dirty too). Either way the marks go
    /// and both are empty after. Returns how many versions were marked clean (0 for an
    /// empty group).
    pub(crate) fn end(&mut self, inner: &Inner) -> io::Result<usize> {
        let before = self.settle_or_fail(inner)?;
        if self.batches.is_empty() {
            return Ok(before);
        }
        let synced = sync_volumes(inner, &self.touched);
        self.finish(inner, synced).map(|n| n + before)
    }

    /// A write of the open group's latest batch, or of the batch that was to join it, failed
    /// (`e`): every version of the open group stays dirty; the syncing group is waited for
    /// and marked by its own sync's outcome. Both are empty after. Returns the error.
    pub(crate) fn fail(&mut self, inner: &Inner, e: io::Error) -> io::Error {
        let _ = self.settle(inner);
        let kind = e.kind();
        let text = e.to_string();
        let _ = self.finish(inner, Err(e));
        io::Error::new(kind, text)
    }

    /// The flusher stops: the versions stay dirty, their marks go (a sync under way is
    /// waited for first: its thread holds no mark, but it must not outlive the stop).
    pub(crate) fn abandon(&mut self, inner: &Inner) {
        if let Some(s) = self.syncing.take() {
            let _ = s.sync.join();
            for live in &s.batches {
                abandon(inner, live);
            }
        }
        for live in self.batches.drain(..) {
            abandon(inner, &live);
        }
        self.touched.clear();
        self.blocks = 0;
    }

    /// [`SyncGroup::settle`]; if the sync failed, the open group fails with it.
    fn settle_or_fail(&mut self, inner: &Inner) -> io::Result<usize> {
        self.settle(inner).map_err(|e| self.fail(inner, e))
    }

    /// Wait for the syncing group's sync, if one runs, and mark its versions by its outcome.
    /// Returns how many were marked clean, or the sync's error.
    fn settle(&mut self, inner: &Inner) -> io::Result<usize> {
        let Some(s) = self.syncing.take() else { return Ok(0) };
        let result = s
            .sync
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the flusher's sync thread panicked")));
        finish_all(inner, s.batches, result)
    }

    /// Phase 3 of every batch of the open group (`flush_batch.rs`) with `result`.
    fn finish(&mut self, inner: &Inner, result: io::Result<()>) -> io::Result<usize> {
        let batches = std::mem::take(&mut self.batches);
        self.touched.clear();
        self.blocks = 0;
        finish_all(inner, batches, result)
    }
}

/// Phase 3 of every batch of `batches` (`flush_batch.rs`) with `result`.
fn finish_all(
    inner: &Inner,
    batches: Vec<Vec<Version>>,
    result: io::Result<()>,
) -> io::Result<usize> {
    let mut total = 0;
    let mut failed = None;
    for live in batches {
        let r = match &result {
            Ok(()) => Ok(()),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        };
        match finish_live(inner, live, r) {
            Ok(n) => total += n,
            Err(e) => failed = Some(e),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(total),
    }
}
