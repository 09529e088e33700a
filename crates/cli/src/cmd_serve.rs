//! `ember serve`: its flags, and the [`ServeConfig`] they become, over a config file when
//! `--config` names one (`ember_serve::ConfigSource`: a flag given on the command
//! line overrides the file's key, across reloads too); `ember_serve` checks it, builds the
//! server (a cache device in front of backing volumes, one NBD export per volume, Prometheus
//! metrics, the control socket) and runs it until SIGTERM, SIGINT or `ember ctl stop`, then
//! shuts down cleanly so that the next start is warm.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use ember_serve::config::{CacheSettings, ListenSettings, LiveSettings, WarmupSettings};
use ember_serve::{parse_size, BackingVolume, ConfigSource, ServeConfig};

pub use crate::net_args::{parse_mode, NetArgs};
use crate::tuning_args::{SieveParams, WritebackArgs};

/// Options of `ember serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Read the configuration from this TOML file (docs/reference/config.md); a flag given
    /// on the command line overrides the file's key, also across reloads (SIGHUP,
    /// `ember ctl reload`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Print the effective configuration (the file, the flags over it) as TOML and exit.
    #[arg(long)]
    pub print_config: bool,

    /// Check the configuration (the file, the flags over it) and exit: 0 when a server
    /// could start from it.
    #[arg(long)]
    pub check: bool,

    /// The cache device: a file or a block device, or `mem:SIZE` for a cache in memory
    /// (formatted at every start, empty after every restart; write-through, write-around,
    /// write-back-flush and ordered-write-back only).
    #[arg(long, value_name = "CACHEFILE|mem:SIZE", required_unless_present = "config")]
    pub cache: Option<PathBuf>,

    /// A backing volume, exported under NAME: NAME=PATH (file or block device) or
    /// NAME=nbd://HOST:PORT/EXPORT or NAME=nbd+unix:///EXPORT?socket=PATH. Repeat for more.
    #[arg(long, value_name = "NAME=PATH|NAME=URI", required_unless_present = "config")]
    pub backing: Vec<String>,

    /// The control socket `ember ctl` talks to (mode 0600; only this user and root).
    /// Default: $RUNTIME_DIRECTORY/ember.sock under systemd, else /run/ember/NAME.sock.
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,

    /// The server's name, for the default control socket (default: the config file's
    /// stem, else `ember`).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// How events (warnings, reloads, settings changed) are logged on stderr: text
    /// (`LEVEL message key=value`) or json (one object a line).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,

    /// TCP address to listen on (default 127.0.0.1:10809 unless only --unix is given; port 0
    /// picks a free port, printed at start).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,

    /// Unix socket to listen on.
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,

    /// Replacement policy with its parameters, NAME[:PARAM=VALUE]... as `ember sim` spells
    /// it (lru, arc, s3fifo, lfu, lfuda:variant=lcs, slru:4:lcs, ...; `ember sim --policy
    /// help` lists them). Every policy but the oracle OPT runs here.
    #[arg(long, default_value = "lru")]
    pub policy: String,

    /// Admission sieve. Per-miss (read and write misses under every write policy; a refused
    /// write miss goes to backing): aod (allocate every miss), wmna (write-miss no-allocate),
    /// sievestore-c, randsieve-c, ocf-nhit, bloom (admit on the second miss), prob (admit a
    /// miss with --admit-probability). Batch, at each --epoch's end (write-through and
    /// write-around): sievestore-d, randsieve-blkd.
    #[arg(long, default_value = "aod")]
    pub admission: String,

    /// Write policy: write-through, write-around, write-back-flush, write-back-persist,
    /// ordered-write-back (Koller et al.: dirty blocks reach backing in FLUSH-epoch order,
    /// so backing is always a consistent older state; FLUSH and FUA are not durable), or
    /// unsafe-write-back (ignores FLUSH: loses acknowledged data on a crash; for comparison
    /// only, as in the thesis).
    #[arg(long, default_value = "write-through")]
    pub write_policy: String,

    /// Cache block size in bytes when formatting (power of two, ≥ 4096).
    #[arg(long, default_value_t = 4096)]
    pub block_size: u32,

    /// Serve Prometheus metrics over HTTP on this address (e.g. 127.0.0.1:9100; port 0 picks
    /// a free port, printed at start).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// Format the cache device if it holds no ember superblock (for the given backings).
    #[arg(long)]
    pub format_if_needed: bool,

    /// Create the cache file with this size if it does not exist (bytes, or with K/M/G/T).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub cache_size: Option<u64>,

    /// Open the cache device with O_DIRECT (bypass the page cache, as on a real SSD).
    #[arg(long)]
    pub direct: bool,

    /// Trust that only ember writes the NBD backings, so a restart after a clean shutdown
    /// keeps their cached blocks. Without it an NBD backing starts cold: ember cannot tell
    /// whether another client wrote it while ember was stopped.
    #[arg(long)]
    pub trust_nbd_backing: bool,

    /// Worker threads shared by all connections, for the requests a connection's own thread
    /// does not answer itself (it answers hits). Default: four per CPU this process may use.
    #[arg(long)]
    pub workers: Option<usize>,

    /// Limits and TLS of the NBD server.
    #[command(flatten)]
    pub net: NetArgs,

    /// Bonfire's warmup: monitoring, warmup log, preload.
    #[command(flatten)]
    pub warmup: WarmupArgs,

    /// Discrete sieves (sievestore-d, randsieve-blkd): at most this many bytes of access
    /// counts per epoch; accesses beyond are not counted (the stats say how many).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256M")]
    pub epoch_count_memory: u64,

    /// The sieves' parameters (SieveStore's t1, t2, W, k, IMCT size; SieveStore-D's t and
    /// --epoch).
    #[command(flatten)]
    pub sieve: SieveParams,

    /// Write-back tuning (max/min dirty, epochs, flush order).
    #[command(flatten)]
    pub writeback: WritebackArgs,

    /// The sequential cutoff (--seq-cutoff, its read and write thresholds, policy, streams).
    #[command(flatten)]
    pub seq_cutoff: crate::seq_cutoff_args::SeqCutoffArgs,

    /// Cleaning control (--flush-rate, --flush-idle, --dirty-target, --flush-min-rate).
    #[command(flatten)]
    pub cleaning: crate::cleaning_args::CleaningArgs,
    /// When the cache device is given up (--io-error-limit, --io-error-halflife,
    /// --io-timeout) and where the state file is kept (--state-dir).
    #[command(flatten)]
    pub health: crate::health_args::HealthArgs,

    /// Wong & Wilkes' two tiers: --demote (client), --array-scheme (array).
    #[command(flatten)]
    pub demote: crate::demote_args::DemoteArgs,
}

/// Bonfire's warmup (docs/design/warmup.md).
#[derive(Args, Debug)]
pub struct WarmupArgs {
    /// Record every served request in this warmup log (a file, created if missing, or a
    /// block device: blank or holding a warmup log, never anything else; or `cache:`, the
    /// region `ember cache format --warmup-log SIZE` reserved on the cache device), and
    /// preload from it whenever the cache starts without a valid map.
    #[arg(long, value_name = "PATH")]
    pub warmup_log: Option<PathBuf>,

    /// The selector that picks what to preload: last-k, first-k, top-k, random-k, auto (the
    /// one that converges soonest when the log's history is simulated; Last-K if the log is
    /// too short to decide), or none (monitor only).
    #[arg(long, value_name = "SELECTOR", default_value = "last-k", requires = "warmup_log")]
    pub warmup: String,

    /// How much to preload: a percentage of the cache (e.g. 50%) or bytes (e.g. 256M).
    #[arg(long, value_name = "PCT%|SIZE", default_value = "100%", requires = "warmup_log")]
    pub warmup_size: String,

    /// Warmup region size, 4K to 1M (Bonfire's default 1M): the unit the selector ranks.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "1M", requires = "warmup_log")]
    pub warmup_region: u64,

    /// Bytes of records the circular warmup log keeps (32 bytes a request).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "64M", requires = "warmup_log")]
    pub warmup_log_size: u64,

    /// Bytes of the metadata staging buffer (Bonfire: 256K).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256K", requires = "warmup_log")]
    pub warmup_staging: u64,

    /// How often the log writer drains the staging buffer into the log (e.g. 10ms, 2s).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, default_value = "10ms", requires = "warmup_log")]
    pub warmup_log_interval: std::time::Duration,

    /// Also keep Bonfire's performance snapshot: the data of recently accessed blocks, in
    /// `LOG.snapshot`, so a preload reads them sequentially from there instead of from
    /// backing (only copies no later logged write made stale). FLUSH and FUA then also sync
    /// the warmup log.
    #[arg(long, requires = "warmup_log")]
    pub warmup_snapshot: bool,

    /// Bytes of the snapshot's staging buffer: one segment, written when full (Bonfire: 128M).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "128M", requires = "warmup_snapshot")]
    pub warmup_snapshot_staging: u64,

    /// Bytes of the snapshot file (segments written circularly; at least one staging buffer
    /// and its index).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "1G", requires = "warmup_snapshot")]
    pub warmup_snapshot_size: u64,
}

/// A duration by [`ember_units::parse_duration`]'s rule (`10ms`, `2s`; a bare number is
/// seconds), between 1 ms and 3600 s.
fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let d = ember_units::parse_duration(s).map_err(|e| e.to_string())?;
    if !(std::time::Duration::from_millis(1)..=std::time::Duration::from_secs(3600)).contains(&d) {
        return Err(format!("{s:?}: between 1ms and 3600s"));
    }
    Ok(d)
}

impl ServeArgs {
    /// The configuration these flags describe.
    pub fn config(&self) -> anyhow::Result<ServeConfig> {
        let volumes = self.backing.iter().map(|b| parse_backing(b)).collect::<Result<_, _>>()?;
        Ok(ServeConfig {
            name: self.name.clone(),
            control: self.control.clone(),
            log_format: self.log_format.clone(),
            metrics: self.metrics.clone(),
            workers: self.workers,
            cache: CacheSettings {
                device: self.cache.clone().unwrap_or_default(),
                size: self.cache_size,
                format_if_needed: self.format_if_needed,
                direct: self.direct,
                block_size: self.block_size,
                reformat_failed: self.health.reformat_failed_cache,
            },
            volumes,
            listen: ListenSettings {
                tcp: self.listen.clone(),
                unix: self.unix.clone(),
                unix_mode: self.net.unix_mode,
            },
            tls: self.net.tls(),
            live: LiveSettings {
                write_policy: self.write_policy.clone(),
                policy: self.policy.clone(),
                admission: self.admission.clone(),
                epoch_count_memory: self.epoch_count_memory,
                sieve: (&self.sieve).into(),
                writeback: (&self.writeback).into(),
                seq_cutoff: self.seq_cutoff.settings(),
                cleaning: self.cleaning.settings(),
                limits: self.net.limits(),
            },
            warmup: self.warmup.settings(),
            nbd_backing: self.demote.nbd_backing(self.trust_nbd_backing),
            tiers: self.demote.tiers(),
            health: self.health.settings(),
        })
    }
}

impl WarmupArgs {
    /// The warmup settings these flags describe.
    pub fn settings(&self) -> WarmupSettings {
        WarmupSettings {
            log: self.warmup_log.clone(),
            selector: self.warmup.clone(),
            size: self.warmup_size.clone(),
            region: self.warmup_region,
            log_size: self.warmup_log_size,
            staging: self.warmup_staging,
            log_interval: self.warmup_log_interval,
            snapshot: self.warmup_snapshot,
            snapshot_staging: self.warmup_snapshot_staging,
            snapshot_size: self.warmup_snapshot_size,
        }
    }
}

/// Parse `NAME=PATH` or `NAME=nbd://…` (the server checks the name and the path).
pub fn parse_backing(s: &str) -> anyhow::Result<BackingVolume> {
    let (name, backing) = s.split_once('=').ok_or_else(|| {
        anyhow!("--backing {s:?}: expected NAME=PATH or NAME=nbd://HOST:PORT/EXPORT")
    })?;
    Ok(BackingVolume::new(name, backing))
}

/// The flags of `ember serve` given on the command line (not defaults), by their long
/// names, from the parsed `matches`.
pub fn given_flags(matches: &ArgMatches) -> Vec<String> {
    matches
        .ids()
        // clap lists each flattened struct of arguments as a group named after the struct
        // (`WritebackArgs`): present when one of its flags is, but not a flag itself.
        .filter(|id| !id.as_str().starts_with(|c: char| c.is_ascii_uppercase()))
        .filter(|id| matches.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .flat_map(|id| settings_of(&id.as_str().replace('_', "-")))
        .collect()
}

/// The settings a flag of `ember serve` (its long name) gives: none for the file's own
/// flags (`--config`, `--print-config`, `--check`), the read and the write threshold for
/// `--seq-cutoff` (a key each in the file), else the flag's own.
pub fn settings_of(flag: &str) -> Vec<String> {
    match flag {
        "config" | "print-config" | "check" | "help" => vec![],
        "seq-cutoff" => vec!["seq-cutoff-read".into(), "seq-cutoff-write".into()],
        _ => vec![flag.to_string()],
    }
}

/// Start logging events on stderr, one line each, in `format` (text or json).
pub fn init_logging(format: &str) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_max_level(tracing::Level::INFO);
    let _ = if format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}

/// Run `ember serve` until SIGTERM, SIGINT or `ember ctl stop`; `given` are the flags given
/// on the command line ([`given_flags`]), which override the config file.
pub fn run(args: ServeArgs, given: &[String]) -> anyhow::Result<()> {
    let flags = args.config()?;
    let given: Vec<&str> = given.iter().map(String::as_str).collect();
    let (config, source) = match &args.config {
        Some(file) => {
            let source = ConfigSource::new(Some(file.clone()), flags, &given)?;
            (source.load()?, Some(source))
        }
        None => (ConfigSource::flags_only(flags).load()?, None),
    };
    if args.print_config {
        print!("{}", ember_serve::config::to_toml(&config)?);
        return Ok(());
    }
    if args.check {
        let what =
            args.config.as_ref().map_or("the command line".into(), |f| f.display().to_string());
        println!("{what}: ok");
        return Ok(());
    }
    init_logging(&config.log_format);
    ember_serve::run_from(config, source)
}

#[cfg(test)]
#[path = "cmd_serve_tests.rs"]
mod tests;
