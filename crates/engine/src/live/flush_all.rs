//! A flush on demand (`Engine::flush_all`, `ember ctl flush`): write back every block dirty
//! at the call and return once all of it is durable on backing.
//!
//! The call closes the current epoch (writes after it join the next one, so it waits only
//! for what was dirty at the call, however busy the volume is), asks the flusher for every
//! epoch up to the closed one whatever min_dirty says (`flush_target`: the flusher's
//! *waited-for* demand, which a rate cap on background cleaning never slows,
//! `wb/flusher.rs`), and waits until no dirty version of those epochs is left, then syncs
//! backing (while the device names a persisted dirty map, by committing it as a FLUSH
//! does: recovery must not replay a version older than what the call put on backing).
//! While it runs, a rewrite keeps the version of a closed epoch under every
//! write-back policy (`flush_alls`, read by `CacheState::commit_dirty`), as write-back flush
//! always does: so each block dirty at the call reaches backing itself, or backing holds a
//! newer copy (a write-through fallback, a TRIM), never only a newer copy still dirty. A
//! FLUSH from a client is untouched: it keeps its policy's own semantics.

use super::progress::{wait_written_back, Progress};
use crate::core::Inner;
use crate::error::EngineError;
use crate::wb::barrier::barrier_persist;
use serde::Serialize;
use std::time::{Duration, Instant};

/// What a flush on demand did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlushReport {
    /// Dirty block versions there were at the call, all now on backing (or superseded there).
    pub blocks: u64,
    /// How long it took.
    pub took: Duration,
}

/// The call's mark on `flush_alls`, taken back however the call ends.
struct Counting<'a>(&'a Inner);

impl Drop for Counting<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock();
        st.flush_alls -= 1;
    }
}

/// See the module comment. The caller has started the flusher if blocks are dirty.
pub(crate) fn flush_all(
    inner: &Inner,
    progress: &mut dyn FnMut(Progress),
) -> Result<FlushReport, EngineError> {
    let start = Instant::now();
    if inner.stripes.is_poisoned() {
        return Err(EngineError::Io(crate::stripes::poisoned_error()));
    }
    let persisting = inner.policy.load().persisting();
    let (upto, total) = {
        let mut st = inner.state.lock();
        if st.closing || st.stop {
            return Err(EngineError::ShutDown);
        }
        st.flush_alls += 1;
        let upto = st.current_epoch;
        if st.dirty_upto(upto) > 0 {
            st.advance_epoch(persisting);
        }
        st.flush_target = st.flush_target.max(upto);
        inner.cv.notify_all();
        (upto, st.dirty_upto(upto))
    };
    let _counting = Counting(inner);
    wait_written_back(inner, "flush", total, |st| Some(st.dirty_upto(upto)), progress)?;
    // The flusher synced what it wrote; write-through fallbacks and discards that superseded
    // dirty versions meanwhile are synced here. While the device names a persisted dirty
    // map (write-back persist, or its drain), that map is committed too, as a FLUSH commits
    // it: it may still name an older version of a block whose newer one this call put on
    // backing, and recovery would replay the older one over it.
    barrier_persist(inner).map_err(EngineError::Io)?;
    Ok(FlushReport { blocks: total, took: start.elapsed() })
}
