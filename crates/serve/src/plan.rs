//! Every setting of a [`ServeConfig`] checked and resolved before any device is opened: the
//! volumes' names, the policies, the admission sieve, the warmup, the write-back tuning and
//! the NBD server's limits and TLS (its certificates loaded). A refused setting is an error
//! naming its `ember serve` flag; nothing has been opened or written yet.

use anyhow::bail;
use ember_engine::{WarmupOptions, WriteMode, WritebackConfig};
use ember_nbd::server::ServerConfig;
use ember_policy::demote::{DemoteAdmission, Scheme};
use ember_policy::replacement::Spec;
use ember_policy::Admission;

use crate::admission;
use crate::cache_device::refuse_on_memory;
use crate::config::ServeConfig;
use crate::net::{default_workers, server_config};
use crate::policies::{parse_policy, parse_write_mode};

impl ServeConfig {
    /// Check every setting that can be checked without opening a device (the TLS
    /// certificates are loaded), as [`crate::Server::start`] does first. An error names the
    /// setting's flag.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.cache.device.as_os_str().is_empty() {
            anyhow::bail!("--cache: no cache device");
        }
        // No volume named is checked at start: the cache device may record some
        // (`recorded.rs`).
        match self.log_format.as_str() {
            "text" | "json" => {}
            f => anyhow::bail!("--log-format {f}: text or json"),
        }
        crate::plan::Plan::check(self).map(drop)
    }
}

/// What a [`ServeConfig`] resolves to.
pub(crate) struct Plan {
    /// What the engine is opened with.
    pub engine: EnginePlan,
    /// The engine's warmup options, with a warmup log.
    pub warmup: Option<WarmupOptions>,
    /// The cache device is memory (`mem:SIZE`).
    pub memory: bool,
    /// The NBD server's configuration, worker threads included.
    pub net: ServerConfig,
}

/// What the engine is opened with.
pub(crate) struct EnginePlan {
    /// The write policy.
    pub write_mode: WriteMode,
    /// The replacement policy and its parameters (unless an array scheme replaces it).
    pub kind: Spec,
    /// The array tier's scheme.
    pub array_scheme: Option<Scheme>,
    /// Whether the array tier's sieve decides on DEMOTEs.
    pub demote_admission: DemoteAdmission,
    /// The admission sieve.
    pub admission: Box<dyn Admission>,
    /// The epoch of a batch sieve.
    pub batch_epoch: Option<u64>,
    /// The write-back tuning.
    pub writeback: WritebackConfig,
    /// The sequential cutoff.
    pub seq_cutoff: ember_engine::SeqCutoffSettings,
    /// Cleaning control.
    pub cleaning: ember_engine::CleaningConfig,
    /// The volumes' own settings, for those that hold any.
    pub volumes: Vec<crate::config::VolumeOwn>,
    /// Some volume has a share: the replacement policy runs under shares.
    pub shares: bool,
}

impl Plan {
    /// Check `config`, in the order `ember serve` always has.
    pub fn check(config: &ServeConfig) -> anyhow::Result<Plan> {
        for volume in &config.volumes {
            volume.check()?;
        }
        let live = &config.live;
        let write_mode = parse_write_mode(&live.write_policy)?;
        let warmup = config.warmup.options(&config.cache.device)?;
        let memory = config.cache.memory_size()?.is_some();
        if memory {
            if let Some(why) = refuse_on_memory(write_mode) {
                bail!("--write-policy {} on a memory cache: {why}", write_mode.name());
            }
        }
        let kind = parse_policy(&live.policy)?;
        let array_scheme = config.tiers.scheme(&live.policy)?;
        let demote_admission = config.tiers.demote_admission()?;
        let (admission, batch_epoch) =
            admission::admission(&live.admission, &live.sieve, live.epoch_count_memory)?;
        if batch_epoch.is_some() && write_mode.is_write_back() {
            bail!(
                "--admission {}: a discrete sieve replaces the cache's contents at each epoch's \
                 end, which dirty blocks cannot follow: use write-through or write-around",
                live.admission
            );
        }
        let writeback = live.writeback.config()?;
        let seq_cutoff = live.seq_cutoff.settings()?;
        let cleaning = live.cleaning.config()?;
        let mut volumes = Vec::new();
        for v in config.volumes.iter().filter(|v| v.has_own_settings()) {
            volumes.push(v.own(live, write_mode)?);
        }
        let shares = config.volumes.iter().any(|v| v.has_share());
        if let Some(v) = config.volumes.iter().find(|v| v.has_share()) {
            use ember_policy::replacement::WithShares;
            if array_scheme.is_some() || !WithShares::takes(kind) {
                bail!(
                    "[[volume]] {}: a share needs a replacement policy that picks its victim \
                     under the shares' filter ({}); --policy is {}",
                    v.name,
                    WithShares::policies().join(", "),
                    live.policy
                );
            }
        }
        let workers = config.workers.unwrap_or_else(default_workers).max(1);
        let net = server_config(&live.limits, &config.tls, workers)?;
        Ok(Plan {
            engine: EnginePlan {
                write_mode,
                kind,
                array_scheme,
                demote_admission,
                admission,
                batch_epoch,
                writeback,
                seq_cutoff,
                cleaning,
                volumes,
                shares,
            },
            warmup,
            memory,
            net,
        })
    }
}
