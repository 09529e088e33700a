//! The flusher (thesis 4.1, 4.4): a thread that writes dirty blocks to backing, oldest epoch
//! first, and marks them clean once backing has them durably; also the synchronous flushes
//! of open (recovered dirty blocks under another policy) and of a clean stop.

use crate::clock::now_ns;
use crate::core::{Inner, Limits};
use crate::device::{io_context, AlignedBuf};
use crate::layout::{key_block, key_volume};
use crate::state::CacheState;
use parking_lot::MutexGuard;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Backing writes a flusher batch has in flight at once.
const FLUSH_LANES: usize = 8;

/// Why the flusher writes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Demand {
    /// Someone waits for it: a FLUSH or an ordered write-back request (`flush_target`), a
    /// flush on demand (`Engine::flush_all`), a policy switch's drain, a clean stop (`drain`).
    /// Never slowed down.
    Waited,
    /// Background cleaning: more dirty blocks than min_dirty, nobody waiting.
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

/// The pace of a batch. A cap on the rate of background cleaning belongs here and applies to
/// [`Demand::Background`] only: what someone waits for is never slowed by it. There is no
/// cap yet.
fn pace(_demand: Demand) {}

/// The flusher thread: writes dirty blocks to backing, oldest epoch first, ascending block
/// order within it, while there are more than min_dirty or a FLUSH, a flush on demand, a
/// policy switch or a clean stop waits. The limits are read afresh for every batch (they
/// change while serving).
pub(crate) fn flusher(inner: std::sync::Arc<Inner>) {
    loop {
        let (batch, why) = {
            let mut st = inner.state.lock();
            loop {
                if st.stop {
                    return;
                }
                let lim = inner.limits.get();
                // A degraded cache's dirty blocks are lost with its device: nothing to flush.
                if let Some(why) = demand(&st, &lim).filter(|_| inner.health.is_healthy()) {
                    let b = st.flush_batch(lim.batch, lim.lru);
                    if !b.is_empty() {
                        break (b, why);
                    }
                }
                inner.cv.wait_for(&mut st, Duration::from_millis(200));
            }
        };
        pace(why);
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| flush_batch(&inner, &batch)));
        let outcome = match outcome {
            Ok(r) => r,
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
            Ok(0) => {
                let mut st = inner.state.lock();
                if !st.stop {
                    inner.cv.wait_for(&mut st, Duration::from_millis(10));
                }
            }
            Ok(_) => {}
            Err(e) => {
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

/// Flush one batch (one epoch's versions, ascending by key). Under the blocks' stripe
/// locks: pin the versions still dirty and not fenced, mark them in flight, read them from
/// the cache device into the batch's buffer and unpin them. Then, holding no stripe lock and
/// no pin (a foreground request on these blocks waits neither for backing nor for a cache
/// block the flusher holds): write the buffer to backing, sync backing, and move each version
/// out of the dirty map unless a newer version of its block in its epoch replaced it meanwhile
/// (that one stays dirty and is flushed again, after this batch's copy landed: one batch at a
/// time). A request that writes one of these blocks to backing directly waits for its
/// in-flight mark ([`wait_not_flushing`]), so this batch's copy never lands after it. Returns
/// how many versions were written.
pub(crate) fn flush_batch(inner: &Inner, batch: &[(u64, u64, u32)]) -> io::Result<usize> {
    let mut live = Vec::with_capacity(batch.len());
    let bs = inner.block_size() as usize;
    let mut buf = AlignedBuf::new(batch.len().max(1) * bs);
    let read = {
        let _held = inner
            .stripes
            .lock_keys(batch.iter().map(|&(_, k, _)| (key_volume(k), key_block(k))))?;
        {
            let mut st = inner.state.lock();
            for &(e, k, c) in batch {
                if st.is_dirty_version(e, k, c) && !st.fenced_for_flush(k, e) {
                    st.pin(c);
                    st.mark_flushing(k, e);
                    live.push((e, k, c));
                }
            }
        }
        let read = read_live(inner, &live, &mut buf.as_mut_slice()[..live.len() * bs]);
        // The data is in the buffer: the pins go while the stripe locks still keep every
        // version as it was (each stays referenced by the dirty map, so none is freed here).
        let mut st = inner.state.lock();
        for &(_, _, c) in &live {
            st.unpin(c);
        }
        read
    };
    let result = read.and_then(|()| write_live(inner, &live, &buf.as_slice()[..live.len() * bs]));
    let mut st = inner.state.lock();
    let now = now_ns();
    for &(e, k, c) in &live {
        let superseded = st.unmark_flushing(k);
        if result.is_ok() && !superseded {
            st.flushed(e, k, c, now);
        }
    }
    inner.count_evictions(&mut st);
    for &(_, k, _) in &live {
        if let Some(ctr) = inner.counters.get(key_volume(k) as usize) {
            if result.is_ok() {
                ctr.flushed_blocks.fetch_add(1, Relaxed);
            }
        }
    }
    if result.is_err() {
        if let Some(&(_, k, _)) = live.first() {
            if let Some(ctr) = inner.counters.get(key_volume(k) as usize) {
                ctr.flush_errors.fetch_add(1, Relaxed);
            }
        }
    }
    inner.cv.notify_all();
    result.map(|()| live.len())
}

/// Wait, on the state lock `st` (released while waiting), until the flusher writes none of
/// `keys` to backing (see [`flush_batch`]). The caller holds the stripe locks of the keys (or
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

/// Read the batch's pinned versions from the cache device into `data` (runs of consecutive
/// cache blocks, one read each).
fn read_live(inner: &Inner, live: &[(u64, u64, u32)], data: &mut [u8]) -> io::Result<()> {
    let bs = inner.block_size() as usize;
    let mut i = 0;
    while i < live.len() {
        let mut j = i + 1;
        while j < live.len() && live[j].2 == live[j - 1].2.wrapping_add(1) {
            j += 1;
        }
        let off = inner.geometry.block_offset(live[i].2);
        inner.cache.read_at(off, &mut data[i * bs..j * bs]).map_err(|e| {
            io_context(inner.cache.as_ref(), "flusher read", off, ((j - i) * bs) as u64, e)
        })?;
        i = j;
    }
    Ok(())
}

/// Write the batch's data to backing (runs of consecutive blocks of one volume, one write
/// each, several in flight) and sync every backing volume it touched.
fn write_live(inner: &Inner, live: &[(u64, u64, u32)], data: &[u8]) -> io::Result<()> {
    if live.is_empty() {
        return Ok(());
    }
    let bs = inner.block_size() as usize;
    // Runs of consecutive blocks of one volume, each one backing write.
    let mut runs = Vec::new();
    let mut i = 0;
    while i < live.len() {
        let (vid, b0) = (key_volume(live[i].1), key_block(live[i].1));
        let mut j = i + 1;
        while j < live.len()
            && key_volume(live[j].1) == vid
            && key_block(live[j].1) == b0 + (j - i) as u64
        {
            j += 1;
        }
        runs.push((vid, b0, i, j));
        i = j;
    }
    // Issued concurrently (the thesis' flusher batches with asynchronous I/O): an upstream
    // NBD server or a disk queue sees them together.
    let write_run = |&(vid, b0, i, j): &(u32, u64, usize, usize)| -> io::Result<()> {
        let vol = inner.volume_by_id(vid).ok_or_else(|| {
            io::Error::other(format!("dirty block of volume #{vid}, which is not served"))
        })?;
        let off = b0 * bs as u64;
        vol.backing.write_at(off, &data[i * bs..j * bs]).map_err(|e| {
            io_context(vol.backing.as_ref(), "flusher write", off, ((j - i) * bs) as u64, e)
        })?;
        if let Some(ctr) = inner.counters.get(vid as usize) {
            ctr.backing_write_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
            ctr.cache_read_bytes.fetch_add(((j - i) * bs) as u64, Relaxed);
        }
        Ok(())
    };
    let lanes = runs.len().min(FLUSH_LANES);
    if lanes <= 1 {
        runs.iter().try_for_each(write_run)?;
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..lanes)
                .map(|lane| {
                    let runs = &runs;
                    let write_run = &write_run;
                    s.spawn(move || runs.iter().skip(lane).step_by(lanes).try_for_each(write_run))
                })
                .collect();
            handles.into_iter().try_for_each(|h| {
                h.join().unwrap_or_else(|_| Err(io::Error::other("flusher lane panicked")))
            })
        })?;
    }
    let mut touched: Vec<u32> = runs.iter().map(|r| r.0).collect();
    touched.sort_unstable();
    touched.dedup();
    for vid in touched {
        if let Some(vol) = inner.volume_by_id(vid) {
            vol.backing
                .sync()
                .map_err(|e| io_context(vol.backing.as_ref(), "flusher sync", 0, 0, e))?;
        }
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
