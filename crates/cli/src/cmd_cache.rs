//! `ember cache format` and `ember cache inspect`: create and examine a cache device.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use ember_engine::device::FileOptions;
use ember_engine::{Engine, FormatSpec, VolumeSpec};
use ember_serve::open_spec;
use ember_units::parse_size;

/// `ember cache …`
#[derive(Subcommand)]
pub enum CacheCommand {
    /// Format a cache device for one or more backing volumes (forgets what it cached).
    Format(FormatArgs),
    /// Show a cache device: geometry, volumes, last shutdown, occupancy, dirty blocks.
    Inspect(InspectArgs),
}

/// Arguments of `ember cache format`.
#[derive(Args)]
pub struct FormatArgs {
    /// The cache device: a file (created with --size if missing) or a block device.
    #[arg(long)]
    pub cache: String,
    /// Create or extend the cache file to this size (e.g. 512M, 20G). K/M/G = KiB/MiB/GiB;
    /// KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// A backing volume, NAME=DEVICE (a path or an nbd:// URI); repeat for an ensemble.
    #[arg(long = "volume", required = true, value_name = "NAME=DEVICE")]
    pub volumes: Vec<String>,
    /// Cache block size in bytes (4096, 4K). K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    pub block_size: u64,
    /// Space reserved for the write-back journal. K/M/G = KiB/MiB/GiB; KB/MB/GB =
    /// 10^3/10^6/10^9.
    #[arg(long, default_value = "4M", value_parser = parse_size)]
    pub journal: u64,
    /// Space reserved for a warmup log inside the cache layout (0: none), for `ember serve
    /// --warmup-log cache:` (a 4 KiB header, then 32 bytes a logged request). K/M/G =
    /// KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "0", value_parser = parse_size)]
    pub warmup_log: u64,
    /// Reformat a device that already holds an ember cache.
    #[arg(long)]
    pub force: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `ember cache inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// The cache device.
    #[arg(long)]
    pub cache: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Run a cache subcommand.
pub fn run(cmd: CacheCommand) -> Result<()> {
    match cmd {
        CacheCommand::Format(a) => format(a),
        CacheCommand::Inspect(a) => inspect(a),
    }
}

fn format(a: FormatArgs) -> Result<()> {
    let mut volumes = Vec::new();
    for v in &a.volumes {
        let Some((name, dev)) = v.split_once('=') else {
            bail!("--volume {v:?}: expected NAME=DEVICE");
        };
        let backing = open_spec(dev, FileOptions::default())
            .with_context(|| format!("--volume {name}: opening {dev}"))?;
        volumes.push(VolumeSpec { name: name.to_string(), size: backing.size() });
    }
    let cache =
        open_spec(&a.cache, FileOptions { direct: false, create_size: a.size, exclusive: true })
            .with_context(|| format!("--cache {}", a.cache))?;
    if !a.force {
        if let Ok(r) = Engine::inspect(cache.as_ref()) {
            bail!(
                "{} already holds an ember cache ({} volumes, formatted {}); pass --force to \
                 reformat it",
                a.cache,
                r.volumes.len(),
                ember_engine::report::format_unix(r.format_time)
            );
        }
    }
    let block_size = u32::try_from(a.block_size).context("--block-size")?;
    let spec = FormatSpec {
        block_size,
        journal_bytes: a.journal,
        warmup_log_bytes: a.warmup_log,
        volumes,
    };
    Engine::format(cache.as_ref(), &spec).with_context(|| format!("formatting {}", a.cache))?;
    let report = Engine::inspect(cache.as_ref())?;
    emit(&report, a.json)
}

/// Print a report as text or JSON; a closed stdout (`| head`) is not an error.
fn emit(report: &ember_engine::Report, json: bool) -> Result<()> {
    use std::io::Write;
    let text = if json { serde_json::to_string_pretty(report)? + "\n" } else { report.to_string() };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

fn inspect(a: InspectArgs) -> Result<()> {
    let cache = open_spec(&a.cache, FileOptions::default())
        .with_context(|| format!("--cache {}", a.cache))?;
    let report = Engine::inspect(cache.as_ref())?;
    emit(&report, a.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_then_inspect_files_and_refuse_to_reformat() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("vol.img");
        std::fs::write(&vol, vec![0u8; 1 << 20]).unwrap();
        let cache = dir.path().join("cache.img");
        let args = |force: bool| FormatArgs {
            cache: cache.display().to_string(),
            size: Some(16 << 20),
            volumes: vec![format!("web={}", vol.display())],
            block_size: 4096,
            journal: 1 << 20,
            warmup_log: 0,
            force,
            json: false,
        };
        format(args(false)).unwrap();
        let dev = open_spec(&cache.display().to_string(), FileOptions::default()).unwrap();
        let r = Engine::inspect(dev.as_ref()).unwrap();
        assert_eq!(r.volumes.len(), 1);
        assert_eq!((r.volumes[0].name.as_str(), r.volumes[0].size), ("web", 1 << 20));
        assert_eq!(r.geometry.journal_len, 1 << 20);
        let e = format(args(false)).unwrap_err().to_string();
        assert!(e.contains("already holds an ember cache") && e.contains("--force"), "{e}");
        format(args(true)).unwrap();
        inspect(InspectArgs { cache: cache.display().to_string(), json: true }).unwrap();
        let e = format(FormatArgs { volumes: vec!["novalue".into()], ..args(true) }).unwrap_err();
        assert!(e.to_string().contains("NAME=DEVICE"), "{e}");
        let missing =
            inspect(InspectArgs { cache: "/nonexistent/c".into(), json: false }).unwrap_err();
        assert!(format!("{missing:#}").contains("/nonexistent/c"), "{missing:#}");
    }
}
