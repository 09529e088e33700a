//! `ember sim`: simulate replacement policies over a trace at several cache sizes, print a
//! table, and write JSON, CSV and PNG plots (column names in docs/reference/outputs.md).

use crate::grid_args::WarmupArgs;
use crate::output::{MiniSimNote, OutputArgs, Report, Row, WarmupNote};
use crate::plot_sim;
use crate::trace_args::TraceInput;
use anyhow::{bail, Context};
use clap::Args;
use ember_policy::replacement::Spec;
use ember_sim::core::minisim::{run_minis_floored, SampledStream, SpatialSample};
use ember_sim::core::plan::{Driver, Outcome, PlanOptions, Progress, TraceSource};
use ember_sim::{default_threads, Capacity, Interval, Plan};
use ember_trace::{BlockChunk, BlockReader};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

/// Arguments of `ember sim`.
#[derive(Args)]
pub struct SimArgs {
    /// The trace and how to read it (format, CSV columns, block size, ...).
    #[command(flatten)]
    pub input: TraceInput,
    /// Replacement policies, comma-separated, each NAME[:PARAM=VALUE]... (lru, arc, s3fifo,
    /// lfuda:lcs, lruk:k=3, opt, ...); `--policy help` lists every policy with its
    /// parameters, defaults and citation.
    #[arg(long, default_value = "lru", value_delimiter = ',', value_parser = crate::grid_args::PolicyArg)]
    pub policy: Vec<String>,
    /// Cache sizes, comma-separated: blocks (1000), bytes (64MiB, 1GiB, 512KB) or a
    /// percentage of the working set (1%, 10%). K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "1%,10%", value_delimiter = ',')]
    pub size: Vec<String>,
    /// Also record a timeline: a time span (1h, 10m, 30s) or a request count (100000req).
    /// With an uncounted warm-up period, its intervals are flagged `warmup` and the plot
    /// marks where counting starts.
    #[arg(long)]
    pub interval: Option<Interval>,
    /// The uncounted warm-up period (--warmup-requests, --warmup-time).
    #[command(flatten)]
    pub uncounted: WarmupArgs,
    /// Write the results as CSV to this file (with --interval, also <stem>.timeline.csv).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Plot hit ratio against cache size to this PNG (with --interval, also
    /// <stem>.timeline.png).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// --out DIR (sim.json, sim.csv, hit_ratio.png, and timeline.csv, timeline.png), --json,
    /// --quiet.
    #[command(flatten)]
    pub output: OutputArgs,
    /// One access per request, keyed by its first block (with --block-size set to the trace's
    /// address unit, e.g. 512): libCacheSim's object view of a block trace, for comparing with
    /// it on traces it reads natively. Default: every block a request touches is an access.
    #[arg(long)]
    pub per_request: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Miniature simulations (MINISIM, Waldspurger et al., ATC 2017), for miss-ratio curves
    /// of any policy at a fraction of the cost: only a spatial sample of the blocks (this
    /// rate: 1%, 0.01) is simulated, at each size scaled by the rate (raised, up to 16 times,
    /// for a small cache, so that its miniature holds at least 2,000 blocks). Counters are
    /// the sample's; the miss ratios estimate the full caches'. Not with --interval or an
    /// uncounted warm-up period.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub minisim: Option<f64>,
    /// The sequential cutoff in front of the cache, as `ember serve` runs it (with it the
    /// trace is held in memory; not with --minisim). Each run's JSON then carries
    /// `seq_cutoff_bypasses`.
    #[command(flatten)]
    pub seq_cutoff: crate::seq_cutoff_args::SeqCutoffArgs,
    /// Simulate the deployment this topology file names instead of a grid: every tier
    /// (docs/guide/deployment.md) from the config file its `ember serve` runs with, the
    /// trace's volumes routed to client tiers. Prints a row per tier (hits, allocation-writes
    /// admitted and refused, DEMOTEs sent, stored, aborted and refused, dirty blocks, backing
    /// reads, mean READ latency); --json, --csv and --out write deployment.json and
    /// deployment.csv; --warmup-requests N runs the first N requests uncounted. --policy,
    /// --size and the grid's other flags do not apply.
    #[arg(long, value_name = "TOPOLOGY")]
    pub deployment: Option<PathBuf>,
    /// Simulate one cache over the trace's volumes with the settings of this `ember serve`
    /// config file: the cache-wide `[live]` ones and each `[[volume]]` table's own (write
    /// policy, sieve, sequential cutoff, min-share and max-share), the trace's volume names
    /// being the tables' names; at each --size. --json writes {"runs": [...]}. --policy and
    /// the sieve and cutoff flags do not apply (the file gives them).
    #[arg(long, value_name = "FILE", conflicts_with = "deployment")]
    pub config: Option<PathBuf>,
}

/// A sampling rate: a fraction (0.01) or a percentage (1%), above 0 and at most 1.
fn parse_rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let rate = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("sampling rate {text:?}: a fraction (0.01) or a percentage (1%)"))?;
    SpatialSample::new(rate).map_err(|e| e.to_string())?;
    Ok(rate)
}

/// The report of `ember sim --minisim RATE`: one streamed pass samples the trace (and
/// counts its working set for percentage sizes), then every cell runs as a miniature
/// simulation over the sample.
fn compute_minisim(
    args: &SimArgs,
    source: &TraceSource,
    policies: &[Spec],
    sizes: &[(String, Capacity)],
    rate: f64,
) -> anyhow::Result<Report> {
    if args.interval.is_some() || args.uncounted.given() {
        bail!("--minisim takes neither --interval nor an uncounted warm-up period");
    }
    let sample = SpatialSample::new(rate)?;
    let path = &source.path;
    let block_size = source.read.block_size;
    let context = || format!("reading trace {}", path.display());
    let mut reader =
        BlockReader::open(path, &source.read, source.per_request, false).with_context(context)?;
    let widest = sample.widest();
    let mut sampled = SampledStream::new(widest, block_size)?;
    let mut chunk = BlockChunk::default();
    let started = std::time::Instant::now();
    while reader.next_chunk(&mut chunk, 1 << 18).with_context(context)? {
        sampled.push_chunk(&chunk);
    }
    let (requests, accesses, wss) = (sampled.requests(), sampled.accesses(), sampled.wss());
    let stream = sampled.finish(policies.iter().any(|k| k.needs_oracle()));
    let cells: Vec<(Spec, u64)> = policies
        .iter()
        .flat_map(|k| sizes.iter().map(move |(_, c)| (*k, c.blocks(block_size, wss))))
        .collect();
    let threads = args.threads.unwrap_or_else(default_threads);
    let results: Vec<_> = run_minis_floored(&sample, &widest, &stream, accesses, &cells, threads)?
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    if !args.output.quiet {
        eprintln!(
            "ember sim --minisim {rate}: sampled {} of {accesses} block accesses of {} in {:.2} s \
             ({} runs)",
            stream.len(),
            path.display(),
            started.elapsed().as_secs_f64(),
            results.len()
        );
    }
    let labels = policies.iter().flat_map(|_| sizes.iter().map(|(l, _)| l.clone()));
    Ok(Report {
        trace: path.display().to_string(),
        block_size,
        requests,
        block_accesses: accesses,
        wss_blocks: wss,
        interval: None,
        warmup: None,
        minisim: Some(MiniSimNote {
            rate: sample.rate(),
            sampled_accesses: stream.len() as u64,
            sampled_blocks: ember_sim::core::stream::distinct_keys(stream.keys()),
        }),
        rows: labels.zip(results).map(|(size, result)| Row { size, result }).collect(),
    })
}

/// `a/b.csv` -> `a/b.timeline.csv`.
fn sibling(path: &Path, ext: &str) -> PathBuf {
    let stem = path.file_stem().map_or_else(|| "sim".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}.timeline.{ext}"))
}

/// Set to `1`, this environment variable makes a grid with OPT hold the whole trace in memory
/// (the path before the streaming pass of next-access times): a reference for tests and for
/// comparing the two paths.
pub const WHOLE_TRACE_ENV: &str = "EMBER_SIM_WHOLE_TRACE";

/// The progress bar: drawn on stderr when it is a terminal and not --quiet.
fn progress_bar(quiet: bool, len: Option<u64>) -> ProgressBar {
    let bar = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::no_length(),
    };
    if quiet || !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    let template = if len.is_some() {
        "{spinner} [{elapsed_precise}] {wide_bar} {percent}% {msg} (eta {eta})"
    } else {
        "{spinner} [{elapsed_precise}] {human_pos} accesses {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

/// Run the grid that `args` describe and return the report, writing nothing (progress bar
/// and timing line on stderr unless --quiet). The plan ([`Plan`]) picks how the trace is
/// read and simulated.
pub fn compute(args: &SimArgs) -> anyhow::Result<Report> {
    let policies = crate::grid_args::policies(&args.policy)?;
    let sizes = crate::grid_args::sizes(&args.size)?;
    if policies.is_empty() || sizes.is_empty() {
        bail!("give at least one --policy and one --size");
    }
    let block_size = args.input.block_size;
    if block_size == 0 {
        bail!("--block-size must be positive");
    }
    let quiet = args.output.quiet;
    let trace_path = args.input.path().to_path_buf();
    let source = TraceSource {
        path: trace_path.clone(),
        read: args.input.read_options(),
        per_request: args.per_request,
    };
    let seq_cutoff = args.seq_cutoff.config(block_size);
    if let Some(rate) = args.minisim {
        if seq_cutoff.is_active() {
            bail!(
                "--minisim samples blocks, which breaks sequential streams: not with --seq-cutoff"
            );
        }
        return compute_minisim(args, &source, &policies, &sizes, rate);
    }
    let warmup = args.uncounted.period()?;
    let options = PlanOptions {
        interval: args.interval,
        threads: args.threads.unwrap_or_else(default_threads),
        whole_trace: std::env::var_os(WHOLE_TRACE_ENV).is_some_and(|v| v == "1"),
        warmup,
        seq_cutoff,
    };
    let plan = Plan::new(source, policies, sizes, options)?;
    let bar: OnceLock<ProgressBar> = OnceLock::new();
    let runs = AtomicUsize::new(0);
    let out = plan.run(&|p| match p {
        Progress::Start { work, runs: n } => {
            runs.store(n, Relaxed);
            let b = bar.get_or_init(|| progress_bar(quiet, work));
            b.set_message(format!("{n} runs"));
        }
        Progress::Advance { done, runs_done } => {
            if let Some(b) = bar.get() {
                b.set_position(done);
                if let Some(d) = runs_done {
                    b.set_message(format!("{d}/{} runs", runs.load(Relaxed)));
                }
            }
        }
    });
    if let Some(b) = bar.get() {
        b.finish_and_clear();
    }
    let out = out?;
    if out.skipped > 0 && !quiet {
        eprintln!(
            "ember sim: skipped {} malformed records of {}",
            out.skipped,
            trace_path.display()
        );
    }
    if !quiet {
        eprintln!("{}", timing_line(&out, &trace_path));
    }
    Ok(Report {
        trace: trace_path.display().to_string(),
        block_size,
        requests: out.totals.requests,
        block_accesses: out.totals.accesses,
        wss_blocks: out.totals.wss,
        interval: args.interval.map(|i| i.to_string()),
        warmup: WarmupNote::of(
            warmup,
            out.totals.counted_from,
            out.totals.requests,
            out.totals.accesses,
        ),
        minisim: None,
        rows: out.runs.into_iter().map(|(c, result)| Row { size: c.size, result }).collect(),
    })
}

/// The line `ember sim` prints on stderr after a run: what ran, on what, how fast.
fn timing_line(out: &Outcome, trace: &Path) -> String {
    let t = &out.timings;
    let sim_time = t.simulate.as_secs_f64();
    let runs = out.runs.len();
    let rate = out.totals.accesses as f64 * runs as f64 / sim_time.max(1e-9) / 1e6;
    if out.driver == Driver::Whole {
        return format!(
            "ember sim: read {} in {:.2} s, next-access times in {:.2} s; {} runs of {} accesses \
             in {:.2} s on {} threads ({:.1} M accesses/s)",
            trace.display(),
            t.read.as_secs_f64(),
            t.before.saturating_sub(t.read).as_secs_f64(),
            runs,
            out.totals.accesses,
            sim_time,
            out.threads,
            rate,
        );
    }
    format!(
        "ember sim: {} runs{} of {} accesses streamed from {} in {:.2} s ({}{} threads, {:.1} M \
         accesses/s)",
        runs,
        if out.driver == Driver::Shared { " over one shared index" } else { "" },
        out.totals.accesses,
        trace.display(),
        sim_time,
        match out.first_pass {
            Some(pass) => format!("after a {:.2} s {pass} pass; ", t.before.as_secs_f64()),
            None => String::new(),
        },
        out.threads,
        rate,
    )
}

/// Run `ember sim`: the grid, its table on stdout, and the files asked for.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    if let Some(topology) = &args.deployment {
        return crate::sim_deployment::run(&args, topology);
    }
    if let Some(config) = &args.config {
        return crate::sim_volumes::run(&args, config);
    }
    let report = compute(&args)?;
    print!("{}", report.table());
    let n_sizes = args.size.iter().filter(|s| !s.trim().is_empty()).count();
    write_outputs(&args, &report, n_sizes)
}

fn write_outputs(args: &SimArgs, report: &Report, n_sizes: usize) -> anyhow::Result<()> {
    args.output.dir()?;
    let json = args.output.json_file("sim.json");
    let csv = args.output.file(args.csv.as_ref(), "sim.csv");
    let png = args.output.file(args.plot.as_ref(), "hit_ratio.png");
    let timeline = args.interval.is_some();
    if let Some(p) = &json {
        report.write_json(p)?;
    }
    if let Some(p) = &csv {
        report.write_csv(p)?;
        if timeline {
            let t = if args.csv.is_some() {
                sibling(p, "csv")
            } else {
                p.with_file_name("timeline.csv")
            };
            report.write_timeline_csv(&t)?;
        }
    }
    if let Some(p) = &png {
        if n_sizes >= 2 {
            plot_sim::hit_ratio_curve(report, p)?;
        } else if args.plot.is_some() && !args.output.quiet {
            eprintln!("ember sim: one size only, no hit-ratio curve plotted to {}", p.display());
        }
        if let Some(i) = args.interval {
            let t = if args.plot.is_some() {
                sibling(p, "png")
            } else {
                p.with_file_name("timeline.png")
            };
            plot_sim::timeline(report, &t, matches!(i, Interval::Requests(_)))?;
        }
    }
    Ok(())
}
