//! Administration of a cache device: format it, inspect it without modifying it, and the
//! clean shutdown (drain, checkpoint, clean flag) that makes the next start warm. Free
//! functions over the device or the shared core; [`crate::Engine`] calls them.

use crate::backing::fingerprint;
use crate::config::FormatSpec;
use crate::core::Inner;
use crate::device::{io_context, Device};
use crate::error::EngineError;
use crate::layout::checkpoint::ENTRY_DIRTY;
use crate::layout::superblock::{FLAG_CLEAN, NO_CHECKPOINT};
use crate::layout::{
    epochs_of, key_volume, recover, unix_now, Checkpoint, Geometry, LayoutError, Superblock,
    VolumeRecord, VolumeState, WriteMode, VERSION,
};
use crate::report::{Occupancy, Report, VolumeUsage};
use crate::wb::flusher::drain;
use serde::Serialize;
use std::collections::HashSet;
use uuid::Uuid;

/// What a clean shutdown persisted.
#[derive(Clone, Debug, Serialize)]
pub struct ShutdownReport {
    /// Map entries written to the checkpoint.
    pub persisted_blocks: u64,
    /// Checkpoint generation written.
    pub generation: u64,
    /// Superblock sequence number written.
    pub sequence: u64,
}

/// Format `cache` for the volumes of `spec`: superblock (clean, no checkpoint), empty
/// journal. Everything previously cached is forgotten.
pub(crate) fn format(cache: &dyn Device, spec: &FormatSpec) -> Result<Superblock, EngineError> {
    if spec.volumes.is_empty() {
        return Err(EngineError::Config("a cache device needs at least one volume".into()));
    }
    let mut names = HashSet::new();
    for v in &spec.volumes {
        if !names.insert(v.name.as_str()) {
            return Err(EngineError::Config(format!("volume name {:?} given twice", v.name)));
        }
    }
    let geometry = Geometry::compute(
        cache.size(),
        spec.block_size,
        spec.journal_bytes,
        spec.warmup_log_bytes,
    )?;
    let sb = Superblock {
        version: VERSION,
        sequence: 2,
        cache_uuid: Uuid::new_v4(),
        device_size: cache.size(),
        flags: FLAG_CLEAN,
        write_mode: WriteMode::WriteThrough,
        live_mode: None,
        draining: None,
        format_time: unix_now(),
        last_shutdown: 0,
        open_count: 0,
        geometry,
        checkpoint_slot: NO_CHECKPOINT,
        checkpoint_generation: 0,
        checkpoint_entries: 0,
        checkpoint_crc: 0,
        volumes: spec
            .volumes
            .iter()
            .map(|v| VolumeRecord {
                name: v.name.clone(),
                uuid: Uuid::new_v4(),
                size: v.size,
                fingerprint: 0,
                backing_medium: 0,
                backing_state: 0,
                state: VolumeState::Cached,
                recorded: Default::default(),
            })
            .collect(),
        records: Default::default(),
    };
    sb.encode()?; // validates names and counts before touching the device
    lay_out(cache, &sb)?;
    Ok(sb)
}

/// Write the empty layout `sb` describes to `cache`: the other superblock slot, the
/// checkpoint headers and the journal's first block cleared, synced, then `sb` (synced).
/// Everything the device held is forgotten.
pub(crate) fn lay_out(cache: &dyn Device, sb: &Superblock) -> Result<(), EngineError> {
    let geometry = sb.geometry;
    let bs = geometry.block_size as u64;
    let zero = vec![0u8; bs as usize];
    // Slot 1 (odd sequences) is cleared so no older superblock can outrank this one; the
    // checkpoint headers and the journal's first block are cleared so nothing stale parses.
    for off in [
        crate::layout::SUPERBLOCK_SIZE,
        geometry.checkpoint_a,
        geometry.checkpoint_b,
        geometry.journal_offset,
    ] {
        if off == geometry.journal_offset && geometry.journal_len == 0 {
            continue;
        }
        let len = if off == crate::layout::SUPERBLOCK_SIZE {
            crate::layout::SUPERBLOCK_SIZE as usize
        } else {
            bs as usize
        };
        cache
            .write_at(off, &zero[..len])
            .map_err(|e| io_context(cache, "format write", off, len as u64, e))?;
    }
    cache.sync().map_err(|e| io_context(cache, "format sync", 0, 0, e))?;
    sb.write(cache)?;
    Ok(())
}

/// Read what `cache` holds: geometry, volumes, last shutdown, and occupancy when the last
/// shutdown was clean. Does not modify the device.
pub(crate) fn inspect(cache: &dyn Device) -> Result<Report, EngineError> {
    let sb = Superblock::read(cache)?;
    let mut per_volume: Option<Vec<u64>> = None;
    let mut occupancy = None;
    let mut note;
    let mut dirty_epochs = Vec::new();
    let mut last_generation = sb.checkpoint_generation;
    let mut journal_commits = 0;
    let crashed_persist = !sb.is_clean() && sb.write_mode == WriteMode::WriteBackPersist;
    if crashed_persist {
        match recover(cache, &sb) {
            Ok(r) => {
                dirty_epochs = epochs_of(&r.dirty);
                last_generation = r.last_generation;
                journal_commits = r.journal_commits;
                note = format!(
                    "write-back persist, not shut down cleanly: the persisted dirty map \
                     (checkpoint generation {} + {} journal commits) holds {} dirty blocks, \
                     recovered at the next start",
                    r.checkpoint_generation,
                    r.journal_commits,
                    r.dirty.len()
                );
            }
            Err(LayoutError::Io(e)) => return Err(EngineError::Io(e)),
            Err(e) => note = format!("the persisted dirty map is unusable: {e}"),
        }
    } else if !sb.is_clean() {
        note = "the last shutdown was not clean; the map is not on the device".to_string();
    } else if sb.checkpoint_slot == NO_CHECKPOINT {
        note = "no checkpoint yet: empty".to_string();
        per_volume = Some(vec![0; sb.volumes.len()]);
        occupancy = Some(Occupancy {
            capacity_blocks: sb.geometry.data_blocks,
            resident_blocks: 0,
            dirty_blocks: 0,
        });
    } else {
        match Checkpoint::read_named(cache, &sb) {
            Ok(cp) => {
                let mut counts = vec![0u64; sb.volumes.len()];
                let mut dirty = 0;
                for e in &cp.entries {
                    if let Some(c) = counts.get_mut(key_volume(e.key) as usize) {
                        *c += 1;
                    }
                    dirty += u64::from(e.flags & ENTRY_DIRTY != 0);
                }
                dirty_epochs = epochs_of(&cp.entries);
                occupancy = Some(Occupancy {
                    capacity_blocks: sb.geometry.data_blocks,
                    resident_blocks: cp.entries.len() as u64,
                    dirty_blocks: dirty,
                });
                per_volume = Some(counts);
                note = format!("checkpoint generation {}", cp.generation);
            }
            Err(LayoutError::Io(e)) => return Err(EngineError::Io(e)),
            Err(e) => note = format!("checkpoint unusable ({e}); the next start is cold"),
        }
    }
    if sb.write_mode == WriteMode::UnsafeWriteBack && !sb.is_clean() {
        note += "; it ran unsafe-write-back: unflushed writes are lost";
    }
    Ok(Report {
        device: cache.describe(),
        version: sb.version,
        cache_uuid: sb.cache_uuid,
        device_size: sb.device_size,
        geometry: sb.geometry,
        write_mode: sb.write_mode,
        clean_shutdown: sb.is_clean(),
        last_shutdown: (sb.last_shutdown != 0).then_some(sb.last_shutdown),
        format_time: sb.format_time,
        open_count: sb.open_count,
        sequence: sb.sequence,
        checkpoint_generation: sb.checkpoint_generation,
        last_generation,
        journal_commits,
        dirty_epochs,
        occupancy,
        note,
        volumes: sb
            .volumes
            .iter()
            .enumerate()
            .filter(|(_, v)| v.in_use())
            .map(|(i, v)| VolumeUsage {
                name: v.name.clone(),
                uuid: v.uuid,
                size: v.size,
                cached_blocks: per_volume.as_ref().map(|p| p[i]),
                state: v.state,
                backing: v.recorded.backing.clone(),
                settings: v.recorded.settings.clone(),
            })
            .collect(),
    })
}

/// Clean shutdown: refuse new requests, wait for those in flight, make backing and cache
/// durable, write the map to the free checkpoint slot, then a superblock with the clean
/// flag pointing at it. If any step fails the cache simply starts cold next time.
///
/// Write-back flush and unsafe write-back first write every dirty block to backing;
/// write-back persist keeps them and writes them with the map (dirty flag and epoch), so
/// the next start resumes flushing them.
pub(crate) fn shutdown(
    inner: &Inner,
    stop_flusher: impl FnOnce(),
) -> Result<ShutdownReport, EngineError> {
    {
        // Requests waiting for the flusher (the epoch cap, a FLUSH) stop waiting, so the
        // gate can drain.
        let mut st = inner.state.lock();
        st.closing = true;
        inner.cv.notify_all();
    }
    if !inner.gate.close_and_drain() {
        return Err(EngineError::ShutDown);
    }
    if !inner.health.is_healthy() {
        // Degraded: the device is not written again, not even a superblock. Backing holds
        // everything served since; the next start needs a new or reformatted device.
        stop_flusher();
        for v in &inner.volumes {
            v.backing.sync().map_err(|e| io_context(v.backing.as_ref(), "sync", 0, 0, e))?;
        }
        return Err(EngineError::Io(std::io::Error::other(format!(
            "not shut down cleanly: the cache device {} was given up (degraded mode); backing \
             is synced, and the next start needs a new or reformatted cache device",
            inner.cache.describe()
        ))));
    }
    if inner.stripes.is_poisoned() {
        // A request panicked: the map may name a block never filled. Leave the cache as a
        // crash would (clean flag clear): the next start is cold, or recovers the persisted
        // dirty map under write-back persist.
        stop_flusher();
        return Err(EngineError::Io(std::io::Error::other(
            "not shut down cleanly: a request panicked earlier, so the map is not saved; the \
             next start is cold",
        )));
    }
    // Every policy in force but write-back persist writes its dirty blocks back before a
    // clean stop; so does a switch's drain of one of them (a switch out of write-back persist
    // into write-through or write-around keeps the drained blocks in the checkpoint instead,
    // as write-back persist does, and the next start resumes them).
    let policy = inner.policy.load();
    let flushes = |m: Option<WriteMode>| {
        matches!(
            m,
            Some(
                WriteMode::WriteBackFlush
                    | WriteMode::UnsafeWriteBack
                    | WriteMode::OrderedWriteBack
            )
        )
    };
    if flushes(Some(policy.mode)) || flushes(policy.drain) {
        drain(inner).map_err(EngineError::Io)?;
    }
    stop_flusher();
    for v in &inner.volumes {
        v.backing.sync().map_err(|e| io_context(v.backing.as_ref(), "sync", 0, 0, e))?;
    }
    let cache = inner.cache.as_ref();
    cache.sync().map_err(|e| io_context(cache, "sync", 0, 0, e))?;
    // The map, unless the checkpoint the superblock names holds it exactly (a warm start that
    // loaded all of it, and nothing mapped, unmapped, accessed or flushed since): then that
    // checkpoint stays, and the stop writes no entry.
    let (entries, current) = {
        let st = inner.state.lock();
        if !policy.persisting() && st.checkpoint_current() {
            (Vec::new(), Some(st.len() as u64))
        } else {
            (st.entries(), None)
        }
    };
    let persisted_generation = inner.persist.lock().generation;
    let mut sb = inner.superblock.lock();
    let mut next = sb.clone();
    if let Some(n) = current {
        debug_assert_eq!(n, sb.checkpoint_entries);
    } else {
        let slot = if sb.checkpoint_slot == 0 { 1 } else { 0 };
        let generation = sb.checkpoint_generation.max(persisted_generation) + 1;
        let crc = Checkpoint::write(cache, &inner.geometry, slot, generation, &entries)?;
        cache.sync().map_err(|e| io_context(cache, "sync after checkpoint", 0, 0, e))?;
        next.checkpoint_slot = slot;
        next.checkpoint_generation = generation;
        next.checkpoint_entries = entries.len() as u64;
        next.checkpoint_crc = crc;
    }
    for v in &inner.volumes {
        let rec = &mut next.volumes[v.id as usize];
        rec.fingerprint = fingerprint(v.backing.as_ref(), inner.geometry.block_size)?;
        // Taken after the last backing write and sync: a warm start compares it.
        let id = v
            .backing
            .identity()
            .map_err(|e| io_context(v.backing.as_ref(), "identity", 0, 0, e))?;
        rec.backing_medium = id.medium_digest();
        rec.backing_state = id.state_digest();
    }
    next.sequence += 1;
    next.flags |= FLAG_CLEAN;
    next.last_shutdown = unix_now();
    next.write(cache)?;
    *sb = next;
    Ok(ShutdownReport {
        persisted_blocks: sb.checkpoint_entries,
        generation: sb.checkpoint_generation,
        sequence: sb.sequence,
    })
}
