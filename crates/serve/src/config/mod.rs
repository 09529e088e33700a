//! [`ServeConfig`]: everything a server is built from, as plain data (every setting of
//! `ember serve`, named after its flag), with serde so that a file can hold one. It holds no
//! device, engine, socket or thread: [`crate::Server::start`] checks it and builds those.
//!
//! The groups follow what can change while the server runs: [`LiveSettings`] (write policy,
//! replacement and admission with the sieves' parameters, dirty thresholds, the NBD server's
//! limits) is what a running server could apply again; everything else is fixed at start.
//! Every group has the defaults `ember serve` has; only the cache device and the volumes must
//! be given ([`ServeConfig::new`]).

mod cleaning;
mod dirty_limit;
mod file;
mod health;
mod keys;
mod live;
mod save;
mod seq_cutoff;
mod sieve_file;
mod units;
mod volume_own;
mod warmup;

use std::path::PathBuf;

use ember_nbd::server::TlsMode;
use serde::{Deserialize, Serialize};

pub use cleaning::CleaningFileSettings;
pub(crate) use dirty_limit::blocks_or_percent;
pub(crate) use file::{
    command_line, get as get_value, line_of_key, line_of_volume_key, set as set_value,
};
pub use file::{parse_with, ConfigError};
pub use health::HealthSettings;
pub use keys::{Key, KEYS};
pub use live::{LimitSettings, LiveSettings, SieveSettings, WritebackSettings};
pub use save::{save_new_volume, save_setting, save_volume_setting};
pub use seq_cutoff::SeqCutoffFileSettings;
pub use volume_own::{
    named_volume_key, under_shares, ShareSize, VolumeOwn, VolumeSeqCutoffFile, VolumeSieveFile,
};
pub use warmup::WarmupSettings;

/// Everything a server is built from. Its serde form is the config file's (TOML, keys in
/// kebab-case, each volume a `[[volume]]` table; docs/reference/config.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServeConfig {
    /// The server's name (`--name`): names the default control socket,
    /// `/run/ember/NAME.sock`. Default: the config file's stem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The control socket `ember ctl` talks to (`--control`). Default:
    /// `$RUNTIME_DIRECTORY/ember.sock` under systemd, else `/run/ember/NAME.sock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<PathBuf>,
    /// How events are logged on stderr (`--log-format`): text or json.
    #[serde(default = "default_log_format")]
    pub log_format: String,
    /// Serve Prometheus metrics over HTTP on this address (`--metrics`; port 0 picks one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// Worker threads running requests (`--workers`; default four per CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// The cache device (required; [`ServeConfig::check`] refuses an empty path).
    #[serde(default)]
    pub cache: CacheSettings,
    /// The backing volumes, one export each, in this order (`--backing NAME=SPEC`; in a
    /// file, one `[[volume]]` table each; at least one).
    #[serde(rename = "volume", default)]
    pub volumes: Vec<BackingVolume>,
    /// Where the NBD server listens.
    #[serde(default)]
    pub listen: ListenSettings,
    /// TLS of the NBD server.
    #[serde(default)]
    pub tls: TlsConfig,
    /// What can change while serving.
    #[serde(default)]
    pub live: LiveSettings,
    /// Bonfire's warmup: monitoring, warmup log, preload.
    #[serde(default)]
    pub warmup: WarmupSettings,
    /// How NBD backings are trusted, reconnected and given up on.
    #[serde(default)]
    pub nbd_backing: NbdBackingSettings,
    /// Wong & Wilkes' two tiers: client (`--demote`) or array (`--array-scheme`).
    #[serde(default)]
    pub tiers: TierSettings,
    /// When the cache device is given up, and where degraded mode's record is kept.
    #[serde(default)]
    pub health: HealthSettings,
}

impl ServeConfig {
    /// The cache device `device` in front of `volumes`, everything else as `ember serve`'s
    /// defaults.
    pub fn new(device: impl Into<PathBuf>, volumes: Vec<BackingVolume>) -> ServeConfig {
        ServeConfig {
            name: None,
            control: None,
            log_format: default_log_format(),
            metrics: None,
            workers: None,
            cache: CacheSettings::new(device),
            volumes,
            listen: ListenSettings::default(),
            tls: TlsConfig::default(),
            live: LiveSettings::default(),
            warmup: WarmupSettings::default(),
            nbd_backing: NbdBackingSettings::default(),
            tiers: TierSettings::default(),
            health: HealthSettings::default(),
        }
    }
}

/// `config` as the config file would hold it (TOML).
pub fn to_toml(config: &ServeConfig) -> anyhow::Result<String> {
    toml::to_string(config).map_err(|e| anyhow::anyhow!("printing the configuration: {e}"))
}

fn default_log_format() -> String {
    "text".into()
}

/// The cache device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CacheSettings {
    /// A file or a block device, or `mem:SIZE` for a cache in memory (formatted at every
    /// start; write-through, write-around, write-back-flush and ordered-write-back only).
    #[serde(default)]
    pub device: PathBuf,
    /// Create the cache file with this many bytes if it does not exist (`--cache-size`).
    #[serde(default, with = "units::opt_size", skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Format the device if it holds no ember superblock (`--format-if-needed`).
    #[serde(default)]
    pub format_if_needed: bool,
    /// Open the device with O_DIRECT (`--direct`).
    #[serde(default)]
    pub direct: bool,
    /// Block size in bytes when formatting (`--block-size`; power of two, at least 4096).
    #[serde(default = "default_block_size", with = "units::size")]
    pub block_size: u32,
    /// Reformat the device if the state file says it failed (`--reformat-failed-cache`): a
    /// device that comes back is never used as it is.
    #[serde(default)]
    pub reformat_failed: bool,
}

fn default_block_size() -> u32 {
    4096
}

impl Default for CacheSettings {
    /// No device yet (a config must name one).
    fn default() -> Self {
        CacheSettings::new(PathBuf::new())
    }
}

impl CacheSettings {
    /// The device `device` with the defaults: no creation, no formatting, buffered, 4 KiB.
    pub fn new(device: impl Into<PathBuf>) -> CacheSettings {
        CacheSettings {
            device: device.into(),
            size: None,
            format_if_needed: false,
            direct: false,
            block_size: default_block_size(),
            reformat_failed: false,
        }
    }
}

/// One backing volume, exported under `name`, with the settings it holds apart from the
/// cache-wide `[live]` ones (each unset one is the cache-wide value; `volume_own.rs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BackingVolume {
    /// Export name (1 to 64 bytes).
    pub name: String,
    /// A path (file or block device) or an NBD URI (`nbd://HOST:PORT/EXPORT`,
    /// `nbd+unix:///EXPORT?socket=PATH`).
    pub backing: String,
    /// Its own write policy: write-through, write-around, or the cache-wide one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_policy: Option<String>,
    /// Its own admission sieve (a per-miss one), with `sieve` over `[live.sieve]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
    /// Its own sieve parameters (a key set here gives it a sieve of its own, `admission`'s
    /// or else the cache-wide one's).
    #[serde(default, skip_serializing_if = "VolumeSieveFile::is_empty")]
    pub sieve: VolumeSieveFile,
    /// Its own sequential cutoff.
    #[serde(default, skip_serializing_if = "VolumeSeqCutoffFile::is_empty")]
    pub seq_cutoff: VolumeSeqCutoffFile,
    /// At or under this share of the cache ("25%" or a size), no other volume's allocation
    /// evicts its blocks.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "units::opt_text")]
    pub min_share: Option<String>,
    /// At this share of the cache ("25%" or a size), its allocations evict its own blocks.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "units::opt_text")]
    pub max_share: Option<String>,
}

impl BackingVolume {
    /// The volume `name` over `backing`, with the cache-wide settings.
    pub fn new(name: impl Into<String>, backing: impl Into<String>) -> BackingVolume {
        BackingVolume {
            name: name.into(),
            backing: backing.into(),
            write_policy: None,
            admission: None,
            sieve: VolumeSieveFile::default(),
            seq_cutoff: VolumeSeqCutoffFile::default(),
            min_share: None,
            max_share: None,
        }
    }

    /// True if it holds no setting of its own.
    pub fn has_own_settings(&self) -> bool {
        self.write_policy.is_some()
            || self.admission.is_some()
            || !self.sieve.is_empty()
            || !self.seq_cutoff.is_empty()
            || self.has_share()
    }

    /// True if it has a share of the cache (`min-share` or `max-share`).
    pub fn has_share(&self) -> bool {
        self.min_share.is_some() || self.max_share.is_some()
    }
}

/// Where the NBD server listens. With neither address, TCP 127.0.0.1:10809.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ListenSettings {
    /// TCP address (`--listen`; port 0 picks a free port).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<String>,
    /// Unix socket (`--unix`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unix: Option<PathBuf>,
    /// Permission bits of the Unix socket (`--unix-mode`; default owner-only): an octal
    /// string ("600") or a TOML octal integer (0o600).
    #[serde(with = "units::mode")]
    pub unix_mode: u32,
}

impl Default for ListenSettings {
    fn default() -> Self {
        ListenSettings { tcp: None, unix: None, unix_mode: 0o600 }
    }
}

/// TLS of the NBD server (docs/reference/tls.md); off by default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TlsConfig {
    /// off, on (offered; plaintext clients still served) or require.
    #[serde(with = "units::text")]
    pub mode: TlsMode,
    /// Directory of server-cert.pem, server-key.pem and (to verify peers) ca-cert.pem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificates: Option<PathBuf>,
    /// Accept only clients presenting a certificate issued by the CA in ca-cert.pem.
    pub verify_peer: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig { mode: TlsMode::Off, certificates: None, verify_peer: false }
    }
}

/// How NBD backings are trusted, reconnected and given up on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct NbdBackingSettings {
    /// Trust that only ember writes the NBD backings, so a restart after a clean shutdown
    /// keeps their cached blocks (`--trust-nbd-backing`).
    pub trust_unchanged: bool,
    /// Seconds a broken connection is reconnected and the request sent again before it
    /// fails (`--nbd-reconnect`; 0: never). In a file: `reconnect`, seconds or "30s".
    #[serde(rename = "reconnect", with = "units::secs")]
    pub reconnect_secs: f64,
    /// Seconds of silence from the server's host before its connection fails
    /// (`--nbd-dead-after`; at least 3; 0: never). In a file: `dead-after`.
    #[serde(rename = "dead-after", with = "units::secs")]
    pub dead_after_secs: f64,
}

impl Default for NbdBackingSettings {
    fn default() -> Self {
        NbdBackingSettings { trust_unchanged: false, reconnect_secs: 0.0, dead_after_secs: 30.0 }
    }
}

/// Wong & Wilkes' two tiers (docs/guide/demote.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TierSettings {
    /// Client tier: hand evicted clean blocks to the NBD backing as DEMOTEs (`--demote`).
    pub demote: bool,
    /// Client tier: DEMOTEs awaiting the array's reply per backing (`--demote-queue`).
    pub demote_queue: usize,
    /// Array tier: manage the cache as this scheme and take DEMOTEs (`--array-scheme`;
    /// replaces the replacement policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_scheme: Option<String>,
    /// Array tier: `sieve` offers a DEMOTE of a block the cache does not hold to the
    /// admission sieve as an allocation-write, `all` stores every DEMOTE the scheme places
    /// (`--demote-admission`; `ember_policy::demote::DemoteAdmission`).
    pub demote_admission: String,
}

impl Default for TierSettings {
    fn default() -> Self {
        TierSettings {
            demote: false,
            demote_queue: 256,
            array_scheme: None,
            demote_admission: "sieve".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_round_trips_through_serde_and_fills_in_defaults() {
        let mut c = ServeConfig::new("cache.img", vec![BackingVolume::new("web", "/dev/sdb")]);
        c.tls.mode = TlsMode::Require;
        c.live.writeback.max_dirty = Some("25%".into());
        let text = serde_json::to_string(&c).unwrap();
        assert!(text.contains("\"mode\":\"require\""), "{text}");
        let back: ServeConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);
        // Only the cache device and the volumes are required.
        let minimal = r#"{"cache": {"device": "cache.img"},
                          "volume": [{"name": "web", "backing": "/dev/sdb"}]}"#;
        let m: ServeConfig = serde_json::from_str(minimal).unwrap();
        assert_eq!(m, ServeConfig::new("cache.img", c.volumes.clone()));
        let unknown = r#"{"cache": {"device": "c", "colour": 1}, "volume": []}"#;
        let e = serde_json::from_str::<ServeConfig>(unknown).unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
    }
}
