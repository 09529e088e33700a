//! `ember replay`: replay a trace against an NBD server (see `ember_replay`), with every read
//! verified against the pattern the replay wrote, and print throughput, latency percentiles,
//! verification and the server's hit ratio.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, ValueEnum};
use ember_nbd::client::{Endpoint, NbdUri};
use ember_nbd::Client;
use ember_replay::{plan, replay, MetricsUrl, ReplayConfig, Session, Timing};
use ember_trace::Trace;
use ember_units::parse_duration;

use crate::trace_args::TraceInput;

/// `--timing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimingArg {
    /// As fast as the queue depth allows.
    Fast,
    /// At the trace's timestamps (divided by --speed).
    Trace,
}

/// Options of `ember replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub input: TraceInput,

    /// The NBD server: nbd://HOST[:PORT][/EXPORT] or nbd+unix:///[EXPORT]?socket=PATH. An
    /// export in the URI is used like --export.
    #[arg(long, default_value = "nbd://127.0.0.1:10809")]
    pub server: String,

    /// Replay every trace volume onto this export.
    #[arg(long, value_name = "NAME")]
    pub export: Option<String>,

    /// Replay trace volume VOLUME onto export EXPORT (repeatable). Volumes not mapped go to
    /// the export of the same name.
    #[arg(long = "map", value_name = "VOLUME=EXPORT")]
    pub map: Vec<String>,

    /// Requests in flight at most (1: synchronous).
    #[arg(long, default_value_t = 1)]
    pub queue_depth: usize,

    /// Connections per export (requests in flight are spread over them).
    #[arg(long, default_value_t = 1)]
    pub connections: usize,

    /// fast: as fast as possible; trace: at the trace's timestamps.
    #[arg(long, value_enum, default_value = "fast")]
    pub timing: TimingArg,

    /// With --timing trace, replay this many times faster than recorded.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,

    /// Before the replay, write the pattern over every sector the trace touches, so that
    /// every read can be verified.
    #[arg(long)]
    pub prefill: bool,

    /// Only prefill (write the pattern over the trace's footprint) and replay nothing, e.g.
    /// straight to a backing server before putting a cache in front of it.
    #[arg(long, conflicts_with = "assume_prefilled")]
    pub prefill_only: bool,

    /// Verify as if the footprint had been prefilled with this --seed by an earlier run (for
    /// a read-only trace replayed again, e.g. after a server restart).
    #[arg(long, conflicts_with = "prefill")]
    pub assume_prefilled: bool,

    /// Seed stamped into the pattern.
    #[arg(long, default_value_t = 0x656d_6265_72)]
    pub seed: u64,

    /// Replay only the first N requests.
    #[arg(long, value_name = "N")]
    pub max_requests: Option<usize>,

    /// The server's Prometheus metrics (HOST:PORT or http://HOST:PORT/metrics), scraped for
    /// its hit ratio over time.
    #[arg(long, value_name = "URL")]
    pub metrics_url: Option<String>,

    /// Time between metrics scrapes. Units ns, us, ms, s, m, h, d; a bare number is seconds.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub metrics_interval: Duration,

    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// For each trace volume, the export it goes to (and the list of exports used).
pub fn map_volumes(
    trace: &Trace,
    export: Option<&str>,
    map: &[String],
    server_exports: &[String],
) -> anyhow::Result<(Vec<Option<usize>>, Vec<String>)> {
    let mut explicit = Vec::new();
    for m in map {
        let (v, e) =
            m.split_once('=').ok_or_else(|| anyhow!("--map {m:?}: expected VOLUME=EXPORT"))?;
        if trace.volumes.id(v).is_none() {
            bail!(
                "--map {m:?}: the trace has no volume {v:?} (volumes: {})",
                trace.volumes.names().join(", ")
            );
        }
        explicit.push((v.to_string(), e.to_string()));
    }
    let mut exports: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for name in trace.volumes.names() {
        let target = if let Some((_, e)) = explicit.iter().find(|(v, _)| v == name) {
            e.clone()
        } else if let Some(e) = export {
            e.to_string()
        } else if server_exports.iter().any(|e| e == name) {
            name.clone()
        } else if server_exports.len() == 1 && trace.volumes.len() == 1 {
            server_exports[0].clone()
        } else {
            bail!(
                "trace volume {name:?} has no export of that name (the server has: {}); use --export or --map",
                server_exports.join(", ")
            );
        };
        if !server_exports.is_empty() && !server_exports.contains(&target) {
            bail!("export {target:?} is not on the server (it has: {})", server_exports.join(", "));
        }
        let index = match exports.iter().position(|e| *e == target) {
            Some(i) => i,
            None => {
                exports.push(target);
                exports.len() - 1
            }
        };
        out.push(Some(index));
    }
    Ok((out, exports))
}

/// Run `ember replay`.
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let uri = NbdUri::parse(&args.server).map_err(|e| anyhow!("--server: {e}"))?;
    let (mut trace, _) = args.input.read()?;
    if let Some(n) = args.max_requests {
        trace.requests.truncate(n);
    }
    let export =
        args.export.clone().or_else(|| (!uri.export.is_empty()).then(|| uri.export.clone()));
    let server_exports: Vec<String> = Client::list_exports(&uri.endpoint)
        .with_context(|| format!("listing the exports of {}", args.server))?
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let (volume_map, exports) = map_volumes(&trace, export.as_deref(), &args.map, &server_exports)?;
    let session = Session::connect(&uri.endpoint, &exports, args.connections)?;
    let mut p = plan(&trace, &volume_map, session.targets().to_vec()).map_err(|e| anyhow!(e))?;
    if args.prefill_only {
        p.ios.clear();
    }
    let timing = match args.timing {
        TimingArg::Fast => Timing::Fast,
        TimingArg::Trace => Timing::Trace { speed: args.speed },
    };
    if args.metrics_interval.is_zero() {
        bail!("--metrics-interval must be positive");
    }
    let config = ReplayConfig {
        queue_depth: args.queue_depth,
        timing,
        seed: args.seed,
        prefill: args.prefill || args.prefill_only,
        assume_prefilled: args.assume_prefilled,
        metrics: args.metrics_url.as_deref().map(MetricsUrl::parse).transpose()?,
        metrics_interval: args.metrics_interval,
    };
    let mut report = replay(&p, &session, &config)?;
    session.close()?;
    report.server = match &uri.endpoint {
        Endpoint::Tcp(a) => format!("nbd://{a}"),
        Endpoint::Unix(s) => format!("nbd+unix:///?socket={}", s.display()),
    };
    report.mapping = trace
        .volumes
        .names()
        .iter()
        .zip(&volume_map)
        .filter_map(|(v, e)| e.map(|e| (v.clone(), exports[e].clone())))
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{report}");
    }
    if report.failed() {
        let errors: u64 = report.ops.iter().map(|o| o.errors).sum();
        bail!(
            "{} reads failed verification, {} requests answered with an error",
            report.verification.reads_failed,
            errors
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::VolumeTable;

    fn trace(volumes: &[&str]) -> Trace {
        let mut t = VolumeTable::new();
        for v in volumes {
            t.intern(v);
        }
        Trace::new(Vec::new(), t)
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn volumes_map_by_name_flag_or_single_export() {
        let t = trace(&["web", "db"]);
        let m = map_volumes(&t, None, &[], &s(&["db", "web"])).map_err(|e| e.to_string());
        assert_eq!(m, Ok((vec![Some(0), Some(1)], s(&["web", "db"]))));
        let m = map_volumes(&t, Some("x"), &[], &s(&["x"])).map_err(|e| e.to_string());
        assert_eq!(m, Ok((vec![Some(0), Some(0)], s(&["x"]))));
        let m =
            map_volumes(&t, Some("x"), &s(&["db=y"]), &s(&["x", "y"])).map_err(|e| e.to_string());
        assert_eq!(m, Ok((vec![Some(0), Some(1)], s(&["x", "y"]))));
        let one = trace(&["0"]);
        let m = map_volumes(&one, None, &[], &s(&["disk"])).map_err(|e| e.to_string());
        assert_eq!(m, Ok((vec![Some(0)], s(&["disk"]))));
        assert!(map_volumes(&t, None, &[], &s(&["disk"])).is_err());
        assert!(map_volumes(&t, Some("nope"), &[], &s(&["disk"])).is_err());
        assert!(map_volumes(&t, None, &s(&["zz=disk"]), &s(&["disk"])).is_err());
    }
}
