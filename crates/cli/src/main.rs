//! `ember`: a storage-level block cache and its laboratory.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ember_cli::{
    cmd_analyze, cmd_cache, cmd_ctl, cmd_demote, cmd_deploy, cmd_gen, cmd_generate, cmd_replay,
    cmd_serve, cmd_sievestore, cmd_sim, cmd_stats, cmd_sweep, cmd_trace, cmd_warmup, grid_args,
    legacy, report,
};

/// ember: a storage-level block cache (serve) and its laboratory (sim, trace).
#[derive(Parser)]
#[command(name = "ember", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read, convert, describe and generate block traces.
    #[command(subcommand)]
    Trace(TraceCommand),
    /// Serve a cache device in front of backing volumes over NBD.
    Serve(Box<cmd_serve::ServeArgs>),
    #[command(about = cmd_ctl::ABOUT)]
    Ctl(cmd_ctl::CtlArgs),
    /// Start, stop and ask a deployment of `ember serve` tiers (client tiers over an array
    /// tier) named in a topology file, on this machine.
    Deploy(cmd_deploy::DeployArgs),
    /// Replay a trace against an NBD server, verifying every read.
    Replay(cmd_replay::ReplayArgs),
    /// Print a running server's statistics (from its --metrics address).
    Stats(cmd_stats::StatsArgs),
    /// Simulate replacement policies over a trace at several cache sizes.
    Sim(Box<cmd_sim::SimArgs>),
    /// SieveStore (ISCA 2010): admission sieves in an ensemble or partitioned cache, and the
    /// paper's comparison (--experiment).
    Sievestore(Box<cmd_sievestore::SieveStoreCmdArgs>),
    /// Wong & Wilkes (USENIX ATC 2002): client caches over an array cache with DEMOTE, and
    /// the paper's comparison (--experiment).
    Demote(Box<cmd_demote::DemoteCmdArgs>),
    /// Characterize a trace for cache warmup: WSS, reaccess classes, reuse distance, spatial
    /// clustering, popularity skew, miss-ratio curves (Bonfire section 3).
    Analyze(Box<cmd_analyze::AnalyzeArgs>),
    /// Bonfire's cache warmup study: run, sweep, advise (Bonfire section 4).
    #[command(subcommand)]
    Warmup(cmd_warmup::WarmupCommand),
    /// Run a grid of traces x policies x sizes x sieves on Ray (local, or --ray-address), into
    /// Parquet, CSV and plots; resumable (needs the emberlab Python package).
    Sweep(cmd_sweep::SweepArgs),
    /// Format and inspect cache devices.
    #[command(subcommand)]
    Cache(cmd_cache::CacheCommand),
    /// Turn an experiment's output directory (sim, sievestore, demote, analyze, warmup run,
    /// sweep) into one self-contained HTML page: configuration, tables, figures, and the
    /// paper's published numbers beside ember's.
    Report(report::ReportArgs),
    /// Write man pages, shell completions or the Markdown command-line reference, all from
    /// this command's own definition (used by `make install`).
    #[command(subcommand, hide = true)]
    Generate(cmd_generate::GenerateCommand),
}

// `ember ctl` alone. A status poller starts `ember ctl` again and again, and building the
// whole command line's definition (every subcommand's arguments, a few hundred KiB of heap)
// was most of what such a start cost; `ember ctl ...` is parsed with this definition only,
// the same arguments as `Cli`'s `ctl` (a test holds the two help texts equal).
#[derive(Parser)]
#[command(
    name = "ember-ctl",
    bin_name = "ember ctl",
    version,
    propagate_version = true,
    about = cmd_ctl::ABOUT
)]
struct CtlCli {
    #[command(flatten)]
    args: cmd_ctl::CtlArgs,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Print requests, reads, writes, volumes, time span and working-set size.
    Info(cmd_trace::InfoArgs),
    /// Convert a trace from any readable format into another (default: ember's binary).
    Convert(cmd_trace::ConvertArgs),
    /// Write a synthetic trace.
    #[command(subcommand)]
    Gen(cmd_gen::GenCommand),
}

fn main() {
    let mut argv: Vec<String> = std::env::args().collect();
    if let Some((new, note)) = legacy::rewrite(&argv[1..]) {
        eprintln!("{note}");
        argv.truncate(1);
        argv.extend(new);
    }
    if grid_args::asks_policy_help(&argv[1..]) {
        print!("{}", ember_policy::replacement::catalog::help());
        return;
    }
    if argv.get(1).map(String::as_str) == Some("ctl") {
        let ctl = CtlCli::parse_from(&argv[1..]);
        if let Err(e) = cmd_ctl::run(ctl.args) {
            eprintln!("ember: error: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    let matches = Cli::command().get_matches_from(argv);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let given = matches.subcommand_matches("serve").map(cmd_serve::given_flags).unwrap_or_default();
    let result = match cli.command {
        Command::Trace(TraceCommand::Info(a)) => cmd_trace::info(a),
        Command::Trace(TraceCommand::Convert(a)) => cmd_trace::convert(a),
        Command::Trace(TraceCommand::Gen(c)) => cmd_gen::run(c),
        Command::Serve(a) => cmd_serve::run(*a, &given),
        Command::Ctl(a) => cmd_ctl::run(a),
        Command::Deploy(a) => cmd_deploy::run(a),
        Command::Replay(a) => cmd_replay::run(a),
        Command::Stats(a) => cmd_stats::run(a),
        Command::Sim(a) => cmd_sim::run(*a),
        Command::Sievestore(a) => cmd_sievestore::run(*a),
        Command::Demote(a) => cmd_demote::run(*a),
        Command::Cache(c) => cmd_cache::run(c),
        Command::Analyze(a) => cmd_analyze::run(*a),
        Command::Warmup(c) => cmd_warmup::run(c),
        Command::Sweep(a) => cmd_sweep::run(a),
        Command::Report(a) => report::run(a),
        Command::Generate(c) => cmd_generate::run(c, Cli::command()),
    };
    if let Err(e) = result {
        eprintln!("ember: error: {e:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ember ctl`'s own parser offers what `ember`'s `ctl` subcommand does, word for word.
    #[test]
    fn ctl_alone_has_the_same_help_as_embers_ctl() {
        let mut whole = Cli::command();
        whole.build();
        let mut from_whole = whole.find_subcommand_mut("ctl").expect("ctl").clone();
        let mut alone = CtlCli::command();
        alone.build();
        assert_eq!(alone.render_long_help().to_string(), from_whole.render_long_help().to_string());
        for sub in ["status", "flush", "set", "attach"] {
            let a = alone.find_subcommand_mut(sub).expect(sub).render_long_help().to_string();
            let w = from_whole.find_subcommand_mut(sub).expect(sub).render_long_help().to_string();
            assert_eq!(a, w, "ember ctl {sub} --help");
        }
    }
}
