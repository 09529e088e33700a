//! Degraded mode's state file: the cache device that failed and the blocks lost with it
//! ([`ember_engine::DegradedRecord`]), kept outside the cache device in the state directory
//! (`--state-dir`; else beside the config file, else beside the control socket) as
//! `NAME.state.json`. Written atomically (a temporary file synced, renamed over, the
//! directory synced) before ember serves degraded, and again whenever the list changes. A
//! start reads it: a failed device is refused unless `--reformat-failed-cache`, and the
//! volumes with lost blocks are refused until `ember ctl clear-lost`
//! (docs/reference/degraded.md).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use ember_engine::DegradedRecord;
use serde::{Deserialize, Serialize};

/// What the state file holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StateRecord {
    /// The cache device in service (path, or `mem:SIZE`): the configured one, or the one
    /// `ember ctl replace-cache` put in its place.
    pub cache_device: PathBuf,
    /// A replacement of the failed device by this one is under way (`ember ctl
    /// replace-cache`): until the record names it as `cache_device`, the failed device's
    /// record holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacing: Option<PathBuf>,
    /// Failed devices that `cache_device` replaced while serving: a start configured with
    /// one of them runs on `cache_device` instead (the failed one is never trusted again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<PathBuf>,
    /// The engine's record: degraded or not, why, the lost blocks.
    #[serde(flatten)]
    pub record: DegradedRecord,
}

impl StateRecord {
    /// Nothing to keep: the cache is healthy, no block is lost, and no failed device is
    /// named in place of the one in service.
    pub fn is_empty(&self) -> bool {
        !self.record.degraded
            && self.record.lost.is_empty()
            && self.replacing.is_none()
            && self.replaced.is_empty()
    }
}

/// The state file of one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    /// The state file `NAME.state.json` in `dir`.
    pub fn in_dir(dir: &Path, name: Option<&str>) -> StateFile {
        StateFile { path: dir.join(format!("{}.state.json", name.unwrap_or("ember"))) }
    }

    /// Where the state file of a server lives: `state_dir`, else the config file's directory,
    /// else the control socket's; `None` if none is known.
    pub fn locate(
        state_dir: Option<&Path>,
        config_file: Option<&Path>,
        control: Option<&Path>,
        name: Option<&str>,
    ) -> Option<StateFile> {
        let dir = state_dir
            .map(Path::to_path_buf)
            .or_else(|| config_file.and_then(Path::parent).map(Path::to_path_buf))
            .or_else(|| control.and_then(Path::parent).map(Path::to_path_buf))?;
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        Some(StateFile::in_dir(&dir, name))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record, or `None` if there is no state file.
    pub fn read(&self) -> anyhow::Result<Option<StateRecord>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.path.display())),
        };
        serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{}: not a state file of ember", self.path.display()))
    }

    /// Write `rec` atomically and durably; an empty record removes the file instead.
    pub fn write(&self, rec: &StateRecord) -> io::Result<()> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let context = |e: io::Error, what: &str| {
            io::Error::new(e.kind(), format!("{}: {what}: {e}", self.path.display()))
        };
        if rec.is_empty() {
            match std::fs::remove_file(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(context(e, "removing")),
            }
        } else {
            std::fs::create_dir_all(&dir).map_err(|e| context(e, "creating its directory"))?;
            let text = serde_json::to_string_pretty(rec).map_err(io::Error::other)?;
            let tmp = self.path.with_extension("json.tmp");
            let mut f = File::create(&tmp).map_err(|e| context(e, "creating"))?;
            f.write_all(text.as_bytes()).map_err(|e| context(e, "writing"))?;
            f.write_all(b"\n").map_err(|e| context(e, "writing"))?;
            f.sync_all().map_err(|e| context(e, "syncing"))?;
            drop(f);
            std::fs::rename(&tmp, &self.path).map_err(|e| context(e, "renaming"))?;
        }
        File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| context(e, "syncing its directory"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_an_empty_one_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f =
            StateFile::locate(None, Some(&dir.path().join("e.toml")), None, Some("web")).unwrap();
        assert_eq!(f.path(), dir.path().join("web.state.json"));
        assert_eq!(f.read().unwrap(), None);
        let mut rec = StateRecord { cache_device: "/dev/sdz".into(), ..StateRecord::default() };
        rec.record.degraded = true;
        rec.record.block_size = 4096;
        rec.record.reason = "EIO".into();
        rec.record.lost.insert("db".into(), vec![0, 8192]);
        f.write(&rec).unwrap();
        assert_eq!(f.read().unwrap(), Some(rec.clone()));
        rec.record.degraded = false;
        rec.record.lost.clear();
        rec.replaced = vec!["/dev/sdy".into()];
        f.write(&rec).unwrap();
        assert_eq!(f.read().unwrap(), Some(rec.clone()), "a replaced device is kept");
        rec.replaced.clear();
        f.write(&rec).unwrap();
        assert!(!f.path().exists());
        assert_eq!(StateFile::locate(None, None, None, None), None);
        let s = StateFile::locate(Some(Path::new("/var/lib/ember")), None, None, None).unwrap();
        assert_eq!(s.path(), Path::new("/var/lib/ember/ember.state.json"));
        std::fs::write(f.path(), "nonsense").unwrap();
        assert!(f.read().is_err());
    }
}
