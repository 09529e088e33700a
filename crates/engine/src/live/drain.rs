//! The end of a write-policy switch's drain (`switch.rs` begins it): once no dirty version of
//! a drained epoch is left and no request holds one, the switch is recorded as complete and
//! the policy word drops the former policy.
//!
//! - Out of write-back persist: backing is synced (the fallbacks and discards that superseded
//!   drained versions are durable), then the superblock says the new policy, and only then is
//!   the persisted dirty map forgotten (its blocks may be reused) and the flusher let go of
//!   the new policy's epochs. A crash before the superblock is durable recovers the persisted
//!   map, whose versions are all on backing or superseded there by data a FLUSH since then
//!   committed away; a crash after it starts cold over a backing that holds everything.
//! - Out of another write-back policy: the superblock drops the drain (it is only a record:
//!   those policies start cold after a crash either way).
//!
//! The drain ends on a thread of its own (`finisher`), so it completes even when the caller
//! stopped waiting (an error, or the control command's caller gone); the caller waits for it
//! with `wait`. A failure to end it (backing's sync, the superblock write) counts as a
//! flusher error (waiters see it) and is retried every 100 ms.

use super::progress::{wait_written_back, Progress};
use super::switch::record;
use crate::core::Inner;
use crate::error::EngineError;
use crate::layout::WriteMode;
use crate::state::Drain;
use crate::wb::flusher::sync_all_backing;
use crate::write_policy::Policy;
use std::sync::Arc;
use std::time::Duration;

/// End the drain if it is over. `Ok(true)`: no drain runs any more; `Ok(false)`: it is not
/// over yet.
pub(crate) fn finish(inner: &Inner) -> Result<bool, EngineError> {
    let _switch = inner.switch.lock();
    let p = inner.policy.load();
    let Some(from) = p.drain else { return Ok(true) };
    let mut cur = inner.persist.lock();
    {
        let st = inner.state.lock();
        if !matches!(st.switch_drain, Drain::Upto(_)) || !st.drain_done() {
            return Ok(false);
        }
    }
    if from == WriteMode::WriteBackPersist {
        sync_all_backing(inner, "sync (end of a switch)").map_err(EngineError::Io)?;
        record(inner, p.mode, None, None)?;
        cur.active = false;
        cur.need_checkpoint = false;
        let mut st = inner.state.lock();
        st.persist_off();
        st.end_drain();
    } else {
        record(inner, p.mode, None, None)?;
        inner.state.lock().end_drain();
    }
    inner.policy.store_same_phase(Policy::plain(p.mode));
    drop(cur);
    let _st = inner.state.lock();
    inner.cv.notify_all();
    Ok(true)
}

/// The drain's thread: ends the drain once it is over (see the module comment), then
/// exits; exits at once when the engine stops (not at the start of a clean stop, whose own
/// drain may need this one to end first).
pub(crate) fn finisher(inner: Arc<Inner>) {
    loop {
        {
            let mut st = inner.state.lock();
            loop {
                if st.stop || st.switch_drain == Drain::None {
                    return;
                }
                if matches!(st.switch_drain, Drain::Upto(_)) && st.drain_done() {
                    break;
                }
                inner.cv.wait_for(&mut st, Duration::from_millis(100));
            }
        }
        match finish(&inner) {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => {
                let mut st = inner.state.lock();
                st.flush_error_gen += 1;
                st.last_flush_error = format!("ending the switch of write policy: {e}");
                inner.cv.notify_all();
                if !st.stop {
                    inner.cv.wait_for(&mut st, Duration::from_millis(100));
                }
            }
        }
    }
}

/// Wait until the drain of the switch to `target` ended, reporting progress (see
/// `progress.rs` for the exits). `total`: the dirty versions it had to write back.
pub(crate) fn wait(
    inner: &Inner,
    target: WriteMode,
    total: u64,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), EngineError> {
    let what = format!("switch to {target}");
    wait_written_back(
        inner,
        &what,
        total,
        // Until the word drops the drain, at least one step is left (its end).
        |st| inner.policy.load().drain.map(|_| st.drain_left().max(1)),
        progress,
    )
}
