//! `ember ctl`: talk to a running `ember serve` through its control socket
//! (docs/reference/control.md): `status`, `flush [VOLUME]`, `get KEY`, `set KEY VALUE [--save]`,
//! `reload`, `stop`, `clear-lost VOLUME`. Prints a table, or the server's JSON reply with `--json`; an error
//! reply is an error (exit status 1).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use ember_serve::control::{find_socket, request, Command, Progress, Status};
use serde_json::Value;

/// Options of `ember ctl`.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The server's control socket (default: /run/ember/NAME.sock or, under systemd,
    /// /run/ember/NAME/ember.sock; without --name, the only one there is).
    #[arg(long, value_name = "PATH", global = true)]
    pub control: Option<PathBuf>,
    /// The server's name (its config file's stem, or its --name).
    #[arg(long, value_name = "NAME", global = true)]
    pub name: Option<String>,
    /// Print the server's JSON reply instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to ask.
    #[command(subcommand)]
    pub command: CtlCommand,
}

/// The commands of `ember ctl`.
#[derive(Subcommand, Debug)]
pub enum CtlCommand {
    /// Every volume (backing, policies, occupancy, dirty blocks, hit ratio, warmup,
    /// errors) and the server's limits and connections.
    Status,
    /// Write back every dirty block now, with a progress line; returns when what was dirty
    /// at the call is durable on backing. Naming a VOLUME flushes every volume too.
    Flush {
        /// A volume that must exist; every volume is flushed (the volumes share the cache's
        /// epochs, which are written back oldest first across volumes).
        volume: Option<String>,
    },
    /// The value in force of a setting (named as its `ember serve` flag: write-policy,
    /// max-dirty, ...).
    Get {
        /// The setting.
        key: String,
    },
    /// Change a setting while serving, until the server stops (or for good with --save).
    Set {
        /// The setting (write-policy, policy, admission, sieve-*, epoch, max-dirty,
        /// min-dirty, max-epochs, flush-order, max-connections, buffer-budget).
        key: String,
        /// The new value, as the flag takes it.
        value: String,
        /// Also write it into the config file, atomically, keeping its comments.
        #[arg(long)]
        save: bool,
    },
    /// Read the config file again: apply what can change live, report what needs a
    /// restart and which earlier `set` values the file replaced (also on SIGHUP).
    Reload,
    /// Stop the server as SIGTERM does (drain the clients, clean shutdown).
    Stop,
    /// Accept backing's version of every block of VOLUME that was lost with a failed cache
    /// device (its only current copy was dirty there): backing's bytes, older than what
    /// clients last wrote, become current; reads of them succeed again, and a volume refused
    /// at start is served again (docs/reference/degraded.md).
    ClearLost {
        /// The volume.
        volume: String,
    },
}

impl CtlCommand {
    fn request(&self) -> Command {
        match self {
            CtlCommand::Status => Command::Status,
            CtlCommand::Flush { volume } => Command::Flush { volume: volume.clone() },
            CtlCommand::Get { key } => Command::Get { key: key.clone() },
            CtlCommand::Set { key, value, save } => {
                Command::Set { key: key.clone(), value: value.clone(), save: *save }
            }
            CtlCommand::Reload => Command::Reload,
            CtlCommand::Stop => Command::Stop,
            CtlCommand::ClearLost { volume } => Command::ClearLost { volume: volume.clone() },
        }
    }
}

/// Run `ember ctl`.
pub fn run(args: CtlArgs) -> anyhow::Result<()> {
    let socket = match &args.control {
        Some(p) => p.clone(),
        None => find_socket(args.name.as_deref())?,
    };
    // A flush, and a write-policy switch draining dirty blocks, report their progress.
    let what = match args.command {
        CtlCommand::Flush { .. } => "flush",
        _ => "drain",
    };
    let show_progress = !args.json;
    let mut shown = false;
    let mut on_progress = |p: Progress| {
        if show_progress {
            shown = true;
            let pct = if p.total == 0 { 100.0 } else { 100.0 * p.done as f64 / p.total as f64 };
            eprint!("\r{what}: {} of {} blocks ({pct:.0}%)", p.done, p.total);
            let _ = std::io::stderr().flush();
        }
    };
    let reply = request(&socket, args.command.request(), &mut on_progress)?;
    if shown {
        eprintln!();
    }
    if reply.ok != Some(true) {
        bail!("{}", reply.error.unwrap_or_else(|| "the server refused".into()));
    }
    let result = reply.result.unwrap_or(Value::Null);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    print!("{}", render(&args.command, &result)?);
    Ok(())
}

/// The table or lines `ember ctl` prints for `command`'s `result`.
pub fn render(command: &CtlCommand, result: &Value) -> anyhow::Result<String> {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        v => v.to_string(),
    };
    Ok(match command {
        CtlCommand::Status => {
            let st: Status = serde_json::from_value(result.clone())
                .map_err(|e| anyhow!("not a status reply: {e}"))?;
            status_table(&st)
        }
        CtlCommand::Flush { .. } => format!(
            "flushed {} blocks in {:.3} s\n",
            s(&result["blocks"]),
            result["seconds"].as_f64().unwrap_or(0.0)
        ),
        CtlCommand::Get { .. } => format!("{} = {}\n", s(&result["key"]), s(&result["value"])),
        CtlCommand::Set { .. } => {
            let mut out = if result["changed"] == Value::Bool(false) {
                format!("{} is already {}\n", s(&result["key"]), s(&result["value"]))
            } else {
                format!(
                    "{}: {} -> {}{}\n",
                    s(&result["key"]),
                    s(&result["old"]),
                    s(&result["value"]),
                    if result["saved"] == Value::Bool(true) { " (saved)" } else { "" }
                )
            };
            if let Some(note) = result["note"].as_str() {
                out.push_str(&format!("note: {note}\n"));
            }
            out
        }
        CtlCommand::Reload => reload_lines(result),
        CtlCommand::Stop => "stopping\n".into(),
        CtlCommand::ClearLost { .. } => format!(
            "volume {}: {} lost blocks cleared; backing's version of them is current{}\n",
            s(&result["volume"]),
            s(&result["cleared_blocks"]),
            if result["was_refused"] == Value::Bool(true) {
                ", and it is served again"
            } else {
                ""
            }
        ),
    })
}

fn list(v: &Value) -> String {
    match v.as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|x| x.as_str().map_or(x.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".into(),
    }
}

fn reload_lines(r: &Value) -> String {
    let mut out = format!("applied: {}\n", list(&r["applied"]));
    out.push_str(&format!("needs a restart: {}\n", list(&r["restart"])));
    for refused in r["refused"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "refused: {} ({})\n",
            list(&refused["keys"]),
            refused["reason"].as_str().unwrap_or("")
        ));
    }
    for set in r["replaced_sets"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "the file replaced `set {} {}` with {}\n",
            set["key"].as_str().unwrap_or(""),
            set["set"],
            set["file"]
        ));
    }
    out
}

fn status_table(st: &Status) -> String {
    let mut out = String::new();
    let c = &st.cache;
    out.push_str(&format!(
        "server {} (pid {}, up {:.0} s){}\n",
        st.name.as_deref().unwrap_or("ember"),
        st.pid,
        st.uptime_secs,
        st.config_file.as_ref().map(|f| format!(", config {}", f.display())).unwrap_or_default()
    ));
    out.push_str(&format!(
        "cache {}: {} of {} blocks of {} bytes, {} dirty; write policy {}, policy {}, admission {}\n",
        c.device.display(),
        c.resident_blocks,
        c.capacity_blocks,
        c.block_size,
        c.dirty_blocks,
        st.write_policy,
        st.policy,
        st.admission
    ));
    out.push_str(&format!(
        "warmup {}{}; read hit ratio {:.2}%\n",
        st.warmup.state,
        if st.warmup.planned_blocks > 0 {
            format!(
                " ({} of {} blocks preloaded)",
                st.warmup.preloaded_blocks, st.warmup.planned_blocks
            )
        } else {
            String::new()
        },
        100.0 * st.hit_ratio
    ));
    out.push_str(&st.health.line());
    out.push_str(&format!(
        "connections {} of {}; buffers {} of {} bytes\n\n",
        st.connections, st.max_connections, st.buffer_used, st.buffer_budget
    ));
    out.push_str(&format!(
        "{:<16} {:<32} {:>12} {:>12} {:>8} {:>12} {:>8}\n",
        "VOLUME", "BACKING", "READ HITS", "READ MISSES", "HIT %", "WRITES", "ERRORS"
    ));
    for v in &st.volumes {
        out.push_str(&format!(
            "{:<16} {:<32} {:>12} {:>12} {:>8.2} {:>12} {:>8}\n",
            v.name,
            v.backing,
            v.read_hits,
            v.read_misses,
            100.0 * v.hit_ratio,
            v.writes,
            v.io_errors + v.flush_errors + v.cache_read_errors
        ));
    }
    out
}
