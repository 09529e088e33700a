//! `ember sim`: simulate replacement policies over a trace at several cache sizes, print a
//! table, and write JSON, CSV and PNG plots (column names in docs/reference/outputs.md).

use crate::output::{OutputArgs, Report, Row};
use crate::plot_sim;
use crate::trace_args::TraceInput;
use anyhow::{bail, Context};
use clap::Args;
use ember_policy::admission::Aod;
use ember_policy::replacement::Kind;
use ember_policy::with_replacement;
use ember_sim::grid_shared::{run_shared_chunks, run_shared_records, SharedGrid};
use ember_sim::{
    count_pass, default_threads, policy_run, run_grid, run_streaming, run_streaming_records,
    run_streaming_with_next, simulate_with_progress, AccessStream, AccessStreamBuilder, Capacity,
    ChunkRun, GridProgress, Interval, RunConfig, SimResult, Split, StreamTotals, CHUNK_ACCESSES,
};
use ember_trace::{BlockChunk, BlockReader, Spool};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `ember sim`.
#[derive(Args)]
pub struct SimArgs {
    /// The trace and how to read it (format, CSV columns, block size, ...).
    #[command(flatten)]
    pub input: TraceInput,
    /// Replacement policies, comma-separated: lru, fifo, clock, sieve, arc, slru, 2q, s3fifo,
    /// opt.
    #[arg(long, default_value = "lru", value_delimiter = ',')]
    pub policy: Vec<String>,
    /// Cache sizes, comma-separated: blocks (1000), bytes (64MiB, 1GiB, 512KB) or a
    /// percentage of the working set (1%, 10%).
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

/// One run of the grid: a policy at a size.
struct Cell {
    policy: Kind,
    size: String,
    capacity: u64,
}

/// Run one cell with a concrete policy type, so the hot loop is monomorphized.
fn run_cell(
    cell: &Cell,
    stream: &AccessStream,
    config: &RunConfig,
    tick: &mut dyn FnMut(u64),
) -> SimResult {
    let cap = usize::try_from(cell.capacity).unwrap_or(usize::MAX);
    with_replacement!(cell.policy, cap, |p| simulate_with_progress(
        &mut p, &mut Aod, stream, config, tick
    ))
}

/// `a/b.csv` -> `a/b.timeline.csv`.
fn sibling(path: &Path, ext: &str) -> PathBuf {
    let stem = path.file_stem().map_or_else(|| "sim".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}.timeline.{ext}"))
}

/// Run the grid that `args` describe and return the report, writing nothing (progress bar
/// and timing line on stderr unless --quiet).
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
    let oracle = policies.iter().any(|p| p.needs_oracle());
    if oracle && std::env::var_os(WHOLE_TRACE_ENV).is_some_and(|v| v == "1") {
        return compute_whole(args, &policies, &sizes);
    }
    compute_streamed(args, &policies, &sizes, oracle)
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

/// Every policy streams: the trace is read once in bounded chunks (twice when a size is a
/// percentage of the working set, which the first pass counts), every cell of the grid
/// simulating each chunk while the next is read. Memory: the policies' state, two chunks and
/// the working-set counter, whatever the trace's length.
///
/// With `oracle` (OPT in the grid), the trace is read once into temporary files
/// ([`ember_trace::Spool`]), a backward pass over them computes the next-access times (its
/// map holds one entry per distinct block), and the grid streams from the files.
fn compute_streamed(
    args: &SimArgs,
    policies: &[Kind],
    sizes: &[(String, Capacity)],
    oracle: bool,
) -> anyhow::Result<Report> {
    let quiet = args.output.quiet;
    let started = Instant::now();
    let trace_path = args.input.path().to_path_buf();
    let block_size = args.input.block_size;
    let opts = args.input.read_options();
    let keep_times = args.interval.is_some();
    let open = || {
        BlockReader::open(&trace_path, &opts, args.per_request, keep_times)
            .with_context(|| format!("opening trace {}", trace_path.display()))
    };
    let reading = || format!("reading trace {}", trace_path.display());
    let needs_wss = sizes.iter().any(|(_, c)| matches!(c, Capacity::Percent(_)));
    let mut skipped = 0u64;
    let future = if oracle {
        let mut r = open()?;
        let tmp = std::env::temp_dir();
        let mut spool = Spool::new(keep_times).with_context(|| {
            format!("creating temporary files for OPT in {} (set TMPDIR)", tmp.display())
        })?;
        let mut c = BlockChunk::default();
        while r.next_chunk(&mut c, CHUNK_ACCESSES).with_context(reading)? {
            spool.push(&c).context("writing the trace to temporary files for OPT")?;
        }
        skipped = r.stats().skipped;
        Some(spool.finish().context("computing next-access times for OPT")?)
    } else {
        None
    };
    let counted = if let Some(f) = &future {
        Some(StreamTotals { requests: f.requests(), accesses: f.len(), wss: f.distinct() })
    } else if needs_wss {
        if !BlockReader::rereadable(&trace_path) {
            bail!(
                "{}: a size in % of the working set needs a first pass over the trace, and a pipe \
                 can be read only once: give sizes in blocks or bytes",
                trace_path.display()
            );
        }
        let mut r = open()?;
        Some(count_pass(&mut |c| r.next_chunk(c, CHUNK_ACCESSES)).with_context(reading)?)
    } else {
        None
    };
    let wss_known = counted.map_or(0, |t| t.wss);
    let cells: Vec<Cell> = policies
        .iter()
        .flat_map(|p| {
            sizes.iter().map(move |(text, c)| Cell {
                policy: *p,
                size: text.clone(),
                capacity: c.blocks(block_size, wss_known),
            })
        })
        .collect();
    let timeline = args.interval.is_some();
    // A grid of LRU, FIFO, CLOCK and S3-FIFO cells without a timeline runs over one shared
    // index (ember_sim::grid_shared): one probe per access for all cells, the same results.
    let shared: Option<Vec<(Kind, usize)>> = (cells.len() > 1 && !timeline && future.is_none())
        .then(|| cells.iter().map(|c| (c.policy, c.capacity)).collect::<Vec<(Kind, u64)>>())
        .filter(|c| SharedGrid::supports(c))
        .map(|c| c.into_iter().map(|(k, n)| (k, n as usize)).collect());
    let runs: Vec<Box<dyn ChunkRun>> = cells
        .iter()
        .filter(|_| shared.is_none())
        .map(|c| {
            let cap = usize::try_from(c.capacity).unwrap_or(usize::MAX);
            with_replacement!(c.policy, cap, |p| policy_run(p, Aod, timeline))
        })
        .collect();
    let threads = args.threads.unwrap_or_else(default_threads).max(1);
    let bar = progress_bar(quiet, counted.map(|t| t.accesses));
    let total_runs = cells.len();
    bar.set_message(format!("{total_runs} runs"));
    let on_progress = |n: u64| bar.set_position(n);
    let sim_start = Instant::now();
    let (results, totals) = if let Some(f) = &future {
        let mut reader = f.reader();
        run_streaming_with_next(
            &mut |c, next| reader.next_chunk(c, next, CHUNK_ACCESSES),
            runs,
            args.interval,
            threads,
            &on_progress,
        )
        .context("reading the temporary files of OPT's next-access times")?
    } else {
        let mut reader = open()?;
        let out = if let Some(grid) = &shared {
            if reader.reads_records_in_place() {
                run_shared_records(&mut reader, grid, threads, &on_progress)
            } else {
                run_shared_chunks(
                    &mut |c| reader.next_chunk(c, CHUNK_ACCESSES),
                    grid,
                    threads,
                    &on_progress,
                )
            }
            .with_context(reading)?
        } else if reader.reads_records_in_place() && args.interval.is_none() {
            // oracleGeneral: the runs read the records in place (zero-copy).
            run_streaming_records(&mut reader, runs, threads, &on_progress).with_context(reading)?
        } else {
            run_streaming(
                &mut |c| reader.next_chunk(c, CHUNK_ACCESSES),
                runs,
                args.interval,
                threads,
                &on_progress,
            )
            .with_context(reading)?
        };
        skipped = reader.stats().skipped;
        out
    };
    bar.finish_and_clear();
    if skipped > 0 && !quiet {
        eprintln!("ember sim: skipped {skipped} malformed records of {}", trace_path.display());
    }
    if !quiet {
        let sim_time = sim_start.elapsed().as_secs_f64();
        let accesses = totals.accesses as f64 * cells.len() as f64;
        eprintln!(
            "ember sim: {} runs{} of {} accesses streamed from {} in {:.2} s ({}{} threads, {:.1} M accesses/s)",
            cells.len(),
            if shared.is_some() { " over one shared index" } else { "" },
            totals.accesses,
            trace_path.display(),
            sim_time,
            if counted.is_some() {
                let pass = if oracle { "next-access" } else { "working-set" };
                format!("after a {:.2} s {pass} pass; ", (sim_start - started).as_secs_f64())
            } else {
                String::new()
            },
            match &shared {
                Some(_) => {
                    let mut kinds: Vec<Kind> = cells.iter().map(|c| c.policy).collect();
                    kinds.dedup();
                    threads.min(kinds.len())
                }
                None => threads.min(cells.len()),
            },
            accesses / sim_time.max(1e-9) / 1e6,
        );
    }
    Ok(Report {
        trace: trace_path.display().to_string(),
        block_size,
        requests: totals.requests,
        block_accesses: totals.accesses,
        wss_blocks: totals.wss,
        interval: args.interval.map(|i| i.to_string()),
        rows: cells
            .iter()
            .zip(results)
            .map(|(c, result)| Row { size: c.size.clone(), result })
            .collect(),
    })
}

/// With [`WHOLE_TRACE_ENV`] set and OPT in the grid: the whole trace is held as an
/// [`AccessStream`] (9 bytes per block access, 17 with the next-access times) and the grid
/// runs over it.
fn compute_whole(
    args: &SimArgs,
    policies: &[Kind],
    sizes: &[(String, Capacity)],
) -> anyhow::Result<Report> {
    let quiet = args.output.quiet;
    let started = Instant::now();
    let block_size = args.input.block_size;
    let trace_path = args.input.path().to_path_buf();
    let split = if args.per_request { Split::FirstBlock } else { Split::Blocks };
    // Stream the trace straight into the access stream: no intermediate Vec<Request>.
    let mut builder = AccessStreamBuilder::new(block_size, split)?;
    if args.interval.is_none() {
        // No timeline, and plain runs use AOD, which ignores time: 8 bytes per access saved.
        builder = builder.without_times();
    }
    let opts = args.input.read_options();
    let mut reader =
        BlockReader::open(&trace_path, &opts, args.per_request, args.interval.is_some())
            .with_context(|| format!("opening trace {}", trace_path.display()))?;
    let mut chunk = BlockChunk::default();
    while reader
        .next_chunk(&mut chunk, CHUNK_ACCESSES)
        .with_context(|| format!("reading trace {}", trace_path.display()))?
    {
        builder.push_chunk(&chunk);
    }
    let stats = reader.stats();
    if stats.skipped > 0 && !quiet {
        eprintln!(
            "ember sim: skipped {} malformed records of {}",
            stats.skipped,
            trace_path.display()
        );
    }
    let read_time = started.elapsed();
    let stream = builder.finish(true);
    let loaded = started.elapsed();

    let cells: Vec<Cell> = policies
        .iter()
        .flat_map(|p| {
            let stream = &stream;
            sizes.iter().map(move |(text, c)| Cell {
                policy: *p,
                size: text.clone(),
                capacity: c.blocks(stream.block_size(), stream.wss()),
            })
        })
        .collect();
    let config = RunConfig { interval: args.interval };
    let threads = args.threads.unwrap_or_else(default_threads).max(1);

    let bar = progress_bar(quiet, Some(stream.len() as u64 * cells.len() as u64));
    let total_runs = cells.len();
    let on_progress = |p: GridProgress| {
        bar.set_position(p.done_accesses);
        bar.set_message(format!("{}/{} runs", p.done_runs, total_runs));
    };
    let sim_start = Instant::now();
    let results = run_grid(
        &cells,
        stream.len() as u64,
        threads,
        |c, tick| run_cell(c, &stream, &config, tick),
        &on_progress,
    );
    bar.finish_and_clear();
    let sim_time = sim_start.elapsed();
    if !quiet {
        let accesses = stream.len() as f64 * cells.len() as f64;
        eprintln!(
            "ember sim: read {} in {:.2} s, next-access times in {:.2} s; {} runs of {} accesses in {:.2} s on {} threads ({:.1} M accesses/s)",
            trace_path.display(),
            read_time.as_secs_f64(),
            (loaded - read_time).as_secs_f64(),
            cells.len(),
            stream.len(),
            sim_time.as_secs_f64(),
            threads.min(cells.len()),
            accesses / sim_time.as_secs_f64().max(1e-9) / 1e6,
        );
    }

    Ok(Report {
        trace: trace_path.display().to_string(),
        block_size: stream.block_size(),
        requests: stream.requests(),
        block_accesses: stream.len() as u64,
        wss_blocks: stream.wss(),
        interval: args.interval.map(|i| i.to_string()),
        rows: cells
            .iter()
            .zip(results)
            .map(|(c, result)| Row { size: c.size.clone(), result })
            .collect(),
    })
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
