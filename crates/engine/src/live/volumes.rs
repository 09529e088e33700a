//! Changes of the volume set while serving, as `ember ctl attach`, `uncache`, `recache` and
//! `remove` make them (bcache's attach and detach, `lvconvert --uncache`, `casadm
//! --add-core/--remove-core`). Each is recorded in the superblock's volume table (one byte a
//! slot, `layout/volume_state.rs`), written with a new sequence number, so a crash at any
//! point leaves the table before the change or after it.
//!
//! - **attach**: the volume takes the first free slot (or a new one) in a new superblock,
//!   then joins the served set; its blocks start cold.
//! - **uncache**: allocation stops first (the volume's `caching` flag, stored under the
//!   state lock, which every allocation decision reads under the same lock: no allocation
//!   decided after it maps a block), then the table says *uncached*, then rounds of "write
//!   back every dirty block, drop every clean one" run until the volume holds no block. A
//!   block is dropped only clean: its newest version is on backing, so a read after the drop
//!   reads backing and gets what a read before it got. A request in flight on a dropped
//!   block keeps its cache block pinned (never reused under it) and its stripe locks, which
//!   order it with every later request on the block. A write hit during a round makes a new
//!   dirty version, written back by the next round.
//! - **recache**: the table says *cached*, then allocation resumes (cold).
//! - **record**: a volume's backing as given and its own settings go to the volume records
//!   (layout version 2, `layout/volume_records.rs`): `attach` records them with the slot,
//!   `ember serve` at start and after `set --volume`; a freed slot's record is cleared. The
//!   records are written before the superblock that names them, in the same change.
//! - **remove**: the volume's requests are refused ([`EngineError::ShutDown`]) and the ones
//!   in flight waited for; the table says *removing*; its blocks are written back and
//!   dropped as for uncache. Then, while the device names a persisted dirty map (write-back
//!   persist), the map is committed and written as a new checkpoint, which restarts the
//!   journal: no structure on the device names the volume's keys any more, and only then
//!   does the table say the slot is *free* (a later attach may take it). A failure before
//!   that records the volume's former state again and serves it again, and says why.
//!
//! Lock order: `volume_change` (the changes run one at a time) → `persist` → `superblock` →
//! `volume_names`; `state` alone. A failure leaves the cache serving, and every acknowledged write where it
//! was (a dirty block stays dirty until backing takes it).

use super::flush_all::flush_all;
use super::Progress;
use crate::core::{Cursor, Inner};
use crate::device::{io_context, Device};
use crate::error::EngineError;
use crate::layout::{block_key, key_volume, BackingRecord, Superblock, VolumeRecord, VolumeState};
use crate::stripes::STRIPES;
use crate::volume_info::VolumeInfo;
use crate::wb::barrier::{barrier_persist, write_checkpoint};
use parking_lot::MutexGuard;
use serde::Serialize;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rounds of write-back-and-drop before an uncache gives up on a volume whose clients keep
/// rewriting the blocks it drops (it stays uncached; calling it again resumes).
const ROUNDS: usize = 1000;

/// How long a removal waits for the requests in flight on the volume.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(60);

/// What a change of the volume set did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VolumeChange {
    /// The volume.
    pub volume: String,
    /// Its slot in the volume table (its number in block keys).
    pub slot: u32,
    /// Dirty block versions written back (of every volume: the volumes share the epochs).
    pub written_back: u64,
    /// Clean blocks of the volume dropped from the cache.
    pub dropped: u64,
    /// How long the change took.
    pub took: Duration,
}

impl VolumeChange {
    /// The change to `name` in `slot`, begun at `start`, with its (written back, dropped)
    /// counts.
    fn of(name: &str, slot: u32, (written_back, dropped): (u64, u64), start: Instant) -> Self {
        VolumeChange { volume: name.into(), slot, written_back, dropped, took: start.elapsed() }
    }
}

/// Make `next` the superblock: the volume records first if they changed (to the copy `sb`
/// does not name, synced), then `next` with the next sequence number.
fn commit(
    inner: &Inner,
    sb: &mut MutexGuard<'_, Superblock>,
    mut next: Superblock,
) -> Result<(), EngineError> {
    let changed = next.volumes.len() != sb.volumes.len()
        || next.volumes.iter().zip(sb.volumes.iter()).any(|(a, b)| a.recorded != b.recorded);
    if changed {
        next.write_records(inner.cache.as_ref())?;
    }
    next.sequence += 1;
    next.write(inner.cache.as_ref())?;
    set_names(inner, &next);
    **sb = next;
    Ok(())
}

/// Record `state` for slot `id` in a new superblock (nothing written if it says so already).
fn record(inner: &Inner, id: u32, state: VolumeState) -> Result<(), EngineError> {
    let mut sb = inner.superblock.lock();
    let mut next = sb.clone();
    let Some(rec) = next.volumes.get_mut(id as usize) else {
        return Err(EngineError::Invalid(format!("no volume in slot {id}")));
    };
    if rec.state == state {
        return Ok(());
    }
    if state == VolumeState::Free {
        *rec = VolumeRecord::free();
    } else {
        rec.state = state;
    }
    commit(inner, &mut sb, next)
}

/// Record each served volume's backing as given and own settings (`records`: name and
/// record); one change of the device when any differs from what it records. Returns false
/// when the layout keeps no records (a journal too small to spare their area): nothing then
/// reaches the device.
pub(crate) fn record_volumes(
    inner: &Inner,
    records: &[(String, BackingRecord)],
) -> Result<bool, EngineError> {
    let _change = inner.volume_change.lock();
    let mut sb = inner.superblock.lock();
    let mut next = sb.clone();
    for (name, rec) in records {
        let Some(slot) = next.slot_of(name) else {
            return Err(EngineError::Invalid(format!("no volume {name:?} is recorded")));
        };
        next.volumes[slot as usize].recorded = rec.clone();
    }
    let kept = next.geometry.records_len > 0;
    if next.volumes == sb.volumes {
        return Ok(kept);
    }
    commit(inner, &mut sb, next)?;
    Ok(kept)
}

/// The names of `sb`'s slots, for the counters.
fn set_names(inner: &Inner, sb: &crate::layout::Superblock) {
    *inner.volume_names.write() = sb.volumes.iter().map(|v| v.name.clone()).collect();
}

fn refuse_if_stopping(inner: &Inner) -> Result<(), EngineError> {
    let st = inner.state.lock();
    if st.closing || st.stop {
        return Err(EngineError::ShutDown);
    }
    Ok(())
}

fn served(inner: &Inner, name: &str) -> Result<Arc<VolumeInfo>, EngineError> {
    inner.volumes.by_name(name).ok_or_else(|| {
        let names: Vec<String> = inner.volumes.iter().map(|v| v.name.clone()).collect();
        EngineError::Invalid(format!(
            "no volume {name:?} is served (volumes: {})",
            names.join(", ")
        ))
    })
}

/// Store whether `vol`'s misses may allocate, under the state lock (see the module doc).
fn set_caching(inner: &Inner, vol: &VolumeInfo, on: bool) {
    let _st = inner.state.lock();
    vol.caching.store(on, SeqCst);
}

/// Attach `backing` as volume `name`: recorded in a free slot of the table with `recorded`
/// (its backing as given and own settings), then served, cold. Returns its slot.
pub(crate) fn attach(
    inner: &Inner,
    name: &str,
    backing: Arc<dyn Device>,
    recorded: BackingRecord,
) -> Result<VolumeChange, EngineError> {
    let start = Instant::now();
    let _change = inner.volume_change.lock();
    refuse_if_stopping(inner)?;
    let id = backing.identity().map_err(|e| io_context(backing.as_ref(), "identity", 0, 0, e))?;
    let size = backing.size();
    let slot = {
        let mut sb = inner.superblock.lock();
        let mut next = sb.clone();
        let slot =
            next.place_volume(name, size).map_err(|e| EngineError::Refused(e.to_string()))?;
        next.volumes[slot as usize].backing_medium = id.medium_digest();
        next.volumes[slot as usize].recorded = recorded;
        commit(inner, &mut sb, next)?;
        slot
    };
    let backing = Arc::new(crate::device::sync_skip::SyncSkip::new(backing));
    inner.volumes.add(Arc::new(VolumeInfo::new(slot, name.to_string(), size, backing, true)));
    Ok(VolumeChange::of(name, slot, (0, 0), start))
}

/// Stop caching volume `name`, keep serving it from backing: see the module doc. The caller
/// has started the flusher if blocks are dirty.
pub(crate) fn uncache(
    inner: &Inner,
    name: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<VolumeChange, EngineError> {
    let start = Instant::now();
    let _change = inner.volume_change.lock();
    refuse_if_stopping(inner)?;
    let vol = served(inner, name)?;
    let was = vol.caching();
    set_caching(inner, &vol, false);
    if let Err(e) = record(inner, vol.id, VolumeState::Uncached) {
        set_caching(inner, &vol, was);
        return Err(e);
    }
    let (written_back, dropped) = drop_blocks(inner, &vol, progress)?;
    Ok(VolumeChange::of(name, vol.id, (written_back, dropped), start))
}

/// Cache volume `name` again (cold).
pub(crate) fn recache(inner: &Inner, name: &str) -> Result<VolumeChange, EngineError> {
    let start = Instant::now();
    let _change = inner.volume_change.lock();
    refuse_if_stopping(inner)?;
    let vol = served(inner, name)?;
    record(inner, vol.id, VolumeState::Cached)?;
    set_caching(inner, &vol, true);
    Ok(VolumeChange::of(name, vol.id, (0, 0), start))
}

/// Remove volume `name`: see the module doc. The caller has started the flusher if blocks
/// are dirty, and decided that the volume's clients may lose it.
pub(crate) fn remove(
    inner: &Inner,
    name: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<VolumeChange, EngineError> {
    let start = Instant::now();
    let _change = inner.volume_change.lock();
    refuse_if_stopping(inner)?;
    let vol = served(inner, name)?;
    let was_caching = vol.caching();
    let was = if was_caching { VolumeState::Cached } else { VolumeState::Uncached };
    vol.closed.store(true, SeqCst);
    let undo = |e: EngineError| -> EngineError {
        // Served again, as it was; the table says so too (if that write fails as well, a
        // restart that names the volume serves it: a removal is never half done).
        let restored = record(inner, vol.id, was);
        set_caching(inner, &vol, was_caching);
        vol.closed.store(false, SeqCst);
        match restored {
            Ok(()) => EngineError::Refused(format!(
                "volume {name:?} is not removed and is served again: {e}"
            )),
            Err(r) => EngineError::Refused(format!(
                "volume {name:?} is not removed and is served again: {e}; the volume table \
                 still says removing ({r}): a restart that names it serves it"
            )),
        }
    };
    if let Err(e) = wait_idle(inner, &vol) {
        return Err(undo(e));
    }
    set_caching(inner, &vol, false);
    if let Err(e) = record(inner, vol.id, VolumeState::Removing) {
        return Err(undo(e));
    }
    let (written_back, dropped) = match drop_blocks(inner, &vol, progress) {
        Ok(r) => r,
        Err(e) => return Err(undo(e)),
    };
    if let Err(e) = forget_keys(inner, vol.id) {
        return Err(undo(e));
    }
    if let Err(e) = record(inner, vol.id, VolumeState::Free) {
        return Err(undo(e));
    }
    inner.volumes.remove(vol.id);
    super::volume_settings::forget_share(inner, vol.id);
    Ok(VolumeChange::of(name, vol.id, (written_back, dropped), start))
}

/// Wait until no request of `vol` is in flight (it is closed: none starts).
fn wait_idle(inner: &Inner, vol: &VolumeInfo) -> Result<(), EngineError> {
    let t0 = Instant::now();
    while vol.active.load(SeqCst) > 0 {
        refuse_if_stopping(inner)?;
        if t0.elapsed() > IN_FLIGHT_WAIT {
            return Err(EngineError::Io(std::io::Error::other(format!(
                "{} requests of the volume are still in flight after {} s",
                vol.active.load(SeqCst),
                IN_FLIGHT_WAIT.as_secs()
            ))));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Write back and drop `vol`'s blocks until it holds none (its `caching` is off). Returns
/// the dirty versions written back and the clean blocks dropped.
fn drop_blocks(
    inner: &Inner,
    vol: &VolumeInfo,
    progress: &mut dyn FnMut(Progress),
) -> Result<(u64, u64), EngineError> {
    let keys = block_key(vol.id, 0)..block_key(vol.id + 1, 0);
    let (mut written_back, mut dropped) = (0, 0);
    for _ in 0..ROUNDS {
        let dirty = inner.state.lock().occupancy(vol.id).1;
        if dirty > 0 {
            written_back += flush_all(inner, progress)?.blocks;
        }
        let emptied = {
            let mut st = inner.state.lock();
            dropped += st.invalidate_range(keys.clone());
            st.occupancy(vol.id) == (0, 0)
        };
        if emptied {
            // A request that found a block resident before it was dropped may still put it
            // back (a rewrite, a fill). Wait for every request holding a stripe now: if none
            // did, none can any more (nothing is resident, and nothing is allocated).
            inner.stripes.wait_range(vol.id, 0..STRIPES as u64).map_err(EngineError::Io)?;
            let mut st = inner.state.lock();
            let again = st.invalidate_range(keys.clone());
            dropped += again;
            if again == 0 && st.occupancy(vol.id) == (0, 0) {
                return Ok((written_back, dropped));
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err(EngineError::Io(std::io::Error::other(format!(
        "volume {:?}: its blocks kept being rewritten through {ROUNDS} rounds of write-back; \
         it allocates nothing new: run the command again",
        vol.name
    ))))
}

/// While the device names a persisted dirty map, commit it and write it as a new checkpoint
/// (restarting the journal), so nothing on the device names a key of slot `id`.
fn forget_keys(inner: &Inner, id: u32) -> Result<(), EngineError> {
    // Commits what the flusher wrote back since the last barrier: the persisted map then
    // holds no version of the volume (it holds none in memory).
    barrier_persist(inner).map_err(EngineError::Io)?;
    let mut cur = inner.persist.lock();
    if !cur.active {
        return Ok(());
    }
    let entries = inner.state.lock().persisted_entries();
    if let Some(e) = entries.iter().find(|e| key_volume(e.key) == id) {
        return Err(EngineError::Io(std::io::Error::other(format!(
            "the persisted dirty map still names block {} of the volume",
            crate::layout::key_block(e.key)
        ))));
    }
    let generation = cur.generation.max(inner.superblock.lock().checkpoint_generation) + 1;
    write_checkpoint(inner, &entries, generation)?;
    *cur = Cursor {
        active: true,
        next_block: 0,
        base: generation,
        generation,
        need_checkpoint: false,
    };
    Ok(())
}

/// At open: drop what an uncached volume still holds (recovered dirty blocks are written
/// back first). A failure leaves the blocks where they are; the volume allocates nothing.
pub(crate) fn settle_uncached(inner: &Inner) -> Result<(), EngineError> {
    for vol in inner.volumes.iter().filter(|v| !v.caching()) {
        let _change = inner.volume_change.lock();
        drop_blocks(inner, &vol, &mut |_| {})?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "volumes_tests.rs"]
mod tests;
