//! `ember serve`: a cache device in front of backing volumes, one NBD export per volume,
//! with Prometheus metrics and a graceful SIGTERM/SIGINT shutdown (server drain, then the
//! engine's clean shutdown persisting the map for a warm restart).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::layout::LayoutError;
use ember_engine::{
    Device, Engine, EngineConfig, EngineError, FormatSpec, SnapshotOptions, VolumeConfig,
    VolumeSpec, WarmupOptions, WarmupSize, WriteMode,
};
use ember_nbd::server::{ServerConfig, TlsMode, TlsSettings, MAX_PAYLOAD_CEILING};
use ember_nbd::{ExportSet, ListenAddr, Server, ServerStats};
use ember_policy::admission::EpochAdmission;
use ember_policy::replacement::Kind;
use ember_policy::Admission;
use ember_serve::{EngineExports, NbdDevice};
use ember_sim::sievestore::Sieve;

use crate::metrics::{render_engine, render_server, MetricsServer, Render};
use crate::tuning_args::{SieveParams, WritebackArgs};

/// Options of `ember serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The cache device: a file or a block device, or `mem:SIZE` for a cache in memory
    /// (formatted at every start, empty after every restart; write-through, write-around,
    /// write-back-flush and ordered-write-back only).
    #[arg(long, value_name = "CACHEFILE|mem:SIZE")]
    pub cache: PathBuf,

    /// A backing volume, exported under NAME: NAME=PATH (file or block device) or
    /// NAME=nbd://HOST:PORT/EXPORT or NAME=nbd+unix:///EXPORT?socket=PATH. Repeat for more.
    #[arg(long, value_name = "NAME=PATH|NAME=URI", required = true)]
    pub backing: Vec<String>,

    /// TCP address to listen on (default 127.0.0.1:10809 unless only --unix is given; port 0
    /// picks a free port, printed at start).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,

    /// Unix socket to listen on.
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,

    /// Replacement policy: lru, fifo, clock, sieve, arc, slru, 2q, s3fifo.
    #[arg(long, default_value = "lru")]
    pub policy: String,

    /// Admission sieve. Per-miss (read and write misses under every write policy; a refused
    /// write miss goes to backing): aod (allocate every miss), wmna (write-miss no-allocate),
    /// sievestore-c, randsieve-c, ocf-nhit. Batch, at each --epoch's end (write-through and
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

    /// Wong & Wilkes' two tiers: --demote (client), --array-scheme (array).
    #[command(flatten)]
    pub demote: crate::demote_args::DemoteArgs,
}

/// Bonfire's warmup (docs/warmup.md, "In the real cache").
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

/// `--warmup-log cache:`: the log in the cache device's own layout.
pub const IN_CACHE: &str = "cache:";

/// A duration: a number with ms or s (`10ms`, `2s`).
fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let (num, scale) = match s.strip_suffix("ms") {
        Some(n) => (n, 1e-3),
        None => (s.strip_suffix('s').unwrap_or(s), 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("{s:?}: not a duration (10ms, 2s)"))?;
    if !(v * scale >= 0.001 && v * scale <= 3600.0) {
        return Err(format!("{s:?}: between 1ms and 3600s"));
    }
    Ok(std::time::Duration::from_secs_f64(v * scale))
}

impl WarmupArgs {
    /// The engine's warmup options, or `None` without `--warmup-log`; `cache` is the cache
    /// device (`--warmup-log cache:` puts the log in its layout's region).
    pub fn options(&self, cache: &Path) -> anyhow::Result<Option<WarmupOptions>> {
        let Some(log) = &self.warmup_log else { return Ok(None) };
        let in_cache = log.as_os_str() == IN_CACHE;
        let log = if in_cache { cache } else { log.as_path() };
        let mut o = WarmupOptions::new(log.to_path_buf());
        o.in_cache = in_cache;
        o.selector = match self.warmup.as_str() {
            "none" | "off" => None,
            // Decided at start (serve_auto), once the cache's size is known.
            "auto" => Some(ember_policy::warmup::SelectorKind::LastK),
            s => Some(s.parse().map_err(|e| anyhow!("--warmup: {e} (or none)"))?),
        };
        o.size = parse_warmup_size(&self.warmup_size)?;
        if !(4096..=1 << 20).contains(&self.warmup_region) {
            bail!("--warmup-region {}: it must be 4K to 1M", self.warmup_region);
        }
        o.region_bytes = self.warmup_region;
        if self.warmup_log_size < 4096 {
            bail!("--warmup-log-size {}: at least 4K", self.warmup_log_size);
        }
        o.log_bytes = self.warmup_log_size;
        if self.warmup_staging < 4096 {
            bail!("--warmup-staging {}: at least 4K", self.warmup_staging);
        }
        o.staging_bytes = self.warmup_staging;
        o.log_interval = self.warmup_log_interval;
        if self.warmup_snapshot {
            use std::os::unix::fs::FileTypeExt;
            if std::fs::metadata(log).is_ok_and(|m| m.file_type().is_block_device()) {
                bail!(
                    "--warmup-snapshot with a warmup log on a block device ({}): the snapshot \
                     lives in a file beside the log (LOG.snapshot), which a device has not; \
                     keep the log in a file to use the snapshot",
                    log.display()
                );
            }
            if self.warmup_snapshot_staging < 4096 {
                bail!("--warmup-snapshot-staging {}: at least 4K", self.warmup_snapshot_staging);
            }
            o.snapshot = Some(SnapshotOptions {
                staging_bytes: self.warmup_snapshot_staging,
                size_bytes: self.warmup_snapshot_size,
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

/// The NBD server's limits and TLS (docs/serve.md, "Limits" and "TLS").
#[derive(Args, Debug)]
pub struct NetArgs {
    /// Connections open at once; one more is accepted and closed at once.
    #[arg(long, default_value_t = 128)]
    pub max_connections: usize,

    /// Bytes of READ replies and WRITE payloads all connections together may hold (bytes,
    /// or with K/M/G); at the limit, requests over 1 MiB wait for buffers to be freed.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256M")]
    pub buffer_budget: u64,

    /// Largest READ/WRITE payload advertised and accepted (at most 32M).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "32M")]
    pub max_payload: u64,

    /// Options one handshake may send before the server hangs up.
    #[arg(long, default_value_t = 32)]
    pub max_handshake_options: usize,

    /// Seconds a whole handshake (TLS included) may take before the connection is dropped.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub handshake_deadline: f64,

    /// TLS: off, on (offered; plaintext clients still served) or require (every client
    /// must upgrade with STARTTLS).
    #[arg(long, value_name = "MODE", default_value = "off", value_parser = parse_tls_mode)]
    pub tls: TlsMode,

    /// Directory of PEM files as qemu-nbd and nbdkit name them: server-cert.pem,
    /// server-key.pem, and ca-cert.pem for --tls-verify-peer.
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,

    /// Accept only clients presenting a certificate issued by the CA in ca-cert.pem.
    #[arg(long)]
    pub tls_verify_peer: bool,

    /// Permission bits of the --unix socket, in octal (default owner-only).
    #[arg(long, value_name = "OCTAL", default_value = "600", value_parser = parse_mode)]
    pub unix_mode: u32,

    /// Longest busy-poll of a connection's socket, in microseconds, after a reply when the
    /// connection has nothing in flight (adaptive below this; 0: never poll; docs/nbd.md).
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 50)]
    pub busy_poll_us: u64,
}

fn parse_tls_mode(s: &str) -> Result<TlsMode, String> {
    s.parse()
}

/// Parse an octal permission mode such as `600` or `0660`.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let mode = u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .map_err(|_| format!("{s:?} is not an octal mode (e.g. 600)"))?;
    if mode > 0o777 {
        return Err(format!("{s:?}: only permission bits (at most 777) are allowed"));
    }
    Ok(mode)
}

impl NetArgs {
    /// The server configuration these flags ask for, with `workers` worker threads.
    pub fn server_config(&self, workers: usize) -> anyhow::Result<ServerConfig> {
        let max_payload =
            u32::try_from(self.max_payload).ok().filter(|&p| p <= MAX_PAYLOAD_CEILING).ok_or_else(
                || anyhow!("--max-payload {}: at most {MAX_PAYLOAD_CEILING}", self.max_payload),
            )?;
        if !(self.handshake_deadline.is_finite() && self.handshake_deadline > 0.0) {
            bail!(
                "--handshake-deadline {}: must be a positive number of seconds",
                self.handshake_deadline
            );
        }
        if self.busy_poll_us > 10_000 {
            bail!("--busy-poll-us {}: at most 10000 (10 ms)", self.busy_poll_us);
        }
        let tls = match (self.tls, &self.tls_certificates) {
            (TlsMode::Off, None) if !self.tls_verify_peer => None,
            (TlsMode::Off, _) => {
                bail!("--tls-certificates and --tls-verify-peer need --tls on or --tls require")
            }
            (_, None) => bail!("--tls {} needs --tls-certificates DIR", self.tls),
            (mode, Some(dir)) => Some(
                TlsSettings::from_dir(dir, mode, self.tls_verify_peer)
                    .with_context(|| format!("--tls-certificates {}", dir.display()))?,
            ),
        };
        let defaults = ServerConfig::default();
        Ok(ServerConfig {
            workers,
            max_payload,
            discard_limit: (2 * u64::from(max_payload)).max(defaults.discard_limit),
            shared_budget: self.buffer_budget,
            max_connections: self.max_connections,
            max_handshake_options: self.max_handshake_options,
            handshake_deadline: Some(Duration::from_secs_f64(self.handshake_deadline)),
            tls,
            spin: Duration::from_micros(self.busy_poll_us),
            ..defaults
        })
    }
}

/// Parse `123`, `4K`, `64M`, `2G`, `1T` (powers of 1024; a trailing `iB`/`B` is accepted).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        Some('T' | 't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| format!("{s:?} is not a size (e.g. 512M)"))?;
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("{s:?} is too large"))
}

/// One `--backing NAME=SPEC`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backing {
    /// Export name.
    pub name: String,
    /// Path or NBD URI.
    pub spec: String,
}

/// Parse `NAME=PATH` or `NAME=nbd://…`.
pub fn parse_backing(s: &str) -> anyhow::Result<Backing> {
    let (name, spec) = s.split_once('=').ok_or_else(|| {
        anyhow!("--backing {s:?}: expected NAME=PATH or NAME=nbd://HOST:PORT/EXPORT")
    })?;
    if name.is_empty() || name.len() > 64 {
        bail!("--backing {s:?}: the name must be 1 to 64 bytes");
    }
    if spec.is_empty() {
        bail!("--backing {s:?}: no path or URI after `=`");
    }
    Ok(Backing { name: name.to_string(), spec: spec.to_string() })
}

fn open_backing(
    b: &Backing,
    trust_nbd: bool,
    demote: &crate::demote_args::DemoteArgs,
) -> anyhow::Result<Arc<dyn Device>> {
    if b.spec.starts_with("nbd://") || b.spec.starts_with("nbd+unix://") {
        let dead_after = demote.dead_after()?;
        let mut dev = NbdDevice::connect_demoting(&b.spec, demote.queue())
            .and_then(|d| d.dead_peer_after(dead_after))
            .with_context(|| format!("backing {}: connecting to {}", b.name, b.spec))?;
        if let Some(window) = demote.reconnect()? {
            dev = dev.reconnect_within(window);
        }
        Ok(Arc::new(if trust_nbd { dev.trust_unchanged() } else { dev }))
    } else {
        let dev = FileDevice::open(Path::new(&b.spec), FileOptions::default())
            .with_context(|| format!("backing {}: opening {}", b.name, b.spec))?;
        Ok(Arc::new(dev))
    }
}

/// Parse `write-through` / `write-around` (the policies this engine version runs).
pub fn parse_write_mode(s: &str) -> anyhow::Result<WriteMode> {
    match s {
        "wt" => Ok(WriteMode::WriteThrough),
        "wa" => Ok(WriteMode::WriteAround),
        _ => s.parse::<WriteMode>().map_err(|e| anyhow!("--write-policy: {e}")),
    }
}

/// The admission sieve called `s`, with `params` (the papers' defaults unless set), and,
/// for a discrete sieve (SieveStore-D, RandSieve-BlkD), its epoch: it counts accesses (at
/// most `count_bytes` of counts per epoch) and the engine's batch mover installs its
/// choice at each epoch's end. The ideal sieve needs the future and is refused.
pub fn parse_admission(
    s: &str,
    params: &SieveParams,
    count_bytes: u64,
) -> anyhow::Result<(Box<dyn Admission>, Option<u64>)> {
    let spec = params.spec(s)?;
    match spec.build().map_err(|e| anyhow!("--admission {s}: {e}"))? {
        Sieve::Continuous(sieve) => Ok((sieve, None)),
        Sieve::Discrete(sieve, epoch_ns) => {
            let a = EpochAdmission::new(sieve, usize::try_from(count_bytes).unwrap_or(usize::MAX))
                .map_err(|e| anyhow!("--admission {s}: {e}"))?;
            Ok((Box::new(a), Some(epoch_ns)))
        }
    }
}

fn parse_policy(s: &str) -> anyhow::Result<Kind> {
    let kind: Kind = s.parse().map_err(|e| anyhow!("--policy: {e}"))?;
    if kind.needs_oracle() {
        bail!("--policy {s}: an oracle policy needs the future and only runs in `ember sim`");
    }
    Ok(kind)
}

/// The size of a `--cache mem:SIZE`, or `None` for a cache file or device.
pub fn memory_cache_size(cache: &Path) -> anyhow::Result<Option<u64>> {
    let Some(size) = cache.to_str().and_then(|s| s.strip_prefix("mem:")) else {
        return Ok(None);
    };
    let size = parse_size(size).map_err(|e| anyhow!("--cache mem:SIZE: {e}"))?;
    if size < 16 << 20 {
        bail!(
            "--cache mem:{size}: a memory cache needs at least 16M (layout and journal included)"
        );
    }
    Ok(Some(size))
}

/// Why `mode` cannot run on a memory cache, if it cannot: a memory cache is lost at every
/// stop, so only the policies whose acknowledged writes reach backing at a FLUSH are safe.
pub fn refuse_on_memory(mode: WriteMode) -> Option<&'static str> {
    match mode {
        // Ordered write-back promises only a consistent backing after a loss of the cache,
        // which a memory cache is at every crash.
        WriteMode::WriteThrough
        | WriteMode::WriteAround
        | WriteMode::WriteBackFlush
        | WriteMode::OrderedWriteBack => None,
        WriteMode::WriteBackPersist => Some(
            "write-back-persist keeps acknowledged writes only on the cache device across a \
             FLUSH, and a memory cache loses them at every stop or crash; use write-back-flush \
             (dirty blocks reach backing at each FLUSH) or a cache file",
        ),
        WriteMode::UnsafeWriteBack => Some(
            "unsafe-write-back ignores FLUSH, so a memory cache would lose acknowledged writes \
             at every stop; use write-back-flush",
        ),
    }
}

/// A memory cache of `size` bytes, formatted for `volumes`.
fn open_memory_cache(
    args: &ServeArgs,
    size: u64,
    volumes: &[VolumeSpec],
) -> anyhow::Result<Arc<dyn Device>> {
    if args.cache_size.is_some() || args.direct {
        bail!("--cache mem:SIZE takes its size from SIZE and has no O_DIRECT: drop --cache-size and --direct");
    }
    let cache = ember_engine::device::MemDevice::new(size);
    let mut spec = FormatSpec::new(volumes.to_vec());
    spec.block_size = args.block_size;
    Engine::format(&cache, &spec).context("formatting the memory cache")?;
    println!("ember serve: memory cache of {size} bytes (empty: a memory cache starts cold)");
    Ok(Arc::new(cache))
}

fn open_cache(args: &ServeArgs, volumes: &[VolumeSpec]) -> anyhow::Result<Arc<dyn Device>> {
    if let Some(size) = memory_cache_size(&args.cache)? {
        return open_memory_cache(args, size, volumes);
    }
    let exists = args.cache.exists();
    if !exists && args.cache_size.is_none() {
        bail!(
            "cache device {} does not exist; give --cache-size to create a cache file",
            args.cache.display()
        );
    }
    let cache = FileDevice::open(
        &args.cache,
        FileOptions {
            direct: args.direct,
            create_size: args.cache_size.filter(|_| !exists),
            exclusive: true,
        },
    )
    .with_context(|| format!("opening cache device {}", args.cache.display()))?;
    match Engine::inspect(&cache) {
        Ok(_) => {}
        Err(EngineError::Layout(LayoutError::NotFormatted { .. })) if args.format_if_needed => {
            let mut spec = FormatSpec::new(volumes.to_vec());
            spec.block_size = args.block_size;
            Engine::format(&cache, &spec)
                .with_context(|| format!("formatting cache device {}", args.cache.display()))?;
            println!("ember serve: formatted {} ({} bytes)", args.cache.display(), cache.size());
        }
        Err(e) => {
            return Err(anyhow!(e)).context(if args.format_if_needed {
                "the cache device cannot be used".to_string()
            } else {
                "the cache device cannot be used (give --format-if-needed to format a new one)"
                    .to_string()
            })
        }
    }
    Ok(Arc::new(cache))
}

/// A console line every second while the preload runs, and one when it ends.
fn spawn_preload_progress(engine: Arc<Engine>) -> anyhow::Result<()> {
    std::thread::Builder::new().name("preload-progress".into()).spawn(move || {
        let mut last = std::time::Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let s = engine.warmup_stats();
            if s.state != ember_engine::warmup::WarmupState::Preloading {
                println!("ember serve: warmup: {}", s.reason);
                return;
            }
            if last.elapsed() >= Duration::from_secs(1) {
                last = std::time::Instant::now();
                println!(
                    "ember serve: warmup: preloading, {} of {} blocks ({} already cached)",
                    s.preloaded_blocks, s.preload_planned_blocks, s.preload_skipped_blocks
                );
            }
        }
    })?;
    Ok(())
}

/// Four workers per CPU this process may run on: a worker blocked in a read or waiting on a
/// lock leaves its core to another (measured in docs/serve.md).
fn default_workers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2) * 4
}

/// Run `ember serve` until SIGTERM or SIGINT.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    crate::memory_return::bound_allocator();
    let backings: Vec<Backing> =
        args.backing.iter().map(|b| parse_backing(b)).collect::<anyhow::Result<_>>()?;
    let write_mode = parse_write_mode(&args.write_policy)?;
    let warmup = args.warmup.options(&args.cache)?;
    let memory = memory_cache_size(&args.cache)?.is_some();
    if memory {
        if let Some(why) = refuse_on_memory(write_mode) {
            bail!("--write-policy {} on a memory cache: {why}", write_mode.name());
        }
    }
    let kind = parse_policy(&args.policy)?;
    let array_scheme = args.demote.scheme(&args.policy)?;
    let (admission, batch_epoch) =
        parse_admission(&args.admission, &args.sieve, args.epoch_count_memory)?;
    if batch_epoch.is_some() && write_mode.is_write_back() {
        bail!(
            "--admission {}: a discrete sieve replaces the cache's contents at each epoch's end, \
             which dirty blocks cannot follow: use write-through or write-around",
            args.admission
        );
    }
    args.writeback.check()?;
    // The server's limits and TLS, checked (certificates loaded) before the cache is opened.
    let net_config = args.net.server_config(args.workers.unwrap_or_else(default_workers).max(1))?;
    let mut volumes = Vec::new();
    let mut specs = Vec::new();
    for b in &backings {
        let backing = open_backing(b, args.trust_nbd_backing, &args.demote)?;
        if args.demote.demote {
            if backing.takes_demotes() {
                println!("ember serve: backing {}: DEMOTE granted, client tier demotes", b.name);
            } else {
                println!(
                    "ember serve: backing {}: takes no DEMOTE (x-ember:demote refused or not NBD), \
                     the client tier runs as NONE-LRU",
                    b.name
                );
            }
        }
        specs.push(VolumeSpec { name: b.name.clone(), size: backing.size() });
        volumes.push(VolumeConfig { name: b.name.clone(), backing });
    }
    let cache = open_cache(&args, &specs)?;
    let data_blocks = ember_engine::layout::Superblock::read(cache.as_ref())
        .map(|sb| sb.geometry.data_blocks)
        .with_context(|| format!("reading the superblock of {}", args.cache.display()))?;
    let wb = args.writeback.config(data_blocks)?;
    let engine = Arc::new(
        Engine::open_with(
            EngineConfig {
                cache,
                volumes,
                write_mode,
                replacement: Box::new(move |cap| match array_scheme {
                    Some(s) => crate::demote_args::array_replacement(s, cap),
                    None => ember_policy::replacement::build(kind, cap),
                }),
                admission,
            },
            wb,
        )
        .with_context(|| format!("opening cache {}", args.cache.display()))?,
    );
    if let Some(s) = array_scheme {
        println!(
            "ember serve: array tier, scheme {s} (Wong & Wilkes), DEMOTEs {}",
            if s.demotes() { "taken" } else { "refused" }
        );
    }
    if let Some(epoch_ns) = batch_epoch {
        engine.start_batch_sieve(epoch_ns).context("starting the discrete sieve")?;
    }
    let open = engine.open_report();
    println!(
        "ember serve: cache {} start {:?} ({} blocks loaded{}), {} blocks of {} bytes, policy {}, admission {}, {}",
        args.cache.display(),
        open.start,
        open.loaded_blocks,
        if open.reason.is_empty() { String::new() } else { format!("; {}", open.reason) },
        engine.geometry().data_blocks,
        engine.geometry().block_size,
        kind,
        args.admission,
        write_mode.name()
    );
    if let Some(w) = &warmup {
        let mut w = w.clone();
        if args.warmup.warmup == "auto" && w.log.exists() {
            let g = engine.geometry();
            let bs = g.block_size as u64;
            let (kind, line) = crate::serve_auto::choose(
                &w.log,
                crate::serve_auto::LiveCache {
                    block_size: bs,
                    cache_blocks: g.data_blocks,
                    warmup_blocks: w.size.blocks(g.data_blocks, bs),
                    region_bytes: w.region_bytes,
                    seed: w.seed,
                },
            );
            println!("ember serve: warmup {line}");
            w.selector = Some(kind);
        } else if args.warmup.warmup == "auto" {
            println!("ember serve: warmup auto: Last-K, because there is no warmup log yet");
        }
        let start = engine.start_warmup(&w).context("starting warmup")?;
        let place = if w.in_cache {
            format!("{IN_CACHE} (the region of {})", w.log.display())
        } else {
            w.log.display().to_string()
        };
        println!("ember serve: warmup log {place}: {}", start.line);
        if start.planned_blocks > 0 {
            spawn_preload_progress(engine.clone())?;
        }
    }

    let stats = Arc::new(ServerStats::new());
    let mut builder =
        Server::builder(Arc::new(EngineExports::new(engine.clone())) as Arc<dyn ExportSet>)
            .workers(args.workers.unwrap_or_else(default_workers).max(1))
            .observer(Arc::new(crate::memory_return::ReturnOnClose::new(stats.clone())));
    let listen = match (&args.listen, &args.unix) {
        (Some(l), _) => Some(l.clone()),
        (None, None) => Some("127.0.0.1:10809".to_string()),
        (None, Some(_)) => None,
    };
    if let Some(l) = &listen {
        builder = builder.listen_tcp(l.as_str()).with_context(|| format!("listening on {l}"))?;
    }
    if let Some(u) = &args.unix {
        builder = builder
            .listen_unix_mode(u, args.net.unix_mode)
            .with_context(|| format!("listening on {}", u.display()))?;
    }
    let tls = net_config.tls.as_ref().map(|t| (t.mode(), t.verify_peer()));
    let server = builder.config(net_config).build().context("starting the NBD server")?;

    let metrics = match &args.metrics {
        Some(addr) => {
            let (stats, engine) = (stats.clone(), engine.clone());
            let render: Render = Arc::new(move || {
                let mut out = String::new();
                render_server(&stats, &mut out);
                render_engine(&engine.stats(), &mut out);
                out.push_str(&engine.dirty_stats().prometheus());
                out.push_str(&engine.warmup_stats().prometheus());
                out
            });
            let m = MetricsServer::start(addr, render)?;
            println!("ember serve: metrics http://{}/metrics", m.addr());
            Some(m)
        }
        None => None,
    };
    if let Some((mode, verify_peer)) = tls {
        println!(
            "ember serve: TLS {} ({}client certificates verified)",
            if mode == TlsMode::Require { "required" } else { "offered" },
            if verify_peer { "" } else { "no " }
        );
    }
    let scheme = if tls.is_some_and(|(mode, _)| mode == TlsMode::Require) { "nbds" } else { "nbd" };
    for addr in server.addrs() {
        for name in engine.volume_names() {
            match addr {
                ListenAddr::Tcp(a) => println!("ember serve: export {name} {scheme}://{a}/{name}"),
                ListenAddr::Unix(p) => {
                    println!(
                        "ember serve: export {name} {scheme}+unix:///{name}?socket={}",
                        p.display()
                    )
                }
            }
        }
    }

    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .context("installing signal handlers")?;
    let signal_handle = signals.handle();
    let shutdown = server.shutdown_handle();
    let waiter = std::thread::Builder::new().name("signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            eprintln!("ember serve: signal {sig}, shutting down");
            shutdown.shutdown();
        }
    })?;
    println!("ember serve: ready");

    let served = server.run();
    signal_handle.close();
    let _ = waiter.join();
    if let Some(m) = metrics {
        m.stop();
    }
    served.context("NBD server")?;
    let report = engine.shutdown().context("clean shutdown of the cache")?;
    let s = engine.stats();
    if memory {
        println!(
            "ember serve: clean shutdown: memory cache discarded ({} blocks); read hit ratio {:.2}% ({} hits, {} misses)",
            report.persisted_blocks,
            100.0 * s.read_hit_ratio(),
            s.total.read_hits,
            s.total.read_misses
        );
        return Ok(());
    }
    println!(
        "ember serve: clean shutdown: {} blocks persisted (checkpoint generation {}); read hit ratio {:.2}% ({} hits, {} misses)",
        report.persisted_blocks,
        report.generation,
        100.0 * s.read_hit_ratio(),
        s.total.read_hits,
        s.total.read_misses
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn limits_and_tls_flags() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            net: NetArgs,
        }
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
                .map_err(|e| e.to_string())
                .and_then(|c| c.net.server_config(3).map_err(|e| format!("{e:#}")))
        };
        let config = parse(&[
            "--max-connections",
            "7",
            "--buffer-budget",
            "64M",
            "--max-payload",
            "1M",
            "--max-handshake-options",
            "5",
            "--handshake-deadline",
            "2.5",
            "--busy-poll-us",
            "120",
        ])
        .unwrap();
        assert_eq!(config.spin, Duration::from_micros(120));
        assert_eq!(parse(&[]).unwrap().spin, Duration::from_micros(50));
        assert_eq!(parse(&["--busy-poll-us", "0"]).unwrap().spin, Duration::ZERO);
        let err = parse(&["--busy-poll-us", "20000"]).unwrap_err();
        assert!(err.contains("--busy-poll-us 20000: at most 10000"), "{err}");
        assert_eq!(config.workers, 3);
        assert_eq!(config.max_connections, 7);
        assert_eq!(config.shared_budget, 64 << 20);
        assert_eq!(config.max_payload, 1 << 20);
        assert_eq!(config.max_handshake_options, 5);
        assert_eq!(config.handshake_deadline, Some(Duration::from_millis(2500)));
        assert!(config.tls.is_none());
        let err = parse(&["--max-payload", "64M"]).unwrap_err();
        assert!(err.contains("at most 33554432"), "{err}");
        let err = parse(&["--tls", "require"]).unwrap_err();
        assert!(err.contains("--tls require needs --tls-certificates"), "{err}");
        let err = parse(&["--tls-verify-peer"]).unwrap_err();
        assert!(err.contains("--tls on"), "{err}");
        let err = parse(&["--tls", "maybe"]).unwrap_err();
        assert!(err.contains("not a TLS mode"), "{err}");
        let err = parse(&["--tls", "on", "--tls-certificates", "/nonexistent"]).unwrap_err();
        assert!(err.contains("server-cert.pem"), "{err}");
        assert_eq!(parse_mode("600"), Ok(0o600));
        assert_eq!(parse_mode("0660"), Ok(0o660));
        assert!(parse_mode("1777").is_err());
        assert!(parse_mode("9").is_err());
    }

    #[test]
    fn memory_cache_spec_and_refusals() {
        let size = |s: &str| memory_cache_size(Path::new(s)).map_err(|e| e.to_string());
        assert_eq!(size("mem:64M"), Ok(Some(64 << 20)));
        assert_eq!(size("/tmp/mem:64M"), Ok(None), "only a leading mem: names memory");
        assert_eq!(size("cache.img"), Ok(None));
        assert!(size("mem:lots").unwrap_err().contains("not a size"));
        assert!(size("mem:1M").unwrap_err().contains("at least 16M"));
        for mode in [
            WriteMode::WriteThrough,
            WriteMode::WriteAround,
            WriteMode::WriteBackFlush,
            WriteMode::OrderedWriteBack,
        ] {
            assert_eq!(refuse_on_memory(mode), None, "{mode:?} is safe on memory");
        }
        assert!(refuse_on_memory(WriteMode::WriteBackPersist).unwrap().contains("loses them"));
        assert!(refuse_on_memory(WriteMode::UnsafeWriteBack).unwrap().contains("ignores FLUSH"));
    }

    #[test]
    fn warmup_sizes_and_flags() {
        assert_eq!(parse_warmup_size("50%").ok(), Some(WarmupSize::Percent(50.0)));
        assert_eq!(parse_warmup_size("256M").ok(), Some(WarmupSize::Bytes(256 << 20)));
        assert!(parse_warmup_size("0%").is_err());
        assert!(parse_warmup_size("101%").is_err());
        assert!(parse_warmup_size("x%").is_err());
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            w: WarmupArgs,
        }
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
                .map_err(|e| e.to_string())
                .and_then(|c| c.w.options(Path::new("c.img")).map_err(|e| format!("{e:#}")))
        };
        assert!(parse(&[]).unwrap().is_none());
        let o = parse(&["--warmup-log", "w.log", "--warmup", "top-k", "--warmup-region", "4K"])
            .unwrap()
            .unwrap();
        assert_eq!(o.selector, Some(ember_policy::warmup::SelectorKind::TopK));
        assert_eq!((o.region_bytes, o.staging_bytes, o.log_bytes), (4096, 256 << 10, 64 << 20));
        assert_eq!(
            parse(&["--warmup-log", "w", "--warmup", "none"]).unwrap().unwrap().selector,
            None
        );
        assert!(parse(&["--warmup", "top-k"]).unwrap_err().contains("--warmup-log"));
        assert!(parse(&["--warmup-log", "w", "--warmup", "lru"])
            .unwrap_err()
            .contains("unknown warmup selector"));
        assert!(parse(&["--warmup-log", "w", "--warmup-region", "2M"])
            .unwrap_err()
            .contains("4K to 1M"));
        // The snapshot, its sizes, the log interval, auto.
        let o = parse(&["--warmup-log", "w", "--warmup-snapshot", "--warmup-log-interval", "2s"])
            .unwrap()
            .unwrap();
        assert_eq!(
            o.snapshot,
            Some(SnapshotOptions { staging_bytes: 128 << 20, size_bytes: 1 << 30 })
        );
        assert_eq!(o.log_interval, std::time::Duration::from_secs(2));
        let o = parse(&[
            "--warmup-log",
            "w",
            "--warmup-snapshot",
            "--warmup-snapshot-staging",
            "64K",
            "--warmup-snapshot-size",
            "4M",
            "--warmup",
            "auto",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            o.snapshot,
            Some(SnapshotOptions { staging_bytes: 64 << 10, size_bytes: 4 << 20 })
        );
        assert_eq!(o.log_interval, std::time::Duration::from_millis(10));
        assert!(parse(&["--warmup-log", "w"]).unwrap().unwrap().snapshot.is_none());
        assert!(parse(&["--warmup-log", "w", "--warmup-snapshot-size", "4M"])
            .unwrap_err()
            .contains("--warmup-snapshot"));
        assert!(parse(&["--warmup-log", "w", "--warmup-log-interval", "0ms"])
            .unwrap_err()
            .contains("between 1ms and 3600s"));
    }

    #[test]
    fn backings() {
        let b = parse_backing("web=/dev/sdb").map_err(|e| e.to_string());
        assert_eq!(b, Ok(Backing { name: "web".into(), spec: "/dev/sdb".into() }));
        let b = parse_backing("db=nbd://h:1/x=y").map_err(|e| e.to_string());
        assert_eq!(b, Ok(Backing { name: "db".into(), spec: "nbd://h:1/x=y".into() }));
        assert!(parse_backing("/dev/sdb").is_err());
        assert!(parse_backing("=x").is_err());
        assert!(parse_backing("x=").is_err());
    }

    #[test]
    fn policies() {
        assert!(matches!(parse_write_mode("write-around"), Ok(WriteMode::WriteAround)));
        assert!(matches!(parse_write_mode("write-back-flush"), Ok(WriteMode::WriteBackFlush)));
        assert!(matches!(parse_write_mode("write-back-persist"), Ok(WriteMode::WriteBackPersist)));
        assert!(matches!(parse_write_mode("unsafe-write-back"), Ok(WriteMode::UnsafeWriteBack)));
        assert!(matches!(parse_write_mode("ordered-write-back"), Ok(WriteMode::OrderedWriteBack)));
        assert!(parse_write_mode("write-back").is_err());
        let p = SieveParams::default();
        let name = |s: &str| parse_admission(s, &p, 1 << 20).map(|(a, e)| (a.name(), e)).ok();
        assert_eq!(name("aod"), Some(("aod", None)));
        assert_eq!(name("sievestore-c"), Some(("sievestore-c", None)));
        assert_eq!(name("sievestore-d"), Some(("sievestore-d", Some(86_400_000_000_000))));
        assert_eq!(name("ideal"), None, "the ideal sieve needs the future");
        assert!(parse_admission("nope", &p, 1 << 20).is_err());
        assert!(matches!(parse_policy("s3fifo"), Ok(Kind::S3Fifo)));
        assert!(parse_policy("opt").is_err());
    }
}
