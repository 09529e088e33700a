//! `ember trace info` and `ember trace convert`.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use ember_trace::{block_key, Format, Op};
use serde::Serialize;

use crate::trace_args::TraceInput;

/// Arguments of `ember trace info`.
#[derive(Args)]
pub struct InfoArgs {
    /// The trace and how to read it.
    #[command(flatten)]
    pub input: TraceInput,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `ember trace convert`.
#[derive(Args)]
pub struct ConvertArgs {
    /// The input trace and how to read it.
    #[command(flatten)]
    pub input: TraceInput,
    /// The output file (`.gz` / `.zst` compress).
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// Output format: msr, spc, csv, oracle-general, ember (default: from OUT's extension,
    /// else ember).
    #[arg(long, value_parser = parse_format)]
    pub to: Option<Format>,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse().map_err(|e: ember_trace::TraceError| e.to_string())
}

/// Per-volume counts.
#[derive(Serialize, Default, Debug, Clone, PartialEq, Eq)]
pub struct VolumeInfo {
    /// Volume name.
    pub name: String,
    /// Requests.
    pub requests: u64,
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Distinct blocks touched.
    pub wss_blocks: u64,
}

/// What `ember trace info` reports.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct TraceInfo {
    /// The trace file.
    pub path: String,
    /// Its format.
    pub format: String,
    /// Requests.
    pub requests: u64,
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Bytes requested by reads.
    pub read_bytes: u64,
    /// Bytes requested by writes.
    pub write_bytes: u64,
    /// Earliest request time (ns).
    pub first_time_ns: Option<u64>,
    /// Latest request time (ns).
    pub last_time_ns: Option<u64>,
    /// Latest minus earliest time, seconds.
    pub span_s: f64,
    /// Block size used for the working set.
    pub block_size: u64,
    /// Distinct blocks touched (all volumes).
    pub wss_blocks: u64,
    /// `wss_blocks * block_size`.
    pub wss_bytes: u64,
    /// Malformed lines or records skipped.
    pub skipped: u64,
    /// Well-formed lines or records that were not requests.
    pub ignored: u64,
    /// Per-volume counts, in volume id order.
    pub volumes: Vec<VolumeInfo>,
}

/// Stream a trace and count what `ember trace info` prints.
pub fn trace_info(input: &TraceInput) -> anyhow::Result<TraceInfo> {
    let bs = input.block_size;
    let mut reader = input.open()?;
    let mut vols: Vec<VolumeInfo> = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let (mut first, mut last) = (None::<u64>, None::<u64>);
    let (mut read_bytes, mut write_bytes) = (0u64, 0u64);
    for r in reader.by_ref() {
        let r = r?;
        let v = r.volume as usize;
        if vols.len() <= v {
            vols.resize(v + 1, VolumeInfo::default());
        }
        let vi = &mut vols[v];
        vi.requests += 1;
        match r.op {
            Op::Read => {
                vi.reads += 1;
                read_bytes += r.length as u64;
            }
            Op::Write => {
                vi.writes += 1;
                write_bytes += r.length as u64;
            }
        }
        for b in r.blocks(bs) {
            if seen.insert(block_key(r.volume, b)) {
                vi.wss_blocks += 1;
            }
        }
        first = Some(first.map_or(r.time_ns, |f| f.min(r.time_ns)));
        last = Some(last.map_or(r.time_ns, |l| l.max(r.time_ns)));
    }
    let names = reader.volumes();
    if vols.len() < names.len() {
        vols.resize(names.len(), VolumeInfo::default());
    }
    for (i, v) in vols.iter_mut().enumerate() {
        v.name = names.name(i as u32);
    }
    let sum = |f: fn(&VolumeInfo) -> u64| vols.iter().map(f).sum::<u64>();
    let wss_blocks = seen.len() as u64;
    Ok(TraceInfo {
        path: input.path().display().to_string(),
        format: reader.format().to_string(),
        requests: sum(|v| v.requests),
        reads: sum(|v| v.reads),
        writes: sum(|v| v.writes),
        read_bytes,
        write_bytes,
        first_time_ns: first,
        last_time_ns: last,
        span_s: match (first, last) {
            (Some(f), Some(l)) => (l - f) as f64 / 1e9,
            _ => 0.0,
        },
        block_size: bs,
        wss_blocks,
        wss_bytes: wss_blocks.saturating_mul(bs),
        skipped: reader.skipped(),
        ignored: reader.ignored(),
        volumes: vols,
    })
}

/// Bytes as a short human string.
fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// Run `ember trace info`.
pub fn info(args: InfoArgs) -> anyhow::Result<()> {
    let i = trace_info(&args.input)?;
    // Write through a handle so a closed pipe (`| head`) is an error, not a panic.
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&i)?)?;
        return Ok(());
    }
    writeln!(out, "trace:        {} ({})", i.path, i.format)?;
    writeln!(out, "requests:     {}", i.requests)?;
    writeln!(out, "reads:        {} ({})", i.reads, human_bytes(i.read_bytes))?;
    writeln!(out, "writes:       {} ({})", i.writes, human_bytes(i.write_bytes))?;
    writeln!(out, "volumes:      {}", i.volumes.len())?;
    match (i.first_time_ns, i.last_time_ns) {
        (Some(f), Some(l)) => {
            writeln!(out, "time span:    {:.3} s (from {f} ns to {l} ns)", i.span_s)
        }
        _ => writeln!(out, "time span:    0 s (no requests)"),
    }?;
    writeln!(
        out,
        "working set:  {} blocks of {} B = {} ({} bytes)",
        i.wss_blocks,
        i.block_size,
        human_bytes(i.wss_bytes),
        i.wss_bytes
    )?;
    writeln!(out, "skipped:      {} malformed", i.skipped)?;
    writeln!(out, "not requests: {}", i.ignored)?;
    if !i.volumes.is_empty() {
        let w = i.volumes.iter().map(|v| v.name.len()).max().unwrap_or(6).max(6);
        writeln!(out,)?;
        writeln!(
            out,
            "{:<w$} {:>12} {:>12} {:>12} {:>12}",
            "volume", "requests", "reads", "writes", "wss_blocks"
        )?;
        for v in &i.volumes {
            writeln!(
                out,
                "{:<w$} {:>12} {:>12} {:>12} {:>12}",
                v.name, v.requests, v.reads, v.writes, v.wss_blocks
            )?;
        }
    }
    Ok(())
}

/// The output format of `convert`: `--to`, else the output name, else ember.
pub fn output_format(to: Option<Format>, out: &Path) -> Format {
    if let Some(f) = to {
        return f;
    }
    if let Some(f) = ember_trace::format_from_name(out) {
        return f;
    }
    let name =
        out.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    let name = name.trim_end_matches(".gz").trim_end_matches(".zst");
    if name.ends_with(".csv") {
        Format::Csv
    } else {
        Format::Ember
    }
}

/// Run `ember trace convert`. A regular file streams: a first pass reads the volume names
/// (every output format names the volumes up front), a second writes request by request
/// (oracleGeneral through temporary files), so the trace is never held. A pipe, which cannot
/// be read twice, is read into memory.
pub fn convert(args: ConvertArgs) -> anyhow::Result<()> {
    let to = output_format(args.to, &args.output);
    if !to.is_writable() {
        anyhow::bail!(
            "ember cannot write {to} traces (writable: msr, spc, csv, oracle-general, ember)"
        );
    }
    let path = args.input.path();
    let (requests, volumes, stats) = if std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        let opts = args.input.read_options();
        let reading = || format!("reading trace {}", path.display());
        let mut first = ember_trace::open(path, &opts).with_context(reading)?;
        let mut count = 0u64;
        for r in first.by_ref() {
            r.with_context(reading)?;
            count += 1;
        }
        let volumes = first.volumes().clone();
        let mut second = ember_trace::open(path, &opts).with_context(reading)?;
        let mut failed = None;
        let stream = second.by_ref().map_while(|r| r.map_err(|e| failed = Some(e)).ok());
        let tally = crate::write_stream::write_stream(
            &args.output,
            to,
            args.input.block_size,
            &volumes,
            Some(count),
            stream,
            &indicatif::ProgressBar::hidden(),
        );
        // A failure leaves no half-written output behind.
        let tally = match (tally, failed) {
            (Ok(t), None) => t,
            (Err(e), _) => {
                let _ = std::fs::remove_file(&args.output);
                return Err(e).with_context(|| format!("writing {}", args.output.display()));
            }
            (Ok(_), Some(e)) => {
                let _ = std::fs::remove_file(&args.output);
                return Err(e).with_context(reading);
            }
        };
        (tally.requests, volumes.len(), second.stats())
    } else {
        let (trace, stats) = args.input.read()?;
        ember_trace::write_trace(&args.output, to, &trace, args.input.block_size)
            .with_context(|| format!("writing {}", args.output.display()))?;
        (trace.requests.len() as u64, trace.volumes.len(), stats)
    };
    eprintln!(
        "converted {requests} requests ({volumes} volumes) from {} to {} ({}); {} malformed skipped",
        stats.format,
        to,
        args.output.display(),
        stats.skipped
    );
    Ok(())
}
