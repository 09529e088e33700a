//! The flusher (thesis 4.1, 4.4): a thread that writes dirty blocks to backing, oldest epoch
//! first, and marks them clean once backing has them durably; also the synchronous flushes
//! of open (recovered dirty blocks under another policy) and of a clean stop.

use super::flush_batch::{abandon, finish, flush_batch, prepare, write, Prepared};
use super::pace::{batch_blocks, Load, Pacer};
use crate::cleaning_cell::CleaningState;
use crate::core::{Inner, Limits};
use crate::device::io_context;
use crate::state::CacheState;
use parking_lot::MutexGuard;
use std::io;
use std::time::{Duration, Instant};

/// Why the flusher writes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Demand {
    /// Someone waits for it: a FLUSH or an ordered write-back request (`flush_target`), a
    /// flush on demand (`Engine::flush_all`), a policy switch's drain, a clean stop (`drain`).
    /// Never slowed down: no cap, no pace.
    Waited,
    /// Background cleaning: more dirty blocks than min_dirty, nobody waiting. Paced by the
    /// cleaning settings (`cleaning.rs`).
    Background,
}

/// What the flusher has to do now, if anything.
fn demand(st: &CacheState, lim: &Limits) -> Option<Demand> {
    if st.drain || st.oldest_dirty_epoch().is_some_and(|e| e <= st.flush_target) {
        Some(Demand::Waited)
    } else if st.dirty_len() > lim.min_dirty {
        Some(Demand::Background)
    } else {
        None
    }
}

/// Longest wait of an idle flusher before it looks again.
const REST: Duration = Duration::from_millis(200);

/// Foreground requests served so far, all volumes (the idle policy watches it grow).
fn requests_seen(inner: &Inner) -> u64 {
    inner
        .counters
        .iter()
        .map(|c| {
            let s = c.snapshot();
            s.read_requests + s.write_requests + s.flushes + s.trims + s.write_zeroes
        })
        .sum()
}

/// The next background batch, paced (`pace.rs`): the batch, or how long to wait before
/// asking again. What someone waits for ([`Demand::Waited`]) never comes here.
fn background(
    inner: &Inner,
    st: &CacheState,
    lim: &Limits,
    pacer: &mut Pacer,
    now_ns: u64,
) -> Result<Vec<(u64, u64, u32)>, Duration> {
    let c = inner.cleaning.get();
    let bs = inner.block_size();
    // The foreground is watched only under the idle policy.
    let watch = !c.idle.is_zero();
    let load = Load {
        requests: if watch { requests_seen(inner) } else { 0 },
        busy: watch && inner.gate.active() > 0,
        dirty: st.dirty_len() as f64 * bs as f64,
        block_size: bs,
    };
    let (state, rate) = pacer.rate(now_ns, &load, &c);
    inner.cleaning.report(state, rate);
    let batch = st.flush_batch(batch_blocks(rate, bs, lim.batch), lim.lru);
    if batch.is_empty() {
        return Err(REST);
    }
    match pacer.admit(now_ns, batch.len() as u64 * bs, rate) {
        d if d.is_zero() => Ok(batch),
        d => Err(Pacer::tick(d, &c)),
    }
}

/// What the flusher does next.
enum Next {
    /// Write back this batch.
    Batch(Vec<(u64, u64, u32)>),
    /// Nothing now (asked not to wait).
    Nothing,
    /// The engine stops.
    Stop,
}

/// The flusher's next batch: what someone waits for first, then paced background cleaning.
/// With `wait`, waits (on the condition variable) until there is one or the engine stops;
/// without, looks once. A batch holds no version the flusher has in flight: the one it
/// reads while the previous is written is of the same epoch (`CacheState::flush_batch`).
fn next(inner: &Inner, pacer: &mut Pacer, origin: Instant, wait: bool) -> Next {
    let mut st = inner.state.lock();
    loop {
        if st.stop {
            return Next::Stop;
        }
        let lim = inner.limits.get();
        // A degraded cache's dirty blocks are lost with its device: nothing to flush.
        let pause = match demand(&st, &lim).filter(|_| inner.health.is_healthy()) {
            Some(Demand::Waited) => {
                let b = st.flush_batch(lim.batch, lim.lru);
                if !b.is_empty() {
                    return Next::Batch(b);
                }
                REST
            }
            Some(Demand::Background) => {
                let now = origin.elapsed().as_nanos() as u64;
                match background(inner, &st, &lim, pacer, now) {
                    Ok(b) => return Next::Batch(b),
                    Err(pause) => pause,
                }
            }
            None => {
                inner.cleaning.report(CleaningState::Resting, None);
                REST
            }
        };
        if !wait {
            return Next::Nothing;
        }
        inner.cv.wait_for(&mut st, pause);
    }
}

/// One step: write `pending` (read at the previous step) to backing, sync it and mark it
/// clean, then read `batch` from the cache device. Returns the outcome of the batch written,
/// if one was, and the batch read, to be written at the next step. A failed write drops the
/// batch read ([`abandon`]): its versions stay dirty and are read again after the back-off,
/// so no batch reaches backing after an older one failed. The steps run in turn: reading
/// the next batch while the previous one is written and synced makes the two contend where
/// the cache device and backing share a disk.
fn step(
    inner: &Inner,
    pending: Option<Prepared>,
    batch: Option<Vec<(u64, u64, u32)>>,
) -> (Option<io::Result<usize>>, Option<Prepared>) {
    match (pending, batch) {
        (None, None) => (None, None),
        (None, Some(b)) => match prepare(inner, &b) {
            Ok(q) => (None, Some(q)),
            Err(e) => (Some(Err(e)), None),
        },
        (Some(p), None) => {
            let r = write(inner, &p);
            (Some(finish(inner, p, r)), None)
        }
        (Some(p), Some(b)) => {
            let r = write(inner, &p);
            let outcome = finish(inner, p, r);
            let q = prepare(inner, &b);
            match q {
                Ok(q) if outcome.is_ok() => (Some(outcome), Some(q)),
                Ok(q) => {
                    abandon(inner, q);
                    (Some(outcome), None)
                }
                Err(e) => (Some(outcome.and(Err(e))), None),
            }
        }
    }
}

/// The flusher thread: writes dirty blocks to backing, oldest epoch first, ascending block
/// order within it, while there are more than min_dirty or a FLUSH, a flush on demand, a
/// policy switch or a clean stop waits. The limits and the cleaning settings are read afresh
/// for every batch (they change while serving). Background batches are paced (`pace.rs`);
/// a wait for the pace ends at once when someone waits for the flusher (the condition
/// variable wakes it and the demand is [`Demand::Waited`]).
///
/// Batches (`flush_batch.rs`) are written one after the other, each after the previous one's
/// sync, and each is marked clean only once its sync returned.
pub(crate) fn flusher(inner: std::sync::Arc<Inner>) {
    let mut pacer = Pacer::default();
    let origin = Instant::now();
    let mut pending: Option<Prepared> = None;
    loop {
        let batch = match next(&inner, &mut pacer, origin, pending.is_none()) {
            Next::Batch(b) => Some(b),
            Next::Nothing => None,
            Next::Stop => {
                if let Some(p) = pending.take() {
                    abandon(&inner, p);
                }
                return;
            }
        };
        let held = pending.take();
        let stepped =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step(&inner, held, batch)));
        let outcome = match stepped {
            Ok((outcome, next_pending)) => {
                pending = next_pending;
                outcome
            }
            Err(_) => {
                // A device (or the engine) panicked during a batch: the table is poisoned,
                // nothing is served any more; every waiter must learn it (the poison is
                // set before the in-flight marks go, so a waiter for them sees it).
                inner.stripes.poison();
                let mut st = inner.state.lock();
                st.clear_flushing();
                st.flush_error_gen += 1;
                st.last_flush_error = "the flusher panicked".into();
                inner.cv.notify_all();
                return;
            }
        };
        match outcome {
            // Every version of the batch sits in a TRIM's fence: wait for it to end.
            Some(Ok(0)) => {
                let mut st = inner.state.lock();
                if !st.stop {
                    inner.cv.wait_for(&mut st, Duration::from_millis(10));
                }
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) => {
                let mut st = inner.state.lock();
                st.flush_error_gen += 1;
                st.last_flush_error = e.to_string();
                inner.cv.notify_all();
                // Back off, then retry: the blocks are still dirty.
                if !st.stop {
                    inner.cv.wait_for(&mut st, Duration::from_millis(100));
                }
            }
        }
    }
}

/// Wait, on the state lock `st` (released while waiting), until the flusher writes none of
/// `keys` to backing (see `flush_batch.rs`). The caller holds the stripe locks of the keys (or
/// a fence over them), so no new mark appears among them once this returns. Fails once the
/// engine is poisoned (a flusher panic).
pub(crate) fn wait_not_flushing(
    inner: &Inner,
    st: &mut MutexGuard<'_, CacheState>,
    keys: std::ops::Range<u64>,
) -> io::Result<()> {
    while st.flushing_in(keys.clone()) {
        if inner.stripes.is_poisoned() {
            return Err(crate::stripes::poisoned_error());
        }
        // The flusher wakes `cv` when its batch ends.
        inner.cv.wait_for(st, Duration::from_millis(10));
    }
    Ok(())
}

/// Flush every dirty block in the calling thread (at open, when dirty blocks were recovered
/// but the policy is not write-back persist).
pub(crate) fn flush_all_now(inner: &Inner) -> io::Result<()> {
    loop {
        let lim = inner.limits.get();
        let batch = inner.state.lock().flush_batch(lim.batch, lim.lru);
        if batch.is_empty() {
            return Ok(());
        }
        if flush_batch(inner, &batch)? == 0 {
            // Nothing flushable (no request runs at open, so no fence stands): stop.
            return Err(io::Error::other("dirty blocks could not be flushed"));
        }
    }
}

/// Ask the flusher for everything (clean stop) and wait; fails if a batch fails meanwhile.
pub(crate) fn drain(inner: &Inner) -> io::Result<()> {
    let mut st = inner.state.lock();
    st.drain = true;
    let gen0 = st.flush_error_gen;
    inner.cv.notify_all();
    while st.dirty_len() > 0 {
        if st.flush_error_gen != gen0 || inner.stripes.is_poisoned() {
            st.drain = false;
            return Err(io::Error::other(format!(
                "flushing dirty blocks to backing failed: {}",
                st.last_flush_error
            )));
        }
        inner.cv.wait_for(&mut st, Duration::from_millis(100));
    }
    Ok(())
}

/// Sync every backing volume.
pub(crate) fn sync_all_backing(inner: &Inner, what: &str) -> io::Result<()> {
    for v in &inner.volumes {
        v.backing.sync().map_err(|e| io_context(v.backing.as_ref(), what, 0, 0, e))?;
    }
    Ok(())
}
