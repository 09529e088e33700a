//! `ember analyze`: trace characterization for cache warmup (Bonfire FAST 2013 section 3,
//! SieveStore's popularity skew, LRU miss-ratio curves), as tables, JSON and PNG plots.

use crate::output::{write_text, OutputArgs};
use crate::trace_args::TraceInput;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use ember_analyze::report::TraceReport;
use ember_analyze::stream::{analyze_stream, AnalyzeCensus};
use ember_analyze::{analyze, AnalyzeConfig, REUSE_BUCKETS};
use ember_units::parse_nonzero_size;

/// Arguments of `ember analyze`.
#[derive(Args)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    pub input: TraceInput,
    /// Region size of the spatial-clustering analysis (Figure 4), e.g. 1MiB, 64KiB, 4096.
    /// K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_size)]
    pub region_size: u64,
    /// Popularity bins per day (SieveStore Figure 2).
    #[arg(long, default_value_t = 10_000)]
    pub bins: usize,
    /// Points of the miss-ratio curves (log-spaced cache sizes up to the WSS).
    #[arg(long, default_value_t = 64)]
    pub mrc_points: usize,
    /// Also estimate the miss-ratio curve with SHARDS at this sampling rate (e.g. 0.01).
    #[arg(long)]
    pub shards: Option<f64>,
    /// Skip the exact reuse distances and miss-ratio curve (for traces too large; use
    /// --shards or --sample-rate).
    #[arg(long)]
    pub no_exact: bool,
    /// Compute the reuse distances and the miss-ratio curve from a SHARDS sample at this rate
    /// (spatial hash sampling; e.g. 0.01) instead of exactly: their state shrinks about in
    /// proportion. Replaces the exact pass and --shards.
    #[arg(long, conflicts_with = "shards")]
    pub sample_rate: Option<f64>,
    /// Analyze the whole trace only, not each volume.
    #[arg(long)]
    pub whole_only: bool,
    /// --out DIR (analyze.json and the PNG figures), --json FILE, --quiet (no tables).
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Analyze a trace per its reading flags and the config; shared with `ember warmup advise`.
///
/// A regular file streams (a census pass, then the analysis pass: memory is per distinct
/// block, not per request); a pipe is read into memory.
pub fn analyze_input(input: &TraceInput, cfg: AnalyzeConfig) -> anyhow::Result<TraceReport> {
    if input.block_size == 0 {
        bail!("--block-size must be at least 1");
    }
    let cfg = AnalyzeConfig { block_size: input.block_size, ..cfg };
    // A bad rate is refused before any pass over the trace.
    for rate in [cfg.shards_rate, cfg.sample_rate].into_iter().flatten() {
        ember_analyze::shards::ShardsPass::new(rate)?;
    }
    if std::fs::metadata(input.path()).is_ok_and(|m| m.is_file()) {
        let context = || format!("reading trace {}", input.path().display());
        let mut reader = input.open()?;
        let mut census = AnalyzeCensus::new(cfg.block_size);
        for r in reader.by_ref() {
            census.push(&r.with_context(context)?);
        }
        let names = reader.volumes().names().to_vec();
        let requests = input.open()?.map(|r| r.with_context(context));
        return analyze_stream(&census, &names, &cfg, requests);
    }
    let (trace, _) = input.read()?;
    analyze(&trace, &cfg).map_err(|e| anyhow!("{e}"))
}

/// Analyze the trace that `a` names, writing nothing.
pub fn compute(a: &AnalyzeArgs) -> anyhow::Result<TraceReport> {
    let cfg = AnalyzeConfig {
        block_size: a.input.block_size,
        region_bytes: a.region_size,
        bins: a.bins.max(1),
        mrc_points: a.mrc_points.max(2),
        exact: !a.no_exact,
        shards_rate: a.shards,
        sample_rate: a.sample_rate,
        per_volume: !a.whole_only,
    };
    analyze_input(&a.input, cfg)
}

/// Run `ember analyze`.
pub fn run(a: AnalyzeArgs) -> anyhow::Result<()> {
    let report = compute(&a)?;
    if !a.output.quiet {
        print_tables(&report);
    }
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(p) = &a.output.json {
        write_text(p, &json)?;
    }
    if let Some(dir) = a.output.dir()? {
        write_text(&dir.join("analyze.json"), &json)?;
        crate::plot_analyze::figures(&report, dir)?;
        if !a.output.quiet {
            eprintln!("wrote {}/analyze.json and figures", dir.display());
        }
    }
    Ok(())
}

fn gb(b: u64) -> String {
    format!("{:.3}", b as f64 / 1e9)
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.4}"))
}

fn print_tables(r: &TraceReport) {
    let rs = r.named();
    println!("Table 1: working set, size, reaccesses (block size {} B)", r.block_size);
    println!(
        "{:<16} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10}",
        "volume", "WSS(GB)", "Size(GB)", "requests", "RAR", "RAW", "reacc(%)"
    );
    for (n, a) in &rs {
        let s = &a.summary;
        println!(
            "{:<16} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10.2}",
            n,
            gb(s.wss_bytes),
            gb(s.total_bytes),
            s.requests,
            s.read_after_read,
            s.read_after_write,
            s.reaccess_percent
        );
    }
    println!("\nFigure 1a: reaccessed blocks by class (%, a block may be in several)");
    println!(
        "{:<16} {:>12} {:>8} {:>8} {:>8}",
        "volume", "reacc.blocks", "hourly", "daily", "other"
    );
    for (n, a) in &rs {
        let t = &a.temporal;
        println!(
            "{:<16} {:>12} {:>8.2} {:>8.2} {:>8.2}",
            n, t.reaccessed_blocks, t.class_percent[0], t.class_percent[1], t.class_percent[2]
        );
    }
    println!("\nFigure 1b: hourly reaccesses by time since the previous access (%, 10-min bins)");
    for (n, a) in &rs {
        let p = a.temporal.hourly_recency_percent.map(|x| format!("{x:.1}"));
        println!("{:<16} {}", n, p.join(" "));
    }
    println!("\nFigure 2: daily reaccesses by wall-clock hour (UTC), per day (whole trace)");
    for (d, hours) in r.whole.temporal.daily_by_hour.iter().enumerate() {
        let total: u64 = hours.iter().sum();
        if total == 0 {
            continue;
        }
        let peak = hours.iter().enumerate().max_by_key(|x| x.1).map(|x| x.0).unwrap_or(0);
        println!(
            "day {d:<3} {total:>10} daily reaccesses, peak at {peak:02}:00 ({} there)",
            hours[peak]
        );
    }
    println!("\nFigure 3: reuse distance of reaccesses (% per group)");
    let names: Vec<&str> = REUSE_BUCKETS.iter().map(|b| b.0).collect();
    println!(
        "{:<16} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "volume", names[0], names[1], names[2], names[3], "median(blocks)"
    );
    for (n, a) in &rs {
        match &a.reuse {
            Some(u) => {
                let p = u.reaccess_bucket_percent;
                println!(
                    "{:<16} {:>12.2} {:>12.2} {:>12.2} {:>12.2} {:>14}",
                    n, p[0], p[1], p[2], p[3], u.reaccess_median_blocks
                )
            }
            None => println!("{n:<16} (not computed: --no-exact)"),
        }
    }
    println!("\nFigure 4: spatial clustering: mean % of a region's blocks reaccessed, per class");
    println!(
        "{:<16} {:>10} {:>10} {:>10}   regions (hourly/daily/other)",
        "volume", "hourly", "daily", "other"
    );
    for (n, a) in &rs {
        let s = &a.spatial;
        println!(
            "{:<16} {:>10.2} {:>10.2} {:>10.2}   {}/{}/{}",
            n,
            s.mean_percent[0],
            s.mean_percent[1],
            s.mean_percent[2],
            s.regions[0],
            s.regions[1],
            s.regions[2]
        );
    }
    println!("\nPopularity skew (SieveStore Figure 2): share of each day's accesses to its top 1 % blocks");
    for (n, a) in &rs {
        let p: Vec<String> = a
            .popularity
            .days
            .iter()
            .map(|d| format!("d{}:{:.1}%", d.day, d.top1_percent))
            .collect();
        println!("{:<16} {}", n, p.join(" "));
    }
    if r.top1_volume_share.len() > 1 {
        println!("\nEach volume's share of the trace's top 1 % blocks");
        for s in &r.top1_volume_share {
            println!(
                "{:<16} blocks {:>6.2} %  accesses {:>6.2} %",
                s.name, s.blocks_percent, s.accesses_percent
            );
        }
    }
    println!("\nLRU miss-ratio curve (whole trace)");
    let m = &r.whole.mrc;
    let sizes = m.exact.as_ref().or(m.shards.as_ref()).map(|c| c.sizes.clone()).unwrap_or_default();
    println!("{:>12} {:>10} {:>10}", "size(blocks)", "exact", "shards");
    let step = (sizes.len() / 12).max(1);
    for (i, s) in sizes.iter().enumerate() {
        if i % step != 0 && i + 1 != sizes.len() {
            continue;
        }
        let e = m.exact.as_ref().map(|c| c.miss_ratio[i]);
        let h = m.shards.as_ref().map(|c| c.miss_ratio[i]);
        println!("{:>12} {:>10} {:>10}", s, opt(e), opt(h));
    }
    if let (Some(mean), Some(max)) = (m.shards_mean_abs_error, m.shards_max_abs_error) {
        println!(
            "SHARDS (rate {}, {} sampled accesses) against exact: mean abs error {mean:.5}, max abs error {max:.5}",
            m.shards_rate.unwrap_or(0.0),
            m.shards_sampled.unwrap_or(0)
        );
    }
}
