//! Opening a cache for service: check the configured volumes against the superblock, load
//! the map of the last clean shutdown (warm), recover the persisted dirty map after a crash
//! under write-back persist, or start cold, then clear the clean flag before the first write;
//! a version-1 cache is then upgraded to version 2 in place (`layout/upgrade.rs`).
//! Hands the shared core back to [`crate::Engine`]; it does not know the engine handle.

use crate::backing::{check_clean, check_replaced, Stale};
use crate::cleaning_cell::LiveCleaning;
use crate::clock::now_ns;
use crate::config::EngineConfig;
use crate::core::{Cursor, Inner, LiveLimits};
use crate::device::watched::Watched;
use crate::device::{io_context, Device};
use crate::error::EngineError;
use crate::gate::Gate;
use crate::health::Health;
use crate::layout::checkpoint::ENTRY_DIRTY;
use crate::layout::entry_check::{duplicate_key, EntryCheck, DUPLICATE};
use crate::layout::superblock::{FLAG_CLEAN, NO_CHECKPOINT};
use crate::layout::upgrade::upgraded_geometry;
use crate::layout::{
    key_volume, recover, Checkpoint, LayoutError, MapEntry, Superblock, VolumeState, WriteMode,
    MAX_VOLUMES, VERSION,
};
use crate::state::CacheState;
use crate::stats::Counters;
use crate::stripes::Stripes;
use crate::volume_info::VolumeInfo;
use crate::volume_set::VolumeSet;
use crate::wb::barrier::write_checkpoint;
use crate::wb::flusher::flush_all_now;
use crate::wb::WritebackConfig;
use crate::write_policy::{refused_on_volatile, PolicyCell};
use parking_lot::{Condvar, Mutex, RwLock};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

/// How the cache started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartKind {
    /// Freshly formatted: empty, nothing to load.
    Fresh,
    /// Warm: the map of the last clean shutdown was loaded.
    Warm,
    /// Cold: the last shutdown was not clean, or its checkpoint was unusable.
    Cold,
}

/// What `open` found.
#[derive(Clone, Debug, Serialize)]
pub struct OpenReport {
    /// Fresh, warm or cold.
    pub start: StartKind,
    /// Map entries loaded (warm start).
    pub loaded_blocks: u64,
    /// Checkpoint entries dropped because their volume is not served now.
    pub dropped_blocks: u64,
    /// Why the start is cold, or empty.
    pub reason: String,
    /// Volumes this start named that the cache device did not record: recorded now (in a
    /// free slot of the volume table) and served cold.
    pub attached: Vec<String>,
    /// Volumes the cache device records that this start did not name: kept recorded (their
    /// slot, and any dirty block refuses the start as before), not served.
    pub unserved: Vec<String>,
    /// The layout upgrade this open made (a version-1 cache is now version 2), if any.
    pub upgraded: Option<String>,
}

/// Open a formatted cache device for service: check the volumes; load the map if the
/// last shutdown was clean; if the cache last ran write-back persist and crashed, recover
/// its persisted dirty map (checkpoint + journal, thesis 5.3). Dirty blocks recovered
/// under another policy are written to backing first. Then, before anything else is
/// written to the cache device, clear the clean flag (synced; under write-back persist
/// together with a fresh checkpoint of the dirty map). The caller starts the flusher.
pub(crate) fn open(
    config: EngineConfig,
    wb: WritebackConfig,
) -> Result<(Arc<Inner>, OpenReport), EngineError> {
    let EngineConfig { cache, volumes, write_mode, replacement, admission } = config;
    if cache.volatile() {
        if let Some(why) = refused_on_volatile(write_mode) {
            return Err(EngineError::Config(format!("{write_mode} on a memory cache: {why}")));
        }
    }
    let mut sb = Superblock::read(cache.as_ref())?;
    let limits = wb.resolve(sb.geometry.data_blocks)?;
    if volumes.is_empty() {
        return Err(EngineError::Config("no volumes to serve".into()));
    }
    // The recorded set is the cache's: a volume named now and not recorded is attached (a
    // free slot, cold), as `ember ctl attach` would; one recorded and not named stays
    // recorded, unserved.
    let mut attached = Vec::new();
    for v in &volumes {
        if sb.slot_of(&v.name).is_none() && !attached.contains(&v.name) {
            sb.place_volume(&v.name, v.backing.size()).map_err(|e| {
                EngineError::Config(format!(
                    "volume {:?} is not on cache device {} and cannot be recorded: {e}",
                    v.name,
                    cache.describe()
                ))
            })?;
            attached.push(v.name.clone());
        }
    }
    let unserved: Vec<String> = sb
        .volumes
        .iter()
        .filter(|r| r.in_use() && !volumes.iter().any(|v| v.name == r.name))
        .map(|r| r.name.clone())
        .collect();
    let mut infos = Vec::with_capacity(volumes.len());
    let mut seen = HashSet::new();
    for v in volumes {
        let Some(id) = sb.slot_of(&v.name).map(|i| i as usize) else {
            return Err(EngineError::Config(format!("volume {:?} is not recorded", v.name)));
        };
        if !seen.insert(id) {
            return Err(EngineError::Config(format!("volume {:?} given twice", v.name)));
        }
        let rec = &sb.volumes[id];
        if v.backing.size() != rec.size {
            return Err(EngineError::Config(format!(
                "volume {:?}: backing device {} has {} bytes but the cache was formatted for \
                 {} bytes; reformat the cache device",
                v.name,
                v.backing.describe(),
                v.backing.size(),
                rec.size
            )));
        }
        // Barriers sync every backing; one nothing was written to since its last sync is
        // skipped (device/sync_skip.rs).
        let backing = Arc::new(crate::device::sync_skip::SyncSkip::new(v.backing));
        let caching = rec.state != VolumeState::Uncached;
        infos.push(VolumeInfo::new(id as u32, v.name, rec.size, backing, caching));
    }
    // A version-1 cache runs with version 2's geometry from the start (its journal ends
    // before the records area), and is upgraded once its journal holds nothing live.
    let upgrading = sb.version < VERSION;
    let g = if upgrading { upgraded_geometry(&sb.geometry) } else { sb.geometry };
    let cap = g.data_blocks as usize;
    let replacement = replacement(cap);
    if replacement.name() == "opt" {
        return Err(EngineError::Config(
            "replacement policy opt needs the future (an oracle) and runs only in simulation"
                .into(),
        ));
    }
    let mut state = CacheState::new(g.data_blocks as u32, replacement, admission);
    let all_served: HashSet<u32> = infos.iter().map(|v| v.id).collect();
    // The volumes whose clean blocks may stay: an uncached one keeps none (its dirty ones are
    // kept, and written back).
    let mut served: HashSet<u32> =
        infos.iter().filter(|v| v.caching.load(SeqCst)).map(|v| v.id).collect();
    // A volume whose backing changed (or cannot be checked) since the last clean shutdown
    // is served cold; dirty blocks over a changed backing refuse the start.
    let mut stale: Vec<(u32, String, Stale)> = Vec::new();
    if sb.is_clean() && sb.checkpoint_slot != NO_CHECKPOINT {
        for v in &infos {
            if attached.contains(&v.name) {
                // Nothing of it is on the device: cold, with nothing to check.
                served.remove(&v.id);
                continue;
            }
            let rec = &sb.volumes[v.id as usize];
            if let Some(why) = check_clean(v.backing.as_ref(), rec, g.block_size)? {
                served.remove(&v.id);
                stale.push((v.id, v.name.clone(), why));
            }
        }
    }
    let crashed_persist = !sb.is_clean() && sb.write_mode == WriteMode::WriteBackPersist;
    let mut last_generation = sb.checkpoint_generation;
    let mut open_report = if crashed_persist {
        // Thesis 5.3: the persisted dirty map is the checkpoint plus the journal; it must
        // be recovered in full, never dropped (it holds acknowledged writes).
        let rec = recover(cache.as_ref(), &sb).map_err(|e| {
            EngineError::Config(format!(
                "{}: the cache ran write-back persist and did not shut down cleanly, and \
                 its persisted dirty map cannot be read: {e}",
                cache.describe()
            ))
        })?;
        check_dirty_served(&sb, &rec.dirty, &all_served)?;
        for v in &infos {
            if !rec.dirty.iter().any(|e| key_volume(e.key) == v.id) {
                continue;
            }
            if let Some(why) = check_replaced(v.backing.as_ref(), &sb.volumes[v.id as usize])? {
                return Err(refuse_dirty(&v.name, &why, &rec.dirty, v.id));
            }
        }
        last_generation = rec.last_generation;
        state.load(&rec.dirty, now_ns(), write_mode == WriteMode::WriteBackPersist);
        OpenReport {
            start: StartKind::Cold,
            loaded_blocks: rec.dirty.len() as u64,
            dropped_blocks: 0,
            attached: Vec::new(),
            unserved: Vec::new(),
            upgraded: None,
            reason: format!(
                "recovered {} dirty blocks after a crash under write-back persist \
                 (checkpoint generation {}, {} journal commits replayed, last generation {})",
                rec.dirty.len(),
                rec.checkpoint_generation,
                rec.journal_commits,
                rec.last_generation
            ),
        }
    } else if !sb.is_clean() {
        let lost = match sb.write_mode {
            WriteMode::UnsafeWriteBack => {
                "; it ran unsafe-write-back, so writes it had not flushed are lost"
            }
            WriteMode::OrderedWriteBack => {
                "; it ran ordered-write-back, so backing holds the writes of the epochs before \
                 some FLUSH and part of the next epoch's (consistent, older): the later ones \
                 are lost"
            }
            _ => "",
        };
        OpenReport {
            start: StartKind::Cold,
            loaded_blocks: 0,
            dropped_blocks: 0,
            attached: Vec::new(),
            unserved: Vec::new(),
            upgraded: None,
            reason: format!("the last shutdown was not clean{lost}"),
        }
    } else if sb.checkpoint_slot == NO_CHECKPOINT {
        OpenReport {
            start: StartKind::Fresh,
            loaded_blocks: 0,
            dropped_blocks: 0,
            attached: Vec::new(),
            unserved: Vec::new(),
            upgraded: None,
            reason: "freshly formatted".into(),
        }
    } else {
        let checked = Checkpoint::read_named(cache.as_ref(), &sb).and_then(|cp| {
            let dirty: Vec<MapEntry> =
                cp.entries.iter().filter(|e| e.flags & ENTRY_DIRTY != 0).copied().collect();
            validate(&sb, cp, &served, &all_served).map(|r| (r, dirty))
        });
        match checked {
            Ok(((entries, dropped), dirty)) => {
                check_dirty_served(&sb, &dirty, &all_served).map_err(|e| {
                    EngineError::Config(format!("{e} (clean shutdown with dirty blocks)"))
                })?;
                for (id, name, why) in &stale {
                    if let Stale::Changed(why) = why {
                        if dirty.iter().any(|e| key_volume(e.key) == *id) {
                            return Err(refuse_dirty(name, why, &dirty, *id));
                        }
                    }
                }
                state.load(&entries, now_ns(), write_mode == WriteMode::WriteBackPersist);
                let mut reason = format!("checkpoint generation {}", sb.checkpoint_generation);
                if !dirty.is_empty() {
                    reason += &format!(", {} of its blocks dirty", dirty.len());
                }
                for (_, name, why) in &stale {
                    reason += &match why {
                        Stale::Changed(w) => format!(
                            "; volume {name} changed while ember was stopped ({w}): its clean \
                             cached blocks were dropped"
                        ),
                        Stale::Unverifiable(w) => format!(
                            "; volume {name} cannot be checked for changes made while ember \
                             was stopped ({w}): its clean cached blocks were dropped"
                        ),
                    };
                }
                // Cold if no served volume kept its map.
                let warm = infos.iter().any(|v| served.contains(&v.id));
                OpenReport {
                    start: if warm { StartKind::Warm } else { StartKind::Cold },
                    loaded_blocks: entries.len() as u64,
                    dropped_blocks: dropped,
                    attached: Vec::new(),
                    unserved: Vec::new(),
                    upgraded: None,
                    reason,
                }
            }
            Err(LayoutError::Io(e)) => return Err(EngineError::Io(e)),
            Err(e) if sb.write_mode == WriteMode::WriteBackPersist => {
                return Err(EngineError::Config(format!(
                    "{}: the checkpoint of the last clean shutdown (write-back persist) is \
                     unusable and may hold dirty blocks: {e}",
                    cache.describe()
                )))
            }
            Err(e) => OpenReport {
                start: StartKind::Cold,
                loaded_blocks: 0,
                dropped_blocks: 0,
                attached: Vec::new(),
                unserved: Vec::new(),
                upgraded: None,
                reason: format!("checkpoint unusable: {e}"),
            },
        }
    };
    open_report.attached = attached;
    open_report.unserved = unserved;
    state.persist_tracking = write_mode == WriteMode::WriteBackPersist;
    let mut running_sb = sb.clone();
    for v in &infos {
        let id = v
            .backing
            .identity()
            .map_err(|e| io_context(v.backing.as_ref(), "identity", 0, 0, e))?;
        let rec = &mut running_sb.volumes[v.id as usize];
        rec.backing_medium = id.medium_digest();
        // Unknown until a clean shutdown records it: this run writes the backing.
        rec.backing_state = 0;
        // A removal the last run left unfinished ends here: the volume is served again.
        if rec.state == VolumeState::Removing {
            rec.state = VolumeState::Cached;
        }
    }
    // From here on every cache-device I/O is watched: its failures decide degraded mode.
    let health = Arc::new(Health::default());
    let watched = Arc::new(Watched::new(cache, health.clone()));
    let cache: Arc<dyn Device> = watched.clone();
    let inner = Arc::new(Inner {
        cache,
        watched,
        health,
        geometry: g,
        policy: PolicyCell::new(write_mode),
        switch: Mutex::new(()),
        occupancy: state.occupancy_counters(),
        seq_cutoff: Mutex::new(state.seq_cutoff.config()),
        state: Mutex::new(state),
        stripes: Stripes::new(),
        gate: Gate::default(),
        volumes: VolumeSet::new(infos),
        counters: (0..MAX_VOLUMES).map(|_| Counters::default()).collect(),
        volume_names: RwLock::new(running_sb.volumes.iter().map(|v| v.name.clone()).collect()),
        superblock: Mutex::new(running_sb),
        volume_change: Mutex::new(()),
        limits: LiveLimits::new(limits),
        cleaning: LiveCleaning::new(g.data_blocks),
        cv: Condvar::new(),
        persist: Mutex::new(Cursor::default()),
        ordered_direct: Mutex::new(()),
        warmup: Default::default(),
    });
    if write_mode != WriteMode::WriteBackPersist {
        if open_report.start == StartKind::Warm
            && open_report.dropped_blocks == 0
            && stale.is_empty()
        {
            // The checkpoint the superblock names holds exactly the map now (nothing was
            // dropped): a stop before any change need not rewrite it. Flushing a recovered
            // dirty block below is a change.
            inner.state.lock().mark_checkpoint_current();
        }
        // Recovered dirty blocks reach backing before this policy serves anything.
        flush_all_now(&inner).map_err(EngineError::Io)?;
    }
    // The clean flag goes before the first write of this run (synced by `write`).
    {
        let mut sb = inner.superblock.lock();
        sb.flags &= !FLAG_CLEAN;
        sb.write_mode = write_mode;
        // A switch the last run left unfinished is over: its dirty blocks were recovered
        // under this run's policy (or written back above).
        sb.live_mode = None;
        sb.draining = None;
        sb.open_count += 1;
    }
    if write_mode == WriteMode::WriteBackPersist {
        // A fresh checkpoint of the dirty map, so the journal starts a new cycle.
        let entries = inner.state.lock().persisted_entries();
        let generation = last_generation.max(sb.checkpoint_generation) + 1;
        write_checkpoint(&inner, &entries, generation)?;
        *inner.persist.lock() = Cursor {
            active: true,
            next_block: 0,
            base: generation,
            generation,
            need_checkpoint: false,
        };
    } else {
        let mut sb = inner.superblock.lock();
        sb.sequence += 1;
        sb.write(inner.cache.as_ref())?;
    }
    if upgrading {
        // The journal holds nothing live now (restarted above under write-back persist,
        // unused otherwise): the records area may take its tail.
        let mut sb = inner.superblock.lock();
        let mut next = sb.clone();
        let from = next.version;
        next.upgrade(inner.cache.as_ref())?;
        next.sequence += 1;
        next.write(inner.cache.as_ref())?;
        open_report.upgraded = Some(if next.geometry.records_len > 0 {
            format!(
                "layout version {from} upgraded in place to {}: the volume records take the \
                 last {} KiB of the {} KiB journal region",
                next.version,
                next.geometry.records_len >> 10,
                next.geometry.journal_len >> 10
            )
        } else {
            format!(
                "layout version {from} upgraded in place to {}: its {} KiB journal cannot spare \
                 the volume records, so the cache records no backings or settings",
                next.version,
                next.geometry.journal_len >> 10
            )
        });
        *sb = next;
    }
    Ok((inner, open_report))
}

/// Dirty entries must belong to served volumes: dropping them would lose acknowledged
/// writes.
fn check_dirty_served(
    sb: &Superblock,
    dirty: &[MapEntry],
    served: &HashSet<u32>,
) -> Result<(), EngineError> {
    let mut missing: Vec<String> = dirty
        .iter()
        .map(|e| key_volume(e.key))
        .filter(|v| !served.contains(v))
        .map(|v| sb.volumes.get(v as usize).map_or(format!("#{v}"), |r| r.name.clone()))
        .collect();
    missing.sort();
    missing.dedup();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(EngineError::Config(format!(
            "the cache holds dirty blocks of volume(s) {} that are not being served; serve them \
             so the dirty blocks reach their backing devices",
            missing.join(", ")
        )))
    }
}

/// Check checkpoint entries against the superblock; keep the clean entries of `warm`
/// volumes and every dirty entry of a served one. Returns the kept entries and how many
/// were dropped.
fn validate(
    sb: &Superblock,
    cp: Checkpoint,
    warm: &HashSet<u32>,
    served: &HashSet<u32>,
) -> Result<(Vec<MapEntry>, u64), LayoutError> {
    let corrupt = |i: usize, detail: String| LayoutError::Corrupt {
        device: "cache device".into(),
        what: "checkpoint entry",
        detail: format!("#{i}: {detail}"),
    };
    // Keys sorted once and one bit per cache block: no per-entry allocation or hashing (a
    // warm start of millions of entries).
    if let Some(i) = duplicate_key(&cp.entries) {
        return Err(corrupt(i, DUPLICATE.into()));
    }
    let mut check = EntryCheck::new(sb);
    let mut kept = Vec::with_capacity(cp.entries.len());
    let mut dropped = 0;
    for (i, e) in cp.entries.into_iter().enumerate() {
        let vol = check.check(&e).map_err(|detail| corrupt(i, detail))?;
        let dirty = e.flags & ENTRY_DIRTY != 0;
        if (dirty && served.contains(&vol)) || warm.contains(&vol) {
            kept.push(e);
        } else {
            dropped += 1;
        }
    }
    Ok((kept, dropped))
}

/// The refusal of a start with dirty blocks over a backing that changed.
fn refuse_dirty(name: &str, why: &str, dirty: &[MapEntry], id: u32) -> EngineError {
    let n = dirty.iter().filter(|e| key_volume(e.key) == id).count();
    EngineError::Config(format!(
        "volume {name:?}: {why}, and the cache holds {n} dirty blocks of it (write-back \
         persist) that were never written to it; refusing to start rather than mix them with \
         what changed. Restore the backing ember ran on, or reformat the cache to discard the \
         dirty blocks"
    ))
}

#[cfg(test)]
#[path = "open_upgrade_tests.rs"]
mod upgrade_tests;
