//! The barriers: ordered write-back only closes the epoch; write-back flush (thesis 3.1,
//! 4.4.2) waits until the closed epoch reached backing; write-back persist (thesis 3.2, 4.2.2, 5.3) commits the dirty map's
//! changes to the journal, or a checkpoint, before the FLUSH is acknowledged.

use super::flusher::{given_up, sync_all_backing};
use crate::core::{Cursor, Inner};
use crate::device::io_context;
use crate::layout::epoch::stored;
use crate::layout::journal::{self, JournalEntry};
use crate::layout::{Checkpoint, LayoutError, MapEntry};
use crate::state::Persisted;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Write-back flush barrier (thesis 3.1, 4.4.2): close the current epoch, wait until it and
/// every older epoch reached backing, sync backing. A flusher error meanwhile fails it (EIO);
/// the blocks stay dirty and the flusher retries. So does a cache device given up meanwhile
/// (the flusher writes nothing more back). `persisting`: the persisted dirty map is
/// kept too (a switch drains write-back persist), so the epoch advances within its window.
pub(crate) fn barrier_flush(inner: &Inner, persisting: bool) -> io::Result<()> {
    let mut st = inner.state.lock();
    let target = st.current_epoch;
    st.advance_epoch(persisting);
    st.flush_target = st.flush_target.max(target);
    let gen0 = st.flush_error_gen;
    inner.cv.notify_all();
    while st.oldest_dirty_epoch().is_some_and(|e| e <= target) {
        if st.flush_error_gen != gen0 {
            return Err(io::Error::other(format!(
                "FLUSH: writing dirty blocks to backing failed (they stay dirty and are \
                 retried): {}",
                st.last_flush_error
            )));
        }
        if st.stop || st.closing {
            return Err(io::Error::other("FLUSH: the engine is shutting down"));
        }
        if inner.stripes.is_poisoned() {
            return Err(crate::stripes::poisoned_error());
        }
        if let Some(e) = given_up(inner) {
            return Err(e);
        }
        inner.cv.wait_for(&mut st, Duration::from_millis(100));
    }
    drop(st);
    sync_all_backing(inner, "sync (FLUSH)")
}

/// Ordered write-back barrier (Koller et al.; thesis 2.2, table 3.1): close the current
/// epoch and return at once. The writes of the closed epoch reach backing before any later
/// one (the flusher takes the oldest epoch first and syncs backing after every batch, or
/// group of batches of that epoch, `sync_group.rs`), but
/// not by the time the FLUSH is acknowledged: no durability is promised.
pub(crate) fn barrier_ordered(inner: &Inner, persisting: bool) {
    let mut st = inner.state.lock();
    if st.advance_epoch(persisting) {
        inner.cv.notify_all();
    }
}

/// Write-back persist barrier (thesis 3.2, 4.2.2, 5.3): snapshot the dirty map's changes,
/// sync backing and the cache device, then commit them to the journal or, when that is
/// smaller or the journal is full, write a checkpoint of the whole persisted dirty map.
pub(crate) fn barrier_persist(inner: &Inner) -> io::Result<()> {
    let mut cur = inner.persist.lock();
    if !cur.active {
        // A switch out of write-back persist finished its drain meanwhile: the device names
        // no persisted map any more, and the request's own policy covers the rest.
        drop(cur);
        return sync_all_backing(inner, "sync (FLUSH)");
    }
    let (changes, release, persisted_len) = {
        let mut st = inner.state.lock();
        // The barrier ends the epoch (entries carry it; recovery shows it per epoch). Only
        // 16 bits of it are stored, so every persisted dirty epoch must stay within WINDOW of
        // the current one (layout::epoch): the flusher is asked for epochs older than half
        // the window, and while one is a whole window old (its backing writes keep failing)
        // the epoch stops advancing; later writes share it (`CacheState::advance_epoch`).
        if st.advance_epoch(true) {
            inner.cv.notify_all();
        }
        let (c, r) = st.persist_snapshot();
        (c, r, st.persisted_len())
    };
    let result = commit(inner, &mut cur, &changes, persisted_len);
    let mut st = inner.state.lock();
    match result {
        Ok(Committed::Nothing) => Ok(()),
        Ok(Committed::Journal) => {
            st.persist_done(&release);
            Ok(())
        }
        Ok(Committed::Checkpoint) => {
            st.persist_reset();
            Ok(())
        }
        Err(e) => {
            // The device holds the old map or the new one: keep both marked until a
            // checkpoint settles it.
            cur.need_checkpoint = true;
            Err(e)
        }
    }
}

enum Committed {
    Nothing,
    Journal,
    Checkpoint,
}

fn commit(
    inner: &Inner,
    cur: &mut Cursor,
    changes: &[crate::state::Change],
    persisted_len: usize,
) -> io::Result<Committed> {
    sync_all_backing(inner, "sync (FLUSH)")?;
    if changes.is_empty() && !cur.need_checkpoint {
        return Ok(Committed::Nothing);
    }
    let cache = inner.cache.as_ref();
    cache.sync().map_err(|e| io_context(cache, "sync (FLUSH)", 0, 0, e))?;
    let g = &inner.geometry;
    let jblocks = journal::blocks_for(changes.len(), g.block_size);
    let cp_blocks = 1 + (persisted_len as u64 * 16).div_ceil(g.block_size as u64);
    let fits = cur.next_block + jblocks <= journal::blocks(g);
    if fits && !cur.need_checkpoint && jblocks <= cp_blocks {
        let entries: Vec<JournalEntry> = changes
            .iter()
            .map(|&(key, v)| match v {
                Some(Persisted { cache_block, epoch }) => {
                    JournalEntry::Insert { key, cache_block, epoch: stored(epoch) }
                }
                None => JournalEntry::Delete { key },
            })
            .collect();
        let generation = cur.generation + 1;
        let img = journal::encode(&entries, generation, cur.base, g.block_size);
        let off = g.journal_offset + cur.next_block * g.block_size as u64;
        cache
            .write_at(off, &img)
            .map_err(|e| io_context(cache, "journal write", off, img.len() as u64, e))?;
        cache.sync().map_err(|e| io_context(cache, "journal sync", off, 0, e))?;
        cur.next_block += jblocks;
        cur.generation = generation;
        if let Some(ctr) = inner.counters.first() {
            ctr.journal_commits.fetch_add(1, Relaxed);
        }
        return Ok(Committed::Journal);
    }
    let entries = inner.state.lock().persisted_entries();
    let generation = cur.generation + 1;
    write_checkpoint(inner, &entries, generation).map_err(layout_io)?;
    *cur = Cursor {
        active: true,
        next_block: 0,
        base: generation,
        generation,
        need_checkpoint: false,
    };
    if let Some(ctr) = inner.counters.first() {
        ctr.persist_checkpoints.fetch_add(1, Relaxed);
    }
    Ok(Committed::Checkpoint)
}

fn layout_io(e: LayoutError) -> io::Error {
    match e {
        LayoutError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

/// Write `entries` as a checkpoint of `generation` to the free slot, sync, and switch the
/// superblock to it (clean flag clear): the atomic commit point.
pub(crate) fn write_checkpoint(
    inner: &Inner,
    entries: &[MapEntry],
    generation: u64,
) -> Result<(), LayoutError> {
    let cache = inner.cache.as_ref();
    let mut sb = inner.superblock.lock();
    let slot = if sb.checkpoint_slot == 0 { 1 } else { 0 };
    let crc = Checkpoint::write(cache, &inner.geometry, slot, generation, entries)?;
    cache.sync().map_err(|e| io_context(cache, "sync after checkpoint", 0, 0, e))?;
    let mut next = sb.clone();
    next.sequence += 1;
    next.checkpoint_slot = slot;
    next.checkpoint_generation = generation;
    next.checkpoint_entries = entries.len() as u64;
    next.checkpoint_crc = crc;
    next.write(cache)?;
    *sb = next;
    Ok(())
}
