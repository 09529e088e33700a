//! `ember warmup`: Bonfire's cache warmup study (FAST 2013 section 4): `run` one
//! configuration, `sweep` the Table 2 grid into a Table 3-shaped summary, `advise` an
//! algorithm from `ember analyze`'s results with the Figure 8 decision tree.

use crate::cmd_analyze::analyze_input;
use crate::file_passes::FilePasses;
use crate::output::{write_text, OutputArgs};
use crate::plot::{colour, draw_legend, line, png, WIDE, WIDE_LINE};
use crate::trace_args::TraceInput;
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use ember_analyze::report::TraceReport;
use ember_analyze::{advise, analyze, AnalyzeConfig};
use ember_policy::warmup::SelectorKind;
use ember_sim::warmup::evidence::rank_selectors;
use ember_sim::warmup::experiment::{run_warmup, DayRuns, VolumeAccesses, WarmupConfig};
use ember_sim::warmup::stream::{run_warmup_stream, CensusTaker, WarmupCensus};
use ember_sim::warmup::sweep::{sweep_with, SweepGrid};
use ember_trace::Trace;
use ember_units::{parse_nonzero_duration, parse_nonzero_size, parse_size};
use plotters::prelude::*;
use std::path::PathBuf;

/// The subcommands of `ember warmup`.
#[derive(Subcommand)]
pub enum WarmupCommand {
    /// Run cold, always-warm and the warmed schemes on every period of a trace.
    Run(Box<RunArgs>),
    /// Sweep the Table 2 grid and print a Table 3-shaped summary.
    Sweep(Box<SweepArgs>),
    /// Recommend a warmup selector: every selector simulated on the trace's own history, the
    /// best by T_converge and load reduction; Figure 8's decision tree as the explanation.
    Advise(Box<AdviseArgs>),
}

/// Options shared by `run` and `sweep`.
#[derive(Args)]
pub struct ExperimentArgs {
    #[command(flatten)]
    pub input: TraceInput,
    /// Period length: a new cache starts at each period's beginning, warmed from the
    /// previous period (`1d`, `12h`, `2500s`, `30m`). Units ns, us, ms, s, m, h, d; a bare
    /// number is seconds.
    #[arg(long, default_value = "1d", value_parser = parse_duration)]
    pub period: u64,
    /// Timeline interval within a period. Units ns, us, ms, s, m, h, d; a bare number is
    /// seconds.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub interval: u64,
    /// Readahead window on a read miss (e.g. 128KiB, Bonfire's disk prefetching); 0 = off.
    /// K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "0", value_parser = parse_size)]
    pub readahead: u64,
    /// Backing bandwidth for the pre-load time, bytes per second (Bonfire: 100 MB/s). K/M/G =
    /// KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "100MB", value_parser = parse_nonzero_size)]
    pub bandwidth: u64,
    /// Seed of Random-K.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Arguments of `ember warmup run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub exp: ExperimentArgs,
    /// Cache size, % of each volume's working set.
    #[arg(long, default_value_t = 50.0)]
    pub cache: f64,
    /// Warmup size, % of each volume's working set.
    #[arg(long, default_value_t = 10.0)]
    pub warmup: f64,
    /// Warmup region size (4KiB, 1MiB, ...). K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_size)]
    pub region: u64,
    /// Warmed schemes, comma-separated: last-k, first-k, top-k, random-k.
    #[arg(long, default_value = "last-k,first-k,top-k,random-k", value_delimiter = ',')]
    pub schemes: Vec<SelectorKind>,
    /// Violation threshold Th_V (fraction).
    #[arg(long, default_value_t = 0.9)]
    pub th_v: f64,
    /// Convergence threshold Th_N (fraction).
    #[arg(long, default_value_t = 0.05)]
    pub th_n: f64,
    /// --json FILE (timelines and metrics), --out DIR (warmup.json and one hit-rate timeline
    /// PNG per volume and period), --quiet.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Arguments of `ember warmup sweep`.
#[derive(Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub exp: ExperimentArgs,
    /// Cache sizes, % of WSS.
    #[arg(long, default_value = "25,50,75,100", value_delimiter = ',')]
    pub cache: Vec<f64>,
    /// Warmup sizes, % of WSS.
    #[arg(long, default_value = "5,10,25", value_delimiter = ',')]
    pub warmup: Vec<f64>,
    /// Warmup region sizes. K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(
        long,
        default_value = "4KiB,1MiB",
        value_delimiter = ',',
        value_parser = parse_nonzero_size
    )]
    pub region: Vec<u64>,
    /// Th_V values (fractions).
    #[arg(long, default_value = "0.7,0.8,0.9", value_delimiter = ',')]
    pub th_v: Vec<f64>,
    /// Th_N values (fractions).
    #[arg(long, default_value = "0.01,0.03,0.05", value_delimiter = ',')]
    pub th_n: Vec<f64>,
    /// Write the rows as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Arguments of `ember warmup advise`.
#[derive(Args)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub exp: ExperimentArgs,
    /// Warmup region size the cache will use (Figure 8's last branch, and the simulation).
    /// K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_size)]
    pub region: u64,
    /// Cache size for the simulation, % of each volume's working set.
    #[arg(long, default_value_t = 50.0)]
    pub cache: f64,
    /// Warmup size for the simulation, % of each volume's working set.
    #[arg(long, default_value_t = 10.0)]
    pub warmup: f64,
    /// Violation threshold Th_V (fraction).
    #[arg(long, default_value_t = 0.9)]
    pub th_v: f64,
    /// Convergence threshold Th_N (fraction).
    #[arg(long, default_value_t = 0.05)]
    pub th_n: f64,
    /// Use this `ember analyze` JSON document instead of analyzing the trace.
    #[arg(long)]
    pub analysis: Option<PathBuf>,
}

/// A positive duration in nanoseconds ([`ember_units::parse_nonzero_duration`]: a bare number
/// is seconds), for the flags that hold one as a `u64`.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let d = parse_nonzero_duration(s).map_err(|e| e.to_string())?;
    u64::try_from(d.as_nanos()).map_err(|_| format!("duration {s:?}: too large (over 584 years)"))
}

/// Run `ember warmup`.
pub fn run(cmd: WarmupCommand) -> anyhow::Result<()> {
    match cmd {
        WarmupCommand::Run(a) => run_one(*a),
        WarmupCommand::Sweep(a) => run_sweep(*a),
        WarmupCommand::Advise(a) => run_advise(*a),
    }
}

/// The trace of an experiment: held in memory (a pipe, or a regular file whose volumes are
/// not in time order), or streamed from a regular file, a pass per experiment run.
enum Source<'a> {
    /// Every volume's accesses, sorted by time, and the trace's first time.
    Held(Vec<VolumeAccesses>, u64),
    /// The census of a regular file, read again at each run.
    Streamed(WarmupCensus, FilePasses<'a>),
}

impl Source<'_> {
    /// Run the experiment of `cfg`.
    fn run(&self, cfg: &WarmupConfig) -> anyhow::Result<Vec<DayRuns>> {
        match self {
            Source::Held(vols, t0) => Ok(run_warmup(vols, *t0, cfg)),
            Source::Streamed(census, passes) => {
                let path = passes.path();
                run_warmup_stream(census, cfg, passes.open()?)
                    .with_context(|| format!("reading trace {}", path.display()))
            }
        }
    }
}

/// The experiment's trace: a regular file streams (a census pass here, then a pass per run:
/// memory is the caches' and selectors' state and the working sets' block sets, not the
/// trace) when each volume's accesses come in time order; otherwise (or from a pipe) it is
/// read into memory and each volume sorted by time.
fn load(exp: &ExperimentArgs) -> anyhow::Result<Source<'_>> {
    if exp.input.block_size == 0 {
        bail!("--block-size must be at least 1");
    }
    if is_file(exp) {
        let mut reader = exp.input.open()?;
        let mut census = CensusTaker::new(exp.input.block_size);
        for r in reader.by_ref() {
            census
                .push(&r.with_context(|| format!("reading trace {}", exp.input.path().display()))?);
        }
        let census = census.finish(reader.volumes());
        if census.time_ordered {
            return Ok(Source::Streamed(census, FilePasses::new(&exp.input)));
        }
    }
    let (trace, _) = exp.input.read()?;
    Ok(held(&trace, exp.input.block_size))
}

/// The experiment's source over a held trace.
fn held(trace: &Trace, block_size: u64) -> Source<'static> {
    let t0 = trace.requests.iter().map(|r| r.time_ns).min().unwrap_or(0);
    Source::Held(VolumeAccesses::of_trace(trace, block_size), t0)
}

/// True if `exp`'s trace is a regular file (read in passes), not a pipe (read once).
fn is_file(exp: &ExperimentArgs) -> bool {
    std::fs::metadata(exp.input.path()).is_ok_and(|m| m.is_file())
}

fn base_config(exp: &ExperimentArgs) -> WarmupConfig {
    WarmupConfig {
        block_size: exp.input.block_size,
        period_ns: exp.period,
        interval_ns: exp.interval,
        readahead_bytes: exp.readahead,
        seed: exp.seed,
        ..WarmupConfig::default()
    }
}

fn check_thresholds(th_v: f64, th_n: f64) -> anyhow::Result<()> {
    if !(th_v > 0.0 && th_v <= 1.0 && (0.0..1.0).contains(&th_n)) {
        bail!("Th_V must be in (0, 1] and Th_N in [0, 1); got {th_v} and {th_n}");
    }
    Ok(())
}

fn fmt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1}"))
}

/// Run `ember warmup run`'s experiment, writing nothing: every period's runs, and the JSON
/// document `--json` writes (one `periods` entry per period, with `runs` and `metrics`).
pub fn compute_run(a: &RunArgs) -> anyhow::Result<(Vec<DayRuns>, serde_json::Value)> {
    check_thresholds(a.th_v, a.th_n)?;
    let source = load(&a.exp)?;
    let cfg = WarmupConfig {
        cache_percent: a.cache,
        warmup_percent: a.warmup,
        region_bytes: a.region,
        selectors: a.schemes.clone(),
        ..base_config(&a.exp)
    };
    let days = source.run(&cfg)?;
    if days.is_empty() {
        bail!("no period after the first one has accesses: the trace is shorter than two periods of {} s", a.exp.period as f64 / 1e9);
    }
    let bw = a.exp.bandwidth as f64;
    let mut doc = Vec::new();
    for d in &days {
        let m = d.metrics(a.th_v, a.th_n, bw);
        doc.push(serde_json::json!({ "runs": d, "metrics": m }));
    }
    let json = serde_json::json!({
        "cache_percent": a.cache, "warmup_percent": a.warmup, "region_bytes": a.region,
        "th_v": a.th_v, "th_n": a.th_n, "period_ns": a.exp.period, "interval_ns": a.exp.interval,
        "readahead_bytes": a.exp.readahead, "bandwidth": a.exp.bandwidth, "periods": doc,
    });
    Ok((days, json))
}

fn run_one(a: RunArgs) -> anyhow::Result<()> {
    let (days, json) = compute_run(&a)?;
    let bw = a.exp.bandwidth as f64;
    for d in days.iter().filter(|_| !a.output.quiet) {
        let m = d.metrics(a.th_v, a.th_n, bw);
        println!(
            "volume {} period {} (cache {} blocks, warmup {} blocks; Th_V {}, Th_N {})",
            d.volume, d.day, d.capacity_blocks, d.warmup_blocks, a.th_v, a.th_n
        );
        println!(
            "  {:<12} {:>10} {:>12} {:>12} {:>12} {:>12} {:>10}",
            "scheme",
            "T_conv(h)",
            "load red.(%)",
            "preload(min)",
            "T impr.(%)",
            "load impr.(%)",
            "read hit(%)"
        );
        for x in &m {
            println!(
                "  {:<12} {:>10.2} {:>12} {:>12.2} {:>12} {:>12} {:>10}",
                x.scheme,
                x.converge_hours,
                fmt(x.load_reduction_percent),
                x.preload_minutes,
                fmt(x.converge_improvement_percent),
                fmt(x.load_improvement_percent),
                fmt(x.read_hit_percent)
            );
        }
    }
    let json = serde_json::to_string_pretty(&json)?;
    if let Some(p) = &a.output.json {
        write_text(p, &json)?;
    }
    if let Some(dir) = a.output.dir()? {
        write_text(&dir.join("warmup.json"), &json)?;
        for d in &days {
            let name: String =
                d.volume.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
            timeline_png(d, &dir.join(format!("timeline_{name}_p{}.png", d.day)))?;
        }
    }
    Ok(())
}

/// Read hit rate over the period, one line per scheme (the layout of Bonfire Figures 5, 10).
fn timeline_png(d: &DayRuns, path: &std::path::Path) -> anyhow::Result<()> {
    let n = d.runs.first().map_or(1, |r| r.timeline.len()) as f64;
    let unit = if d.interval_s * n > 7200.0 { 3600.0 } else { 60.0 };
    png(path, (1100, 680), |root| {
        let caption = format!("{} period {}: read hit rate", d.volume, d.day);
        let mut chart = WIDE.chart(root, &caption, 0.0..n * d.interval_s / unit, 0.0..1.02)?;
        WIDE.mesh(&mut chart)
            .x_desc(if unit == 3600.0 {
                "hours since the new cache started"
            } else {
                "minutes since the new cache started"
            })
            .y_desc("read hit rate")
            .draw()?;
        for (i, r) in d.runs.iter().enumerate() {
            let pts: Vec<(f64, f64)> = r
                .timeline
                .iter()
                .enumerate()
                .filter_map(|(t, p)| {
                    p.hit_rate().map(|h| ((t as f64 + 0.5) * d.interval_s / unit, h))
                })
                .collect();
            line(&mut chart, r.scheme.clone(), &pts, colour(i), WIDE_LINE)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        Ok(())
    })
}

fn run_sweep(a: SweepArgs) -> anyhow::Result<()> {
    for &v in &a.th_v {
        for &n in &a.th_n {
            check_thresholds(v, n)?;
        }
    }
    let source = load(&a.exp)?;
    let grid = SweepGrid {
        cache_percents: a.cache.clone(),
        warmup_percents: a.warmup.clone(),
        region_bytes: a.region.clone(),
        th_v: a.th_v.clone(),
        th_n: a.th_n.clone(),
    };
    let rows = sweep_with(
        &base_config(&a.exp),
        &grid,
        a.exp.bandwidth as f64,
        &mut |d, t| eprint!("\rsimulated {d}/{t} configurations"),
        &mut |cfg| source.run(cfg),
    )?;
    eprintln!();
    println!(
        "Table 3 shape: medians over volumes and periods of the best selector per volume-period"
    );
    println!(
        "{:>7} {:>7} {:>8} {:>5} {:>5} {:>9} | {:>9} {:>9} {:>8} | {:>6} {:>6} {:>7} {:>8} | best",
        "S_cache",
        "S_warm",
        "region",
        "Th_V",
        "Th_N",
        "T_pre(m)",
        "cold(h)",
        "bonf.(h)",
        "impr(%)",
        "cold",
        "a-warm",
        "bonfire",
        "impr(%)"
    );
    for r in &rows {
        let best: Vec<String> = r.best_counts.iter().map(|(n, c)| format!("{n}:{c}")).collect();
        println!(
            "{:>7} {:>7} {:>8} {:>5} {:>5} {:>9} | {:>9} {:>9} {:>8} | {:>6} {:>6} {:>7} {:>8} | {}",
            r.cache_percent,
            r.warmup_percent,
            if r.region_bytes >= 1 << 20 { format!("{}MiB", r.region_bytes >> 20) } else { format!("{}KiB", r.region_bytes >> 10) },
            100.0 * r.th_v,
            100.0 * r.th_n,
            r.preload_minutes.map_or("-".into(), |v| format!("{v:.2}")),
            r.cold_hours.map_or("-".into(), |v| format!("{v:.2}")),
            r.bonfire_hours.map_or("-".into(), |v| format!("{v:.2}")),
            fmt(r.converge_improvement_percent),
            fmt(r.cold_load_percent),
            fmt(r.always_warm_load_percent),
            fmt(r.bonfire_load_percent),
            fmt(r.load_improvement_percent),
            best.join(" ")
        );
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

fn run_advise(a: AdviseArgs) -> anyhow::Result<()> {
    // A pipe can be read only once: the analysis and the experiment share the held trace.
    let piped = if a.analysis.is_none() && !is_file(&a.exp) {
        if a.exp.input.block_size == 0 {
            bail!("--block-size must be at least 1");
        }
        Some(a.exp.input.read()?.0)
    } else {
        None
    };
    let report: TraceReport = match &a.analysis {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str(&text).with_context(|| {
                format!("{} is not an `ember analyze` JSON document", p.display())
            })?
        }
        None => {
            let cfg = AnalyzeConfig { bins: 10, mrc_points: 2, ..AnalyzeConfig::default() };
            match &piped {
                Some(trace) => {
                    let cfg = AnalyzeConfig { block_size: a.exp.input.block_size, ..cfg };
                    analyze(trace, &cfg).map_err(|e| anyhow!("{e}"))?
                }
                None => analyze_input(&a.exp.input, cfg)?,
            }
        }
    };
    for (name, an) in report.named() {
        let adv = advise(an, a.region);
        println!("{name}: {} (Figure 8's decision tree)", adv.algorithm.name());
        println!("  because {}", adv.reason);
    }
    // The evidence: every selector simulated on this trace's history.
    check_thresholds(a.th_v, a.th_n)?;
    let source = match &piped {
        Some(trace) => held(trace, a.exp.input.block_size),
        None => load(&a.exp)?,
    };
    drop(piped);
    let cfg = WarmupConfig {
        cache_percent: a.cache,
        warmup_percent: a.warmup,
        region_bytes: a.region,
        selectors: vec![
            SelectorKind::LastK,
            SelectorKind::FirstK,
            SelectorKind::TopK,
            SelectorKind::RandomK,
        ],
        ..base_config(&a.exp)
    };
    let days = source.run(&cfg)?;
    let ev = rank_selectors(&days, a.th_v, a.th_n, a.exp.bandwidth as f64);
    let Some(best) = &ev.best else {
        println!(
            "evidence: none (no period after the first has accesses: the trace is shorter than \
             two periods of {} s; give a shorter --period); the decision tree's choice stands",
            a.exp.period as f64 / 1e9
        );
        return Ok(());
    };
    println!(
        "evidence: each selector simulated on this trace (cache {} %, warmup {} %, region {} B, \
         Th_V {}, Th_N {}), medians over {} volume-periods:",
        a.cache, a.warmup, a.region, a.th_v, a.th_n, ev.periods
    );
    println!(
        "  {:<10} {:>16} {:>20} {:>14}",
        "selector", "T_converge (h)", "load reduction (%)", "read hits (%)"
    );
    for s in &ev.schemes {
        println!(
            "  {:<10} {:>16.2} {:>20} {:>14}",
            s.scheme,
            s.converge_hours,
            fmt(s.load_reduction_percent),
            fmt(s.read_hit_percent)
        );
    }
    println!("recommended: {best} (lowest T_converge, then highest load reduction, then hits)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1d"), Ok(86_400_000_000_000));
        assert_eq!(parse_duration("10m"), Ok(600_000_000_000));
        assert_eq!(parse_duration("2500s"), Ok(2_500_000_000_000));
        assert_eq!(parse_duration("100"), Ok(100_000_000_000));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5y").is_err());
    }
}
