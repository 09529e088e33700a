//! Cleaning control (`[live.cleaning]` in a file; `--flush-rate`, `--flush-idle`,
//! `--dirty-target`, `--flush-min-rate`): a cap on background cleaning and the idle policy
//! with bcache's PI controller, carried out by the engine's flusher
//! ([`ember_engine::CleaningConfig`]). Off unless set: background cleaning at full speed.

use std::time::Duration;

use ember_engine::{CleaningConfig, DEFAULT_MIN_RATE};
use serde::{Deserialize, Serialize};

use super::dirty_limit::blocks_or_percent;
use super::units;

/// Cleaning control.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct CleaningFileSettings {
    /// Cap on background cleaning, bytes per second; 0: none (`--flush-rate`). A FLUSH,
    /// `ember ctl flush`, a write-policy switch's drain and a clean stop ignore it.
    #[serde(with = "units::size")]
    pub flush_rate: u64,
    /// The idle policy: background cleaning runs at full speed only once no request came
    /// for this many milliseconds, and otherwise steers the dirty count toward
    /// `dirty-target`; 0: off (`--flush-idle`).
    pub flush_idle: u64,
    /// BLOCKS or PCT% the controller steers the dirty count toward while requests come
    /// (`--dirty-target`; default 10%).
    #[serde(skip_serializing_if = "Option::is_none", with = "units::opt_text")]
    pub dirty_target: Option<String>,
    /// The controller's lowest rate, bytes per second (`--flush-min-rate`).
    #[serde(with = "units::size")]
    pub min_rate: u64,
}

impl Default for CleaningFileSettings {
    fn default() -> Self {
        CleaningFileSettings {
            flush_rate: 0,
            flush_idle: 0,
            dirty_target: None,
            min_rate: DEFAULT_MIN_RATE,
        }
    }
}

impl CleaningFileSettings {
    /// The engine's settings, or why these are wrong (the engine checks the target against
    /// the cache).
    pub fn config(&self) -> anyhow::Result<CleaningConfig> {
        if self.min_rate == 0 {
            anyhow::bail!("--flush-min-rate 0: at least one byte a second");
        }
        if self.flush_rate > 0 && self.min_rate > self.flush_rate {
            anyhow::bail!(
                "--flush-min-rate {} is above --flush-rate {}",
                self.min_rate,
                self.flush_rate
            );
        }
        let dirty_target = match &self.dirty_target {
            Some(s) => Some(blocks_or_percent("--dirty-target", s)?),
            None => None,
        };
        Ok(CleaningConfig {
            flush_rate: self.flush_rate,
            flush_idle: Duration::from_millis(self.flush_idle),
            dirty_target,
            min_rate: self.min_rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_engine::DirtyLimit;

    #[test]
    fn off_by_default_and_checked() {
        let d = CleaningFileSettings::default().config().unwrap();
        assert_eq!(d, CleaningConfig::default());
        let c = CleaningFileSettings {
            flush_rate: 64 << 20,
            flush_idle: 250,
            dirty_target: Some("20%".into()),
            min_rate: 1 << 20,
        };
        let e = c.config().unwrap();
        assert_eq!(e.flush_idle, Duration::from_millis(250));
        assert_eq!(e.dirty_target, Some(DirtyLimit::Percent(20.0)));
        let bad = CleaningFileSettings { min_rate: 128 << 20, ..c.clone() };
        assert!(bad.config().unwrap_err().to_string().contains("above --flush-rate"));
        let bad = CleaningFileSettings { dirty_target: Some("x%".into()), ..c.clone() };
        assert!(bad.config().unwrap_err().to_string().contains("--dirty-target"));
        let bad = CleaningFileSettings { min_rate: 0, ..c };
        assert!(bad.config().is_err());
        // In a file: sizes as text or bytes, the idle time in milliseconds.
        let t: CleaningFileSettings =
            toml::from_str("flush-rate = \"8M\"\nflush-idle = 100\ndirty-target = 5000\n").unwrap();
        assert_eq!((t.flush_rate, t.flush_idle), (8 << 20, 100));
        assert_eq!(t.dirty_target.as_deref(), Some("5000"));
    }
}
