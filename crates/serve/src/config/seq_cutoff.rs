//! The sequential cutoff's settings (`[live.seq-cutoff]` in a file; `--seq-cutoff-policy`,
//! `--seq-cutoff-read`, `--seq-cutoff-write`, `--seq-cutoff-streams`): Open CAS's
//! `seq-cutoff`, decided by `ember_policy::seq_cutoff`. Off unless a threshold is given.

use ember_engine::SeqCutoffSettings;
use ember_policy::seq_cutoff::{CutoffPolicy, DEFAULT_STREAMS};
use serde::{Deserialize, Serialize};

use super::units;

/// The sequential cutoff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SeqCutoffFileSettings {
    /// When it acts: always, full (only when the cache is full; the default) or never
    /// (`--seq-cutoff-policy`).
    pub policy: String,
    /// Read streams longer than this are not allocated; 0: reads never cut
    /// (`--seq-cutoff-read`).
    #[serde(with = "units::size")]
    pub read: u64,
    /// Write streams longer than this are not allocated; 0: writes never cut
    /// (`--seq-cutoff-write`).
    #[serde(with = "units::size")]
    pub write: u64,
    /// Streams tracked per volume (`--seq-cutoff-streams`).
    pub streams: usize,
}

impl Default for SeqCutoffFileSettings {
    fn default() -> Self {
        Self { policy: "full".into(), read: 0, write: 0, streams: DEFAULT_STREAMS }
    }
}

impl SeqCutoffFileSettings {
    /// The engine's settings, or why these are wrong.
    pub fn settings(&self) -> anyhow::Result<SeqCutoffSettings> {
        let policy: CutoffPolicy =
            self.policy.parse().map_err(|e| anyhow::anyhow!("--seq-cutoff-policy: {e}"))?;
        if self.streams == 0 {
            anyhow::bail!("--seq-cutoff-streams 0: at least one stream");
        }
        Ok(SeqCutoffSettings {
            policy,
            read_bytes: self.read,
            write_bytes: self.write,
            streams: self.streams,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_checked() {
        let d = SeqCutoffFileSettings::default().settings().unwrap();
        assert_eq!((d.policy, d.read_bytes, d.write_bytes), (CutoffPolicy::Full, 0, 0));
        let bad = SeqCutoffFileSettings { policy: "sometimes".into(), ..Default::default() };
        assert!(bad.settings().unwrap_err().to_string().contains("--seq-cutoff-policy"));
        let none = SeqCutoffFileSettings { streams: 0, ..Default::default() };
        assert!(none.settings().is_err());
    }
}
