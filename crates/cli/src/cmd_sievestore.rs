//! `ember sievestore`: `--experiment` (SieveStore's comparison, tables and Figures 5, 6, 8
//! and 9 as PNG), and `--admission` / `--partition` runs of any sieve in an ensemble cache or
//! per-volume partitions (docs/reference/laboratory.md).

use crate::file_passes::FilePasses;
use crate::grid_args::WarmupArgs;
use crate::output::{display_name, ensure_dir, write_text, OutputArgs};
use crate::plot_sensitivity::plot_sensitivity;
use crate::plot_sievestore::{plot_allocation_writes, plot_captured, plot_drives, plot_occupancy};
use crate::trace_args::TraceInput;
use crate::tuning_args::SieveParams;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use ember_policy::admission::SieveSpec;
use ember_policy::replacement::{build, Spec};
use ember_policy::Replacement;
use ember_sim::sievestore::cost_model::{
    drives_needed, occupancy_per_minute, DeviceModel, PAPER_COVERAGES,
};
use ember_sim::sievestore::ensemble::Partition;
use ember_sim::sievestore::epoch_spool::DEFAULT_LIMIT;
use ember_sim::sievestore::experiment::{default_capacity, DailyBlocks};
use ember_sim::sievestore::experiment::{ExperimentReport, SieveStoreExperiment};
use ember_sim::sievestore::sensitivity::{
    sensitivity, sensitivity_streamed, table as sensitivity_table, SensitivityPoint,
};
use ember_sim::sievestore::stream::{count, run_streamed_after, StreamCell};
use ember_sim::sievestore::{DayStats, SieveRun};
use ember_sim::{default_threads, Capacity, WarmupPeriod};
use ember_trace::gen::ensemble::{self, EnsembleConfig, MSR_VOLUMES};
use ember_trace::{Format, Request, Trace, TraceError, TraceReader};
use std::path::{Path, PathBuf};

/// Arguments of `ember sievestore`.
#[derive(Args)]
pub struct SieveStoreCmdArgs {
    /// The trace and how to read it.
    #[command(flatten)]
    pub input: TraceInput,
    /// The sieves, the partitioning, the device model.
    #[command(flatten)]
    pub sieve: SieveArgs,
    /// Replacement policies under the continuous sieves, comma-separated: lru, fifo, clock,
    /// sieve, arc, slru, 2q, s3fifo (not with --experiment).
    #[arg(long, default_value = "lru", value_delimiter = ',')]
    pub policy: Vec<String>,
    /// Cache sizes, comma-separated: blocks, bytes (64MiB) or % of the working set (not with
    /// --experiment, which sizes the cache as the paper did: see --cache-blocks). K/M/G =
    /// KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "1%,10%", value_delimiter = ',')]
    pub size: Vec<String>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The uncounted warm-up period of the sieve x policy x size runs (--warmup-requests,
    /// --warmup-time; not with --experiment or --sensitivity, which follow the paper).
    #[command(flatten)]
    pub uncounted: WarmupArgs,
    /// --out, --json, --quiet.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// SieveStore's flags of `ember sievestore`.
#[derive(Args, Clone, Debug, Default)]
pub struct SieveArgs {
    /// Run the paper's comparison instead of the sieve x policy x size grid (SieveStore,
    /// ISCA 2010: every sieve, ensemble vs per-volume, cost model, Figures 5, 6, 8, 9), into
    /// --out (default: the current directory).
    #[arg(long)]
    pub experiment: bool,
    /// Run SieveStore's sensitivity analysis instead (section 5.1): SieveStore-D's t and
    /// epoch, SieveStore-C's t1, t2 and window, each varied around the paper's value in the
    /// experiment's ensemble cache (--cache-blocks); a table, sensitivity.json and
    /// sensitivity.png into --out (default: the current directory).
    #[arg(long, conflicts_with = "experiment")]
    pub sensitivity: bool,
    /// Admission policies (sieves), comma-separated: aod, wmna, sievestore-c, sievestore-d,
    /// randsieve-c, randsieve-blkd, ideal, ocf-nhit (default: aod; with --experiment, every
    /// sieve). Runs them under SieveStore's cache managers, per day and per minute.
    #[arg(long, value_delimiter = ',')]
    pub admission: Vec<String>,
    /// Share the cache among volumes: ensemble (one cache), proportional (per-volume
    /// partitions sized by access share) or equal.
    #[arg(long)]
    pub partition: Option<String>,
    /// SSD model for drive IOPS occupancy: x25e (35,000 read / 3,300 write IOPS, 4 KiB) or
    /// NAME:READ_IOPS:WRITE_IOPS[:UNIT_BYTES].
    #[arg(long, default_value = "x25e")]
    pub device: String,
    /// Cache size in blocks for --experiment (default: 1.35 x the largest daily top 1 % of
    /// blocks, the paper's 16 GB against at most 11.9 GB).
    #[arg(long)]
    pub cache_blocks: Option<usize>,
    /// The sieves' parameters (applied to the `--admission` runs; the experiment runs
    /// the paper's defaults).
    #[command(flatten)]
    pub params: SieveParams,
    /// The sequential cutoff in front of every sieve of the `--admission` runs (as
    /// `ember serve --seq-cutoff` runs it; not with --experiment or --sensitivity).
    #[command(flatten)]
    pub seq_cutoff: crate::seq_cutoff_args::SeqCutoffArgs,
}

impl SieveArgs {
    fn device(&self) -> anyhow::Result<DeviceModel> {
        self.device.parse::<DeviceModel>().map_err(|e| anyhow!("--device: {e}"))
    }

    fn partition(&self) -> anyhow::Result<Partition> {
        match &self.partition {
            None => Ok(Partition::Ensemble),
            Some(p) => p.parse().map_err(|e| anyhow!("--partition: {e}")),
        }
    }

    fn sieves(&self) -> anyhow::Result<Vec<SieveSpec>> {
        if self.admission.is_empty() {
            return Ok(vec![SieveSpec::Aod]);
        }
        self.admission
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| self.params.spec(s))
            .collect()
    }
}

/// Run the paper's comparison over `trace`, writing nothing.
pub fn experiment(
    args: &SieveArgs,
    trace: &Trace,
    trace_name: &str,
    block_size: u64,
    threads: usize,
) -> anyhow::Result<ExperimentReport> {
    experiment_setup(args, block_size, threads)?
        .run(trace)
        .with_context(|| format!("sievestore experiment on {trace_name}"))
}

/// `--experiment` or `--sensitivity` over a regular file, streamed (a counting pass, then one
/// pass per worker thread); prints the malformed records skipped.
fn compute_streamed(args: &SieveStoreCmdArgs, threads: usize) -> anyhow::Result<SieveStoreResult> {
    let path = args.input.path();
    let block_size = args.input.block_size;
    let passes = FilePasses::new(&args.input);
    let open = || passes.open();
    let result = if args.sieve.sensitivity {
        let cap = match args.sieve.cache_blocks {
            Some(c) => c,
            None => {
                let mut daily = DailyBlocks::default();
                for r in open().with_context(|| format!("reading trace {}", path.display()))? {
                    daily.add(
                        &r.with_context(|| format!("reading trace {}", path.display()))?,
                        block_size,
                    );
                }
                daily.default_capacity()
            }
        };
        let points = sensitivity_streamed(&open, block_size, cap, threads)
            .with_context(|| format!("sievestore sensitivity on {}", path.display()))?;
        SieveStoreResult::Sensitivity(cap, points)
    } else {
        SieveStoreResult::Experiment(
            experiment_setup(&args.sieve, block_size, threads)?
                .run_streamed(&open)
                .with_context(|| format!("sievestore experiment on {}", path.display()))?,
        )
    };
    if passes.skipped() > 0 && !args.output.quiet {
        eprintln!(
            "ember sievestore: skipped {} malformed records of {}",
            passes.skipped(),
            path.display()
        );
    }
    Ok(result)
}

/// The experiment the flags describe.
fn experiment_setup(
    args: &SieveArgs,
    block_size: u64,
    threads: usize,
) -> anyhow::Result<SieveStoreExperiment> {
    let mut exp = SieveStoreExperiment {
        block_size,
        capacity_blocks: args.cache_blocks,
        device: args.device()?,
        threads: threads.max(1),
        ..SieveStoreExperiment::default()
    };
    if !args.admission.is_empty() {
        exp.sieves = args.sieves()?;
    }
    if let Some(p) = &args.partition {
        let p: Partition = p.parse().map_err(|e| anyhow!("--partition: {e}"))?;
        exp.partitions =
            if p == Partition::Ensemble { vec![p] } else { vec![Partition::Ensemble, p] };
    }
    Ok(exp)
}

/// Write the experiment's `sievestore.txt`, `sievestore.json` and figures into `out`.
pub fn write_experiment(
    report: &ExperimentReport,
    trace_name: &str,
    out: &Path,
    quiet: bool,
) -> anyhow::Result<()> {
    ensure_dir(out)?;
    let tables = report.tables();
    write_text(&out.join("sievestore.txt"), &tables)?;
    let json = serde_json::to_string_pretty(report).context("encoding the report as JSON")?;
    write_text(&out.join("sievestore.json"), &json)?;
    plot_captured(report, trace_name, &out.join("fig5_accesses_captured.png"))?;
    plot_allocation_writes(report, trace_name, &out.join("fig6_allocation_writes.png"))?;
    plot_occupancy(report, trace_name, &out.join("fig8_drive_occupancy.png"))?;
    plot_drives(report, trace_name, &out.join("fig9_drives_needed.png"))?;
    if !quiet {
        println!("{tables}");
        println!(
            "wrote sievestore.txt, sievestore.json, fig5_accesses_captured.png, \
             fig6_allocation_writes.png, fig8_drive_occupancy.png, fig9_drives_needed.png in {}",
            out.display()
        );
    }
    Ok(())
}

/// One `--admission` run: a sieve at a cache size.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AdmissionRow {
    /// The replacement policy under the sieve.
    pub policy: String,
    /// The sieve.
    pub admission: String,
    /// How the cache was shared.
    pub partition: Partition,
    /// The size as given.
    pub size: String,
    /// Capacity in blocks.
    pub capacity_blocks: u64,
    /// Drives needed for 100 %, 99.9 % and 90 % of the minutes.
    pub drives: [u32; 3],
    /// Every day added up.
    pub total: DayStats,
    /// Counts per day and minute.
    pub run: SieveRun,
}

/// Opens the trace for one pass (the streamed runs read it once, or twice when the cache is
/// partitioned or sized in % of the working set).
type OpenPass<'a> =
    &'a dyn Fn() -> anyhow::Result<Box<dyn Iterator<Item = Result<Request, TraceError>> + 'a>>;

/// An owned maker of empty replacement policies (one per `--policy`).
type BoxedFactory = Box<dyn Fn(usize) -> Box<dyn Replacement> + Sync>;

/// Run every `--admission` sieve at every size (`(text, size)`) under `--partition`, with
/// continuous sieves over each of `kinds` (rows policy-major, then sieve, then size), over the
/// requests each call of `open` streams: one pass for the runs, plus a first pass for the
/// per-volume shares and the working set when partitions or % sizes need them (memory: the
/// cells' own state, never the trace; `ember_sim::sievestore::stream`). The requests of the
/// uncounted `warmup` period run but are not counted (nor their minutes in the drives).
pub fn run_admissions(
    args: &SieveArgs,
    open: OpenPass<'_>,
    block_size: u64,
    sizes: &[(String, Capacity)],
    kinds: &[Spec],
    warmup: WarmupPeriod,
) -> anyhow::Result<Vec<AdmissionRow>> {
    let cutoff = args.seq_cutoff.config(block_size);
    let sieves: Vec<SieveSpec> =
        args.sieves()?.into_iter().map(|s| s.with_cutoff(cutoff)).collect();
    let partition = args.partition()?;
    let device = args.device()?;
    if let Some(kind) = kinds.iter().find(|k| k.needs_oracle()) {
        bail!("--policy {kind}: oracle replacement is not available under --admission");
    }
    let percent = sizes.iter().any(|(_, c)| matches!(c, Capacity::Percent(_)));
    let counts = if percent || partition != Partition::Ensemble {
        Some(count(open()?, block_size, percent).context("first pass over the trace")?)
    } else {
        None
    };
    let wss = counts.as_ref().and_then(|c| c.distinct_blocks).unwrap_or(0);
    let factories: Vec<BoxedFactory> =
        kinds.iter().map(|&k| Box::new(move |c| build(k, c)) as _).collect();
    let mut cells = Vec::new();
    let mut labels = Vec::new();
    for (kind, make_cache) in kinds.iter().zip(&factories) {
        for spec in &sieves {
            spec.build().with_context(|| spec.name().to_string())?;
            for (text, cap) in sizes {
                let blocks = cap.blocks(block_size, wss);
                let capacity = usize::try_from(blocks).unwrap_or(usize::MAX);
                cells.push(StreamCell {
                    spec: spec.clone(),
                    capacity,
                    partition,
                    make_cache: make_cache.as_ref(),
                });
                labels.push((*kind, text.clone(), blocks));
            }
        }
    }
    let runs =
        run_streamed_after(open()?, block_size, &cells, counts.as_ref(), DEFAULT_LIMIT, warmup)
            .context("sievestore runs")?;
    Ok(labels
        .into_iter()
        .zip(cells.iter().zip(runs))
        .map(|((kind, size, blocks), (cell, run))| {
            let occ = occupancy_per_minute(run.counted_minutes(), &device, block_size);
            AdmissionRow {
                policy: kind.to_string(),
                admission: cell.spec.name().to_string(),
                partition,
                size,
                capacity_blocks: blocks,
                drives: PAPER_COVERAGES.map(|c| drives_needed(&occ, c)),
                total: run.total(),
                run,
            }
        })
        .collect())
}

/// Print the admission runs as a table.
fn print_rows(rows: &[AdmissionRow]) {
    println!(
        "{:<15} {:<12} {:>10} {:>12} {:>8} {:>8} {:>8} {:>12} {:>8} {:>14} {:>12}",
        "admission",
        "partition",
        "size",
        "blocks",
        "hit %",
        "rd hit%",
        "wr hit%",
        "alloc-writes",
        "ssd op%",
        "drives 100/99.9/90",
        "sieve bytes"
    );
    for r in rows {
        let t = r.total;
        let p = |a: u64| if t.accesses == 0 { 0.0 } else { 100.0 * a as f64 / t.accesses as f64 };
        println!(
            "{:<15} {:<12} {:>10} {:>12} {:>8.2} {:>8.2} {:>8.2} {:>12} {:>8.2} {:>14} {:>12}",
            r.admission,
            r.partition.name(),
            r.size,
            r.capacity_blocks,
            p(t.hits()),
            p(t.read_hits),
            p(t.write_hits),
            t.allocation_writes,
            p(t.ssd_ops()),
            format!("{}/{}/{}", r.drives[0], r.drives[1], r.drives[2]),
            r.run.sieve_memory_bytes
        );
    }
}

/// What `ember sievestore` computed: the paper's comparison, or the grid's runs.
pub enum SieveStoreResult {
    /// `--experiment`.
    Experiment(ExperimentReport),
    /// Every sieve x policy x size, policy-major.
    Runs(Vec<AdmissionRow>),
    /// `--sensitivity`: (cache blocks, the points).
    Sensitivity(usize, Vec<SensitivityPoint>),
}

/// Read the trace and run what `args` ask for, writing nothing.
pub fn compute(args: &SieveStoreCmdArgs) -> anyhow::Result<SieveStoreResult> {
    let block_size = args.input.block_size;
    if block_size == 0 {
        bail!("--block-size must be positive");
    }
    let policies = crate::grid_args::policies(&args.policy)?;
    let sizes = crate::grid_args::sizes(&args.size)?;
    if !args.sieve.experiment
        && !args.sieve.sensitivity
        && (policies.is_empty() || sizes.is_empty())
    {
        bail!("give at least one --policy and one --size");
    }
    let path = args.input.path();
    let threads = args.threads.unwrap_or_else(default_threads).max(1);
    let warmup = args.uncounted.period()?;
    if (args.sieve.experiment || args.sieve.sensitivity) && !warmup.is_none() {
        bail!(
            "--warmup-requests and --warmup-time apply to the sieve x policy x size runs; \
             --experiment and --sensitivity follow the paper (which leaves out day 1)"
        );
    }
    if !args.sieve.sensitivity && !args.sieve.experiment {
        // Streamed: the trace is read as it is simulated, never held.
        let opts = args.input.read_options();
        let skipped = std::cell::Cell::new(0u64);
        let passes = std::cell::Cell::new(0u32);
        let reader = std::cell::RefCell::new(None::<TraceReader>);
        let open =
            || -> anyhow::Result<Box<dyn Iterator<Item = Result<Request, TraceError>> + '_>> {
                if passes.get() > 0 && !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
                    bail!(
                        "{} is not a regular file: --partition {} and sizes in % need two passes \
                     over the trace (give sizes in blocks or bytes and --partition ensemble to \
                     stream it once)",
                        path.display(),
                        args.sieve.partition.as_deref().unwrap_or("ensemble")
                    );
                }
                passes.set(passes.get() + 1);
                if let Some(done) = reader.borrow_mut().take() {
                    skipped.set(done.skipped());
                }
                let r = ember_trace::open(path, &opts)
                    .with_context(|| format!("reading trace {}", path.display()))?;
                *reader.borrow_mut() = Some(r);
                let reader = &reader;
                Ok(Box::new(std::iter::from_fn(move || reader.borrow_mut().as_mut()?.next())))
            };
        let rows = run_admissions(&args.sieve, &open, block_size, &sizes, &policies, warmup)
            .with_context(|| format!("ember sievestore on {}", path.display()))?;
        if let Some(done) = reader.borrow_mut().take() {
            skipped.set(done.skipped());
        }
        if skipped.get() > 0 && !args.output.quiet {
            eprintln!(
                "ember sievestore: skipped {} malformed records of {}",
                skipped.get(),
                path.display()
            );
        }
        return Ok(SieveStoreResult::Runs(rows));
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return compute_streamed(args, threads);
    }
    // --experiment or --sensitivity on a pipe (they read the trace several times): in memory.
    let (trace, stats) = args.input.read()?;
    if stats.skipped > 0 && !args.output.quiet {
        eprintln!(
            "ember sievestore: skipped {} malformed records of {}",
            stats.skipped,
            path.display()
        );
    }
    if args.sieve.sensitivity {
        let cap = args.sieve.cache_blocks.unwrap_or_else(|| default_capacity(&trace, block_size));
        let points = sensitivity(&trace, block_size, cap, threads)
            .with_context(|| format!("sievestore sensitivity on {}", path.display()))?;
        return Ok(SieveStoreResult::Sensitivity(cap, points));
    }
    let name = display_name(path);
    Ok(SieveStoreResult::Experiment(experiment(&args.sieve, &trace, &name, block_size, threads)?))
}

/// Run `ember sievestore`: the experiment (tables and figures into --out, default the
/// current directory), or the sieve x policy x size grid (a table; `sievestore_runs.json` in
/// --out or at --json).
pub fn run(args: SieveStoreCmdArgs) -> anyhow::Result<()> {
    let quiet = args.output.quiet;
    match compute(&args)? {
        SieveStoreResult::Experiment(report) => {
            let dir = args.output.out.clone().unwrap_or_else(|| PathBuf::from("."));
            let name = display_name(args.input.path());
            write_experiment(&report, &name, &dir, quiet)?;
            if let Some(p) = &args.output.json {
                let json =
                    serde_json::to_string_pretty(&report).context("encoding the report as JSON")?;
                write_text(p, &json)?;
            }
        }
        SieveStoreResult::Sensitivity(cap, points) => {
            let dir = args.output.out.clone().unwrap_or_else(|| PathBuf::from("."));
            ensure_dir(&dir)?;
            let text = format!("cache {cap} blocks\n{}", sensitivity_table(&points));
            write_text(&dir.join("sensitivity.txt"), &text)?;
            let json = serde_json::to_string_pretty(&points).context("encoding the sweep")?;
            write_text(&args.output.json.clone().unwrap_or(dir.join("sensitivity.json")), &json)?;
            let name = display_name(args.input.path());
            plot_sensitivity(&points, &name, &dir.join("sensitivity.png"))?;
            if !quiet {
                println!("{text}");
                println!(
                    "wrote sensitivity.txt, sensitivity.json, sensitivity.png in {}",
                    dir.display()
                );
            }
        }
        SieveStoreResult::Runs(rows) => {
            if !quiet {
                let warmup = args.uncounted.period()?;
                if !warmup.is_none() {
                    println!(
                        "uncounted warm-up period: {warmup} (run through every cache, not counted)"
                    );
                }
                let mut start = 0;
                while start < rows.len() {
                    let policy = &rows[start].policy;
                    let end = rows[start..]
                        .iter()
                        .position(|r| &r.policy != policy)
                        .map_or(rows.len(), |k| start + k);
                    println!("replacement {policy} (continuous sieves; discrete sieves replace only at epoch ends)");
                    print_rows(&rows[start..end]);
                    start = end;
                }
            }
            if let Some(p) = args.output.json_file("sievestore_runs.json") {
                args.output.dir()?;
                let json = serde_json::to_string_pretty(&rows).context("encoding runs as JSON")?;
                write_text(&p, &json)?;
            }
        }
    }
    Ok(())
}

/// Arguments of `ember trace gen ensemble`.
#[derive(Args, Clone, Debug)]
pub struct GenEnsembleArgs {
    /// The output file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format (default msr: MSR-Cambridge CSV).
    #[arg(long, default_value = "msr")]
    pub format: String,
    /// Number of volumes (MSR names: prxy_0, src1_2, web_0, ...; at most 36).
    #[arg(long, default_value_t = 12)]
    pub volumes: usize,
    /// Calendar days.
    #[arg(long, default_value_t = 4)]
    pub days: u32,
    /// Block accesses per day over the ensemble.
    #[arg(long, default_value_t = 2_000_000)]
    pub accesses_per_day: u64,
    /// Fraction of each hot set replaced per day.
    #[arg(long, default_value_t = 0.15)]
    pub drift: f64,
    /// Block size in bytes. K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value_t = 4096, value_parser = ember_units::parse_size)]
    pub block_size: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Run `ember trace gen ensemble`: generate the ensemble workload and write it.
pub fn gen_ensemble(args: &GenEnsembleArgs) -> anyhow::Result<()> {
    if args.volumes == 0 || args.volumes > MSR_VOLUMES.len() {
        bail!("--volumes must be within 1..={}", MSR_VOLUMES.len());
    }
    let format: Format = args.format.parse().map_err(|e| anyhow!("--format: {e}"))?;
    let cfg = EnsembleConfig {
        days: args.days,
        accesses_per_day: args.accesses_per_day,
        drift: args.drift,
        block_size: args.block_size,
        seed: args.seed,
        ..EnsembleConfig::with_volumes(args.volumes)
    };
    // A day at a time: memory is one day's requests, whatever --days.
    let stream = ensemble::EnsembleStream::new(&cfg)?;
    let volumes = stream.volumes().clone();
    let bar = indicatif::ProgressBar::hidden();
    let tally = crate::write_stream::write_stream(
        &args.output,
        format,
        args.block_size,
        &volumes,
        None,
        stream,
        &bar,
    )
    .with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!(
        "ember trace gen ensemble: {} requests, {} volumes, {} days -> {}",
        tally.requests,
        volumes.len(),
        args.days,
        args.output.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::gen::ensemble::{generate, EnsembleConfig};

    #[test]
    fn experiment_writes_tables_json_and_figures() {
        let cfg =
            EnsembleConfig { days: 2, accesses_per_day: 20_000, ..EnsembleConfig::with_volumes(6) };
        let trace = generate(&cfg).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let args = SieveArgs { experiment: true, device: "x25e".into(), ..SieveArgs::default() };
        let rep = experiment(&args, &trace, "ensemble", 4096, 2).unwrap();
        write_experiment(&rep, "ensemble", dir.path(), true).unwrap();
        assert_eq!(rep.days, 2);
        for f in [
            "sievestore.txt",
            "sievestore.json",
            "fig5_accesses_captured.png",
            "fig6_allocation_writes.png",
            "fig8_drive_occupancy.png",
            "fig9_drives_needed.png",
        ] {
            let len = std::fs::metadata(dir.path().join(f)).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{f}: {len} bytes");
        }
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("sievestore.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["rows"].as_array().map(|a| a.len()), Some(rep.rows.len()));
        let bad = SieveArgs { device: "nope".into(), ..args.clone() };
        assert!(experiment(&bad, &trace, "x", 4096, 1).is_err());
    }

    #[test]
    fn admission_runs_cover_every_sieve_and_size() {
        let cfg =
            EnsembleConfig { days: 2, accesses_per_day: 10_000, ..EnsembleConfig::with_volumes(4) };
        let trace = generate(&cfg).unwrap();
        let args = SieveArgs {
            admission: vec!["aod".into(), "sievestore-c".into(), "sievestore-d".into()],
            partition: Some("proportional".into()),
            device: "x25e".into(),
            ..SieveArgs::default()
        };
        let sizes = vec![
            ("100".to_string(), Capacity::Blocks(100)),
            ("1000".to_string(), Capacity::Blocks(1000)),
        ];
        let passes = std::cell::Cell::new(0);
        let open =
            || -> anyhow::Result<Box<dyn Iterator<Item = Result<Request, TraceError>> + '_>> {
                passes.set(passes.get() + 1);
                Ok(Box::new(trace.requests.iter().copied().map(Ok)))
            };
        let rows = run_admissions(
            &args,
            &open,
            4096,
            &sizes,
            &[Spec::from(ember_policy::Kind::Lru)],
            WarmupPeriod::None,
        )
        .unwrap();
        assert_eq!(rows.len(), 6);
        assert_eq!(passes.get(), 2, "a partitioned grid reads the trace twice");
        assert!(rows.iter().all(|r| r.run.total().accesses > 10_000));
        assert_eq!(rows[0].partition, Partition::Proportional);
        // The same rows as the whole-trace partitioned runs.
        for r in &rows {
            let spec: SieveSpec = r.admission.parse().unwrap();
            let want = ember_sim::sievestore::ensemble::run_partitioned(
                &trace.requests,
                4096,
                r.capacity_blocks as usize,
                Partition::Proportional,
                &spec,
            )
            .unwrap();
            assert!(r.run == want, "{} at {}", r.admission, r.size);
        }
        let bad = SieveArgs { admission: vec!["lru".into()], ..args };
        assert!(run_admissions(
            &bad,
            &open,
            4096,
            &sizes,
            &[Spec::from(ember_policy::Kind::Lru)],
            WarmupPeriod::None
        )
        .is_err());
    }
}
