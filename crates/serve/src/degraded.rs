//! Degraded mode's bookkeeping around the engine (docs/reference/degraded.md): at start, the
//! state file is read (a cache device that failed is refused, or reformatted when the
//! operator says so; the volumes with lost blocks are refused until `ember ctl clear-lost`);
//! then the engine gets its health rules and a sink that writes the state file (synced,
//! atomically) and says that the cache was given up. A device `ember ctl replace-cache` put
//! in place of a failed one is named in the state file with the failed ones it replaced: a
//! start configured with a failed one runs on its replacement.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use anyhow::{bail, Context};
use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::{DegradedRecord, DegradedSink, Engine, FormatSpec, VolumeSpec};
use parking_lot::Mutex;

use crate::config::{CacheSettings, ServeConfig};
use crate::console::Console;
use crate::state_file::{StateFile, StateRecord};

/// What the start found in the state file.
pub(crate) struct Prior {
    /// The state file, if a state directory is known.
    pub file: Option<StateFile>,
    /// Its record, if there is one.
    pub record: Option<StateRecord>,
    /// The configured cache device is the one that failed, and is to be reformatted.
    pub reformat: bool,
    /// The cache device in service: the configured one, or the one that replaced it while
    /// serving (`ember ctl replace-cache`).
    pub in_service: InService,
}

impl Prior {
    /// `config` with the cache device in service.
    pub fn effective(&self, mut config: ServeConfig) -> ServeConfig {
        config.cache.device = self.in_service.device.clone();
        config
    }
}

/// The cache device in service and the failed ones it replaced while serving.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct InService {
    /// The device.
    pub device: PathBuf,
    /// Failed devices it replaced: a start configured with one of them runs on `device`.
    pub replaced: Vec<PathBuf>,
}

/// Read the state file before the cache device is opened: follow a replacement made while
/// serving, and refuse a device that failed (unless `--reformat-failed-cache`).
pub(crate) fn before_open(
    config: &ServeConfig,
    file: Option<StateFile>,
    console: &dyn Console,
) -> anyhow::Result<Prior> {
    config.health.config()?;
    let record = match &file {
        Some(f) => f.read()?,
        None => None,
    };
    let mut reformat = false;
    let configured = &config.cache.device;
    let mut in_service = InService { device: configured.clone(), replaced: Vec::new() };
    if let Some(r) = &record {
        if r.replaced.contains(configured) && r.cache_device != *configured {
            in_service = InService { device: r.cache_device.clone(), replaced: r.replaced.clone() };
            console.say(&format!(
                "cache device {} failed and was replaced by {} while serving (`ember ctl \
                 replace-cache`): serving on {}; name it in the configuration",
                configured.display(),
                r.cache_device.display(),
                r.cache_device.display()
            ));
        }
        let device = &in_service.device;
        let same = r.cache_device == *device && config.cache.memory_size()?.is_none();
        if r.record.degraded && same {
            let unfinished = r.replacing.as_ref().map_or(String::new(), |p| {
                format!(
                    "; its replacement by {} did not finish: configure that device to start \
                     on it",
                    p.display()
                )
            });
            if !config.cache.reformat_failed {
                bail!(
                    "cache device {} failed ({}; recorded in {}) and is never used as it is \
                     again: give --reformat-failed-cache to reformat it (it starts cold), or \
                     configure a new cache device{unfinished}",
                    device.display(),
                    r.record.reason,
                    file.as_ref().map_or(String::new(), |f| f.path().display().to_string())
                );
            }
            reformat = true;
            console.say(&format!(
                "cache device {} failed earlier ({}): reformatting it (--reformat-failed-cache)",
                device.display(),
                r.record.reason
            ));
        }
    }
    Ok(Prior { file, record, reformat, in_service })
}

/// Reformat the cache device of `c` for `volumes` (the device that failed, on the operator's
/// word): everything it held is forgotten.
pub(crate) fn reformat(c: &CacheSettings, volumes: &[VolumeSpec]) -> anyhow::Result<()> {
    let dev = FileDevice::open(
        &c.device,
        FileOptions { direct: c.direct, create_size: None, exclusive: true },
    )
    .with_context(|| format!("opening cache device {} to reformat it", c.device.display()))?;
    let mut spec = FormatSpec::new(volumes.to_vec());
    spec.block_size = c.block_size;
    Engine::format(&dev, &spec)
        .with_context(|| format!("reformatting cache device {}", c.device.display()))?;
    Ok(())
}

/// Degraded mode's bookkeeping of a running server: the state file, the cache device in
/// service and the failed ones it replaced; it makes the engine's sinks.
pub(crate) struct Bookkeeping {
    file: Option<StateFile>,
    in_service: Mutex<InService>,
    console: Arc<dyn Console>,
}

impl Bookkeeping {
    /// The cache device in service now.
    pub fn in_service(&self) -> InService {
        self.in_service.lock().clone()
    }

    /// What the state file says of `rec` with `s` in service.
    fn state(s: &InService, rec: &DegradedRecord) -> StateRecord {
        StateRecord {
            cache_device: s.device.clone(),
            replacing: None,
            replaced: s.replaced.clone(),
            record: rec.clone(),
        }
    }

    /// Write `rec` with the device in service now (a replacement under way is forgotten).
    pub fn write(&self, rec: &DegradedRecord) -> io::Result<()> {
        let s = self.in_service();
        match &self.file {
            Some(f) => f.write(&Self::state(&s, rec)),
            None => Ok(()),
        }
    }

    /// Record that a replacement of the device in service by `new` is under way: until the
    /// engine's record names `new`, a restart holds to the failed device's record.
    pub fn record_replacing(&self, rec: &DegradedRecord, new: &Path) -> io::Result<()> {
        let Some(f) = &self.file else { return Ok(()) };
        let mut state = Self::state(&self.in_service(), rec);
        state.replacing = Some(new.to_path_buf());
        f.write(&state)
    }

    /// The engine's sink: the state file, synced, and a warning when the cache is given up.
    /// With `next`, the first record written says `next` is in service (a replacement), and
    /// from then on it is.
    pub fn sink(self: &Arc<Self>, next: Option<InService>) -> DegradedSink {
        let book = self.clone();
        let pending = Mutex::new(next);
        let said = AtomicBool::new(false);
        Box::new(move |rec: &DegradedRecord| {
            let mut pending = pending.lock();
            let replacing = pending.is_some();
            let s = pending.clone().unwrap_or_else(|| book.in_service());
            let written = match &book.file {
                Some(f) => f.write(&Self::state(&s, rec)),
                None if rec.lost_blocks() > 0 && !replacing => Err(io::Error::other(
                    "no state directory: the lost list is kept only in memory",
                )),
                None => Ok(()),
            };
            if written.is_ok() {
                if let Some(next) = pending.take() {
                    *book.in_service.lock() = next;
                }
            }
            if rec.degraded && !said.swap(true, SeqCst) {
                book.console.warn(&format!(
                    "cache device {} given up (degraded mode): {}; every request goes to \
                     backing; {} blocks lost{}",
                    s.device.display(),
                    rec.reason,
                    rec.lost_blocks(),
                    match (&book.file, &written) {
                        (Some(f), Ok(())) => format!(", listed in {}", f.path().display()),
                        (_, Err(e)) => format!("; the list could not be written: {e}"),
                        (None, Ok(())) => String::new(),
                    }
                ));
            }
            written
        })
    }
}

/// Once the engine is open: its health rules, the lost lists restored (their volumes
/// refused), the state file rewritten (the new device is healthy), and the sink in place.
/// `config` names the cache device in service ([`Prior::effective`]).
pub(crate) fn after_open(
    engine: &Engine,
    config: &ServeConfig,
    prior: Prior,
    console: Arc<dyn Console>,
) -> anyhow::Result<Arc<Bookkeeping>> {
    engine.set_health(config.health.config()?);
    // The failed devices stay named while the configuration names one of them.
    let mut in_service = prior.in_service;
    in_service.device = config.cache.device.clone();
    if let Some(r) = &prior.record {
        for (volume, offsets) in &r.record.lost {
            let n = engine
                .restore_lost(volume, r.record.block_size, offsets)
                .with_context(|| format!("restoring the lost blocks of volume {volume:?}"))?;
            console.warn(&format!(
                "volume {volume} refused: {n} blocks were lost with cache device {} ({}); `ember \
                 ctl clear-lost {volume}` serves it again with backing's version of them",
                r.cache_device.display(),
                r.record.reason
            ));
        }
        if let Some(f) = &prior.file {
            let now = Bookkeeping::state(&in_service, &engine.degraded_record());
            if now != *r {
                f.write(&now).context("rewriting the state file")?;
            }
        }
    }
    if prior.file.is_none() && engine.write_mode().is_write_back() {
        console.say(
            "no state directory (give --state-dir): if the cache device fails under a write-back \
             policy, the list of lost blocks lives only in memory",
        );
    }
    let book =
        Arc::new(Bookkeeping { file: prior.file, in_service: Mutex::new(in_service), console });
    engine.set_degraded_sink(book.sink(None));
    Ok(book)
}

/// The state file of a server configured as `config`, started from `config_file` with its
/// control socket at `control` (if any).
pub(crate) fn state_file(
    config: &ServeConfig,
    config_file: Option<&Path>,
    control: Option<&Path>,
    name: Option<&str>,
) -> Option<StateFile> {
    StateFile::locate(config.health.state_dir.as_deref(), config_file, control, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BackingVolume;
    use parking_lot::Mutex;

    #[derive(Default)]
    struct Lines(Mutex<Vec<String>>);

    impl Console for Lines {
        fn say(&self, line: &str) {
            self.0.lock().push(line.to_string());
        }
        fn warn(&self, line: &str) {
            self.0.lock().push(line.to_string());
        }
    }

    fn config(device: &Path) -> ServeConfig {
        ServeConfig::new(device, vec![BackingVolume::new("db", "b.img")])
    }

    #[test]
    fn a_device_that_failed_is_refused_unless_reformatted_and_a_new_one_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let failed = dir.path().join("cache.img");
        let file = StateFile::in_dir(dir.path(), None);
        let mut rec = StateRecord { cache_device: failed.clone(), ..StateRecord::default() };
        rec.record.degraded = true;
        rec.record.reason = "EIO".into();
        rec.record.block_size = 4096;
        file.write(&rec).unwrap();
        let lines = Lines::default();

        let e = before_open(&config(&failed), Some(file.clone()), &lines).err().unwrap();
        assert!(format!("{e:#}").contains("--reformat-failed-cache"), "{e:#}");

        let mut c = config(&failed);
        c.cache.reformat_failed = true;
        let p = before_open(&c, Some(file.clone()), &lines).unwrap();
        assert!(p.reformat);
        assert_eq!(p.record, Some(rec.clone()));

        let p =
            before_open(&config(&dir.path().join("new.img")), Some(file.clone()), &lines).unwrap();
        assert!(!p.reformat, "a new device starts cold, it is not the failed one");

        let p = before_open(&config(&failed), None, &lines).unwrap();
        assert!(!p.reformat && p.record.is_none(), "no state directory: nothing known");

        let mut bad = config(&failed);
        bad.health.io_timeout = 0.001;
        assert!(before_open(&bad, None, &lines).is_err());
    }

    #[test]
    fn a_start_follows_a_replacement_made_while_serving() {
        let dir = tempfile::tempdir().unwrap();
        let (failed, new) = (dir.path().join("cache.img"), dir.path().join("new.img"));
        let file = StateFile::in_dir(dir.path(), None);
        let lines = Lines::default();

        // Killed during the replacement: the failed device's record holds.
        let mut rec = StateRecord { cache_device: failed.clone(), ..StateRecord::default() };
        rec.record.degraded = true;
        rec.record.reason = "EIO".into();
        rec.record.block_size = 4096;
        rec.replacing = Some(new.clone());
        file.write(&rec).unwrap();
        let e = before_open(&config(&failed), Some(file.clone()), &lines).err().unwrap();
        assert!(format!("{e:#}").contains("did not finish"), "{e:#}");

        // Replaced: a start configured with the failed device runs on the new one.
        let mut rec = StateRecord { cache_device: new.clone(), ..StateRecord::default() };
        rec.record.block_size = 4096;
        rec.replaced = vec![failed.clone()];
        file.write(&rec).unwrap();
        let p = before_open(&config(&failed), Some(file.clone()), &lines).unwrap();
        assert_eq!(p.in_service, InService { device: new.clone(), replaced: vec![failed.clone()] });
        assert_eq!(p.effective(config(&failed)).cache.device, new);
        assert!(!p.reformat);
        // Configured with the new one: nothing is followed, the failed one is forgotten.
        let p = before_open(&config(&new), Some(file.clone()), &lines).unwrap();
        assert_eq!(p.in_service, InService { device: new.clone(), replaced: vec![] });

        // The new device failed too: a start configured with the first one is refused.
        rec.record.degraded = true;
        file.write(&rec).unwrap();
        let e = before_open(&config(&failed), Some(file.clone()), &lines).err().unwrap();
        assert!(format!("{e:#}").contains("new.img failed"), "{e:#}");
    }
}
