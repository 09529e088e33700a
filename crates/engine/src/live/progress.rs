//! The progress of an operation that waits for dirty blocks to reach backing (a flush on
//! demand, a write-policy switch's drain), and the one wait both use: on the engine's
//! condition variable, with every exit a wait in the engine has (a flusher error since the
//! wait began, a shutdown, a poisoned engine), reporting progress at least every 100 ms.

use crate::core::Inner;
use crate::error::EngineError;
use crate::state::CacheState;
use crate::wb::flusher::given_up;
use parking_lot::MutexGuard;
use serde::Serialize;
use std::time::{Duration, Instant};

/// How far an operation that writes dirty blocks back has come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// Dirty block versions written back (or superseded on backing) since the call.
    pub done: u64,
    /// Dirty block versions the call has to write back, counted when it began.
    pub total: u64,
}

/// How often a waiting operation reports its progress.
const EVERY: Duration = Duration::from_millis(100);

/// Wait, on the state lock, until `left` says nothing is left (`Some(0)`, or `None`: the
/// operation ended another way), reporting `Progress { done: total - left, total }` through
/// `progress` (with the state lock released) at the start, at least every 100 ms, and at the
/// end. Fails with `what` and the flusher's error when a flusher batch fails after the wait
/// began (the dirty blocks stay dirty and are retried), with [`EngineError::ShutDown`] when a
/// shutdown begins, when the engine is poisoned, and when the cache device is given up (the
/// flusher writes nothing more back).
pub(crate) fn wait_written_back(
    inner: &Inner,
    what: &str,
    total: u64,
    left: impl Fn(&CacheState) -> Option<u64>,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), EngineError> {
    let mut st = inner.state.lock();
    let gen0 = st.flush_error_gen;
    let mut last: Option<Instant> = None;
    loop {
        let remaining = left(&st).unwrap_or(0);
        let done = remaining == 0;
        if done || last.is_none_or(|t| t.elapsed() >= EVERY) {
            let p = Progress { done: total.saturating_sub(remaining), total };
            MutexGuard::unlocked(&mut st, || progress(p));
            last = Some(Instant::now());
            if done {
                return Ok(());
            }
            // The lock was released meanwhile: look again.
            continue;
        }
        if st.flush_error_gen != gen0 {
            return Err(EngineError::Io(std::io::Error::other(format!(
                "{what}: writing dirty blocks to backing failed (they stay dirty and are \
                 retried): {}",
                st.last_flush_error
            ))));
        }
        if st.closing || st.stop {
            return Err(EngineError::ShutDown);
        }
        if inner.stripes.is_poisoned() {
            return Err(EngineError::Io(crate::stripes::poisoned_error()));
        }
        if let Some(e) = given_up(inner) {
            return Err(EngineError::Io(e));
        }
        inner.cv.wait_for(&mut st, EVERY);
    }
}
