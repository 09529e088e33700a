//! One flusher batch (thesis 4.1, 4.4), in three phases (`flusher.rs` runs them in turn; a
//! group of batches someone waits for shares one backing sync, `sync_group.rs`):
//!
//! 1. [`prepare`]: under the blocks' stripe locks, pin the versions still dirty and not
//!    fenced, mark them in flight, read them from the cache device into the batch's buffer
//!    (runs of consecutive cache blocks, one read each, in whatever order their keys lie on
//!    the device) and unpin them;
//! 2. [`write`]: holding no stripe lock and no pin (a foreground request on these blocks
//!    waits neither for backing nor for a cache block the flusher holds), write the buffer to
//!    backing (runs of consecutive blocks of a volume, one write each, several in flight) and
//!    sync every backing volume it touched ([`write_unsynced`] leaves the sync to the
//!    group the batch joins);
//! 3. [`finish`]: move each version out of the dirty map, once backing holds it durably,
//!    unless a newer version of its block in its epoch replaced it meanwhile (that one stays
//!    dirty and is flushed again, after this batch's copy landed); or, if the batch failed,
//!    leave every version dirty. Either way the in-flight marks go.
//!
//! A request that writes one of these blocks to backing directly waits for its in-flight mark
//! (`flusher::wait_not_flushing`), so a batch's copy never lands after it. The flusher writes
//! batches one after the other: backing receives them in order, and a batch is never written
//! after an older one of its group failed. While it holds the in-flight marks of a group not
//! yet synced, it takes a batch's stripe locks only without waiting ([`try_prepare`]): a
//! request holding one of them may be waiting for one of those marks.

use crate::clock::now_ns;
use crate::core::Inner;
use crate::device::{io_context, AlignedBuf};
use crate::layout::{key_block, key_volume};
use crate::stripes::Held;
use std::io;
use std::sync::atomic::Ordering::Relaxed;

/// Backing writes a flusher batch has in flight at once.
const FLUSH_LANES: usize = 8;

/// A batch read from the cache device (or whose read failed), its versions marked in flight,
/// not yet on backing.
pub(crate) struct Prepared {
    /// (epoch, key, cache block) of each version marked, ascending by key.
    live: Vec<(u64, u64, u32)>,
    /// Their data, one block each, in the order of `live`.
    buf: AlignedBuf,
    /// The read failed: nothing is written, and [`finish`] fails the batch.
    read_error: Option<io::Error>,
}

/// Phase 1 (see the module comment). Fails, marking nothing, only when the stripe locks
/// cannot be taken (a poisoned engine).
pub(crate) fn prepare(inner: &Inner, batch: &[(u64, u64, u32)]) -> io::Result<Prepared> {
    let held =
        inner.stripes.lock_keys(batch.iter().map(|&(_, k, _)| (key_volume(k), key_block(k))))?;
    Ok(prepare_held(inner, batch, held))
}

/// Phase 1 without waiting for a stripe lock: `None`, marking nothing, if a request holds
/// one of the batch's stripes (see the module comment).
pub(crate) fn try_prepare(
    inner: &Inner,
    batch: &[(u64, u64, u32)],
) -> Option<io::Result<Prepared>> {
    let keys = batch.iter().map(|&(_, k, _)| (key_volume(k), key_block(k)));
    Some(inner.stripes.try_lock_keys(keys)?.map(|held| prepare_held(inner, batch, held)))
}

/// Phase 1 with the batch's stripe locks `_held` (released on return).
fn prepare_held(inner: &Inner, batch: &[(u64, u64, u32)], _held: Held<'_>) -> Prepared {
    let mut live = Vec::with_capacity(batch.len());
    let bs = inner.block_size() as usize;
    let mut buf = AlignedBuf::new(batch.len().max(1) * bs);
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
    Prepared { live, buf, read_error: read.err() }
}

impl Prepared {
    /// Versions marked in flight.
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// No version was marked (every one fenced, or no longer dirty).
    pub(crate) fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Its versions marked in flight, (epoch, key, cache block) ascending by key; the data
    /// is dropped.
    pub(crate) fn into_live(self) -> Vec<(u64, u64, u32)> {
        self.live
    }
}

/// Phase 2 (see the module comment).
pub(crate) fn write(inner: &Inner, p: &Prepared) -> io::Result<()> {
    let touched = write_unsynced(inner, p)?;
    sync_volumes(inner, &touched)
}

/// Phase 2 without the sync: write the batch to backing and return the volumes it touched,
/// which must be synced before any of its versions is marked clean.
pub(crate) fn write_unsynced(inner: &Inner, p: &Prepared) -> io::Result<Vec<u32>> {
    if let Some(e) = &p.read_error {
        return Err(io::Error::new(e.kind(), e.to_string()));
    }
    let bs = inner.block_size() as usize;
    write_runs(inner, &p.live, &p.buf.as_slice()[..p.live.len() * bs])
}

/// Phase 3 (see the module comment), with the outcome of [`write`]. Returns how many
/// versions were written.
pub(crate) fn finish(inner: &Inner, p: Prepared, result: io::Result<()>) -> io::Result<usize> {
    finish_live(inner, p.live, result)
}

/// Phase 3 for the versions `live` of a batch, with the outcome of its writes and sync.
pub(crate) fn finish_live(
    inner: &Inner,
    live: Vec<(u64, u64, u32)>,
    result: io::Result<()>,
) -> io::Result<usize> {
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

/// Drop the versions `live` of a batch not written, or written but not synced (the flusher
/// stops): they stay dirty, their marks go.
pub(crate) fn abandon(inner: &Inner, live: &[(u64, u64, u32)]) {
    let mut st = inner.state.lock();
    for &(_, k, _) in live {
        st.unmark_flushing(k);
    }
    inner.cv.notify_all();
}

/// Flush one batch, its phases one after the other (see the module comment). Returns how
/// many versions were written.
pub(crate) fn flush_batch(inner: &Inner, batch: &[(u64, u64, u32)]) -> io::Result<usize> {
    let p = prepare(inner, batch)?;
    let result = write(inner, &p);
    finish(inner, p, result)
}

/// Read the batch's pinned versions from the cache device into `data`, version `i` of
/// `live` into block `i`: runs of consecutive cache blocks, one read each, whatever the order
/// of their keys. (A rewrite takes its cache blocks from the free list, most recently freed
/// first, so a volume rewritten in block order may lie on the cache device in descending
/// order: read in key order, that is one read a block.) A run whose versions are also
/// consecutive in `live` is read in place; another is read into a scratch buffer, then each
/// block copied to its place.
fn read_live(inner: &Inner, live: &[(u64, u64, u32)], data: &mut [u8]) -> io::Result<()> {
    let bs = inner.block_size() as usize;
    let mut order: Vec<usize> = (0..live.len()).collect();
    order.sort_unstable_by_key(|&i| live[i].2);
    let mut scratch: Option<AlignedBuf> = None;
    for run in cache_runs(live, &order) {
        let off = inner.geometry.block_offset(live[run[0]].2);
        let len = run.len() * bs;
        let in_place = run.windows(2).all(|w| w[1] == w[0] + 1);
        let read = if in_place {
            inner.cache.read_at(off, &mut data[run[0] * bs..run[0] * bs + len])
        } else {
            let buf = scratch.get_or_insert_with(|| AlignedBuf::new(live.len() * bs));
            let got = &mut buf.as_mut_slice()[..len];
            inner.cache.read_at(off, got).map(|()| {
                for (j, &i) in run.iter().enumerate() {
                    data[i * bs..(i + 1) * bs].copy_from_slice(&got[j * bs..(j + 1) * bs]);
                }
            })
        };
        read.map_err(|e| io_context(inner.cache.as_ref(), "flusher read", off, len as u64, e))?;
    }
    Ok(())
}

/// The runs of `order` (indices of `live`, ascending by cache block) whose cache blocks are
/// consecutive.
fn cache_runs<'a>(
    live: &'a [(u64, u64, u32)],
    order: &'a [usize],
) -> impl Iterator<Item = &'a [usize]> + 'a {
    order.chunk_by(move |&a, &b| live[a].2.checked_add(1) == Some(live[b].2))
}

/// Write the batch's data to backing (runs of consecutive blocks of one volume, one write
/// each, several in flight); returns the volumes it touched, ascending, unsynced.
fn write_runs(inner: &Inner, live: &[(u64, u64, u32)], data: &[u8]) -> io::Result<Vec<u32>> {
    if live.is_empty() {
        return Ok(Vec::new());
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
    Ok(touched)
}

/// Sync the backing of each volume of `touched`.
pub(crate) fn sync_volumes(inner: &Inner, touched: &[u32]) -> io::Result<()> {
    for &vid in touched {
        if let Some(vol) = inner.volume_by_id(vid) {
            vol.backing
                .sync()
                .map_err(|e| io_context(vol.backing.as_ref(), "flusher sync", 0, 0, e))?;
        }
    }
    Ok(())
}
