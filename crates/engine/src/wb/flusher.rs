//! The flusher (thesis 4.1, 4.4): a thread that writes dirty blocks to backing, oldest epoch
//! first, and marks them clean once backing has them durably; also the synchronous flushes
//! of open (recovered dirty blocks under another policy) and of a clean stop.

use super::flush_batch::{flush_batch, prepare, try_prepare, write_unsynced, Prepared};
use super::pace::{batch_blocks, Load, Pacer};
use super::sync_group::SyncGroup;
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
    /// Write back this batch, for this demand.
    Batch(Vec<(u64, u64, u32)>, Demand),
    /// Nothing now (asked not to wait).
    Nothing,
    /// The engine stops.
    Stop,
}

/// The flusher's next batch: what someone waits for first, then paced background cleaning.
/// With `wait`, waits (on the condition variable) until there is one or the engine stops;
/// without, looks once. A batch holds no version the flusher has in flight: while a sync
/// group is open, the next batch holds other versions of the same epoch
/// (`CacheState::flush_batch`).
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
                    return Next::Batch(b, Demand::Waited);
                }
                REST
            }
            Some(Demand::Background) => {
                let now = origin.elapsed().as_nanos() as u64;
                match background(inner, &st, &lim, pacer, now) {
                    Ok(b) => return Next::Batch(b, Demand::Background),
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

/// One step for `next`: a batch written to backing (its group's sync started when the group
/// is full, or done at once when someone else may need its marks gone), or the groups ended.
/// Returns how many versions were marked clean or written into the group (0: the batch was
/// all fenced), or the error of a failed batch; `None` when there was nothing to do.
///
/// A batch someone waits for joins the open sync group (`sync_group.rs`); a full group
/// syncs on a thread of its own while the next one is read and written. A background batch
/// first ends the groups, then is written and synced alone (its pace counts batches). A
/// failed write or sync ends the groups, every version of the open one left dirty, so no
/// batch reaches backing after an older one failed.
fn step(inner: &Inner, group: &mut SyncGroup, next: Next) -> Option<io::Result<usize>> {
    let (batch, demand) = match next {
        Next::Stop => {
            group.abandon(inner);
            return None;
        }
        Next::Nothing => return Some(group.end(inner)),
        Next::Batch(b, d) => (b, d),
    };
    if demand == Demand::Background {
        if let Err(e) = group.end(inner) {
            return Some(Err(e));
        }
        return Some(flush_batch(inner, &batch));
    }
    let prepared = if group.is_empty() {
        prepare(inner, &batch)
    } else {
        match try_prepare(inner, &batch) {
            Some(p) => p,
            // A request holds a stripe of the batch and may wait for the group's marks.
            None => match group.end(inner) {
                Ok(_) => prepare(inner, &batch),
                Err(e) => return Some(Err(e)),
            },
        }
    };
    let p: Prepared = match prepared {
        Ok(p) => p,
        Err(e) => return Some(Err(group.fail(inner, e))),
    };
    if p.is_empty() {
        // Every version of the batch sits in a TRIM's fence: the flusher waits, so the
        // group's marks must not.
        return Some(group.end(inner).map(|_| 0));
    }
    let epoch = batch.first().map_or(0, |v| v.0);
    let written = group.before_write(inner, epoch).and_then(|_| write_unsynced(inner, &p));
    match written {
        Ok(touched) => {
            let n = p.len();
            group.push(p.into_live(), &touched);
            let marked = if group.is_full(inner.block_size()) {
                group.rotate(inner)
            } else {
                group.poll(inner)
            };
            Some(marked.map(|_| n))
        }
        Err(e) => {
            group.push(p.into_live(), &[]);
            Some(Err(group.fail(inner, e)))
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
/// Batches (`flush_batch.rs`) are written one after the other. What someone waits for is
/// written in sync groups (`sync_group.rs`): several batches, one backing sync, each marked
/// clean only once that sync returned, a full group's sync running while the next group is
/// read and written; a background batch is synced alone.
pub(crate) fn flusher(inner: std::sync::Arc<Inner>) {
    let mut pacer = Pacer::default();
    let origin = Instant::now();
    let mut group = SyncGroup::default();
    loop {
        let got = next(&inner, &mut pacer, origin, group.is_empty());
        let stop = matches!(got, Next::Stop);
        let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            step(&inner, &mut group, got)
        }));
        let outcome = match stepped {
            Ok(_) if stop => return,
            Ok(outcome) => outcome,
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

/// The error of a wait for the flusher's progress once the cache device is given up
/// (tripped or degraded, `health/`): the flusher writes nothing more back (its dirty blocks
/// went with the device), so what the wait needs never comes. `None` while healthy. Every
/// such wait checks it, as it checks the poison: the switch into degraded mode, which also
/// ends them (`io/degraded.rs`), is made only by the next request, and none may come.
pub(crate) fn given_up(inner: &Inner) -> Option<io::Error> {
    (!inner.health.is_healthy()).then(|| {
        io::Error::other(format!(
            "the cache device {} was given up (degraded mode): its dirty blocks are not \
             written back",
            inner.cache.describe()
        ))
    })
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

/// Ask the flusher for everything (clean stop) and wait; fails if a batch fails meanwhile
/// or the cache device is given up.
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
        if let Some(e) = given_up(inner) {
            st.drain = false;
            return Err(e);
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
