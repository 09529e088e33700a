//! The backing volumes: a file or a block device, or an export of an upstream NBD server
//! (`nbd://`, `nbd+unix://`), which may be trusted across restarts, reconnected, declared
//! dead after a silence, and, for a client tier, sent DEMOTEs.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::Device;

use crate::config::{BackingVolume, NbdBackingSettings};
use crate::NbdDevice;

impl BackingVolume {
    /// Check the name (1 to 64 bytes) and that a path or URI is given.
    pub fn check(&self) -> anyhow::Result<()> {
        let flag = format!("{}={}", self.name, self.backing);
        if self.name.is_empty() || self.name.len() > 64 {
            bail!("--backing {flag:?}: the name must be 1 to 64 bytes");
        }
        if self.backing.is_empty() {
            bail!("--backing {flag:?}: no path or URI after `=`");
        }
        Ok(())
    }

    /// Whether the backing is an NBD export.
    pub fn is_nbd(&self) -> bool {
        self.backing.starts_with("nbd://") || self.backing.starts_with("nbd+unix://")
    }
}

impl NbdBackingSettings {
    /// The reconnection window, if any.
    pub fn reconnect(&self) -> anyhow::Result<Option<Duration>> {
        if !(self.reconnect_secs >= 0.0 && self.reconnect_secs < 1e6) {
            bail!("--nbd-reconnect {}: a number of seconds, 0 or more", self.reconnect_secs);
        }
        Ok((self.reconnect_secs > 0.0).then(|| Duration::from_secs_f64(self.reconnect_secs)))
    }

    /// The silence after which a connection is dead (at least 3 s), if any.
    pub fn dead_after(&self) -> anyhow::Result<Option<Duration>> {
        if !(self.dead_after_secs >= 0.0 && self.dead_after_secs < 1e6) {
            bail!("--nbd-dead-after {}: a number of seconds, 0 or more", self.dead_after_secs);
        }
        Ok((self.dead_after_secs > 0.0)
            .then(|| Duration::from_secs_f64(self.dead_after_secs.max(3.0))))
    }
}

/// Open the backing of `b`; an NBD backing with `nbd`'s settings and, for a client tier, a
/// DEMOTE queue of `demote_queue` entries.
pub fn open_backing(
    b: &BackingVolume,
    nbd: &NbdBackingSettings,
    demote_queue: Option<usize>,
) -> anyhow::Result<Arc<dyn Device>> {
    if b.is_nbd() {
        let dead_after = nbd.dead_after()?;
        let mut dev = NbdDevice::connect_demoting(&b.backing, demote_queue)
            .and_then(|d| d.dead_peer_after(dead_after))
            .with_context(|| format!("backing {}: connecting to {}", b.name, b.backing))?;
        if let Some(window) = nbd.reconnect()? {
            dev = dev.reconnect_within(window);
        }
        Ok(Arc::new(if nbd.trust_unchanged { dev.trust_unchanged() } else { dev }))
    } else {
        let dev = FileDevice::open(Path::new(&b.backing), FileOptions::default())
            .with_context(|| format!("backing {}: opening {}", b.name, b.backing))?;
        Ok(Arc::new(dev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backings() {
        let b = |name: &str, backing: &str| BackingVolume::new(name, backing);
        assert!(b("web", "/dev/sdb").check().is_ok());
        assert!(b("db", "nbd://h:1/x=y").check().is_ok() && b("db", "nbd://h:1/x").is_nbd());
        assert!(!b("web", "/dev/sdb").is_nbd());
        let e = b("", "x").check().unwrap_err().to_string();
        assert!(e.contains("\"=x\"") && e.contains("1 to 64 bytes"), "{e}");
        assert!(b(&"n".repeat(65), "x").check().is_err());
        assert!(b("x", "").check().unwrap_err().to_string().contains("no path or URI"));
    }

    #[test]
    fn reconnect_and_dead_peer_times() {
        let s = |reconnect_secs: f64, dead_after_secs: f64| NbdBackingSettings {
            trust_unchanged: false,
            reconnect_secs,
            dead_after_secs,
        };
        let secs = |s: u64| Some(Duration::from_secs(s));
        assert_eq!(NbdBackingSettings::default().reconnect().unwrap(), None);
        assert_eq!(NbdBackingSettings::default().dead_after().unwrap(), secs(30), "the default");
        assert_eq!(s(2.5, 30.0).reconnect().unwrap(), Some(Duration::from_millis(2500)));
        assert!(s(-1.0, 30.0).reconnect().is_err());
        assert_eq!(s(0.0, 1.0).dead_after().unwrap(), secs(3), "at least 3 s");
        assert_eq!(s(0.0, 0.0).dead_after().unwrap(), None);
        assert!(s(0.0, -2.0).dead_after().is_err());
    }
}
