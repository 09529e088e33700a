//! The settings a `[[volume]]` table may hold apart from the cache-wide `[live]` ones:
//! `write-policy`, `admission`, a `sieve` table of the sieves' parameters, a `seq-cutoff`
//! table (`policy`, `read`, `write`), and its share of the cache, `min-share` and
//! `max-share` (a percentage of the cache, `"25%"`, or a size, `"1GiB"`). Every key is optional; an unset one is the cache-wide
//! value (a `sieve` key over `[live.sieve]`, a `seq-cutoff` key over `[live.seq-cutoff]`).
//! What each may be is the engine's rule (`ember_engine::Engine::set_volume_write_mode`):
//! write-through, write-around or the cache-wide policy; a per-miss sieve; any cutoff.

use anyhow::{anyhow, bail};
use ember_engine::{SeqCutoffSettings, WriteMode};
use ember_policy::admission::{Sieve, SieveParams, SieveSpec};
use ember_policy::seq_cutoff::CutoffPolicy;
use ember_policy::shares::ShareLimits;
use serde::{Deserialize, Serialize};

use super::live::LiveSettings;
use super::units;
use super::BackingVolume;

/// A volume's own settings, checked against the cache-wide ones (`None`: the cache-wide
/// value).
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeOwn {
    /// The volume.
    pub name: String,
    /// Its own write policy (write-through or write-around).
    pub write_mode: Option<WriteMode>,
    /// Its own sieve.
    pub sieve: Option<SieveSpec>,
    /// Its own sequential cutoff.
    pub seq_cutoff: Option<SeqCutoffSettings>,
    /// At or under this share, no other volume's allocation evicts its blocks.
    pub min_share: Option<ShareSize>,
    /// At this share, its allocations evict its own blocks.
    pub max_share: Option<ShareSize>,
}

impl VolumeOwn {
    /// Volume `name` with every setting the cache-wide one.
    pub fn cache_wide(name: &str) -> VolumeOwn {
        VolumeOwn {
            name: name.to_string(),
            write_mode: None,
            sieve: None,
            seq_cutoff: None,
            min_share: None,
            max_share: None,
        }
    }

    /// Its share limits in blocks of a cache of `capacity` blocks of `block_size` bytes, if
    /// it has a share (an unset min is 0, an unset max the whole cache).
    pub fn share_limits(&self, capacity: u64, block_size: u64) -> Option<ShareLimits> {
        if self.min_share.is_none() && self.max_share.is_none() {
            return None;
        }
        Some(ShareLimits {
            min_blocks: self.min_share.map_or(0, |s| s.blocks(capacity, block_size)),
            max_blocks: self.max_share.map_or(capacity, |s| s.blocks(capacity, block_size)),
        })
    }
}

/// A share of the cache: a percentage of its blocks, or a size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShareSize {
    /// This percentage (0 to 100) of the cache's blocks, rounded down.
    Percent(f64),
    /// This many bytes, rounded down to whole blocks.
    Bytes(u64),
}

impl ShareSize {
    /// `"25%"`, or a size (`"1GiB"`, `4096`).
    pub fn parse(text: &str) -> anyhow::Result<ShareSize> {
        if let Some(p) = text.trim().strip_suffix('%') {
            let pct: f64 = p.trim().parse().map_err(|_| anyhow!("{text:?}: not a percentage"))?;
            if !(0.0..=100.0).contains(&pct) {
                bail!("{text:?}: a percentage from 0 to 100");
            }
            return Ok(ShareSize::Percent(pct));
        }
        crate::parse_size(text).map(ShareSize::Bytes).map_err(|e| anyhow!("{text:?}: {e}"))
    }

    /// In blocks of a cache of `capacity` blocks of `block_size` bytes.
    pub fn blocks(self, capacity: u64, block_size: u64) -> u64 {
        match self {
            ShareSize::Percent(p) => (capacity as f64 * p / 100.0) as u64,
            ShareSize::Bytes(b) => (b / block_size.max(1)).min(capacity),
        }
    }
}

impl BackingVolume {
    /// Its own settings over `live`, the cache-wide ones, whose write policy is
    /// `cache_mode`; or why one cannot be. An error names the volume and the key
    /// (`[[volume]] db: write-policy ...`), so the config file can be pointed at.
    pub fn own(&self, live: &LiveSettings, cache_mode: WriteMode) -> anyhow::Result<VolumeOwn> {
        let name = &self.name;
        let write_mode = match self.write_policy.as_deref() {
            None => None,
            Some(text) => {
                let mode = match text {
                    "wt" => WriteMode::WriteThrough,
                    "wa" => WriteMode::WriteAround,
                    _ => text
                        .parse::<WriteMode>()
                        .map_err(|e| anyhow!("[[volume]] {name}: write-policy {text}: {e}"))?,
                };
                if mode != cache_mode {
                    if mode.is_write_back() {
                        bail!(
                            "[[volume]] {name}: write-policy {text}: the write-back journal, \
                             epochs and flusher are the cache's, so a volume may run \
                             write-through, write-around or the cache-wide policy ({cache_mode})"
                        );
                    }
                    if matches!(
                        cache_mode,
                        WriteMode::OrderedWriteBack | WriteMode::UnsafeWriteBack
                    ) {
                        bail!(
                            "[[volume]] {name}: write-policy {text}: under {cache_mode} every \
                             volume runs it (its promise is about every write of the cache)"
                        );
                    }
                }
                Some(mode).filter(|&m| m != cache_mode)
            }
        };
        let sieve = if self.admission.is_some() || !self.sieve.is_empty() {
            let which = self.admission.as_deref().unwrap_or(&live.admission);
            let params = self.sieve.over(&live.sieve);
            let spec = params
                .spec(which)
                .map_err(|e| anyhow!("[[volume]] {name}: admission {which}: {e}"))?;
            match spec.build().map_err(|e| anyhow!("[[volume]] {name}: admission {which}: {e}"))? {
                Sieve::Continuous(_) => Some(spec),
                Sieve::Discrete(..) => bail!(
                    "[[volume]] {name}: admission {which}: a discrete sieve moves the whole \
                     cache's contents at each epoch's end, so it is cache-wide"
                ),
            }
        } else {
            None
        };
        let seq_cutoff =
            self.seq_cutoff.over(live).map_err(|e| anyhow!("[[volume]] {name}: {e:#}"))?;
        let share = |key: &str, text: &Option<String>| -> anyhow::Result<Option<ShareSize>> {
            text.as_deref()
                .map(|t| ShareSize::parse(t).map_err(|e| anyhow!("[[volume]] {name}: {key} {e:#}")))
                .transpose()
        };
        let min_share = share("min-share", &self.min_share)?;
        let max_share = share("max-share", &self.max_share)?;
        if matches!(max_share, Some(ShareSize::Bytes(0)))
            || max_share == Some(ShareSize::Percent(0.0))
        {
            bail!("[[volume]] {name}: max-share 0: a volume's max share is at least one block");
        }
        Ok(VolumeOwn { name: name.clone(), write_mode, sieve, seq_cutoff, min_share, max_share })
    }
}

/// The volume and the key a message of [`BackingVolume::own`] names
/// (`[[volume]] db: write-policy ...` → `("db", "write-policy")`).
pub fn named_volume_key(message: &str) -> Option<(&str, &str)> {
    let rest = message.split_once("[[volume]] ")?.1;
    let (volume, rest) = rest.split_once(": ")?;
    let key = rest.split([' ', ':']).next()?;
    Some((volume, key))
}

/// A volume's sieve parameters; each unset one is `[live.sieve]`'s.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct VolumeSieveFile {
    /// SieveStore-C's IMCT threshold t1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t1: Option<u32>,
    /// SieveStore-C's MCT threshold t2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t2: Option<u32>,
    /// SieveStore-C's window W ("8h").
    #[serde(skip_serializing_if = "Option::is_none", with = "opt_nanos")]
    pub window: Option<u64>,
    /// SieveStore-C's sub-windows k.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subwindows: Option<usize>,
    /// SieveStore-C's IMCT entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imct: Option<usize>,
    /// RandSieve-C's fraction allocated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// RandSieve-C's and the probabilistic filter's seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The probabilistic filter's probability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// The doorkeeper's blocks recorded before it is cleared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bloom_keys: Option<u64>,
    /// The doorkeeper's false-positive rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bloom_fpr: Option<f64>,
}

impl VolumeSieveFile {
    /// No key set.
    pub fn is_empty(&self) -> bool {
        *self == VolumeSieveFile::default()
    }

    /// These over `base`.
    pub fn over(&self, base: &SieveParams) -> SieveParams {
        let b = base.clone();
        SieveParams {
            t1: self.t1.unwrap_or(b.t1),
            t2: self.t2.unwrap_or(b.t2),
            window_ns: self.window.unwrap_or(b.window_ns),
            subwindows: self.subwindows.unwrap_or(b.subwindows),
            imct: self.imct.unwrap_or(b.imct),
            fraction: self.fraction.unwrap_or(b.fraction),
            seed: self.seed.unwrap_or(b.seed),
            probability: self.probability.unwrap_or(b.probability),
            bloom_keys: self.bloom_keys.unwrap_or(b.bloom_keys),
            bloom_fpr: self.bloom_fpr.unwrap_or(b.bloom_fpr),
            ..b
        }
    }
}

/// A volume's sequential cutoff; each unset key is `[live.seq-cutoff]`'s (the stream count
/// is always the cache's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct VolumeSeqCutoffFile {
    /// always, full or never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Read streams longer than this are not allocated (0: never cut).
    #[serde(skip_serializing_if = "Option::is_none", with = "units::opt_size")]
    pub read: Option<u64>,
    /// Write streams longer than this are not allocated (0: never cut).
    #[serde(skip_serializing_if = "Option::is_none", with = "units::opt_size")]
    pub write: Option<u64>,
}

impl VolumeSeqCutoffFile {
    /// No key set.
    pub fn is_empty(&self) -> bool {
        *self == VolumeSeqCutoffFile::default()
    }

    /// The volume's own cutoff over the cache-wide `live` one, if any key is set; or why the
    /// policy is wrong.
    pub fn over(&self, live: &LiveSettings) -> anyhow::Result<Option<SeqCutoffSettings>> {
        if self.is_empty() {
            return Ok(None);
        }
        let base = live.seq_cutoff.settings()?;
        let policy = match &self.policy {
            Some(p) => {
                p.parse::<CutoffPolicy>().map_err(|e| anyhow!("seq-cutoff.policy {p}: {e}"))?
            }
            None => base.policy,
        };
        Ok(Some(SeqCutoffSettings {
            policy,
            read_bytes: self.read.unwrap_or(base.read_bytes),
            write_bytes: self.write.unwrap_or(base.write_bytes),
            streams: base.streams,
        }))
    }
}

/// An optional duration in nanoseconds, written as a duration ("8h").
mod opt_nanos {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(n) => super::units::nanos::serialize(n, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "super::units::nanos")] u64);
        Ok(Some(Wrap::deserialize(d)?.0))
    }
}

/// The replacement policy `kind` over `capacity` blocks under the volumes' shares (their
/// limits set once the volumes are known), or alone if it cannot take shares (the plan
/// refuses shares with such a policy first; a share set while serving puts a policy
/// started alone under shares then).
pub fn under_shares(
    kind: ember_policy::replacement::Spec,
    capacity: usize,
) -> Box<dyn ember_policy::Replacement> {
    use ember_policy::replacement::WithShares;
    use ember_policy::shares::Shares;
    let shares = Shares::new(capacity);
    match WithShares::new(ember_policy::replacement::build(kind, capacity), shares) {
        Ok(w) => Box::new(w),
        Err(alone) => alone,
    }
}
