//! The engine handle: opens a formatted cache device in front of its backing volumes, hands
//! out volume handles ([`Volume`]) that serve block requests under the configured write
//! policy, reports counters, and shuts down cleanly (drain, checkpoint, clean flag) so the
//! next start is warm.
//!
//! Crash safety in version 1: the first thing `open` writes is a superblock with the clean
//! flag cleared, synced before any other write. After a crash (no clean shutdown) the flag is
//! clear and the cache starts cold (or, under write-back persist, recovers its persisted
//! dirty map); it is never warm from a map that may not match the data region.
//!
//! The work is done elsewhere: [`crate::open`] (open and recovery), [`crate::admin`] (format,
//! inspect, shutdown), [`crate::io`] (the request flows), [`crate::wb`] (flusher, barriers).

use crate::admin::{self, ShutdownReport};
use crate::config::{EngineConfig, FormatSpec};
use crate::core::Inner;
use crate::device::Device;
use crate::error::EngineError;
use crate::io::Volume;
use crate::layout::{Geometry, Superblock, VolumeState, WriteMode};
use crate::live::{
    self, FlushReport, Progress, Status, SwitchReport, VolumeChange, WritebackLimits,
};
use crate::open::{self, OpenReport};
use crate::report::Report;
use crate::stats::Stats;
use crate::wb::flusher;
use crate::wb::WritebackConfig;
use parking_lot::Mutex;
use std::sync::Arc;

/// A cache in service. Serve its volumes through [`Engine::volume`] handles (the NBD adapter,
/// `ember-serve`, wraps them as exports), call
/// [`Engine::shutdown`] on SIGTERM/SIGINT. Dropping it without shutdown is a crash: the next
/// start is cold.
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
    open_report: OpenReport,
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
    batch: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The thread ending a write-policy switch's drain (`live/drain.rs`).
    finisher: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Engine {
    /// Dropping without [`Engine::shutdown`] is a crash: the flusher stops where it is.
    fn drop(&mut self) {
        self.inner.warmup.stop();
        self.stop_flusher();
    }
}

impl Engine {
    /// Format `cache` for the volumes of `spec`: superblock (clean, no checkpoint), empty
    /// journal. Everything previously cached is forgotten.
    pub fn format(cache: &dyn Device, spec: &FormatSpec) -> Result<Superblock, EngineError> {
        admin::format(cache, spec)
    }

    /// Read what `cache` holds: geometry, volumes, last shutdown, and occupancy when the last
    /// shutdown was clean. Does not modify the device.
    pub fn inspect(cache: &dyn Device) -> Result<Report, EngineError> {
        admin::inspect(cache)
    }

    /// Open a formatted cache device for service with the default write-back tuning
    /// ([`WritebackConfig::default`]); see [`Engine::open_with`].
    pub fn open(config: EngineConfig) -> Result<Engine, EngineError> {
        Self::open_with(config, WritebackConfig::default())
    }

    /// Open a formatted cache device for service: resolve `wb`'s dirty thresholds against
    /// the cache's data blocks ([`crate::DirtyLimit`]; one that does not fit is
    /// [`EngineError::DirtyLimit`]); check the volumes; load the map if the last shutdown was
    /// clean; if the cache last ran write-back persist and crashed, recover its persisted
    /// dirty map (checkpoint + journal, thesis 5.3). Dirty blocks recovered under another
    /// policy are written to backing first. Then, before anything else is written to the
    /// cache device, clear the clean flag (synced; under write-back persist together with a
    /// fresh checkpoint of the dirty map), and start the flusher.
    pub fn open_with(config: EngineConfig, wb: WritebackConfig) -> Result<Engine, EngineError> {
        let (inner, open_report) = open::open(config, wb)?;
        let engine = Engine {
            inner,
            open_report,
            flusher: Mutex::new(None),
            batch: Mutex::new(None),
            finisher: Mutex::new(None),
        };
        if engine.inner.policy.load().write_back() {
            engine.ensure_flusher()?;
        }
        if engine.inner.state.lock().dirty_len() > 0 {
            engine.ensure_flusher()?;
        }
        // An uncached volume holds no block: what a crash left of it is written back and
        // dropped now (best effort: it allocates nothing either way).
        let _ = live::volumes::settle_uncached(&engine.inner);
        Ok(engine)
    }

    /// Start the flusher thread unless it runs (at open under a write-back policy, at the
    /// first switch into one or flush on demand otherwise); it runs until the engine stops.
    fn ensure_flusher(&self) -> Result<(), EngineError> {
        let mut slot = self.flusher.lock();
        if slot.is_none() {
            let i = self.inner.clone();
            *slot = Some(
                std::thread::Builder::new()
                    .name("ember-flusher".into())
                    .spawn(move || flusher::flusher(i))
                    .map_err(EngineError::Io)?,
            );
        }
        Ok(())
    }

    /// Start the thread that ends a switch's drain, unless one runs.
    fn ensure_finisher(&self) -> Result<(), EngineError> {
        let mut slot = self.finisher.lock();
        if slot.as_ref().is_some_and(|h| h.is_finished()) {
            if let Some(h) = slot.take() {
                let _ = h.join();
            }
        }
        if slot.is_none() {
            let i = self.inner.clone();
            *slot = Some(
                std::thread::Builder::new()
                    .name("ember-switch".into())
                    .spawn(move || live::drain::finisher(i))
                    .map_err(EngineError::Io)?,
            );
        }
        Ok(())
    }

    fn stop_flusher(&self) {
        {
            let mut st = self.inner.state.lock();
            st.stop = true;
            self.inner.cv.notify_all();
        }
        for slot in [&self.flusher, &self.batch, &self.finisher] {
            if let Some(h) = slot.lock().take() {
                let _ = h.join();
            }
        }
    }

    /// Start the batch mover of a discrete sieve (the admission policy is an
    /// `ember_policy::admission::EpochAdmission`): every `epoch_ns` from the first access,
    /// the sieve's choice becomes the cache's contents (`batch.rs`). Only under
    /// write-through and write-around.
    pub fn start_batch_sieve(&self, epoch_ns: u64) -> Result<(), EngineError> {
        let policy = self.inner.policy.load();
        if policy.write_back() || policy.drain.is_some() {
            return Err(EngineError::Io(std::io::Error::other(
                "a discrete sieve replaces the cache's contents at each epoch's end, which                  dirty blocks cannot follow: use write-through or write-around",
            )));
        }
        if epoch_ns == 0 {
            return Err(EngineError::Io(std::io::Error::other("the epoch must be longer than 0")));
        }
        let mut slot = self.batch.lock();
        if slot.is_none() {
            let i = self.inner.clone();
            *slot = Some(
                std::thread::Builder::new()
                    .name("ember-batch".into())
                    .spawn(move || crate::batch::epoch_thread(i, epoch_ns))
                    .map_err(EngineError::Io)?,
            );
        }
        Ok(())
    }

    /// How this start went (fresh, warm with N blocks, or cold and why).
    pub fn open_report(&self) -> &OpenReport {
        &self.open_report
    }

    /// The handle of volume `name` (cheap to clone; every clone serves the same volume).
    pub fn volume(&self, name: &str) -> Option<Volume> {
        let vol = self.inner.volumes.by_name(name)?;
        Some(Volume::new(self.inner.clone(), vol))
    }

    /// Names of the served volumes, in configuration order, then in the order they were
    /// attached.
    pub fn volume_names(&self) -> Vec<String> {
        self.inner.volumes.iter().map(|v| v.name.clone()).collect()
    }

    /// Attach `backing` as volume `name` while serving, with no reformat (`ember ctl
    /// attach`): its blocks start cold. Returns its slot in the volume table.
    ///
    /// - The volume MUST be recorded in the superblock's volume table (a new superblock, so
    ///   a crash leaves the table before or after) before it is served, with `recorded` (its
    ///   backing as given and own settings) in the volume records written before it.
    /// - MUST refuse ([`EngineError::Refused`], nothing changed) a name already recorded, a
    ///   name longer than 64 bytes, an empty backing and a full table (32 volumes).
    pub fn attach(
        &self,
        name: &str,
        backing: Arc<dyn Device>,
        recorded: crate::layout::BackingRecord,
    ) -> Result<VolumeChange, EngineError> {
        live::volumes::attach(&self.inner, name, backing, recorded)
    }

    /// Record the served volumes' backings as given and their own settings on the cache
    /// device (`records`: volume name and record; layout version 2's volume records), so a
    /// restart that does not name a volume can serve it.
    ///
    /// - The records MUST be written (and synced) before the superblock that names them: a
    ///   crash leaves the former records or these.
    /// - Nothing is written when nothing changed. Returns false when the layout keeps no
    ///   records (a journal region too small to spare their area).
    pub fn record_volumes(
        &self,
        records: &[(String, crate::layout::BackingRecord)],
    ) -> Result<bool, EngineError> {
        live::volumes::record_volumes(&self.inner, records)
    }

    /// The volumes this cache device records now (slots in use: name, state, size and the
    /// volume records), as the last superblock written says.
    pub fn recorded(&self) -> Vec<crate::layout::VolumeRecord> {
        let sb = self.inner.superblock.lock();
        sb.volumes.iter().filter(|v| v.in_use()).cloned().collect()
    }

    /// The volumes `cache` records (slots in use: name, state, size and the volume records),
    /// read without opening it for service and without modifying it.
    pub fn recorded_volumes(
        cache: &dyn Device,
    ) -> Result<Vec<crate::layout::VolumeRecord>, EngineError> {
        let sb = crate::layout::Superblock::read(cache)?;
        Ok(sb.volumes.into_iter().filter(|v| v.in_use()).collect())
    }

    /// Stop caching volume `name` while it stays served, from backing (`ember ctl uncache`):
    /// write its dirty blocks back, drop its blocks, allocate none until
    /// [`Engine::recache`]. Returns once it holds no block of the cache.
    ///
    /// - A read MUST never return bytes older than the last acknowledged write, at any point
    ///   of the call (`live/volumes.rs` says why).
    /// - The uncached state MUST be on the device before the call returns: a restart keeps it.
    /// - MUST report progress as [`Engine::flush_all`] does, and fail in bounded time with
    ///   the same exits; the volume then stays uncached, its dirty blocks dirty, and calling
    ///   it again resumes.
    pub fn uncache(
        &self,
        name: &str,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<VolumeChange, EngineError> {
        if self.inner.state.lock().dirty_len() > 0 {
            self.ensure_flusher()?;
        }
        live::volumes::uncache(&self.inner, name, progress)
    }

    /// Cache volume `name` again after [`Engine::uncache`] (cold); recorded on the device.
    pub fn recache(&self, name: &str) -> Result<VolumeChange, EngineError> {
        live::volumes::recache(&self.inner, name)
    }

    /// Remove volume `name` while serving (`ember ctl remove`): its requests end with
    /// [`EngineError::ShutDown`] from now on (those in flight finish), its dirty blocks are
    /// written back, its blocks dropped, and its slot freed; its room goes to the others.
    ///
    /// - The volume MUST be recorded as removing until its dirty blocks are on backing, and
    ///   its slot freed only once no checkpoint, journal or persisted map names its keys.
    /// - A failure MUST leave it recorded and served again as it was, and say why: never
    ///   half removed.
    /// - The caller decides whether clients may lose the volume (the engine does not know
    ///   them).
    pub fn remove(
        &self,
        name: &str,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<VolumeChange, EngineError> {
        if self.inner.state.lock().dirty_len() > 0 {
            self.ensure_flusher()?;
        }
        live::volumes::remove(&self.inner, name, progress)
    }

    /// What the cache does with served volume `name` now: cached or uncached.
    pub fn volume_state(&self, name: &str) -> Option<VolumeState> {
        let v = self.inner.volumes.by_name(name)?;
        Some(if v.caching() { VolumeState::Cached } else { VolumeState::Uncached })
    }

    /// The cache's geometry.
    pub fn geometry(&self) -> Geometry {
        self.inner.geometry
    }

    /// The write policy new writes go through (while a switch drains a former write-back
    /// policy, the new one; [`Engine::status`] shows the drain).
    pub fn write_mode(&self) -> WriteMode {
        self.inner.policy.load().mode
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

    /// Dirty block versions now (all epochs), read without the state lock (counters the
    /// dirty map keeps): cheap enough to poll while serving.
    pub fn dirty_blocks(&self) -> u64 {
        self.inner.occupancy.dirty_total()
    }

    /// A snapshot of the counters. Reads atomics only (the occupancy counters the state
    /// keeps), never the state lock the request paths take.
    pub fn stats(&self) -> Stats {
        let resident = self.inner.occupancy.resident_total();
        let mut total = crate::stats::VolumeStats::default();
        let names = self.inner.volume_names.read().clone();
        let volumes = names
            .into_iter()
            .zip(&self.inner.counters)
            .filter(|(n, _)| !n.is_empty())
            .map(|(n, c)| {
                let s = c.snapshot();
                total.add(&s);
                (n, s)
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

    /// Write back every block dirty at the call, and return once all of it is durable on
    /// backing (backing synced): the operator's `flush`, as `casadm --flush-cache` or a
    /// bcache writeback flush. Returns how many dirty block versions there were.
    ///
    /// - MUST be safe to call under load, from any thread, while requests run: writes after
    ///   the call go on (into the next epoch) and are not waited for, so it ends however
    ///   busy the volume is.
    /// - MUST report progress through `progress` (dirty versions written back of those at
    ///   the call) at the start, at least every 100 ms, and at the end; `progress` runs with
    ///   no engine lock held and MUST NOT call back into the engine.
    /// - MUST return in bounded time with an error, leaving the blocks dirty (the flusher
    ///   retries them), when a flusher batch fails while it waits (a backing that fails
    ///   writes), when a shutdown begins ([`EngineError::ShutDown`]), or when the engine is
    ///   poisoned. A backing call that never returns is waited for, as everywhere.
    /// - MUST NOT be slowed by a cap on the flush rate: it is a demand someone waits for,
    ///   like a FLUSH, which such a cap (for background cleaning only) never touches
    ///   (`wb/flusher.rs`).
    /// - MUST NOT change what a FLUSH means under any policy: a client's FLUSH keeps its
    ///   policy's semantics (thesis table 3.1), before, during and after this call.
    /// - Under write-through and write-around (nothing dirty) it syncs backing and returns.
    /// - MUST refuse ([`EngineError::Refused`]) once the cache is degraded: its dirty blocks
    ///   went with the device (they are on the lost list).
    pub fn flush_all(
        &self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<FlushReport, EngineError> {
        self.refuse_degraded("flush the cache")?;
        if self.inner.state.lock().dirty_len() > 0 {
            self.ensure_flusher()?;
        }
        live::flush_all::flush_all(&self.inner, progress)
    }

    /// Switch the write policy while serving, to `target`; returns once the switch is
    /// complete: new writes go through `target`, and no dirty block of a former write-back
    /// policy is left (`casadm --set-cache-mode ... --flush-cache`). Every pair of the six
    /// policies is allowed, unless the cache device cannot hold `target` (below).
    ///
    /// - New writes MUST go through `target` from the moment the call stored it (before it
    ///   returns): the switch does not wait for the volume to go idle. It waits for the
    ///   requests that read the old policy, then, leaving a write-back policy, for its dirty
    ///   blocks to be written back under load, reporting progress through `progress` as
    ///   [`Engine::flush_all`] does. With nothing dirty it takes a superblock write (into
    ///   write-back persist, a checkpoint and a superblock).
    /// - A crash at any moment of the switch MUST recover every acknowledged-and-flushed
    ///   byte, under the guarantee of the policy that acknowledged the FLUSH (and, while a
    ///   drain runs, of both): the superblock says which policy's crash rules apply and
    ///   whether a drain runs (docs/reference/write-policies.md, "Switching while serving",
    ///   has the rules pair by pair).
    /// - Into write-back persist, the journal and a checkpoint of every dirty block MUST be
    ///   durable before the first write-back-persist barrier is acknowledged; out of it, the
    ///   persisted dirty map MUST stay recoverable until none of its blocks is dirty.
    /// - Leaving ordered write-back, backing MUST still receive its epochs in order until the
    ///   older epochs have landed.
    /// - A write that arrives for a block still dirty MUST never let an older copy reach
    ///   backing after it (the flusher's copy in flight lands first, `io/through.rs`).
    /// - MUST return in bounded time, with the same exits as [`Engine::flush_all`]. An error
    ///   while draining leaves the switch in force with its drain pending: the dirty blocks
    ///   stay dirty, the flusher retries them, the drain ends by itself once backing takes
    ///   them ([`Engine::status`] shows it), and calling `set_write_mode(target)` again waits
    ///   for it.
    /// - MUST refuse ([`EngineError::Refused`], nothing changed) a switch the cache cannot
    ///   make: any switch once the cache is degraded; write-back persist or unsafe write-back on a memory cache
    ///   ([`crate::Device::volatile`]), a write-back policy while a discrete sieve runs,
    ///   another policy while an earlier switch's drain is pending, and any switch once a
    ///   shutdown began.
    /// - MUST NOT be called from `progress` or from a request's thread holding the engine's
    ///   locks (none is exposed); calls are serialized.
    pub fn set_write_mode(
        &self,
        target: WriteMode,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<SwitchReport, EngineError> {
        self.refuse_degraded("switch the write policy")?;
        let start = std::time::Instant::now();
        let before = self.inner.policy.load();
        let from = before.drain.unwrap_or(before.mode);
        if target.is_write_back() || from.is_write_back() {
            self.ensure_flusher()?;
        }
        let batch = self.batch.lock().is_some();
        let drained = match live::switch::begin(&self.inner, target, batch)? {
            live::switch::Begun::Done => 0,
            live::switch::Begun::Draining { total } => {
                // Nothing left to write back: end the drain here, no thread needed.
                let ended = live::drain::finish(&self.inner);
                if !matches!(ended, Ok(true)) {
                    self.ensure_finisher()?;
                    ended?;
                    live::drain::wait(&self.inner, target, total, progress)?;
                } else {
                    progress(Progress { done: total, total });
                }
                total
            }
        };
        Ok(SwitchReport { from, to: target, drained_blocks: drained, took: start.elapsed() })
    }

    /// Put a fresh admission sieve in force while serving (`sieve`, built from its spec by
    /// `ember_policy::admission::SieveSpec::build`).
    ///
    /// - The old sieve's counts MUST be dropped with it (the new one learns from nothing);
    ///   the resident blocks MUST stay.
    /// - MUST refuse a discrete sieve (SieveStore-D, RandSieve-BlkD), and any change while one
    ///   runs: its batch mover owns the cache's contents epoch by epoch; it is set at start.
    pub fn set_admission(&self, sieve: ember_policy::admission::Sieve) -> Result<(), EngineError> {
        let batch = self.batch.lock().is_some();
        live::settings::set_admission(&self.inner, sieve, batch)
    }

    /// Put a write-back tuning in force while serving: dirty thresholds, epoch cap, batch
    /// size, flush order ([`WritebackConfig`], resolved against the cache as at open).
    /// Returns the limits now in force.
    ///
    /// - MUST refuse a threshold that does not fit the cache ([`EngineError::DirtyLimit`]),
    ///   changing nothing.
    /// - Every later decision MUST see the new limits (the flusher's next batch, the next
    ///   write); nothing already dirty is lost or rewritten by the change.
    pub fn set_writeback(&self, wb: &WritebackConfig) -> Result<WritebackLimits, EngineError> {
        live::settings::set_writeback(&self.inner, wb)
    }

    /// Put cleaning control in force (at start or while serving): a cap on the rate of
    /// background cleaning and the idle policy ([`crate::CleaningConfig`]). Returns the
    /// settings now in force.
    ///
    /// - MUST refuse a dirty target that does not fit the cache ([`EngineError::DirtyLimit`])
    ///   or a minimum rate above the cap ([`EngineError::Config`]), changing nothing.
    /// - The flusher's next background batch MUST follow the new settings.
    /// - MUST NOT slow what someone waits for: a FLUSH, [`Engine::flush_all`], a switch's
    ///   drain and a clean stop ignore the cap and the idle policy.
    pub fn set_cleaning(
        &self,
        c: &crate::CleaningConfig,
    ) -> Result<crate::CleaningStatus, EngineError> {
        live::settings::set_cleaning(&self.inner, c)
    }

    /// Cleaning control in force, and what background cleaning does now.
    pub fn cleaning(&self) -> crate::CleaningStatus {
        self.inner.cleaning.status()
    }

    /// Put a sequential cutoff in force (at start or while serving): from the next client
    /// access, a miss that continues a stream past its threshold is not allocated. Returns
    /// the settings now in force (thresholds rounded up to whole blocks).
    ///
    /// - MUST NOT change what is cached or dirty; only later allocations are decided anew.
    pub fn set_seq_cutoff(&self, s: live::SeqCutoffSettings) -> live::SeqCutoffSettings {
        live::seq_cutoff::set(&self.inner, s)
    }

    /// Give volume `name` a write policy of its own (`None`: the cache-wide one again); returns
    /// the own policy it had.
    ///
    /// - MUST refuse a write-back policy (the journal, epochs and flusher are the cache's),
    ///   any own policy under ordered or unsafe write-back, and any change while a switch's
    ///   drain runs (`live/volume_settings.rs`).
    /// - MUST keep every acknowledged write as crash-safe as the cache-wide policy keeps it:
    ///   the volume's requests run as during a switch out of it.
    pub fn set_volume_write_mode(
        &self,
        name: &str,
        mode: Option<WriteMode>,
    ) -> Result<Option<WriteMode>, EngineError> {
        live::volume_settings::set_write_mode(&self.inner, name, mode)
    }

    /// Give volume `name` a fresh admission sieve of its own (`None`: the cache-wide one).
    ///
    /// - MUST refuse a discrete sieve: it moves the whole cache's contents.
    /// - MUST NOT change what is cached; only the volume's later misses are decided by it.
    pub fn set_volume_admission(
        &self,
        name: &str,
        sieve: Option<ember_policy::admission::Sieve>,
    ) -> Result<(), EngineError> {
        live::volume_settings::set_admission(&self.inner, name, sieve)
    }

    /// Give volume `name` a sequential cutoff of its own (`None`: the cache-wide one); returns
    /// its own settings now.
    pub fn set_volume_seq_cutoff(
        &self,
        name: &str,
        s: Option<live::SeqCutoffSettings>,
    ) -> Result<live::VolumeSettings, EngineError> {
        live::volume_settings::set_seq_cutoff(&self.inner, name, s)
    }

    /// Volume `name`'s occupancy: cache blocks holding the newest version of one of its
    /// blocks, and its dirty versions. `None` if it is not served.
    pub fn volume_occupancy(&self, name: &str) -> Option<(u64, u64)> {
        let v = self.inner.volumes.by_name(name)?;
        Some(self.inner.state.lock().occupancy(v.id))
    }

    /// Give volume `name` a share of the cache (`None`: none). A policy running without
    /// shares is put under them (`ember_policy::replacement::WithShares`) by the first share,
    /// under the state lock, with the counts built from the cached clean blocks; the last
    /// share cleared puts it back alone.
    ///
    /// - MUST refuse, with nothing changed, limits that do not fit (the reason names the
    ///   volume and the minimums' sum) and a policy that cannot take shares (by name).
    /// - MUST NOT evict anything: later allocations respect the limits.
    pub fn set_volume_shares(
        &self,
        name: &str,
        limits: Option<ember_policy::shares::ShareLimits>,
    ) -> Result<(), EngineError> {
        live::volume_settings::set_shares(&self.inner, name, limits)
    }

    /// Would [`Engine::set_volume_shares`] accept `limits` for volume `name` now? A name not
    /// served is checked as the next volume attached (against the others' minimums). Changes
    /// nothing.
    pub fn check_volume_shares(
        &self,
        name: &str,
        limits: Option<ember_policy::shares::ShareLimits>,
    ) -> Result<(), EngineError> {
        live::volume_settings::check_shares(&self.inner, name, limits)
    }

    /// The settings volume `name` holds apart from the cache-wide ones.
    pub fn volume_settings(&self, name: &str) -> Result<live::VolumeSettings, EngineError> {
        live::volume_settings::get(&self.inner, name)
    }

    /// Array tier: whether the admission sieve decides on DEMOTEs of blocks the cache does
    /// not hold (`ember_policy::demote::DemoteAdmission`); returns the rule it replaces.
    ///
    /// - MUST NOT change what is cached; only later DEMOTEs are decided by the new rule.
    pub fn set_demote_admission(
        &self,
        rule: ember_policy::demote::DemoteAdmission,
    ) -> ember_policy::demote::DemoteAdmission {
        std::mem::replace(&mut self.inner.state.lock().demote_admission, rule)
    }

    /// The sequential cutoff in force.
    pub fn seq_cutoff(&self) -> live::SeqCutoffSettings {
        live::seq_cutoff::get(&self.inner)
    }

    /// The write-back tuning in force, in blocks.
    pub fn writeback_limits(&self) -> WritebackLimits {
        live::settings::limits(&self.inner)
    }

    /// Switch the replacement policy while serving, keeping every cached block: LRU, FIFO,
    /// CLOCK and SIEVE take the resident blocks in the order of their last access.
    ///
    /// - MUST keep the cache's contents (nothing is evicted by the switch).
    /// - MUST refuse ([`EngineError::Refused`]) ARC, SLRU, 2Q and S3-FIFO (their history is
    ///   not in the resident set), OPT (it needs the future), and any change of an array
    ///   tier's DEMOTE scheme.
    /// - Holds the state lock for one insertion per clean block (a pause of about 50 ns a
    ///   block for the requests of the cache).
    pub fn set_replacement(
        &self,
        spec: impl Into<ember_policy::replacement::Spec>,
    ) -> Result<(), EngineError> {
        live::settings::set_replacement(&self.inner, spec.into())
    }

    /// A snapshot of the cache and each volume (write policy and any drain, admission,
    /// replacement, occupancy, dirty blocks, hits and misses, warmup, errors), serializable.
    /// Cheap enough to call every 100 ms while serving at full rate: it reads counters and
    /// takes the state lock once for a few fields, never walking the map.
    pub fn status(&self) -> Status {
        crate::io::settle(&self.inner);
        live::status::status(&self.inner)
    }

    /// Clean shutdown: refuse new requests, wait for those in flight, make backing and cache
    /// durable, write the map to the free checkpoint slot, then a superblock with the clean
    /// flag pointing at it. If any step fails the cache simply starts cold next time.
    ///
    /// Write-back flush and unsafe write-back first write every dirty block to backing;
    /// write-back persist keeps them and writes them with the map (dirty flag and epoch), so
    /// the next start resumes flushing them.
    pub fn shutdown(&self) -> Result<ShutdownReport, EngineError> {
        let report = admin::shutdown(&self.inner, || self.stop_flusher());
        // After the drain: the preloader has left the gate, the log gets every request.
        self.inner.warmup.stop();
        report
    }

    /// Start Bonfire's warmup: monitor every request into the warmup log
    /// `opts.log`, and, if this start loaded no map (cold or fresh), preload from the log
    /// in the background. A log that is missing, damaged, truncated or from another cache
    /// means no preload (the returned line says why), never an error; an error means the
    /// log cannot be created or written at all.
    pub fn start_warmup(
        &self,
        opts: &crate::warmup::WarmupOptions,
    ) -> Result<crate::warmup::WarmupStart, EngineError> {
        let warm = self.open_report.start == crate::open::StartKind::Warm;
        crate::warmup::start::start(&self.inner, warm, opts)
    }

    /// Warmup's state and counters.
    pub fn warmup_stats(&self) -> crate::warmup::WarmupStats {
        self.inner.warmup.stats()
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
