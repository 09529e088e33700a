//! The engine: opens a formatted cache device in front of its backing volumes, serves block
//! requests with write-through or write-around, and shuts down cleanly (drain, checkpoint,
//! clean flag) so the next start is warm.
//!
//! Crash safety in version 1: the first thing `open` writes is a superblock with the clean
//! flag cleared, synced before any other write. After a crash (no clean shutdown) the flag is
//! clear and the cache starts cold; it is never warm from a map that may not match the data
//! region. Under write-through and write-around every acknowledged write is on backing, so a
//! cold start loses nothing.

use crate::config::{EngineConfig, FormatSpec};
use crate::device::{io_context, Device};
use crate::error::EngineError;
use crate::gate::Gate;
use crate::layout::superblock::{FLAG_CLEAN, NO_CHECKPOINT};
use crate::layout::{
    unix_now, Checkpoint, Geometry, LayoutError, MapEntry, Superblock, VolumeRecord, WriteMode,
    VERSION,
};
use crate::report::{Occupancy, Report, VolumeUsage};
use crate::state::CacheState;
use crate::stats::{Counters, Stats};
use crate::stripes::Stripes;
use crate::volume::VolumeExport;
use crate::writeback::{Cursor, Limits, WritebackConfig};
use ember_nbd::{Export, ExportSet};
use ember_trace::{key_block, key_volume};
use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::Arc;
use uuid::Uuid;

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
}

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

/// One served volume.
pub(crate) struct VolumeInfo {
    /// Index in the superblock's volume table: the volume number in block keys.
    pub id: u32,
    pub name: String,
    pub size: u64,
    pub backing: Arc<dyn Device>,
}

/// Shared by the engine handle and every export handle.
pub(crate) struct Inner {
    pub cache: Arc<dyn Device>,
    pub geometry: Geometry,
    pub mode: WriteMode,
    pub state: Mutex<CacheState>,
    pub stripes: Stripes,
    pub gate: Gate,
    /// Served volumes, in configuration order.
    pub volumes: Vec<VolumeInfo>,
    /// Counters by superblock volume index.
    pub counters: Vec<Counters>,
    pub superblock: Mutex<Superblock>,
    volume_names: Vec<String>,
    /// Write-back limits (max/min dirty, epochs, batch).
    pub limits: Limits,
    /// Signals dirty-map progress: the flusher waits on it, FLUSH and writes over the epoch
    /// limit wait for the flusher.
    pub cv: Condvar,
    /// The journal cursor (write-back persist); also serializes barriers.
    pub persist: Mutex<Cursor>,
}

impl Inner {
    pub fn block_size(&self) -> u64 {
        self.geometry.block_size as u64
    }

    /// Count the evictions the state logged (clean-LRU evictions under write-back).
    pub fn count_evictions(&self, st: &mut CacheState) {
        for k in st.take_evicted() {
            if let Some(c) = self.counters.get(key_volume(k) as usize) {
                c.evictions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// The served volume with superblock index `id`.
    pub fn volume_by_id(&self, id: u32) -> Option<&VolumeInfo> {
        self.volumes.iter().find(|v| v.id == id)
    }
}

/// A cache in service. Serve its volumes through [`ExportSet`] (or [`Engine::volume`]), call
/// [`Engine::shutdown`] on SIGTERM/SIGINT. Dropping it without shutdown is a crash: the next
/// start is cold.
pub struct Engine {
    inner: Arc<Inner>,
    open_report: OpenReport,
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Engine {
    /// Dropping without [`Engine::shutdown`] is a crash: the flusher stops where it is.
    fn drop(&mut self) {
        self.stop_flusher();
    }
}

fn time_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Engine {
    /// Format `cache` for the volumes of `spec`: superblock (clean, no checkpoint), empty
    /// journal. Everything previously cached is forgotten.
    pub fn format(cache: &dyn Device, spec: &FormatSpec) -> Result<Superblock, EngineError> {
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
                })
                .collect(),
        };
        sb.encode()?; // validates names and counts before touching the device
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
        Ok(sb)
    }

    /// Read what `cache` holds: geometry, volumes, last shutdown, and occupancy when the last
    /// shutdown was clean. Does not modify the device.
    pub fn inspect(cache: &dyn Device) -> Result<Report, EngineError> {
        let sb = Superblock::read(cache)?;
        let mut per_volume: Option<Vec<u64>> = None;
        let mut occupancy = None;
        let mut note;
        let mut dirty_epochs = Vec::new();
        let mut last_generation = sb.checkpoint_generation;
        let mut journal_commits = 0;
        let crashed_persist = !sb.is_clean() && sb.write_mode == WriteMode::WriteBackPersist;
        if crashed_persist {
            match crate::writeback::recover(cache, &sb) {
                Ok(r) => {
                    dirty_epochs = crate::writeback::epochs_of(&r.dirty);
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
            match read_checkpoint(cache, &sb) {
                Ok(cp) => {
                    let mut counts = vec![0u64; sb.volumes.len()];
                    let mut dirty = 0;
                    for e in &cp.entries {
                        if let Some(c) = counts.get_mut(key_volume(e.key) as usize) {
                            *c += 1;
                        }
                        dirty += u64::from(e.flags & crate::layout::checkpoint::ENTRY_DIRTY != 0);
                    }
                    dirty_epochs = crate::writeback::epochs_of(&cp.entries);
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
                .map(|(i, v)| VolumeUsage {
                    name: v.name.clone(),
                    uuid: v.uuid,
                    size: v.size,
                    cached_blocks: per_volume.as_ref().map(|p| p[i]),
                })
                .collect(),
        })
    }

    /// Open a formatted cache device for service with the default write-back tuning
    /// ([`WritebackConfig::default`]); see [`Engine::open_with`].
    pub fn open(config: EngineConfig) -> Result<Engine, EngineError> {
        Self::open_with(config, WritebackConfig::default())
    }

    /// Open a formatted cache device for service: check the volumes; load the map if the
    /// last shutdown was clean; if the cache last ran write-back persist and crashed, recover
    /// its persisted dirty map (checkpoint + journal, thesis 5.3). Dirty blocks recovered
    /// under another policy are written to backing first. Then, before anything else is
    /// written to the cache device, clear the clean flag (synced; under write-back persist
    /// together with a fresh checkpoint of the dirty map), and start the flusher.
    pub fn open_with(config: EngineConfig, wb: WritebackConfig) -> Result<Engine, EngineError> {
        let EngineConfig { cache, volumes, write_mode, replacement, admission } = config;
        let sb = Superblock::read(cache.as_ref())?;
        if volumes.is_empty() {
            return Err(EngineError::Config("no volumes to serve".into()));
        }
        let mut infos = Vec::with_capacity(volumes.len());
        let mut seen = HashSet::new();
        for v in volumes {
            let Some(id) = sb.volumes.iter().position(|r| r.name == v.name) else {
                let known: Vec<&str> = sb.volumes.iter().map(|r| r.name.as_str()).collect();
                return Err(EngineError::Config(format!(
                    "volume {:?} is not on cache device {} (formatted for: {}); reformat with \
                     `ember cache format` to add it",
                    v.name,
                    cache.describe(),
                    known.join(", ")
                )));
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
            infos.push(VolumeInfo {
                id: id as u32,
                name: v.name,
                size: rec.size,
                backing: v.backing,
            });
        }
        let g = sb.geometry;
        let cap = g.data_blocks as usize;
        let replacement = replacement(cap);
        if replacement.name() == "opt" {
            return Err(EngineError::Config(
                "replacement policy opt needs the future (an oracle) and runs only in simulation"
                    .into(),
            ));
        }
        let mut state = CacheState::new(g.data_blocks as u32, replacement, admission);
        let mut served: HashSet<u32> = infos.iter().map(|v| v.id).collect();
        let all_served = served.clone();
        // A volume whose first block changed while ember was stopped is served cold.
        let mut changed = Vec::new();
        if sb.is_clean() && sb.checkpoint_slot != NO_CHECKPOINT {
            for v in &infos {
                let want = sb.volumes[v.id as usize].fingerprint;
                if want != 0 && fingerprint(v.backing.as_ref(), g.block_size)? != want {
                    served.remove(&v.id);
                    changed.push(v.name.clone());
                }
            }
        }
        let crashed_persist = !sb.is_clean() && sb.write_mode == WriteMode::WriteBackPersist;
        let mut last_generation = sb.checkpoint_generation;
        let open_report = if crashed_persist {
            // Thesis 5.3: the persisted dirty map is the checkpoint plus the journal; it must
            // be recovered in full, never dropped (it holds acknowledged writes).
            let rec = crate::writeback::recover(cache.as_ref(), &sb).map_err(|e| {
                EngineError::Config(format!(
                    "{}: the cache ran write-back persist and did not shut down cleanly, and \
                     its persisted dirty map cannot be read: {e}",
                    cache.describe()
                ))
            })?;
            check_dirty_served(&sb, &rec.dirty, &all_served)?;
            last_generation = rec.last_generation;
            state.load(&rec.dirty, time_ns(), write_mode == WriteMode::WriteBackPersist);
            OpenReport {
                start: StartKind::Cold,
                loaded_blocks: rec.dirty.len() as u64,
                dropped_blocks: 0,
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
            let lost = if sb.write_mode == WriteMode::UnsafeWriteBack {
                "; it ran unsafe-write-back, so writes it had not flushed are lost"
            } else {
                ""
            };
            OpenReport {
                start: StartKind::Cold,
                loaded_blocks: 0,
                dropped_blocks: 0,
                reason: format!("the last shutdown was not clean{lost}"),
            }
        } else if sb.checkpoint_slot == NO_CHECKPOINT {
            OpenReport {
                start: StartKind::Fresh,
                loaded_blocks: 0,
                dropped_blocks: 0,
                reason: "freshly formatted".into(),
            }
        } else {
            let checked = read_checkpoint(cache.as_ref(), &sb).and_then(|cp| {
                let dirty: Vec<MapEntry> = cp
                    .entries
                    .iter()
                    .filter(|e| e.flags & crate::layout::checkpoint::ENTRY_DIRTY != 0)
                    .copied()
                    .collect();
                validate(&sb, cp, &served, &all_served).map(|r| (r, dirty))
            });
            match checked {
                Ok(((entries, dropped), dirty)) => {
                    check_dirty_served(&sb, &dirty, &all_served).map_err(|e| {
                        EngineError::Config(format!("{e} (clean shutdown with dirty blocks)"))
                    })?;
                    state.load(&entries, time_ns(), write_mode == WriteMode::WriteBackPersist);
                    let mut reason = format!("checkpoint generation {}", sb.checkpoint_generation);
                    if !dirty.is_empty() {
                        reason += &format!(", {} of its blocks dirty", dirty.len());
                    }
                    if !changed.is_empty() {
                        reason += &format!(
                            "; volume(s) {} changed while ember was stopped (first block \
                             differs): their clean cached blocks were dropped",
                            changed.join(", ")
                        );
                    }
                    OpenReport {
                        start: StartKind::Warm,
                        loaded_blocks: entries.len() as u64,
                        dropped_blocks: dropped,
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
                    reason: format!("checkpoint unusable: {e}"),
                },
            }
        };
        state.persist_tracking = write_mode == WriteMode::WriteBackPersist;
        let limits = wb.resolve(g.data_blocks);
        let running_sb = sb.clone();
        let inner = Arc::new(Inner {
            cache,
            geometry: g,
            mode: write_mode,
            state: Mutex::new(state),
            stripes: Stripes::new(),
            gate: Gate::default(),
            volumes: infos,
            counters: (0..sb.volumes.len()).map(|_| Counters::default()).collect(),
            volume_names: sb.volumes.iter().map(|v| v.name.clone()).collect(),
            superblock: Mutex::new(running_sb),
            limits,
            cv: Condvar::new(),
            persist: Mutex::new(Cursor::default()),
        });
        if write_mode != WriteMode::WriteBackPersist {
            // Recovered dirty blocks reach backing before this policy serves anything.
            crate::writeback::flush_all_now(&inner).map_err(EngineError::Io)?;
        }
        // The clean flag goes before the first write of this run (synced by `write`).
        {
            let mut sb = inner.superblock.lock();
            sb.flags &= !FLAG_CLEAN;
            sb.write_mode = write_mode;
            sb.open_count += 1;
        }
        if write_mode == WriteMode::WriteBackPersist {
            // A fresh checkpoint of the dirty map, so the journal starts a new cycle.
            let entries = inner.state.lock().persisted_entries();
            let generation = last_generation.max(sb.checkpoint_generation) + 1;
            crate::writeback::write_checkpoint(&inner, &entries, generation)?;
            *inner.persist.lock() =
                Cursor { next_block: 0, base: generation, generation, need_checkpoint: false };
        } else {
            let mut sb = inner.superblock.lock();
            sb.sequence += 1;
            sb.write(inner.cache.as_ref())?;
        }
        let flusher = if write_mode.is_write_back() {
            let i = inner.clone();
            Some(
                std::thread::Builder::new()
                    .name("ember-flusher".into())
                    .spawn(move || crate::writeback::flusher(i))
                    .map_err(EngineError::Io)?,
            )
        } else {
            None
        };
        Ok(Engine { inner, open_report, flusher: Mutex::new(flusher) })
    }

    fn stop_flusher(&self) {
        {
            let mut st = self.inner.state.lock();
            st.stop = true;
            self.inner.cv.notify_all();
        }
        if let Some(h) = self.flusher.lock().take() {
            let _ = h.join();
        }
    }

    /// How this start went (fresh, warm with N blocks, or cold and why).
    pub fn open_report(&self) -> &OpenReport {
        &self.open_report
    }

    /// The export handle of volume `name`.
    pub fn volume(&self, name: &str) -> Option<Arc<dyn Export>> {
        let index = self.inner.volumes.iter().position(|v| v.name == name)?;
        Some(Arc::new(VolumeExport::new(self.inner.clone(), index)))
    }

    /// Names of the served volumes, in configuration order.
    pub fn volume_names(&self) -> Vec<String> {
        self.inner.volumes.iter().map(|v| v.name.clone()).collect()
    }

    /// The cache's geometry.
    pub fn geometry(&self) -> Geometry {
        self.inner.geometry
    }

    /// The write policy in force.
    pub fn write_mode(&self) -> WriteMode {
        self.inner.mode
    }

    /// The dirty map now: dirty block versions, in total and per epoch (0 under
    /// write-through and write-around).
    pub fn dirty_stats(&self) -> crate::stats::DirtyStats {
        let st = self.inner.state.lock();
        crate::stats::DirtyStats {
            dirty_blocks: st.dirty_len() as u64,
            dirty_epochs: st.dirty_epochs(),
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let resident = self.inner.state.lock().len() as u64;
        let mut total = crate::stats::VolumeStats::default();
        let volumes = self
            .inner
            .volume_names
            .iter()
            .zip(&self.inner.counters)
            .map(|(n, c)| {
                let s = c.snapshot();
                total.add(&s);
                (n.clone(), s)
            })
            .collect();
        Stats {
            block_size: self.inner.geometry.block_size,
            capacity_blocks: self.inner.geometry.data_blocks,
            resident_blocks: resident,
            volumes,
            total,
        }
    }

    /// Clean shutdown: refuse new requests, wait for those in flight, make backing and cache
    /// durable, write the map to the free checkpoint slot, then a superblock with the clean
    /// flag pointing at it. If any step fails the cache simply starts cold next time.
    ///
    /// Write-back flush and unsafe write-back first write every dirty block to backing;
    /// write-back persist keeps them and writes them with the map (dirty flag and epoch), so
    /// the next start resumes flushing them.
    pub fn shutdown(&self) -> Result<ShutdownReport, EngineError> {
        let inner = &self.inner;
        if !inner.gate.close_and_drain() {
            return Err(EngineError::ShutDown);
        }
        if matches!(inner.mode, WriteMode::WriteBackFlush | WriteMode::UnsafeWriteBack) {
            crate::writeback::drain(inner).map_err(EngineError::Io)?;
        }
        self.stop_flusher();
        for v in &inner.volumes {
            v.backing.sync().map_err(|e| io_context(v.backing.as_ref(), "sync", 0, 0, e))?;
        }
        let cache = inner.cache.as_ref();
        cache.sync().map_err(|e| io_context(cache, "sync", 0, 0, e))?;
        let entries = inner.state.lock().entries();
        let mut sb = inner.superblock.lock();
        let slot = if sb.checkpoint_slot == 0 { 1 } else { 0 };
        let generation = sb.checkpoint_generation.max(inner.persist.lock().generation) + 1;
        let crc = Checkpoint::write(cache, &inner.geometry, slot, generation, &entries)?;
        cache.sync().map_err(|e| io_context(cache, "sync after checkpoint", 0, 0, e))?;
        let mut next = sb.clone();
        for v in &inner.volumes {
            next.volumes[v.id as usize].fingerprint =
                fingerprint(v.backing.as_ref(), inner.geometry.block_size)?;
        }
        next.sequence += 1;
        next.flags |= FLAG_CLEAN;
        next.last_shutdown = unix_now();
        next.checkpoint_slot = slot;
        next.checkpoint_generation = generation;
        next.checkpoint_entries = entries.len() as u64;
        next.checkpoint_crc = crc;
        next.write(cache)?;
        *sb = next;
        Ok(ShutdownReport {
            persisted_blocks: entries.len() as u64,
            generation,
            sequence: sb.sequence,
        })
    }
}

/// CRC-32C of a backing volume's first block (or all of it, if smaller); never 0, which
/// means "no fingerprint".
fn fingerprint(dev: &dyn Device, block_size: u32) -> Result<u32, EngineError> {
    let n = (block_size as u64).min(dev.size()) as usize;
    let mut b = vec![0u8; n];
    dev.read_at(0, &mut b).map_err(|e| io_context(dev, "fingerprint read", 0, n as u64, e))?;
    Ok(crc32c::crc32c(&b).max(1))
}

fn read_checkpoint(cache: &dyn Device, sb: &Superblock) -> Result<Checkpoint, LayoutError> {
    Checkpoint::read(
        cache,
        &sb.geometry,
        sb.checkpoint_slot,
        sb.checkpoint_generation,
        sb.checkpoint_entries,
        sb.checkpoint_crc,
    )
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
    let corrupt = |detail: String| LayoutError::Corrupt {
        device: "cache device".into(),
        what: "checkpoint entry",
        detail,
    };
    let bs = sb.geometry.block_size as u64;
    let mut blocks = HashSet::new();
    let mut keys = HashSet::new();
    let mut kept = Vec::with_capacity(cp.entries.len());
    let mut dropped = 0;
    for (i, e) in cp.entries.into_iter().enumerate() {
        let vol = key_volume(e.key);
        let Some(rec) = sb.volumes.get(vol as usize) else {
            return Err(corrupt(format!("#{i}: volume {vol} is not in the superblock")));
        };
        if key_block(e.key) >= rec.size / bs {
            return Err(corrupt(format!(
                "#{i}: block {} beyond volume {:?}",
                key_block(e.key),
                rec.name
            )));
        }
        if e.cache_block as u64 >= sb.geometry.data_blocks {
            return Err(corrupt(format!(
                "#{i}: cache block {} beyond the data region",
                e.cache_block
            )));
        }
        let dirty = e.flags & crate::layout::checkpoint::ENTRY_DIRTY != 0;
        if e.flags & !crate::layout::checkpoint::ENTRY_DIRTY & 0xFFFF != 0 {
            return Err(corrupt(format!("#{i}: unknown flags {:#x}", e.flags)));
        }
        if !dirty && e.flags != 0 {
            return Err(corrupt(format!("#{i}: an epoch on a clean entry ({:#x})", e.flags)));
        }
        if !blocks.insert(e.cache_block) || !keys.insert(e.key) {
            return Err(corrupt(format!("#{i}: duplicate cache block or key")));
        }
        if (dirty && served.contains(&vol)) || warm.contains(&vol) {
            kept.push(e);
        } else {
            dropped += 1;
        }
    }
    Ok((kept, dropped))
}

impl ExportSet for Engine {
    fn get(&self, name: &str) -> Option<Arc<dyn Export>> {
        if name.is_empty() {
            let first = self.inner.volumes.first()?;
            return self.volume(&first.name.clone());
        }
        self.volume(name)
    }

    fn list(&self) -> Vec<(String, String)> {
        self.inner
            .volumes
            .iter()
            .map(|v| {
                (
                    v.name.clone(),
                    format!("ember {} cache over {}", self.inner.mode.name(), v.backing.describe()),
                )
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
