//! The write-back machinery of Qin's thesis: the flusher (4.1, 4.4), the two barriers
//! (write-back flush, 3.1 and 4.4.2; write-back persist, 3.2, 4.2.2 and 5.3) and recovery of
//! the persisted dirty map (5.3).
//!
//! Invariants the crash trials check:
//! - a block leaves the dirty map only once backing holds it *durably* (the flusher syncs
//!   backing before marking a batch clean) or holds something newer (a write-through
//!   fallback, TRIM or WRITE_ZEROES, dropped only after their backing I/O completed);
//! - write-back flush: a FLUSH closes the current epoch and is acknowledged when no dirty
//!   version of that epoch or an older one is left and backing was synced;
//! - write-back persist: a FLUSH takes a snapshot of the dirty map (versions whose data is
//!   written: a version enters the map only after its cache write completed), syncs backing
//!   and the cache device, then commits the snapshot (journal append or checkpoint), synced,
//!   before it is acknowledged. Blocks named by the persisted map are never reused until a
//!   later commit no longer names them (the persist bitmap).

use crate::device::{io_context, AlignedBuf};
use crate::engine::Inner;
use crate::layout::journal::{self, JournalEntry};
use crate::layout::{Checkpoint, LayoutError, MapEntry, Superblock};
use crate::state::Persisted;
use ember_trace::{key_block, key_volume};
use std::collections::{BTreeMap, HashSet};
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Tuning of the write-back policies (thesis 4.1, 4.4).
#[derive(Clone, Copy, Debug)]
pub struct WritebackConfig {
    /// At this many dirty blocks, writes fall back to write-through (None: half the cache).
    pub max_dirty_blocks: Option<u64>,
    /// The flusher idles at or below this many dirty blocks unless a FLUSH or a clean stop
    /// needs it (None: an eighth of the cache).
    pub min_dirty_blocks: Option<u64>,
    /// Concurrent dirty epochs under write-back flush; beyond, writes wait (thesis 4.4.2).
    pub max_epochs: usize,
    /// Blocks per flusher batch.
    pub batch_blocks: usize,
    /// Flush the least recently written dirty blocks first instead of the lowest block
    /// numbers (thesis 4.4.1; ascending order is the default, kinder to a disk).
    pub lru_flush_order: bool,
}

impl Default for WritebackConfig {
    fn default() -> Self {
        Self {
            max_dirty_blocks: None,
            min_dirty_blocks: None,
            max_epochs: 4,
            batch_blocks: 64,
            lru_flush_order: false,
        }
    }
}

/// The limits resolved against the cache size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub max_dirty: usize,
    pub min_dirty: usize,
    pub max_epochs: usize,
    pub batch: usize,
    pub lru: bool,
}

impl WritebackConfig {
    pub(crate) fn resolve(&self, data_blocks: u64) -> Limits {
        let max_dirty = self.max_dirty_blocks.unwrap_or(data_blocks / 2).min(data_blocks) as usize;
        let min_dirty =
            (self.min_dirty_blocks.unwrap_or(data_blocks / 8) as usize).min(max_dirty / 2);
        Limits {
            max_dirty,
            min_dirty,
            max_epochs: self.max_epochs.max(1),
            batch: self.batch_blocks.clamp(1, 1024),
            lru: self.lru_flush_order,
        }
    }
}

/// Where the journal stands (write-back persist), under its own lock, which also
/// serializes barriers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cursor {
    /// Next free journal block.
    pub next_block: u64,
    /// Generation of the checkpoint the journal extends.
    pub base: u64,
    /// Generation of the last commit (journal or checkpoint).
    pub generation: u64,
    /// A barrier failed half-way: the next one writes a checkpoint.
    pub need_checkpoint: bool,
}

/// Backing writes a flusher batch has in flight at once.
const FLUSH_LANES: usize = 8;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The flusher thread: writes dirty blocks to backing, oldest epoch first, ascending block
/// order within it, while there are more than min_dirty or a FLUSH or a clean stop waits.
pub(crate) fn flusher(inner: std::sync::Arc<Inner>) {
    let lim = inner.limits;
    loop {
        let batch = {
            let mut st = inner.state.lock();
            loop {
                if st.stop {
                    return;
                }
                let want = st.dirty_len() > lim.min_dirty
                    || st.drain
                    || st.oldest_dirty_epoch().is_some_and(|e| e <= st.flush_target);
                if want {
                    let b = st.flush_batch(lim.batch, lim.lru);
                    if !b.is_empty() {
                        break b;
                    }
                }
                inner.cv.wait_for(&mut st, Duration::from_millis(200));
            }
        };
        if let Err(e) = flush_batch(&inner, &batch) {
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

/// Flush one batch (one epoch's versions, ascending by key): under the blocks' stripe locks,
/// read them from the cache device, write them to backing, sync backing, then move them out
/// of the dirty map.
pub(crate) fn flush_batch(inner: &Inner, batch: &[(u64, u64, u32)]) -> io::Result<()> {
    let _held =
        inner.stripes.lock_keys(batch.iter().map(|&(_, k, _)| (key_volume(k), key_block(k))));
    let mut live = Vec::with_capacity(batch.len());
    {
        let mut st = inner.state.lock();
        for &(e, k, c) in batch {
            if st.is_dirty_version(e, k, c) {
                st.pin(c);
                live.push((e, k, c));
            }
        }
    }
    let result = flush_io(inner, &live);
    let mut st = inner.state.lock();
    let now = now_ns();
    for &(e, k, c) in &live {
        if result.is_ok() {
            st.flushed(e, k, c, now);
        }
        st.unpin(c);
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
    result
}

fn flush_io(inner: &Inner, live: &[(u64, u64, u32)]) -> io::Result<()> {
    if live.is_empty() {
        return Ok(());
    }
    let bs = inner.block_size() as usize;
    let mut buf = AlignedBuf::new(live.len() * bs);
    let data = buf.as_mut_slice();
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
    let data: &[u8] = data;
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
        let batch = inner.state.lock().flush_batch(inner.limits.batch, inner.limits.lru);
        if batch.is_empty() {
            return Ok(());
        }
        flush_batch(inner, &batch)?;
    }
}

/// Ask the flusher for everything (clean stop) and wait; fails if a batch fails meanwhile.
pub(crate) fn drain(inner: &Inner) -> io::Result<()> {
    let mut st = inner.state.lock();
    st.drain = true;
    let gen0 = st.flush_error_gen;
    inner.cv.notify_all();
    while st.dirty_len() > 0 {
        if st.flush_error_gen != gen0 {
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

fn sync_all_backing(inner: &Inner, what: &str) -> io::Result<()> {
    for v in &inner.volumes {
        v.backing.sync().map_err(|e| io_context(v.backing.as_ref(), what, 0, 0, e))?;
    }
    Ok(())
}

/// Write-back flush barrier (thesis 3.1, 4.4.2): close the current epoch, wait until it and
/// every older epoch reached backing, sync backing. A flusher error meanwhile fails it (EIO);
/// the blocks stay dirty and the flusher retries.
pub(crate) fn barrier_flush(inner: &Inner) -> io::Result<()> {
    let mut st = inner.state.lock();
    let target = st.current_epoch;
    st.current_epoch += 1;
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
        if st.stop {
            return Err(io::Error::other("FLUSH: the engine is stopping"));
        }
        inner.cv.wait_for(&mut st, Duration::from_millis(100));
    }
    drop(st);
    sync_all_backing(inner, "sync (FLUSH)")
}

/// Write-back persist barrier (thesis 3.2, 4.2.2, 5.3): snapshot the dirty map's changes,
/// sync backing and the cache device, then commit them to the journal or, when that is
/// smaller or the journal is full, write a checkpoint of the whole persisted dirty map.
pub(crate) fn barrier_persist(inner: &Inner) -> io::Result<()> {
    let mut cur = inner.persist.lock();
    let (changes, release, persisted_len) = {
        let mut st = inner.state.lock();
        // The barrier ends the epoch (entries carry it; recovery shows it per epoch).
        st.current_epoch += 1;
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
                    JournalEntry::Insert { key, cache_block, epoch: epoch as u16 }
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
    *cur = Cursor { next_block: 0, base: generation, generation, need_checkpoint: false };
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

/// The persisted dirty map read back from a device (thesis 5.3): the checkpoint's dirty
/// entries with the journal's committed barriers replayed over them.
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    /// Dirty entries (flags: dirty, epoch in bits 16..32), ascending by key.
    pub dirty: Vec<MapEntry>,
    /// Clean entries of the checkpoint (only meaningful after a clean shutdown), coldest
    /// first.
    pub clean: Vec<MapEntry>,
    /// Generation of the checkpoint.
    pub checkpoint_generation: u64,
    /// Generation of the last journal commit replayed (= the checkpoint's if none).
    pub last_generation: u64,
    /// Journal commits replayed.
    pub journal_commits: u64,
    /// Journal blocks they occupy.
    pub journal_blocks: u64,
}

/// Read the checkpoint named by `sb` and, if the cache last ran write-back persist, replay
/// the journal over its dirty entries. Validates every entry against the superblock.
pub fn recover(cache: &dyn crate::Device, sb: &Superblock) -> Result<Recovered, LayoutError> {
    let corrupt = |detail: String| LayoutError::Corrupt {
        device: cache.describe(),
        what: "persisted dirty map",
        detail,
    };
    let mut out = Recovered {
        checkpoint_generation: sb.checkpoint_generation,
        last_generation: sb.checkpoint_generation,
        ..Default::default()
    };
    let mut dirty: BTreeMap<u64, MapEntry> = BTreeMap::new();
    if sb.checkpoint_slot != crate::layout::superblock::NO_CHECKPOINT {
        let cp = Checkpoint::read(
            cache,
            &sb.geometry,
            sb.checkpoint_slot,
            sb.checkpoint_generation,
            sb.checkpoint_entries,
            sb.checkpoint_crc,
        )?;
        for e in cp.entries {
            if e.flags & crate::layout::checkpoint::ENTRY_DIRTY != 0 {
                dirty.insert(e.key, e);
            } else if sb.is_clean() {
                out.clean.push(e);
            }
        }
    }
    if !sb.is_clean() && sb.write_mode == crate::WriteMode::WriteBackPersist {
        let r = journal::replay(cache, &sb.geometry, sb.checkpoint_generation)?;
        out.journal_blocks = r.blocks_used;
        out.journal_commits = r.commits.len() as u64;
        for (generation, entries) in r.commits {
            out.last_generation = generation;
            for e in entries {
                match e {
                    JournalEntry::Insert { key, cache_block, epoch } => {
                        dirty.insert(
                            key,
                            MapEntry {
                                key,
                                cache_block,
                                flags: crate::state::dirty_flags(epoch as u64),
                            },
                        );
                    }
                    JournalEntry::Delete { key } => {
                        dirty.remove(&key);
                    }
                    JournalEntry::Commit { .. } => {}
                }
            }
        }
    }
    let bs = sb.geometry.block_size as u64;
    let mut blocks = HashSet::new();
    for e in dirty.values().chain(out.clean.iter()) {
        let vol = key_volume(e.key);
        let Some(rec) = sb.volumes.get(vol as usize) else {
            return Err(corrupt(format!(
                "key {:#x}: volume {vol} is not in the superblock",
                e.key
            )));
        };
        if key_block(e.key) >= rec.size / bs {
            return Err(corrupt(format!(
                "block {} beyond volume {:?}",
                key_block(e.key),
                rec.name
            )));
        }
        if e.cache_block as u64 >= sb.geometry.data_blocks {
            return Err(corrupt(format!("cache block {} beyond the data region", e.cache_block)));
        }
        if !blocks.insert(e.cache_block) {
            return Err(corrupt(format!("cache block {} named twice", e.cache_block)));
        }
    }
    out.dirty = dirty.into_values().collect();
    Ok(out)
}

/// Per-epoch counts of dirty entries (epoch from the flags), oldest first.
pub fn epochs_of(entries: &[MapEntry]) -> Vec<(u64, u64)> {
    let mut m: BTreeMap<u64, u64> = BTreeMap::new();
    for e in entries {
        if e.flags & crate::layout::checkpoint::ENTRY_DIRTY != 0 {
            *m.entry(u64::from(e.flags >> 16)).or_default() += 1;
        }
    }
    m.into_iter().collect()
}

#[cfg(test)]
#[path = "writeback_tests.rs"]
mod tests;
