//! `ember sim --config FILE TRACE`: one cache over the trace's volumes with the settings an
//! `ember serve` config file gives them, the cache-wide `[live]` ones and each `[[volume]]`
//! table's own (write policy, sieve, sequential cutoff, share;
//! docs/reference/config.md), simulated at each `--size` by `ember_sim::sievestore::volumes`,
//! which composes the policy code the server runs. A table; --json writes
//! `{"runs": [...]}`, one run per size.

use crate::output::write_text;
use anyhow::{anyhow, Context};
use ember_engine::WriteMode;
use ember_policy::seq_cutoff::SeqCutoffConfig;
use ember_serve::{parse_policy, parse_write_mode};
use ember_sim::sievestore::day_origin;
use ember_sim::sievestore::volumes::{run_volumes, CacheSetting, VolumeSetting};
use serde::Serialize;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

/// One size's counters.
#[derive(Serialize)]
struct Run {
    size: String,
    capacity_blocks: u64,
    reads: u64,
    read_hits: u64,
    writes: u64,
    write_hits: u64,
    allocation_writes: u64,
    seq_cutoff_bypasses: u64,
}

fn cutoff(s: ember_engine::SeqCutoffSettings, block_size: u64) -> SeqCutoffConfig {
    let mut c = SeqCutoffConfig::from_bytes(s.policy, s.read_bytes, s.write_bytes, block_size);
    c.streams = s.streams;
    c
}

/// Run `ember sim --config config` over the trace of `args`.
pub fn run(args: &crate::cmd_sim::SimArgs, config: &Path) -> anyhow::Result<()> {
    // The cache device does not matter to a simulation (nothing is opened): a placeholder
    // over the file's, so a file that names none is read too.
    let flags = ember_serve::ServeConfig::new("simulated", Vec::new());
    let source = ember_serve::ConfigSource::new(Some(config.to_path_buf()), flags, &["cache"])
        .map_err(|e| anyhow!("{e}"))?;
    let serve = source.load().map_err(|e| anyhow!("{e}"))?;
    let live = &serve.live;
    let bs = args.input.block_size;
    let mode = parse_write_mode(&live.write_policy)?;
    let setting = CacheSetting {
        policy: parse_policy(&live.policy)?,
        sieve: live.sieve.spec(&live.admission).map_err(|e| anyhow!("admission: {e}"))?,
        seq_cutoff: cutoff(live.seq_cutoff.settings()?, bs),
        write_around: mode == WriteMode::WriteAround,
    };
    let (trace, _) = args.input.read()?;
    let owns =
        serve.volumes.iter().map(|v| v.own(live, mode)).collect::<anyhow::Result<Vec<_>>>()?;
    let sizes = crate::grid_args::sizes(&args.size)?;
    let wss = if sizes.iter().any(|(_, c)| matches!(c, ember_sim::Capacity::Percent(_))) {
        let keys: HashSet<u64> = trace.requests.iter().flat_map(|r| r.block_keys(bs)).collect();
        keys.len() as u64
    } else {
        0
    };
    let origin = day_origin(&trace.requests);
    let mut runs = Vec::new();
    for (label, size) in &sizes {
        let capacity = size.blocks(bs, wss);
        let volumes: Vec<VolumeSetting> = owns
            .iter()
            .filter_map(|o| {
                let volume = trace.volumes.id(&o.name)?;
                Some(VolumeSetting {
                    volume,
                    write_around: o.write_mode.map(|m| m == WriteMode::WriteAround),
                    sieve: o.sieve.clone(),
                    seq_cutoff: o.seq_cutoff.map(|s| cutoff(s, bs)),
                    share: o.share_limits(capacity, bs),
                })
            })
            .collect();
        let r = run_volumes(&trace.requests, bs, origin, capacity as usize, &setting, &volumes)
            .with_context(|| format!("--size {label}"))?;
        let sum =
            |f: fn(&ember_sim::sievestore::DayStats) -> u64| r.run.days.iter().map(f).sum::<u64>();
        runs.push(Run {
            size: label.clone(),
            capacity_blocks: capacity,
            reads: sum(|d| d.reads),
            read_hits: sum(|d| d.read_hits),
            writes: sum(|d| d.writes),
            write_hits: sum(|d| d.write_hits),
            allocation_writes: sum(|d| d.allocation_writes),
            seq_cutoff_bypasses: r.seq_cutoff_bypasses,
        });
    }
    if !args.output.quiet {
        print!("{}", table(&runs));
    }
    args.output.dir()?;
    if let Some(p) = args.output.json_file("sim.json") {
        let json = serde_json::json!({
            "trace": args.input.path().display().to_string(),
            "config": config.display().to_string(),
            "block_size": bs,
            "runs": runs,
        });
        write_text(&p, &(serde_json::to_string_pretty(&json)? + "\n"))?;
    }
    Ok(())
}

fn table(runs: &[Run]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "size", "blocks", "reads", "r_hits", "writes", "w_hits", "alloc", "cut"
    );
    for r in runs {
        let _ = writeln!(
            s,
            "{:<10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            r.size,
            r.capacity_blocks,
            r.reads,
            r.read_hits,
            r.writes,
            r.write_hits,
            r.allocation_writes,
            r.seq_cutoff_bypasses
        );
    }
    s
}
