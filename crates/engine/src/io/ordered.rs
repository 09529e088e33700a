//! Ordered write-back (Koller et al., FAST 2013; Qin's thesis 2.2 and table 3.1): dirty
//! blocks reach backing in epoch order, so after a crash, or the loss of the cache device,
//! backing holds every write of the epochs before some epoch E and a subset of E's writes.
//! A FLUSH only closes the epoch (`wb::barrier::barrier_ordered`); FUA is ignored.
//!
//! The flusher already writes the oldest epoch first and syncs backing before it marks a
//! batch clean. What this file adds is that nothing else reaches backing out of order:
//!
//! - a write never falls back to write-through when max_dirty is reached or no block is
//!   free: it waits for the flusher *before* it takes any stripe lock
//!   ([`Volume::reserve_ordered`]), holding nothing the flusher needs;
//! - what must go to backing directly (a write miss the sieve refuses, the volume's partial
//!   last block, a chunk larger than max_dirty, TRIM and WRITE_ZEROES) takes a *hold* on
//!   the current epoch ([`Volume::hold_ordered`]): it waits, holding no stripe lock, until
//!   every older epoch reached backing, does its backing I/O and syncs backing; meanwhile the
//!   flusher writes no version of a later epoch. Such requests run one at a time
//!   (`Inner::ordered_direct`), so two of them never wait for each other.

use super::back::RunTarget;
use super::ctx::Volume;
use crate::core::Inner;
use crate::error::EngineError;
use crate::wb::flusher::given_up;
use crate::write_policy::Policy;
use parking_lot::MutexGuard;
use std::time::Duration;

/// A hold on an epoch (see the module comment); released on drop.
pub(super) struct Hold<'a> {
    inner: &'a Inner,
    /// The held epoch.
    pub epoch: u64,
    _direct: MutexGuard<'a, ()>,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let mut st = self.inner.state.lock();
        st.release_hold(self.epoch);
        self.inner.cv.notify_all();
    }
}

impl Volume {
    /// Hold the current epoch and wait, holding no stripe lock, until every older epoch
    /// reached backing. The wait ends with an error when a flusher batch fails meanwhile,
    /// when a shutdown begins, when a panic poisoned the engine, or when the cache device
    /// is given up (the flusher writes nothing more back).
    pub(super) fn hold_ordered(&self) -> Result<Hold<'_>, EngineError> {
        let inner = &*self.inner;
        let direct = inner.ordered_direct.lock();
        let epoch = {
            let mut st = inner.state.lock();
            let e = st.hold();
            st.flush_target = st.flush_target.max(e.saturating_sub(1));
            inner.cv.notify_all();
            e
        };
        let hold = Hold { inner, epoch, _direct: direct };
        let failure = {
            let mut st = inner.state.lock();
            let gen0 = st.flush_error_gen;
            loop {
                if st.older_epochs_done(epoch) {
                    break None;
                }
                if st.flush_error_gen != gen0 {
                    break Some(Err(std::io::Error::other(format!(
                        "ordered write-back: the epochs before this request could not be \
                         written to backing (they stay dirty and are retried): {}",
                        st.last_flush_error
                    ))));
                }
                if st.closing || st.stop {
                    break Some(Ok(()));
                }
                if inner.stripes.is_poisoned() {
                    break Some(Err(crate::stripes::poisoned_error()));
                }
                if let Some(e) = given_up(inner) {
                    break Some(Err(e));
                }
                inner.cv.wait_for(&mut st, Duration::from_millis(100));
            }
        };
        match failure {
            None => Ok(hold),
            Some(Ok(())) => Err(EngineError::ShutDown),
            Some(Err(e)) => Err(self.fail(e)),
        }
    }

    /// Reserve `n` cache blocks for a write of the chunk's blocks from `first` (pinned,
    /// unmapped), waiting for the flusher, holding no lock, while max_dirty is reached or no
    /// block can be freed. A clean block ejected for one of them goes down as a DEMOTE (client
    /// tier) before the blocks are returned, as in `io/back.rs`. The same exits as
    /// [`Volume::hold_ordered`].
    pub(super) fn reserve_ordered(&self, first: u64, n: usize) -> Result<Vec<u32>, EngineError> {
        let inner = &*self.inner;
        let vol = self.vol().id;
        let mut st = inner.state.lock();
        let gen0 = st.flush_error_gen;
        loop {
            if st.dirty_len() == 0 || st.dirty_len() + n <= inner.limits.get().max_dirty {
                let mut got = Vec::with_capacity(n);
                let demotes = self.reserve_new_versions(&mut st, (vol, first, n), &mut got);
                inner.count_evictions(&mut st);
                if got.len() == n {
                    drop(st);
                    for (v, c) in demotes {
                        self.send_demote(v, c);
                    }
                    return Ok(got);
                }
                for c in got {
                    st.unpin(c);
                }
            }
            let failure = if st.flush_error_gen != gen0 {
                Some(std::io::Error::other(format!(
                    "ordered write-back: a write waits for dirty blocks to reach backing and \
                     writing them failed (they stay dirty and are retried): {}",
                    st.last_flush_error
                )))
            } else if inner.stripes.is_poisoned() {
                Some(crate::stripes::poisoned_error())
            } else {
                given_up(inner)
            };
            if let Some(e) = failure {
                drop(st);
                return Err(self.fail(e));
            }
            if st.closing || st.stop {
                return Err(EngineError::ShutDown);
            }
            // The flusher may idle at min_dirty: ask it for everything written so far.
            st.flush_target = st.flush_target.max(st.current_epoch);
            inner.cv.notify_all();
            inner.cv.wait_for(&mut st, Duration::from_millis(100));
        }
    }

    /// A run of a write that must go to backing directly (`around`: the sieve refused its
    /// misses; otherwise the volume's partial last block or a chunk larger than max_dirty):
    /// with a hold on the current epoch, once every older epoch reached backing, under its
    /// stripe locks, written through (merged with a cached version of a partial block) and
    /// synced, then every cached version of its blocks dropped.
    pub(super) fn write_direct_ordered(
        &self,
        first: u64,
        n: u64,
        start: u64,
        data: &[u8],
        around: bool,
        policy: Policy,
    ) -> Result<(), EngineError> {
        let _hold = self.hold_ordered()?;
        let vol = self.vol().id;
        // No discard's fence can stand over the run: discards hold `ordered_direct` too.
        let _held = self.inner.stripes.lock(vol, first..first + n).map_err(|e| self.fail(e))?;
        self.write_run_wb(first, n, start, data, true, around, RunTarget::Backing, policy)
    }

    /// Write-through or write-around leaving ordered write-back: before this request goes
    /// to backing, wait, holding no lock, until the switch's drain is over (every epoch of
    /// the former policy reached backing and no request holds one), so backing still
    /// receives ordered write-back's epochs in order. The same exits as
    /// [`Volume::hold_ordered`].
    pub(super) fn wait_ordered_drain(&self) -> Result<(), EngineError> {
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        let gen0 = st.flush_error_gen;
        while !st.drain_done() {
            if st.flush_error_gen != gen0 {
                let e = std::io::Error::other(format!(
                    "leaving ordered-write-back: its epochs could not be written to backing \
                     before this request (they stay dirty and are retried): {}",
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
            if let Some(e) = given_up(inner) {
                drop(st);
                return Err(self.fail(e));
            }
            inner.cv.wait_for(&mut st, Duration::from_millis(100));
        }
        Ok(())
    }
}
