//! `ember demote`: Wong & Wilkes' client/array hierarchy (*My cache or yours?*, USENIX ATC
//! 2002; docs/reference/laboratory.md). It runs N LRU clients over one array cache under the chosen
//! schemes; `--experiment` runs every scheme side by side and writes the tables and the
//! figures of `plot_demote` (Figures 2/7, 4 and 6).

use crate::file_passes::FilePasses;
use crate::grid_args::WarmupArgs;
use crate::output::{display_name, write_text, OutputArgs};
use crate::plot_demote::{plot_cdf, plot_hit_rate, plot_latency_vs_array};
use crate::trace_args::TraceInput;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use ember_policy::demote::{ArrayConfig, Scheme};
use ember_sim::demote::experiment::{DemoteExperiment, DemoteReport};
use ember_sim::demote::latency_model::{LatencyModel, PAPER_SAN_BITS_PER_S};
use ember_sim::demote::topology::{ArrayAddressing, ClientOf, DemoteConfig};
use ember_sim::{default_threads, Capacity, WarmupPeriod};
use ember_units::{parse_duration_in, TimeUnit, UnitError};
use std::collections::HashSet;
use std::path::PathBuf;

/// Arguments of `ember demote`.
#[derive(Args)]
pub struct DemoteCmdArgs {
    /// The trace and how to read it.
    #[command(flatten)]
    pub input: TraceInput,
    /// The hierarchy: clients, sizes, schemes, latencies.
    #[command(flatten)]
    pub demote: DemoteArgs,
    /// The paper's experiment: every scheme side by side (with `--scheme all`), a hit-rate
    /// sweep over array sizes (default 1/8 to 4 times --array-size), tables and figures in
    /// --out (default: the current directory).
    #[arg(long)]
    pub experiment: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The uncounted warm-up period as on `ember sim` (--warmup-requests, --warmup-time), in
    /// place of --warmup.
    #[command(flatten)]
    pub uncounted: WarmupArgs,
    /// --out, --json, --quiet.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The hierarchy flags of `ember demote`.
#[derive(Args, Clone, Debug)]
pub struct DemoteArgs {
    /// Hierarchy: number of clients (default: one per trace volume, or 1 with
    /// --client-of single).
    #[arg(long)]
    pub clients: Option<usize>,
    /// Hierarchy: who issues a request: `volume` (volume K is client K) or `single`.
    #[arg(long, default_value = "volume")]
    pub client_of: String,
    /// Hierarchy: size of each client cache (blocks, bytes such as 64MiB, or % of the WSS). A
    /// bare number is blocks; K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value = "16384")]
    pub client_size: String,
    /// Hierarchy: size of the array cache (blocks, bytes or % of the WSS, as --client-size).
    #[arg(long, default_value = "16384")]
    pub array_size: String,
    /// Hierarchy: schemes, comma-separated: none-lru, demote-lru, demote, demote-slru,
    /// demote-adapt-uni, demote-adapt-exp, or all (NONE-LRU, the baseline, is always run).
    #[arg(long, default_value = "all", value_delimiter = ',')]
    pub scheme: Vec<String>,
    /// Hierarchy: N_segs of the adaptive schemes.
    #[arg(long, default_value_t = 10)]
    pub segments: usize,
    /// Hierarchy: fraction of the array protected under demote-slru.
    #[arg(long, default_value_t = 0.5)]
    pub slru_protected: f64,
    /// Hierarchy: an aborted DEMOTE of a block the array holds leaves it in place (default:
    /// moves it where demoted blocks go, as LRU treats a reference).
    #[arg(long)]
    pub no_refresh_aborted: bool,
    /// Hierarchy: array addressing: `shared` (block index alone: `ember trace gen
    /// multi-client` traces), `volume` (volume and block: distinct disks) or `auto` (shared
    /// if every volume is named clientN).
    #[arg(long, default_value = "auto")]
    pub addressing: String,
    /// Hierarchy: the uncounted warm-up period (not Bonfire's cache warmup, `ember warmup`):
    /// `wss` (the requests holding a working set's worth of block accesses, at most half the
    /// trace: the paper's procedure), `none`, a count, or a percentage of the requests
    /// (`10%`) [default: wss]. --warmup-requests and --warmup-time give it as `ember sim`
    /// does instead.
    #[arg(long)]
    pub warmup: Option<String>,
    /// Hierarchy: T_c, a client hit. Units ns, us, ms, s; a bare number is milliseconds.
    #[arg(long, default_value_t = 0.0, value_parser = parse_ms)]
    pub t_c: f64,
    /// Hierarchy: T_a, an array hit or full DEMOTE (ignored with --san-mbit). Units ns, us,
    /// ms, s; a bare number is milliseconds.
    #[arg(long, default_value_t = 0.2, value_parser = parse_ms)]
    pub t_a: f64,
    /// Hierarchy: T_d, a disk read (paper: 10 ms synthetic, 5 ms real workloads). Units ns,
    /// us, ms, s; a bare number is milliseconds.
    #[arg(long, default_value_t = 10.0, value_parser = parse_ms)]
    pub t_d: f64,
    /// Hierarchy: an aborted DEMOTE (ignored with --san-mbit). Units ns, us, ms, s; a bare
    /// number is milliseconds.
    #[arg(long, default_value_t = 0.16, value_parser = parse_ms)]
    pub t_abort: f64,
    /// Hierarchy: derive T_a from a SAN of this many Mbit/s: T_a = overhead + block transfer,
    /// aborted DEMOTE = overhead (section 3.5).
    #[arg(long)]
    pub san_mbit: Option<f64>,
    /// Hierarchy: per-operation SAN overhead for --san-mbit (default: the overhead that gives
    /// T_a = 0.2 ms at 1 Gbit/s with this block size). Units ns, us, ms, s; a bare number is
    /// milliseconds.
    #[arg(long, value_parser = parse_ms)]
    pub san_overhead: Option<f64>,
    /// Hierarchy: array sizes of the hit-rate sweep, comma-separated, each as --client-size
    /// (default for --experiment demote: 1/8 to 4 times --array-size).
    #[arg(long, value_delimiter = ',')]
    pub sweep: Vec<String>,
}

/// A latency in milliseconds, the latency model's unit: a bare number is milliseconds.
fn parse_ms(text: &str) -> Result<f64, UnitError> {
    parse_duration_in(text, TimeUnit::Millis).map(|d| TimeUnit::Millis.of(d))
}

fn parse_size(flag: &str, text: &str, block_size: u64, wss: u64) -> anyhow::Result<usize> {
    let c: Capacity = text.trim().parse().map_err(|e| anyhow!("--{flag}: {e}"))?;
    usize::try_from(c.blocks(block_size, wss)).map_err(|_| anyhow!("--{flag}: {text} is too large"))
}

impl DemoteArgs {
    fn schemes(&self) -> anyhow::Result<Vec<Scheme>> {
        let mut out = Vec::new();
        for s in self.scheme.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            if s.eq_ignore_ascii_case("all") {
                out.extend(Scheme::ALL);
            } else {
                out.push(s.parse::<Scheme>().map_err(|e| anyhow!("--scheme: {e}"))?);
            }
        }
        if out.is_empty() {
            bail!("--scheme: give at least one scheme");
        }
        Ok(out)
    }

    fn model(&self, block_size: u64) -> anyhow::Result<LatencyModel> {
        for (name, v) in
            [("t-c", self.t_c), ("t-a", self.t_a), ("t-d", self.t_d), ("t-abort", self.t_abort)]
        {
            if !v.is_finite() || v < 0.0 {
                bail!("--{name} must be a non-negative number of ms, got {v}");
            }
        }
        Ok(match self.san_mbit {
            None => {
                LatencyModel { t_c: self.t_c, t_a: self.t_a, t_d: self.t_d, t_abort: self.t_abort }
            }
            Some(mbit) => {
                if !mbit.is_finite() || mbit <= 0.0 {
                    bail!("--san-mbit must be positive, got {mbit}");
                }
                let overhead = self.san_overhead.unwrap_or_else(|| {
                    LatencyModel::overhead_for(0.2, PAPER_SAN_BITS_PER_S, block_size)
                });
                if !overhead.is_finite() || overhead < 0.0 {
                    bail!("--san-overhead must be a non-negative number of ms, got {overhead}");
                }
                LatencyModel::from_san(mbit * 1e6, overhead, block_size, self.t_c, self.t_d)
            }
        })
    }

    /// Warm-up requests of a trace of `n` requests; `blocks` gives each request's block
    /// count in trace order (read only as far as `wss` needs).
    fn warmup(
        &self,
        n: usize,
        wss: u64,
        blocks: impl IntoIterator<Item = anyhow::Result<u64>>,
    ) -> anyhow::Result<usize> {
        let w = self.warmup.as_deref().unwrap_or("wss").trim();
        Ok(match w {
            "wss" => {
                // The shortest prefix with a working set's worth of block accesses, at most
                // half the requests.
                let mut seen = 0u64;
                let mut k = 0;
                let mut blocks = blocks.into_iter();
                while k < n / 2 && seen < wss {
                    match blocks.next() {
                        Some(b) => seen += b?,
                        None => break,
                    }
                    k += 1;
                }
                k
            }
            "none" | "0" => 0,
            _ if w.ends_with('%') => {
                let p: f64 = w[..w.len() - 1]
                    .trim()
                    .parse()
                    .map_err(|_| anyhow!("--warmup: bad percentage {w:?}"))?;
                if !(0.0..=100.0).contains(&p) {
                    bail!("--warmup: percentage {w:?} outside 0..100");
                }
                ((n as f64 * p / 100.0).round() as usize).min(n)
            }
            _ => w
                .parse::<usize>()
                .map_err(|_| {
                    anyhow!("--warmup: expected wss, none, a count or a percentage, got {w:?}")
                })?
                .min(n),
        })
    }
}

/// The trace requests (all of them, numbered from 0) before the first counted one after
/// `period`, given each request's time and length in trace order: requests touching no block
/// are not numbered by the period, as `ember sim` numbers them, and times count from the first
/// request touching a block.
fn uncounted_requests(
    period: WarmupPeriod,
    requests: impl IntoIterator<Item = anyhow::Result<(u64, u32)>>,
) -> anyhow::Result<usize> {
    if period.is_none() {
        return Ok(0);
    }
    let (mut seen, mut first) = (0u64, None::<u64>);
    let mut i = 0usize;
    for r in requests {
        let (time_ns, length) = r?;
        if length > 0 {
            let t0 = *first.get_or_insert(time_ns);
            if period.over_at(seen, time_ns.saturating_sub(t0)) {
                return Ok(i);
            }
            seen += 1;
        }
        i += 1;
    }
    Ok(i)
}

/// A finished hierarchy run: the report and what it was run on.
pub struct DemoteRun {
    /// Every scheme's results (and the sweep, if any).
    pub report: DemoteReport,
    /// The trace's file name.
    pub name: String,
    /// Requests in the trace.
    pub requests: usize,
    /// Warm-up requests not counted.
    pub warmup: usize,
    /// Working set in blocks.
    pub wss: u64,
}

/// Run the hierarchy that `args` describe, writing nothing.
pub fn compute(args: &DemoteCmdArgs) -> anyhow::Result<DemoteRun> {
    let d = &args.demote;
    let experiment = args.experiment;
    let block_size = args.input.block_size;
    if block_size == 0 {
        bail!("--block-size must be positive");
    }
    let path = args.input.path();
    // A regular file streams: a counting pass, then a pass per run (memory is the caches'
    // state and the working set's block set, not the trace). A pipe is read into memory.
    let streamed = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    let passes = FilePasses::new(&args.input);
    let context = || format!("reading trace {}", path.display());
    let (trace, skipped) = if streamed {
        (None, 0)
    } else {
        let (trace, stats) = args.input.read()?;
        (Some(trace), stats.skipped)
    };
    let mut blocks: HashSet<u64> = HashSet::new();
    let (n, volumes) = match &trace {
        Some(t) => {
            for r in &t.requests {
                blocks.extend(r.block_keys(block_size));
            }
            (t.requests.len(), t.volumes.clone())
        }
        None => {
            let mut reader = args.input.open()?;
            let mut n = 0usize;
            for r in reader.by_ref() {
                blocks.extend(r.with_context(context)?.block_keys(block_size));
                n += 1;
            }
            (n, reader.volumes().clone())
        }
    };
    let wss = blocks.len() as u64;
    drop(blocks);
    let client_of = match d.client_of.as_str() {
        "volume" => ClientOf::Volume,
        "single" => ClientOf::Single,
        other => bail!("--client-of: expected volume or single, got {other:?}"),
    };
    let volume_count = volumes.len().max(1);
    let clients = match (d.clients, client_of) {
        (Some(0), _) => bail!("--clients must be at least 1"),
        (Some(n), _) => n,
        (None, ClientOf::Volume) => volume_count,
        (None, ClientOf::Single) => 1,
    };
    let addressing = match d.addressing.as_str() {
        "shared" => ArrayAddressing::Shared,
        "volume" => ArrayAddressing::PerVolume,
        "auto" => {
            let generated = volumes.names().iter().all(|n| {
                n.strip_prefix("client")
                    .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
            });
            if generated {
                ArrayAddressing::Shared
            } else {
                ArrayAddressing::PerVolume
            }
        }
        other => bail!("--addressing: expected shared, volume or auto, got {other:?}"),
    };
    if d.segments == 0 || d.segments > ember_policy::demote::MAX_SEGMENTS {
        bail!("--segments must be in 1..={}", ember_policy::demote::MAX_SEGMENTS);
    }
    if !(0.0..=1.0).contains(&d.slru_protected) {
        bail!("--slru-protected must be in [0, 1]");
    }
    let array_blocks = parse_size("array-size", &d.array_size, block_size, wss)?;
    let base = DemoteConfig {
        clients,
        client_blocks: parse_size("client-size", &d.client_size, block_size, wss)?,
        array: ArrayConfig {
            segments: d.segments,
            slru_protected: d.slru_protected,
            refresh_aborted: !d.no_refresh_aborted,
            ..ArrayConfig::new(array_blocks, Scheme::NoneLru)
        },
        block_size,
        client_of,
        addressing,
    };
    let mut sweep: Vec<usize> = d
        .sweep
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| parse_size("sweep", s, block_size, wss))
        .collect::<anyhow::Result<_>>()?;
    if sweep.is_empty() && experiment {
        sweep = [8usize, 4, 2].iter().map(|k| (array_blocks / k).max(1)).collect();
        sweep.extend([array_blocks, array_blocks * 2, array_blocks * 4]);
        sweep.dedup();
    }
    let schemes =
        if experiment && d.scheme == ["all"] { Scheme::ALL.to_vec() } else { d.schemes()? };
    let exp = DemoteExperiment {
        base,
        schemes,
        model: d.model(block_size)?,
        sweep_array_blocks: sweep,
        threads: args.threads.unwrap_or_else(default_threads).max(1),
    };
    let name = display_name(path);
    let uncounted = args.uncounted.period()?;
    if args.uncounted.given() && d.warmup.is_some() {
        bail!("give the uncounted warm-up period with --warmup or with --warmup-requests / --warmup-time, not both");
    }
    let report = match &trace {
        Some(t) => {
            let warmup = if args.uncounted.given() {
                uncounted_requests(uncounted, t.requests.iter().map(|r| Ok((r.time_ns, r.length))))?
            } else {
                d.warmup(
                    n,
                    wss,
                    t.requests.iter().map(|r| Ok(r.blocks(block_size).count() as u64)),
                )?
            };
            exp.run(&t.requests, warmup).map(|r| (r, warmup))
        }
        None => {
            let pass = passes.open().with_context(context)?;
            let warmup = if args.uncounted.given() {
                uncounted_requests(
                    uncounted,
                    pass.map(|r| r.with_context(context).map(|r| (r.time_ns, r.length))),
                )?
            } else {
                d.warmup(
                    n,
                    wss,
                    pass.map(|r| Ok(r.with_context(context)?.blocks(block_size).count() as u64)),
                )?
            };
            let open = || passes.open();
            exp.run_streamed(&open, warmup).map(|r| (r, warmup))
        }
    };
    let (report, warmup) =
        report.with_context(|| format!("hierarchy simulation of {}", path.display()))?;
    let skipped = skipped.max(passes.skipped());
    if skipped > 0 && !args.output.quiet {
        eprintln!("ember demote: skipped {skipped} malformed records of {}", path.display());
    }
    Ok(DemoteRun { report, name, requests: n, warmup, wss })
}

/// Run `ember demote`: print the tables, write JSON, tables and figures.
pub fn run(args: DemoteCmdArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let DemoteRun { report, name, requests, warmup, wss } = compute(&args)?;
    let tables = report.tables();
    let quiet = args.output.quiet;
    if !quiet {
        println!("{name}: {requests} requests, {warmup} warm-up, WSS {wss} blocks");
        print!("{tables}");
        eprintln!("ember demote: hierarchy runs in {:.2} s", started.elapsed().as_secs_f64());
    }
    let out: Option<PathBuf> =
        args.output.out.clone().or_else(|| args.experiment.then(|| PathBuf::from(".")));
    if let Some(dir) = &out {
        crate::output::ensure_dir(dir)?;
        write_text(&dir.join("demote.txt"), &tables)?;
    }
    let json = args.output.json.clone().or_else(|| out.as_ref().map(|d| d.join("demote.json")));
    if let Some(p) = &json {
        let text = serde_json::to_string_pretty(&report).context("encoding the report as JSON")?;
        write_text(p, &text)?;
    }
    if let Some(dir) = &out {
        if !report.sweep.is_empty() {
            plot_hit_rate(&report, &name, &dir.join("demote_hit_rate.png"))?;
            plot_latency_vs_array(&report, &name, &dir.join("demote_latency_vs_array.png"))?;
        }
        plot_cdf(&report, &name, &dir.join("demote_latency_cdf.png"))?;
        if !quiet {
            eprintln!("ember demote: wrote demote.txt, demote.json and plots in {}", dir.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use ember_trace::{Op, Request, Trace, VolumeTable};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        d: DemoteArgs,
    }

    fn args(extra: &[&str]) -> DemoteArgs {
        let mut v = vec!["x"];
        v.extend_from_slice(extra);
        Cli::parse_from(v).d
    }

    fn trace(n: usize) -> Trace {
        let requests = (0..n)
            .map(|i| Request {
                time_ns: i as u64,
                volume: 0,
                op: Op::Read,
                offset: 0,
                length: 4096,
            })
            .collect();
        Trace { requests, volumes: VolumeTable::new() }
    }

    #[test]
    fn warmup_forms() {
        let t = trace(200);
        let n = t.requests.len();
        let counts = |bs: u64| t.requests.iter().map(move |r| Ok(r.blocks(bs).count() as u64));
        let w = |a: &[&str], wss: u64| args(a).warmup(n, wss, counts(4096));
        assert_eq!(w(&[], 50).unwrap(), 50);
        assert_eq!(w(&[], 500).unwrap(), 100); // at most half the requests
                                               // 2-block requests: 50 blocks of working set are 25 requests.
        assert_eq!(args(&[]).warmup(n, 50, counts(2048)).unwrap(), 25);
        assert_eq!(w(&["--warmup", "none"], 50).unwrap(), 0);
        assert_eq!(w(&["--warmup", "25%"], 50).unwrap(), 50);
        assert_eq!(w(&["--warmup", "120"], 50).unwrap(), 120);
        assert_eq!(w(&["--warmup", "900"], 50).unwrap(), 200);
        assert!(w(&["--warmup", "abc"], 50).is_err());
        // The flags of `ember sim`: requests touching no block are passed over.
        let reqs = [(0u64, 4096u32), (5, 0), (10, 4096), (20, 4096), (30, 4096)];
        let it = || reqs.iter().map(|&r| Ok(r));
        assert_eq!(uncounted_requests(WarmupPeriod::None, it()).unwrap(), 0);
        assert_eq!(uncounted_requests(WarmupPeriod::Requests(2), it()).unwrap(), 3);
        assert_eq!(uncounted_requests(WarmupPeriod::Time(15), it()).unwrap(), 3);
        assert_eq!(uncounted_requests(WarmupPeriod::Requests(9), it()).unwrap(), 5);
        assert!(w(&["--warmup", "150%"], 50).is_err());
    }

    #[test]
    fn schemes_and_latency_flags() {
        assert_eq!(args(&[]).schemes().unwrap(), Scheme::ALL.to_vec());
        assert_eq!(
            args(&["--scheme", "demote,DEMOTE_ADAPT_EXP"]).schemes().unwrap(),
            vec![Scheme::Demote, Scheme::DemoteAdaptExp]
        );
        assert!(args(&["--scheme", "mru"]).schemes().is_err());
        let m = args(&["--t-d", "5"]).model(4096).unwrap();
        assert_eq!((m.t_a, m.t_d, m.t_abort), (0.2, 5.0, 0.16));
        // Section 3.5: 1 Gbit/s gives the paper's 0.2 ms; 10 Mbit/s adds 3.2 ms of transfer.
        let fast = args(&["--san-mbit", "1000"]).model(4096).unwrap();
        assert!((fast.t_a - 0.2).abs() < 1e-9);
        let slow = args(&["--san-mbit", "10"]).model(4096).unwrap();
        assert!((slow.t_a - (0.2 - 0.032768 + 3.2768)).abs() < 1e-9);
        assert!(args(&["--san-mbit", "0"]).model(4096).is_err());
        // A negative latency is refused when the flag is parsed.
        assert!(Cli::try_parse_from(["x", "--t-a=-1"]).is_err());
        // A bare number is milliseconds; a unit may say otherwise.
        let m = args(&["--t-a", "200us", "--t-d", "0.005s", "--t-abort", "160000ns"]);
        let m = m.model(4096).unwrap();
        assert_eq!((m.t_a, m.t_d, m.t_abort), (0.2, 5.0, 0.16));
        assert!(Cli::try_parse_from(["x", "--t-d", "5 parsecs"]).is_err());
    }

    #[derive(Parser)]
    struct DemoteCli {
        #[command(flatten)]
        cmd: DemoteCmdArgs,
    }

    #[test]
    fn experiment_demote_writes_tables_json_and_plots() {
        // Section 3.3 in miniature: a loop of 7 blocks, one 4-block client over a 4-block
        // array. NONE-LRU misses every READ (10.2 ms), DEMOTE hits the array after a stored
        // DEMOTE (0.4 ms): 25.5x.
        let dir = tempfile::tempdir().unwrap();
        let mut volumes = VolumeTable::new();
        volumes.intern("client0");
        let requests = (0..77u64)
            .map(|i| Request {
                time_ns: i,
                volume: 0,
                op: Op::Read,
                offset: (i % 7) * 4096,
                length: 4096,
            })
            .collect();
        let path = dir.path().join("loop.ember");
        let trace = Trace { requests, volumes };
        ember_trace::write_trace(&path, ember_trace::Format::Ember, &trace, 4096).unwrap();
        let out = dir.path().join("out");
        let cli = DemoteCli::parse_from([
            "demote",
            path.to_str().unwrap(),
            "--experiment",
            "--client-size",
            "4",
            "--array-size",
            "4",
            "--sweep",
            "2,4,8",
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ]);
        run(cli.cmd).unwrap();
        for f in [
            "demote.txt",
            "demote.json",
            "demote_hit_rate.png",
            "demote_latency_cdf.png",
            "demote_latency_vs_array.png",
        ] {
            assert!(out.join(f).is_file(), "{f}");
        }
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("demote.json")).unwrap())
                .unwrap();
        let schemes = json["schemes"].as_array().unwrap();
        assert_eq!(schemes.len(), 6);
        assert_eq!(schemes[0]["scheme"], "NoneLru");
        let demote = schemes.iter().find(|s| s["scheme"] == "Demote").unwrap();
        assert!((demote["mean_speedup"].as_f64().unwrap() - 25.5).abs() < 1e-9);
        assert_eq!(json["sweep"].as_array().unwrap().len(), 18);
        // Warm-up: the first 7 requests (a working set's worth), 70 counted READS.
        assert_eq!(demote["result"]["clients"][0]["reads"], 70);
    }
}
