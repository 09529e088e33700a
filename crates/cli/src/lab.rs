//! The laboratory's entry points for the Python package (`crates/py`): each takes the same
//! command-line arguments as its `ember` subcommand (without the program and subcommand
//! names), runs it without printing or writing files, and returns what `--csv` / `--json`
//! would write. The Python names and flags are the CLI's, by construction.

use crate::cmd_analyze::{self, AnalyzeArgs};
use crate::cmd_demote::{self, DemoteCmdArgs};
use crate::cmd_sievestore::{self, SieveStoreCmdArgs, SieveStoreResult};
use crate::cmd_sim::{self, SimArgs};
use crate::cmd_warmup::{self, RunArgs};
use crate::trace_args::TraceInput;
use anyhow::{anyhow, Context};
use clap::{Args, FromArgMatches};

/// Parse `argv` as the flags of `ember NAME`.
pub fn parse<T: Args + FromArgMatches>(name: &'static str, argv: &[String]) -> anyhow::Result<T> {
    let cmd = T::augment_args(clap::Command::new(name).no_binary_name(true));
    let m = cmd.try_get_matches_from(argv).map_err(|e| anyhow!("{}", e.render()))?;
    T::from_arg_matches(&m).map_err(|e| anyhow!("{}", e.render()))
}

/// `ember sim`: the CSV `--csv` writes, and the timeline CSV when `--interval` is given.
pub fn sim(argv: &[String]) -> anyhow::Result<(String, Option<String>)> {
    let a: SimArgs = parse("sim", argv)?;
    let report = cmd_sim::compute(&a)?;
    let timeline = match a.interval {
        Some(_) => Some(report.timeline_csv_text()?),
        None => None,
    };
    Ok((report.csv_text()?, timeline))
}

/// `ember analyze`: the JSON document `--json` writes.
pub fn analyze(argv: &[String]) -> anyhow::Result<String> {
    let a: AnalyzeArgs = parse("analyze", argv)?;
    let report = cmd_analyze::compute(&a)?;
    serde_json::to_string(&report).context("encoding the analysis as JSON")
}

/// `ember warmup run`: the JSON document `--json` writes.
pub fn warmup(argv: &[String]) -> anyhow::Result<String> {
    let a: RunArgs = parse("warmup run", argv)?;
    let (_, json) = cmd_warmup::compute_run(&a)?;
    serde_json::to_string(&json).context("encoding the warmup runs as JSON")
}

/// `ember demote`: the JSON document `--json` writes, plus the trace's figures under `trace`.
pub fn demote(argv: &[String]) -> anyhow::Result<String> {
    let a: DemoteCmdArgs = parse("demote", argv)?;
    let run = cmd_demote::compute(&a)?;
    /// The report's fields in their order, then what it ran on.
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        #[serde(flatten)]
        report: &'a ember_sim::demote::experiment::DemoteReport,
        trace: serde_json::Value,
    }
    let doc = Doc {
        report: &run.report,
        trace: serde_json::json!({
            "name": run.name, "requests": run.requests, "warmup_requests": run.warmup,
            "wss_blocks": run.wss,
        }),
    };
    serde_json::to_string(&doc).context("encoding the report as JSON")
}

/// `ember sievestore`: the experiment's `sievestore.json` (with `--experiment`), else the
/// runs' `sievestore_runs.json`, or the `--sensitivity` points; the first element says
/// which (`experiment`, `runs` or `sensitivity`).
pub fn sievestore(argv: &[String]) -> anyhow::Result<(&'static str, String)> {
    let a: SieveStoreCmdArgs = parse("sievestore", argv)?;
    Ok(match cmd_sievestore::compute(&a)? {
        SieveStoreResult::Experiment(r) => ("experiment", serde_json::to_string(&r)?),
        SieveStoreResult::Runs(rows) => ("runs", serde_json::to_string(&rows)?),
        SieveStoreResult::Sensitivity(_, points) => {
            ("sensitivity", serde_json::to_string(&points)?)
        }
    })
}

/// The trace path and reading options from the trace flags (`--format`, `--csv-*`, ...).
pub fn trace_input(argv: &[String]) -> anyhow::Result<TraceInput> {
    parse("trace", argv)
}
