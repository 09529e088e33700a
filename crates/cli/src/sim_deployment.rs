//! `ember sim --deployment TOPOLOGY TRACE`: the tiers a topology file names, each read from
//! the config file its server runs with (`ember_serve::deployment`), simulated together over
//! the trace (`ember_sim::demote::deployment`): a table per tier, JSON and CSV.

use crate::output::write_text;
use crate::sim_deployment_model::model;
use anyhow::Context;
use ember_serve::deployment::Deployment;
use ember_sim::demote::deployment::{simulate_deployment, DeploymentReport};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One tier's row of the table and the CSV.
#[derive(Serialize)]
struct Row {
    tier: String,
    role: &'static str,
    capacity_blocks: u64,
    reads: u64,
    read_hits: u64,
    hit_ratio: f64,
    writes: u64,
    write_hits: u64,
    allocation_writes: u64,
    allocations_refused: u64,
    demotes_sent: u64,
    demotes_stored: u64,
    demotes_aborted: u64,
    demotes_refused: u64,
    demotes_refused_stale: u64,
    dirty_writes: u64,
    backing_reads: u64,
    mean_latency_ms: Option<f64>,
}

/// Every tier's row, the clients first.
fn rows(d: &Deployment, r: &DeploymentReport) -> Vec<Row> {
    let mut out: Vec<Row> = r
        .clients
        .iter()
        .zip(d.clients())
        .map(|(c, t)| Row {
            tier: c.name.clone(),
            role: "client",
            capacity_blocks: t.capacity_blocks,
            reads: c.paths.reads,
            read_hits: c.read_hits,
            hit_ratio: c.hit_ratio,
            writes: c.writes,
            write_hits: c.write_hits,
            allocation_writes: c.allocation_writes,
            allocations_refused: c.allocations_refused,
            demotes_sent: c.demotes_sent,
            demotes_stored: 0,
            demotes_aborted: 0,
            demotes_refused: 0,
            demotes_refused_stale: 0,
            dirty_writes: c.dirty_writes,
            backing_reads: c.backing_reads,
            mean_latency_ms: Some(c.mean_latency_ms),
        })
        .collect();
    let a = &r.array;
    out.push(Row {
        tier: a.name.clone(),
        role: "array",
        capacity_blocks: d.array().capacity_blocks,
        reads: a.reads,
        read_hits: a.read_hits,
        hit_ratio: a.hit_ratio,
        writes: a.writes,
        write_hits: a.write_hits,
        allocation_writes: a.allocation_writes,
        allocations_refused: a.allocations_refused,
        demotes_sent: 0,
        demotes_stored: a.demotes_stored,
        demotes_aborted: a.demotes_aborted,
        demotes_refused: a.demotes_refused,
        demotes_refused_stale: a.demotes_refused_stale,
        dirty_writes: 0,
        backing_reads: a.backing_reads,
        mean_latency_ms: None,
    });
    out
}

/// The table `ember sim --deployment` prints.
fn table(d: &Deployment, r: &DeploymentReport, rows: &[Row]) -> String {
    let mut s = String::new();
    let a = d.array();
    let _ = writeln!(
        s,
        "deployment {}: {} client tier(s) over array {} ({}, admission {}, DEMOTEs {}), {} \
         requests",
        d.path.display(),
        d.clients().len(),
        a.name,
        r.scheme,
        a.config.live.admission,
        a.config.tiers.demote_admission,
        r.requests
    );
    let _ = writeln!(
        s,
        "{:<10} {:>6} {:>8} {:>9} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} \
         {:>8} {:>8} {:>8}",
        "tier",
        "role",
        "blocks",
        "reads",
        "hit%",
        "writes",
        "w_hits",
        "alloc",
        "refused",
        "dem_sent",
        "stored",
        "aborted",
        "dem_ref",
        "stale",
        "dirty",
        "back_rd",
        "lat_ms"
    );
    for x in rows {
        let _ = writeln!(
            s,
            "{:<10} {:>6} {:>8} {:>9} {:>7.2} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} \
             {:>8} {:>8} {:>8} {:>8}",
            x.tier,
            x.role,
            x.capacity_blocks,
            x.reads,
            100.0 * x.hit_ratio,
            x.writes,
            x.write_hits,
            x.allocation_writes,
            x.allocations_refused,
            x.demotes_sent,
            x.demotes_stored,
            x.demotes_aborted,
            x.demotes_refused,
            x.demotes_refused_stale,
            x.dirty_writes,
            x.backing_reads,
            x.mean_latency_ms.map_or("-".into(), |l| format!("{l:.3}"))
        );
    }
    let _ = writeln!(
        s,
        "mean READ latency {:.3} ms (Wong & Wilkes' model: T_c per client, T_a {} ms, T_d {} ms, \
         aborted DEMOTE {} ms)",
        r.mean_latency_ms, a.latency_ms, a.backing_latency_ms, a.aborted_demote_ms
    );
    if let Some(x) = &r.restart {
        let warm = match &x.crash.warmup {
            Some(w) => format!(
                "warm from its log by {} ({} of {} planned blocks preloaded)",
                w.selector.name(),
                x.preloaded_blocks,
                x.planned_blocks
            ),
            None => "cold (no warmup log)".into(),
        };
        let y = &x.array;
        let _ = writeln!(
            s,
            "array {} crashed after request {} and restarted {warm}; since then: {} READs, \
             hit% {:.2}, {} backing reads, DEMOTEs {} received, {} stored, {} refused as stale",
            a.name,
            x.crash.after_requests,
            y.reads,
            100.0 * y.hit_ratio,
            y.backing_reads,
            y.demotes_received,
            y.demotes_stored,
            y.demotes_refused_stale
        );
    }
    s
}

/// Run `ember sim --deployment topology` over the trace of `args`.
pub fn run(args: &crate::cmd_sim::SimArgs, topology: &Path) -> anyhow::Result<()> {
    let d = Deployment::load(topology)?;
    let (trace, _) = args.input.read()?;
    let m = model(&d, &trace.volumes, args.input.block_size)?;
    if args.uncounted.warmup_time.is_some() {
        anyhow::bail!("--deployment counts from --warmup-requests N; --warmup-time is not taken");
    }
    let warmup = args.uncounted.warmup_requests.unwrap_or(0);
    let report = simulate_deployment(trace.requests.iter().copied(), &m, warmup)?;
    let rows = rows(&d, &report);
    if !args.output.quiet {
        print!("{}", table(&d, &report, &rows));
    }
    args.output.dir()?;
    if let Some(p) = args.output.json_file("deployment.json") {
        let text = serde_json::to_string_pretty(&report)?;
        write_text(&p, &(text + "\n"))?;
    }
    if let Some(p) = args.output.file(args.csv.as_ref(), "deployment.csv") {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &rows {
            w.serialize(r).context("encoding CSV")?;
        }
        let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("encoding CSV: {e}"))?;
        write_text(&p, &String::from_utf8(bytes).context("encoding CSV")?)?;
    }
    Ok(())
}
