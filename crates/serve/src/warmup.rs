//! Bonfire's warmup in a server (docs/design/warmup.md): the configured
//! settings as the engine's [`WarmupOptions`], and the start: `--warmup auto`'s choice on the
//! logged history, the log opened, a preload started with its progress lines.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use ember_engine::{Engine, SnapshotOptions, WarmupOptions, WarmupSize};

use crate::config::WarmupSettings;
use crate::console::Console;
use crate::lab::{self, LiveCache};
use crate::size::parse_size;

/// `--warmup-log cache:`: the log in the cache device's own layout.
pub const IN_CACHE: &str = "cache:";

/// The selector that is chosen at start from the logged history.
pub const AUTO: &str = "auto";

impl WarmupSettings {
    /// The engine's warmup options, or `None` without a log; `cache` is the cache device
    /// (`cache:` puts the log in its layout's region).
    pub fn options(&self, cache: &Path) -> anyhow::Result<Option<WarmupOptions>> {
        let Some(log) = &self.log else { return Ok(None) };
        let in_cache = log.as_os_str() == IN_CACHE;
        let log = if in_cache { cache } else { log.as_path() };
        let mut o = WarmupOptions::new(log.to_path_buf());
        o.in_cache = in_cache;
        o.selector = match self.selector.as_str() {
            "none" | "off" => None,
            // Decided at start ([`start`]), once the cache's size is known.
            AUTO => Some(ember_policy::warmup::SelectorKind::LastK),
            s => Some(s.parse().map_err(|e| anyhow!("--warmup: {e} (or none)"))?),
        };
        o.size = parse_warmup_size(&self.size)?;
        if !(4096..=1 << 20).contains(&self.region) {
            bail!("--warmup-region {}: it must be 4K to 1M", self.region);
        }
        o.region_bytes = self.region;
        if self.log_size < 4096 {
            bail!("--warmup-log-size {}: at least 4K", self.log_size);
        }
        o.log_bytes = self.log_size;
        if self.staging < 4096 {
            bail!("--warmup-staging {}: at least 4K", self.staging);
        }
        o.staging_bytes = self.staging;
        o.log_interval = self.log_interval;
        if self.snapshot {
            use std::os::unix::fs::FileTypeExt;
            if std::fs::metadata(log).is_ok_and(|m| m.file_type().is_block_device()) {
                bail!(
                    "--warmup-snapshot with a warmup log on a block device ({}): the snapshot \
                     lives in a file beside the log (LOG.snapshot), which a device has not; \
                     keep the log in a file to use the snapshot",
                    log.display()
                );
            }
            if self.snapshot_staging < 4096 {
                bail!("--warmup-snapshot-staging {}: at least 4K", self.snapshot_staging);
            }
            o.snapshot = Some(SnapshotOptions {
                staging_bytes: self.snapshot_staging,
                size_bytes: self.snapshot_size,
            });
        }
        Ok(Some(o))
    }
}

/// `50%` (of the cache) or a size such as `256M`.
pub fn parse_warmup_size(s: &str) -> anyhow::Result<WarmupSize> {
    if let Some(p) = s.strip_suffix('%') {
        let v: f64 =
            p.trim().parse().map_err(|_| anyhow!("--warmup-size {s:?}: not a percentage"))?;
        if !(v > 0.0 && v <= 100.0) {
            bail!("--warmup-size {s}: a percentage above 0 and at most 100");
        }
        return Ok(WarmupSize::Percent(v));
    }
    Ok(WarmupSize::Bytes(parse_size(s).map_err(|e| anyhow!("--warmup-size: {e}"))?))
}

/// Start warmup on `engine` with `options` (from `settings`): choose the selector first if
/// it is [`AUTO`], then open the log and, if there is anything to preload, report the
/// preload's progress on `console` until it ends.
pub fn start(
    engine: &Arc<Engine>,
    settings: &WarmupSettings,
    options: &WarmupOptions,
    console: &Arc<dyn Console>,
) -> anyhow::Result<()> {
    let mut w = options.clone();
    if settings.selector == AUTO && w.log.exists() {
        let g = engine.geometry();
        let bs = g.block_size as u64;
        let (kind, line) = lab::choose(
            &w.log,
            LiveCache {
                block_size: bs,
                cache_blocks: g.data_blocks,
                warmup_blocks: w.size.blocks(g.data_blocks, bs),
                region_bytes: w.region_bytes,
                seed: w.seed,
            },
        );
        console.say(&format!("warmup {line}"));
        w.selector = Some(kind);
    } else if settings.selector == AUTO {
        console.say("warmup auto: Last-K, because there is no warmup log yet");
    }
    let start = engine.start_warmup(&w).context("starting warmup")?;
    let place = if w.in_cache {
        format!("{IN_CACHE} (the region of {})", w.log.display())
    } else {
        w.log.display().to_string()
    };
    console.say(&format!("warmup log {place}: {}", start.line));
    if start.planned_blocks > 0 {
        crate::preload_progress::spawn(engine.clone(), console.clone())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_policy::warmup::SelectorKind;
    use std::path::PathBuf;

    #[test]
    fn warmup_sizes_and_settings() {
        assert_eq!(parse_warmup_size("50%").ok(), Some(WarmupSize::Percent(50.0)));
        assert_eq!(parse_warmup_size("256M").ok(), Some(WarmupSize::Bytes(256 << 20)));
        assert!(parse_warmup_size("0%").is_err());
        assert!(parse_warmup_size("101%").is_err());
        assert!(parse_warmup_size("x%").is_err());
        let options = |f: fn(&mut WarmupSettings)| {
            let mut s = WarmupSettings { log: Some(PathBuf::from("w.log")), ..Default::default() };
            f(&mut s);
            s.options(Path::new("c.img")).map_err(|e| format!("{e:#}"))
        };
        assert!(WarmupSettings::default().options(Path::new("c.img")).unwrap().is_none());
        let o = options(|s| {
            s.selector = "top-k".into();
            s.region = 4096;
        })
        .unwrap()
        .unwrap();
        assert_eq!(o.selector, Some(SelectorKind::TopK));
        assert_eq!((o.region_bytes, o.staging_bytes, o.log_bytes), (4096, 256 << 10, 64 << 20));
        assert!(o.snapshot.is_none() && !o.in_cache);
        assert_eq!(options(|s| s.selector = "none".into()).unwrap().unwrap().selector, None);
        let auto = options(|s| s.selector = AUTO.into()).unwrap().unwrap();
        assert_eq!(auto.selector, Some(SelectorKind::LastK), "until chosen at start");
        assert!(options(|s| s.selector = "lru".into())
            .unwrap_err()
            .contains("unknown warmup selector"));
        assert!(options(|s| s.region = 2 << 20).unwrap_err().contains("4K to 1M"));
        assert!(options(|s| s.log_size = 1024).unwrap_err().contains("at least 4K"));
        let o = options(|s| {
            s.snapshot = true;
            s.snapshot_staging = 64 << 10;
            s.snapshot_size = 4 << 20;
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            o.snapshot,
            Some(SnapshotOptions { staging_bytes: 64 << 10, size_bytes: 4 << 20 })
        );
        let in_cache = WarmupSettings { log: Some(IN_CACHE.into()), ..Default::default() };
        let o = in_cache.options(Path::new("c.img")).unwrap().unwrap();
        assert!(o.in_cache && o.log == Path::new("c.img"));
    }
}
