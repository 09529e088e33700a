//! `ember sim`: simulate replacement policies over a trace at several cache sizes, print a
//! table, and write JSON, CSV and PNG plots (column names in docs/reference/outputs.md).

use crate::output::{OutputArgs, Report, Row};
use crate::plot_sim;
use crate::trace_args::TraceInput;
use anyhow::bail;
use clap::Args;
use ember_sim::core::plan::{Driver, Outcome, PlanOptions, Progress, TraceSource};
use ember_sim::{default_threads, Interval, Plan};
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
    #[arg(long)]
    pub interval: Option<Interval>,
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
    let options = PlanOptions {
        interval: args.interval,
        threads: args.threads.unwrap_or_else(default_threads),
        whole_trace: std::env::var_os(WHOLE_TRACE_ENV).is_some_and(|v| v == "1"),
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
