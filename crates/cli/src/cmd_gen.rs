//! `ember trace gen`: synthetic traces (see [`ember_trace::gen`]).
//!
//! Each generator is a subcommand sharing `--seed`, `--block-size`, `--rate`, `--write-ratio`,
//! `-o/--output` and `--format` (default: from the output file's name). Every generator writes
//! from a stream, so memory does not grow with the trace's length (oracleGeneral's
//! next-access times go through temporary files). The Wong and Wilkes workloads and
//! `multi-client` print where the warm-up ends and the timed requests start.

use crate::write_stream::{write_stream, Tally};
use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use ember_trace::gen::{
    ww_random_stream, ww_seq_stream, ww_zipf_stream, Common, MultiClientConfig, Pattern, SeqConfig,
    Sharing, UniformConfig, WarmedStream, WwConfig, ZipfConfig, DEFAULT_RATE,
};
use ember_trace::{Format, Request, VolumeTable};
use ember_units::{parse_duration, parse_duration_in, parse_size, TimeUnit, UnitError};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::{Path, PathBuf};

/// Streams at least this long show a progress bar (on a terminal).
const PROGRESS_MIN: usize = 1_000_000;

/// The generators of `ember trace gen`.
#[derive(Subcommand)]
pub enum GenCommand {
    /// A storage ensemble over several days (SieveStore section 2): MSR volume names, skewed
    /// and drifting popularity.
    Ensemble(crate::cmd_sievestore::GenEnsembleArgs),
    /// Zipf-like popularity over N blocks (ranks scattered by a seeded permutation).
    Zipf(ZipfArgs),
    /// Uniform random one-block requests over N blocks.
    Uniform(UniformArgs),
    /// A sequential loop over N blocks (repeated scans).
    Seq(SeqArgs),
    /// Wong & Wilkes 2002 section 3.2 RANDOM: N_rand = N_c + N_a blocks, N_rand warm-up and
    /// 10 x N_rand timed one-block READS.
    WwRandom(WwArgs),
    /// Wong & Wilkes 2002 section 3.3 SEQ: a loop of N_seq = N_c + N_a - 1 blocks, one
    /// warm-up pass and 10 timed passes.
    WwSeq(WwArgs),
    /// Wong & Wilkes 2002 section 3.4 ZIPF: alpha = 1 over N_Zipf = 1.5 (N_c + N_a) blocks,
    /// N_Zipf warm-up and 10 x N_Zipf timed READS.
    WwZipf(WwZipfArgs),
    /// N clients over one array (Wong & Wilkes section 5): disjoint, conjoint or partially
    /// shared working sets. Volume clientK is client K; offsets address the shared array.
    MultiClient(MultiClientArgs),
    /// Bonfire's reaccess patterns over several days (FAST 2013 section 3): hourly reaccesses,
    /// a daily job reading the same clustered regions at the same hour, one-off accesses.
    /// Write it as MSR-Cambridge CSV (`-o x.csv`) to keep the wall-clock hours. Set --rate
    /// (background requests per second): the default 1000/s makes 86.4M requests a day.
    Bonfire(BonfireArgs),
}

/// Arguments of `ember trace gen bonfire`.
#[derive(Args)]
pub struct BonfireArgs {
    /// Length of the trace. Units ns, us, ms, s, m, h, d; a bare number is days.
    #[arg(long, default_value_t = 7.0, value_parser = parse_days)]
    pub days: f64,
    /// Wall-clock hour (UTC) of the first request (MSR-Cambridge: 17).
    #[arg(long, default_value_t = 17)]
    pub start_hour: u32,
    /// Share of background requests that are hourly reaccesses (the rest are one-offs).
    #[arg(long, default_value_t = 0.6)]
    pub hourly: f64,
    /// Mean age of the block an hourly reaccess re-reads (truncated below 1 h). Units ns, us,
    /// ms, s, m, h, d; a bare number is seconds.
    #[arg(long, default_value_t = 600.0, value_parser = parse_seconds)]
    pub hourly_mean_age: f64,
    /// Regions the daily job reads every day (0: no daily job).
    #[arg(long, default_value_t = 64)]
    pub daily_regions: u64,
    /// Wall-clock hour (UTC) the daily job starts.
    #[arg(long, default_value_t = 2)]
    pub daily_hour: u32,
    /// How long the daily job takes, in whole minutes. Units s, m, h; a bare number is
    /// minutes.
    #[arg(long, default_value_t = 30, value_parser = parse_minutes)]
    pub daily_minutes: u32,
    /// Region size of the daily job in bytes. K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "1MiB", value_parser = parse_size)]
    pub region_bytes: u64,
    /// One-off address space in blocks.
    #[arg(long, default_value_t = 1 << 28)]
    pub blocks: u64,
    /// Volume name.
    #[arg(long, default_value = "bonfire")]
    pub volume: String,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// A duration in days (a bare number is days), as the Bonfire generator takes it.
fn parse_days(text: &str) -> Result<f64, UnitError> {
    parse_duration_in(text, TimeUnit::Days).map(|d| TimeUnit::Days.of(d))
}

/// A duration in seconds (a bare number is seconds).
fn parse_seconds(text: &str) -> Result<f64, UnitError> {
    parse_duration(text).map(|d| TimeUnit::Secs.of(d))
}

/// A whole number of minutes (a bare number is minutes).
fn parse_minutes(text: &str) -> Result<u32, String> {
    let d = parse_duration_in(text, TimeUnit::Mins).map_err(|e| e.to_string())?;
    if d.subsec_nanos() != 0 || d.as_secs() % 60 != 0 {
        return Err(format!("duration {text:?}: not a whole number of minutes"));
    }
    u32::try_from(d.as_secs() / 60).map_err(|_| format!("duration {text:?}: too large"))
}

/// Options every generator takes.
#[derive(Args, Clone, Debug)]
pub struct CommonArgs {
    /// Seed of the random streams (same seed, same trace).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Block size in bytes; every request covers one block. K/M/G = KiB/MiB/GiB; KB/MB/GB =
    /// 10^3/10^6/10^9.
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    pub block_size: u64,
    /// Requests per second (per client for multi-client); requests are evenly spaced.
    #[arg(long, default_value_t = DEFAULT_RATE)]
    pub rate: f64,
    /// Fraction of requests that are writes, in [0, 1].
    #[arg(long, default_value_t = 0.0)]
    pub write_ratio: f64,
    /// The output file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format: msr, spc, csv, oracle-general or ember (default: from the output
    /// file's name; `.csv` is MSR-Cambridge CSV; anything unrecognised is ember).
    #[arg(long)]
    pub format: Option<String>,
}

impl CommonArgs {
    fn common(&self) -> Common {
        Common {
            seed: self.seed,
            block_size: self.block_size,
            rate: self.rate,
            write_ratio: self.write_ratio,
        }
    }
}

/// Arguments of `ember trace gen zipf`.
#[derive(Args)]
pub struct ZipfArgs {
    /// The Zipf exponent alpha (0 = uniform).
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f64,
    /// Number of distinct blocks N.
    #[arg(long)]
    pub blocks: u64,
    /// Number of requests.
    #[arg(long)]
    pub requests: u64,
    /// Keep the most popular blocks contiguous (rank i at block i - 1) instead of scattered.
    #[arg(long)]
    pub contiguous: bool,
    /// Volume name.
    #[arg(long, default_value = "zipf")]
    pub volume: String,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Arguments of `ember trace gen uniform`.
#[derive(Args)]
pub struct UniformArgs {
    /// Number of distinct blocks N.
    #[arg(long)]
    pub blocks: u64,
    /// Number of requests.
    #[arg(long)]
    pub requests: u64,
    /// Volume name.
    #[arg(long, default_value = "uniform")]
    pub volume: String,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Arguments of `ember trace gen seq`.
#[derive(Args)]
pub struct SeqArgs {
    /// Length of the loop N in blocks.
    #[arg(long)]
    pub blocks: u64,
    /// Number of requests.
    #[arg(long)]
    pub requests: u64,
    /// Position in the loop of the first request.
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// Volume name.
    #[arg(long, default_value = "seq")]
    pub volume: String,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Arguments of the Wong & Wilkes section 3 workloads.
#[derive(Args)]
pub struct WwArgs {
    /// Client cache size N_c in blocks (paper: 16384).
    #[arg(long, default_value_t = ember_trace::gen::ww::WW_CLIENT_BLOCKS)]
    pub client_blocks: u64,
    /// Array cache size N_a in blocks (paper: 16384).
    #[arg(long, default_value_t = ember_trace::gen::ww::WW_ARRAY_BLOCKS)]
    pub array_blocks: u64,
    /// Timed READS per warm-up READ (paper: 10).
    #[arg(long, default_value_t = ember_trace::gen::ww::WW_TIMED_MULTIPLIER)]
    pub timed_multiplier: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Arguments of `ember trace gen ww-zipf`.
#[derive(Args)]
pub struct WwZipfArgs {
    /// The Zipf exponent (paper: 1).
    #[arg(long, default_value_t = ember_trace::gen::ww::WW_ZIPF_ALPHA)]
    pub alpha: f64,
    #[command(flatten)]
    pub ww: WwArgs,
}

/// Per-client access pattern of `multi-client`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum PatternArg {
    /// Uniform random over the client's working set.
    Random,
    /// A sequential loop over the working set (clients start at staggered positions).
    Seq,
    /// Zipf with `--alpha`.
    Zipf,
}

/// Working-set overlap of `multi-client`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum SharingArg {
    /// No block is read by two clients.
    Disjoint,
    /// All clients issue the same READS in the same order at the same time.
    Conjoint,
    /// `--shared-fraction` of each working set is common; each client has its own stream.
    Partial,
}

/// Arguments of `ember trace gen multi-client`.
#[derive(Args)]
pub struct MultiClientArgs {
    /// Number of clients (volumes client0, client1, ...).
    #[arg(long)]
    pub clients: u32,
    /// Working-set size of each client, in blocks.
    #[arg(long)]
    pub blocks_per_client: u64,
    /// Access pattern of each client.
    #[arg(long, value_enum, default_value_t = PatternArg::Random)]
    pub pattern: PatternArg,
    /// Zipf exponent for `--pattern zipf`.
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f64,
    /// How the clients' working sets overlap.
    #[arg(long, value_enum, default_value_t = SharingArg::Disjoint)]
    pub sharing: SharingArg,
    /// Fraction of each working set shared by all clients (with `--sharing partial`).
    #[arg(long, default_value_t = 0.5)]
    pub shared_fraction: f64,
    /// Warm-up requests per client (default: the working-set size).
    #[arg(long)]
    pub warmup_per_client: Option<u64>,
    /// Timed requests per client (default: 10 x the working-set size).
    #[arg(long)]
    pub timed_per_client: Option<u64>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Run `ember trace gen`.
pub fn run(cmd: GenCommand) -> anyhow::Result<()> {
    match cmd {
        GenCommand::Ensemble(a) => crate::cmd_sievestore::gen_ensemble(&a),
        GenCommand::Bonfire(a) => {
            let cfg = ember_trace::gen::bonfire::BonfireConfig {
                days: a.days,
                start_hour: a.start_hour,
                hourly: a.hourly,
                hourly_mean_age_s: a.hourly_mean_age,
                daily_regions: a.daily_regions,
                daily_hour: a.daily_hour,
                daily_minutes: a.daily_minutes,
                region_bytes: a.region_bytes,
                blocks: a.blocks,
                volume: a.volume.clone(),
                common: a.common.common(),
            };
            let s = ember_trace::gen::bonfire::BonfireStream::new(&cfg)?;
            let volumes = s.volumes();
            emit(&a.common, s, volumes)
        }
        GenCommand::Zipf(a) => {
            let mut cfg = ZipfConfig::new(a.alpha, a.blocks, a.requests, a.common.common());
            cfg.scramble = !a.contiguous;
            cfg.volume = a.volume;
            let s = cfg.stream()?;
            let volumes = s.volumes();
            emit(&a.common, s, volumes)
        }
        GenCommand::Uniform(a) => {
            let mut cfg = UniformConfig::new(a.blocks, a.requests, a.common.common());
            cfg.volume = a.volume;
            let s = cfg.stream()?;
            let volumes = s.volumes();
            emit(&a.common, s, volumes)
        }
        GenCommand::Seq(a) => {
            let mut cfg = SeqConfig::new(a.blocks, a.requests, a.common.common());
            cfg.start = a.start;
            cfg.volume = a.volume;
            let s = cfg.stream()?;
            let volumes = s.volumes();
            emit(&a.common, s, volumes)
        }
        GenCommand::WwRandom(a) => emit_warmed(&a.common, ww_random_stream(&ww_config(&a, None))?),
        GenCommand::WwSeq(a) => emit_warmed(&a.common, ww_seq_stream(&ww_config(&a, None))?),
        GenCommand::WwZipf(a) => {
            emit_warmed(&a.ww.common, ww_zipf_stream(&ww_config(&a.ww, Some(a.alpha)))?)
        }
        GenCommand::MultiClient(a) => {
            let pattern = match a.pattern {
                PatternArg::Random => Pattern::Random,
                PatternArg::Seq => Pattern::Seq,
                PatternArg::Zipf => Pattern::Zipf { alpha: a.alpha },
            };
            let sharing = match a.sharing {
                SharingArg::Disjoint => Sharing::Disjoint,
                SharingArg::Conjoint => Sharing::Conjoint,
                SharingArg::Partial => Sharing::Partial { shared_fraction: a.shared_fraction },
            };
            let mut cfg = MultiClientConfig::new(
                a.clients,
                a.blocks_per_client,
                pattern,
                sharing,
                a.common.common(),
            );
            if let Some(w) = a.warmup_per_client {
                cfg.warmup_per_client = w;
            }
            if let Some(t) = a.timed_per_client {
                cfg.timed_per_client = t;
            }
            let s = cfg.warmed_stream()?;
            let l = s.requests.layout();
            emit_warmed(&a.common, s)?;
            note(
                &a.common,
                format_args!(
                    "array: {} blocks; shared blocks 0..{}; client K's private blocks start at \
                 {} + K x {}",
                    l.array_blocks(),
                    l.shared_blocks,
                    l.shared_blocks,
                    l.blocks_per_client - l.shared_blocks
                ),
            );
            Ok(())
        }
    }
}

fn ww_config(a: &WwArgs, alpha: Option<f64>) -> WwConfig {
    let mut c = WwConfig {
        client_blocks: a.client_blocks,
        array_blocks: a.array_blocks,
        timed_multiplier: a.timed_multiplier,
        common: a.common.common(),
        ..WwConfig::default()
    };
    if let Some(alpha) = alpha {
        c.zipf_alpha = alpha;
    }
    c
}

/// The output format: `--format`, else the output file's name.
fn output_format(c: &CommonArgs) -> anyhow::Result<Format> {
    let f = match &c.format {
        Some(name) => name.parse::<Format>()?,
        None => format_for_path(&c.output),
    };
    if !f.is_writable() {
        anyhow::bail!("cannot write {f} traces (writable: msr, spc, csv, oracle-general, ember)");
    }
    Ok(f)
}

/// The format an output file's name implies: its extension (past `.gz` / `.zst`) if it names
/// one, MSR-Cambridge CSV for `.csv`, else ember's binary format.
fn format_for_path(path: &Path) -> Format {
    if let Some(f) = ember_trace::format_from_name(path) {
        return f;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase());
    let name = name.unwrap_or_default();
    let base = name.trim_end_matches(".gz").trim_end_matches(".zst");
    if base.ends_with(".csv") {
        Format::MsrCsv
    } else {
        Format::Ember
    }
}

/// A progress bar for `n` requests, drawn on stderr only for long streams on a terminal.
fn progress(n: usize, what: &str) -> ProgressBar {
    if n < PROGRESS_MIN {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(n as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:40}] {human_pos}/{human_len} ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

/// Write a stream: one request at a time for the streamable formats, so 10M+ requests never
/// sit in memory; for oracleGeneral (its next-access times look ahead) through temporary
/// files ([`Spool`]), memory then growing with the distinct blocks only.
fn emit(
    c: &CommonArgs,
    stream: impl ExactSizeIterator<Item = Request>,
    volumes: VolumeTable,
) -> anyhow::Result<()> {
    let format = output_format(c)?;
    let n = stream.len();
    let bar = progress(n, "generating");
    let tally = write_stream(&c.output, format, c.block_size, &volumes, None, stream, &bar)?;
    report(c, format, &tally, volumes.len());
    Ok(())
}

/// Write a warmed workload from its stream (as [`emit`]; its length, known up front, goes in
/// ember's header) and say where the timed part starts.
fn emit_warmed(
    c: &CommonArgs,
    w: WarmedStream<impl ExactSizeIterator<Item = Request>>,
) -> anyhow::Result<()> {
    let format = output_format(c)?;
    let total = w.remaining();
    let bar = progress(total as usize, "generating");
    let tally =
        write_stream(&c.output, format, c.block_size, &w.volumes, Some(total), w.requests, &bar)
            .with_context(|| format!("writing {}", c.output.display()))?;
    report(c, format, &tally, w.volumes.len());
    note(
        c,
        format_args!(
            "working set: {} blocks; warm-up: {} requests (time_ns < {}); timed: {} requests \
         (time_ns >= {})",
            w.working_set_blocks,
            w.warmup_requests,
            w.timed_start_ns,
            total.saturating_sub(w.warmup_requests),
            w.timed_start_ns
        ),
    );
    Ok(())
}

fn report(c: &CommonArgs, format: Format, t: &Tally, volumes: usize) {
    note(
        c,
        format_args!(
            "wrote {} requests ({} reads, {} writes) on {} volume{} to {} ({format})",
            t.requests,
            t.requests - t.writes,
            t.writes,
            volumes,
            if volumes == 1 { "" } else { "s" },
            c.output.display()
        ),
    );
}

/// Print a line about what was written: on stdout, unless the trace itself goes to stdout
/// (`-o /dev/stdout`, to pipe it), then on stderr so the trace stays clean.
fn note(c: &CommonArgs, line: std::fmt::Arguments<'_>) {
    let to_stdout = ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]
        .iter()
        .any(|p| c.output == std::path::Path::new(p));
    if to_stdout {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bonfire_durations_keep_their_bare_units() {
        assert_eq!(parse_days("7"), Ok(7.0));
        assert_eq!(parse_days("0.5"), Ok(0.5));
        assert_eq!(parse_days("36h"), Ok(1.5));
        assert_eq!(parse_seconds("600"), Ok(600.0));
        assert_eq!(parse_seconds("10m"), Ok(600.0));
        assert_eq!(parse_seconds("250ms"), Ok(0.25));
        assert_eq!(parse_minutes("30"), Ok(30));
        assert_eq!(parse_minutes("1h"), Ok(60));
        assert_eq!(parse_minutes("120s"), Ok(2));
        assert!(parse_minutes("90s").is_err_and(|e| e.contains("whole number of minutes")));
        assert!(parse_minutes("100000000d").is_err_and(|e| e.contains("too large")));
        assert!(parse_days("-1").is_err());
    }
}
