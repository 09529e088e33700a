//! `ember deploy up|down|status TOPOLOGY`: a deployment's `ember serve` tiers on one machine
//! (docs/guide/deployment.md), for tests, demos and a laptop: `up` starts the array tier,
//! then the client tiers, each from its config file and waited for through the notify
//! protocol; `down` stops the clients first (each flushing into the array), then the array;
//! `status` asks each tier's control socket. Logs, pids and sockets are kept in the
//! topology's state directory (`ember_serve::deployment::launch`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use ember_serve::deployment::Deployment;

/// Options of `ember deploy`.
#[derive(Args, Debug)]
pub struct DeployArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: DeployCommand,
}

/// The commands of `ember deploy`.
#[derive(Subcommand, Debug)]
pub enum DeployCommand {
    /// Start every tier, the array first, each waited for until it is ready.
    Up(TopologyArgs),
    /// Stop every tier, the client tiers first (each writes its dirty blocks into the
    /// array), then the array.
    Down(TopologyArgs),
    /// Each tier's pid and its control socket's status (hit ratio, occupancy, dirty blocks).
    Status(TopologyArgs),
}

/// The topology file and how long to wait.
#[derive(Args, Debug)]
pub struct TopologyArgs {
    /// The topology file (deployment.toml).
    pub topology: PathBuf,
    /// Seconds to wait for each tier to be ready (up) or to stop (down).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub timeout: f64,
    /// Status: print every tier's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Up and down: only this tier (repeatable), e.g. to start the array again after it
    /// crashed while its clients reconnect.
    #[arg(long, value_name = "NAME")]
    pub tier: Vec<String>,
}

/// Run `ember deploy`.
pub fn run(args: DeployArgs) -> anyhow::Result<()> {
    let say = &mut |line: &str| println!("{line}");
    match args.command {
        DeployCommand::Up(a) => {
            let d = Deployment::load(&a.topology)?;
            let exe = std::env::current_exe()?;
            d.up(&a.tier, &exe, timeout(a.timeout)?, say)
        }
        DeployCommand::Down(a) => {
            Deployment::load(&a.topology)?.down(&a.tier, timeout(a.timeout)?, say)
        }
        DeployCommand::Status(a) => {
            let states = Deployment::load(&a.topology)?.status();
            if a.json {
                println!("{}", serde_json::to_string_pretty(&states)?);
                return Ok(());
            }
            println!(
                "{:<10} {:>6} {:>8} {:>8} {:>10} {:>10} {:>8}  control",
                "tier", "role", "pid", "hit%", "resident", "capacity", "dirty"
            );
            for s in &states {
                let pid = s.pid.map_or("-".into(), |p| p.to_string());
                match &s.status {
                    Some(v) => {
                        let n = |k: &str| v["cache"][k].as_u64().unwrap_or(0);
                        println!(
                            "{:<10} {:>6} {:>8} {:>8.2} {:>10} {:>10} {:>8}  {}",
                            s.name,
                            s.role,
                            pid,
                            100.0 * v["hit_ratio"].as_f64().unwrap_or(0.0),
                            n("resident_blocks"),
                            n("capacity_blocks"),
                            n("dirty_blocks"),
                            s.control.display()
                        );
                    }
                    None => println!(
                        "{:<10} {:>6} {:>8}  {}",
                        s.name,
                        s.role,
                        pid,
                        s.error.as_deref().unwrap_or("")
                    ),
                }
            }
            Ok(())
        }
    }
}

/// `seconds` as a duration, refusing a negative or absurd one.
fn timeout(seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds > 0.0 && seconds < 1e6) {
        anyhow::bail!("--timeout {seconds}: a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(seconds))
}
