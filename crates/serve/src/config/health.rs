//! When the cache device is given up, and where degraded mode's record is kept (`[health]`
//! in a file; `--io-error-limit`, `--io-error-halflife`, `--io-timeout`, `--state-dir`):
//! docs/reference/degraded.md.

use std::path::PathBuf;
use std::time::Duration;

use ember_engine::HealthConfig;
use serde::{Deserialize, Serialize};

use super::units;

/// The cache device's health rules and the state directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct HealthSettings {
    /// Degraded once the decayed count of cache-device I/O errors reaches this; 0: never by
    /// count (`--io-error-limit`; bcache's default, 8).
    pub io_error_limit: u32,
    /// The error count halves every this many seconds; 0: errors are never forgotten
    /// (`--io-error-halflife`).
    #[serde(with = "units::secs")]
    pub io_error_halflife: f64,
    /// A cache-device I/O not complete after this many seconds degrades the cache (a hung
    /// device); 0: no timeout (`--io-timeout`).
    #[serde(with = "units::secs")]
    pub io_timeout: f64,
    /// Where the state file (degraded flag, lost blocks) is kept (`--state-dir`). Default:
    /// the config file's directory, else the control socket's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<PathBuf>,
}

impl Default for HealthSettings {
    fn default() -> Self {
        let d = HealthConfig::default();
        HealthSettings {
            io_error_limit: d.error_limit,
            io_error_halflife: d.error_halflife.as_secs_f64(),
            io_timeout: 0.0,
            state_dir: None,
        }
    }
}

impl HealthSettings {
    /// The engine's rules, or why these are wrong.
    pub fn config(&self) -> anyhow::Result<HealthConfig> {
        let secs = |v: f64, flag: &str| {
            Duration::try_from_secs_f64(v)
                .map_err(|_| anyhow::anyhow!("--{flag} {v}: a number of seconds, 0 or more"))
        };
        let timeout = secs(self.io_timeout, "io-timeout")?;
        if !timeout.is_zero() && timeout < Duration::from_millis(10) {
            anyhow::bail!("--io-timeout {}: at least 10ms (or 0: no timeout)", self.io_timeout);
        }
        Ok(HealthConfig {
            error_limit: self.io_error_limit,
            error_halflife: secs(self.io_error_halflife, "io-error-halflife")?,
            io_timeout: (!timeout.is_zero()).then_some(timeout),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bad_values() {
        let c = HealthSettings::default().config().unwrap();
        assert_eq!(c, HealthConfig::default());
        let s = HealthSettings { io_timeout: 0.001, ..HealthSettings::default() };
        assert!(s.config().unwrap_err().to_string().contains("--io-timeout"));
        let s = HealthSettings { io_error_halflife: -1.0, ..HealthSettings::default() };
        assert!(s.config().unwrap_err().to_string().contains("--io-error-halflife"));
        let s = HealthSettings { io_timeout: 5.0, ..HealthSettings::default() };
        assert_eq!(s.config().unwrap().io_timeout, Some(Duration::from_secs(5)));
        let t: HealthSettings = toml::from_str("io-timeout = \"2s\"\nio-error-limit = 0").unwrap();
        assert_eq!((t.io_timeout, t.io_error_limit), (2.0, 0));
    }
}
