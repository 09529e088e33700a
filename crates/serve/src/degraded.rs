//! Degraded mode's bookkeeping around the engine (docs/reference/degraded.md): at start, the
//! state file is read (a cache device that failed is refused, or reformatted when the
//! operator says so; the volumes with lost blocks are refused until `ember ctl clear-lost`);
//! then the engine gets its health rules and a sink that writes the state file (synced,
//! atomically) and says that the cache was given up.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use anyhow::{bail, Context};
use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::{DegradedRecord, Engine, FormatSpec, VolumeSpec};

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
}

/// Read the state file before the cache device is opened: refuse a device that failed
/// (unless `--reformat-failed-cache`).
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
    if let Some(r) = &record {
        let same = r.cache_device == config.cache.device && config.cache.memory_size()?.is_none();
        if r.record.degraded && same {
            if !config.cache.reformat_failed {
                bail!(
                    "cache device {} failed ({}; recorded in {}) and is never used as it is \
                     again: give --reformat-failed-cache to reformat it (it starts cold), or \
                     configure a new cache device",
                    config.cache.device.display(),
                    r.record.reason,
                    file.as_ref().map_or(String::new(), |f| f.path().display().to_string())
                );
            }
            reformat = true;
            console.say(&format!(
                "cache device {} failed earlier ({}): reformatting it (--reformat-failed-cache)",
                config.cache.device.display(),
                r.record.reason
            ));
        }
    }
    Ok(Prior { file, record, reformat })
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

/// Once the engine is open: its health rules, the lost lists restored (their volumes
/// refused), the state file rewritten (the new device is healthy), and the sink in place.
pub(crate) fn after_open(
    engine: &Engine,
    config: &ServeConfig,
    prior: Prior,
    console: Arc<dyn Console>,
) -> anyhow::Result<()> {
    engine.set_health(config.health.config()?);
    let device = config.cache.device.clone();
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
            let now =
                StateRecord { cache_device: device.clone(), record: engine.degraded_record() };
            if now != *r {
                f.write(&now).context("rewriting the state file")?;
            }
        }
    }
    let file = prior.file;
    if file.is_none() && engine.write_mode().is_write_back() {
        console.say(
            "no state directory (give --state-dir): if the cache device fails under a write-back \
             policy, the list of lost blocks lives only in memory",
        );
    }
    let said = AtomicBool::new(false);
    engine.set_degraded_sink(Box::new(move |rec: &DegradedRecord| {
        let written = match &file {
            Some(f) => f.write(&StateRecord { cache_device: device.clone(), record: rec.clone() }),
            None if rec.lost_blocks() > 0 => Err(std::io::Error::other(
                "no state directory: the lost list is kept only in memory",
            )),
            None => Ok(()),
        };
        if rec.degraded && !said.swap(true, SeqCst) {
            console.warn(&format!(
                "cache device {} given up (degraded mode): {}; every request goes to backing; {} \
                 blocks lost{}",
                device.display(),
                rec.reason,
                rec.lost_blocks(),
                match (&file, &written) {
                    (Some(f), Ok(())) => format!(", listed in {}", f.path().display()),
                    (_, Err(e)) => format!("; the list could not be written: {e}"),
                    (None, Ok(())) => String::new(),
                }
            ));
        }
        written
    }));
    Ok(())
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
}
