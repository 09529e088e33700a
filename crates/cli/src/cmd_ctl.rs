//! `ember ctl`: talk to a running `ember serve` through its control socket
//! (docs/reference/control.md): `status`, `flush [VOLUME]`, `get KEY`, `set KEY VALUE [--save]`,
//! `reload`, `stop`, `clear-lost VOLUME`, and the volume commands `attach NAME=BACKING`,
//! `uncache VOLUME`, `recache VOLUME`, `remove VOLUME [--force]`. Prints a table, or the server's JSON reply with `--json`; an error
//! reply is an error (exit status 1).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use ember_engine::CleaningState;
use ember_serve::control::{find_socket, request, Command, Progress, Status};
use serde_json::Value;

/// What `ember ctl` does, in its help.
pub const ABOUT: &str =
    "Operate a running server through its control socket: status, flush, get, set, reload, stop.";

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
        /// One volume's own setting (write-policy, admission, sieve-*, seq-cutoff-policy,
        /// seq-cutoff-read, seq-cutoff-write), or the cache-wide value it falls back to.
        #[arg(long)]
        volume: Option<String>,
    },
    /// Change a setting while serving, until the server stops (or for good with --save).
    Set {
        /// The setting (write-policy, policy, admission, sieve-*, epoch, max-dirty,
        /// min-dirty, max-epochs, flush-order, flush-rate, flush-idle, dirty-target,
        /// flush-min-rate, seq-cutoff-*, max-connections, buffer-budget).
        key: String,
        /// The new value, as the flag takes it.
        value: String,
        /// Also write it into the config file, atomically, keeping its comments.
        #[arg(long)]
        save: bool,
        /// Set one volume's own setting (write-policy, admission, sieve-*,
        /// seq-cutoff-policy, seq-cutoff-read, seq-cutoff-write); the value `default` makes
        /// it take the cache-wide one again.
        #[arg(long)]
        volume: Option<String>,
    },
    /// Read the config file again: apply what can change live, report what needs a
    /// restart and which earlier `set` values the file replaced (also on SIGHUP).
    Reload,
    /// Stop the server as SIGTERM does (drain the clients, clean shutdown).
    Stop,
    /// Add an export while serving, with no reformat: the volume is recorded on the cache
    /// device with its backing and served at once, its blocks cold. A restart serves it from
    /// that record (the config file is changed only with --save).
    Attach {
        /// NAME=BACKING: the export name and its backing (a path or an NBD URI), as
        /// `ember serve --backing` takes them.
        #[arg(value_name = "NAME=BACKING")]
        volume: String,
        /// Also add its `[[volume]]` table to the config file, atomically, keeping its
        /// comments, so that the file names it too.
        #[arg(long)]
        save: bool,
        /// One of its own settings, as `set --volume` takes them (write-policy, admission,
        /// sieve.*, seq-cutoff.*, min-share, max-share); repeat for more.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        settings: Vec<String>,
    },
    /// Stop caching a volume while it stays exported: its dirty blocks are written back
    /// (every volume's, with a progress line), its blocks dropped, and its requests served
    /// from backing from then on. Recorded on the cache device: a restart keeps it so.
    Uncache {
        /// The volume.
        volume: String,
    },
    /// Cache an uncached volume again (cold).
    Recache {
        /// The volume.
        volume: String,
    },
    /// Stop a volume's export, write its dirty blocks back and give its room to the other
    /// volumes. Refused while clients are connected to it, unless --force. A failure leaves
    /// the volume exported as it was.
    Remove {
        /// The volume.
        volume: String,
        /// Remove it even with clients connected: their requests in flight finish, their
        /// new ones fail with ESHUTDOWN.
        #[arg(long)]
        force: bool,
    },
    /// Accept backing's version of every block of VOLUME that was lost with a failed cache
    /// device (its only current copy was dirty there): backing's bytes, older than what
    /// clients last wrote, become current; reads of them succeed again, and a volume refused
    /// at start is served again (docs/reference/degraded.md).
    ClearLost {
        /// The volume.
        volume: String,
    },
    /// Put a new cache device in place of the one given up (degraded mode), while serving:
    /// requests in flight against backing finish, then the cache caches again on PATH, cold
    /// (preloaded from Bonfire's warmup log when the log is its own file). PATH is laid out
    /// for the running volumes and block size: it must be at least the failed device's size
    /// (a larger one serves as many blocks until a restart reformats it). The lost list stays:
    /// its blocks read EIO until clear-lost. Refused while the cache is healthy. A restart
    /// configured with the failed device runs on PATH (docs/reference/degraded.md).
    ReplaceCache {
        /// The new cache device: a file or a block device.
        path: PathBuf,
        /// Reformat PATH even if it holds an ember cache (what it holds is forgotten).
        #[arg(long)]
        format: bool,
    },
}

impl CtlCommand {
    fn request(&self) -> anyhow::Result<Command> {
        Ok(match self {
            CtlCommand::Status => Command::Status,
            CtlCommand::Flush { volume } => Command::Flush { volume: volume.clone() },
            CtlCommand::Get { key, volume } => {
                Command::Get { key: key.clone(), volume: volume.clone() }
            }
            CtlCommand::Set { key, value, save, volume } => Command::Set {
                key: key.clone(),
                value: value.clone(),
                save: *save,
                volume: volume.clone(),
            },
            CtlCommand::Reload => Command::Reload,
            CtlCommand::Stop => Command::Stop,
            CtlCommand::Attach { volume, save, settings } => {
                let (name, backing) = volume.split_once('=').unwrap_or((volume.as_str(), ""));
                let mut own = std::collections::BTreeMap::new();
                for kv in settings {
                    let (k, v) = kv.split_once('=').ok_or_else(|| {
                        anyhow::anyhow!(
                            "--set {kv:?}: expected KEY=VALUE (--set write-policy=write-through)"
                        )
                    })?;
                    own.insert(k.to_string(), v.to_string());
                }
                Command::Attach {
                    volume: name.to_string(),
                    backing: backing.to_string(),
                    save: *save,
                    settings: own,
                }
            }
            CtlCommand::Uncache { volume } => Command::Uncache { volume: volume.clone() },
            CtlCommand::Recache { volume } => Command::Recache { volume: volume.clone() },
            CtlCommand::Remove { volume, force } => {
                Command::Remove { volume: volume.clone(), force: *force }
            }
            CtlCommand::ClearLost { volume } => Command::ClearLost { volume: volume.clone() },
            CtlCommand::ReplaceCache { path, format } => Command::ReplaceCache {
                // The server's working directory is not this one's.
                path: std::path::absolute(path)
                    .unwrap_or_else(|_| path.clone())
                    .to_string_lossy()
                    .into_owned(),
                format: *format,
            },
        })
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
        CtlCommand::Uncache { .. } => "uncache",
        CtlCommand::Remove { .. } => "remove",
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
    let reply = request(&socket, args.command.request()?, &mut on_progress)?;
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
        CtlCommand::Get { volume: Some(v), .. } => format!(
            "{v}: {} = {} ({})\n",
            s(&result["key"]),
            s(&result["value"]),
            s(&result["from"])
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
        CtlCommand::Attach { .. } => {
            let own: Vec<String> = result["settings"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| format!("{k} = {}", s(v))).collect())
                .unwrap_or_default();
            format!(
                "attached {} ({}) in slot {}, cold{}\n",
                s(&result["volume"]),
                s(&result["backing"]),
                s(&result["slot"]),
                if own.is_empty() { String::new() } else { format!("; {}", own.join(", ")) }
            )
        }
        CtlCommand::Uncache { .. } => format!(
            "uncached {}: {} dirty blocks written back, {} blocks dropped in {:.3} s\n",
            s(&result["volume"]),
            s(&result["written_back"]),
            s(&result["dropped"]),
            result["seconds"].as_f64().unwrap_or(0.0)
        ),
        CtlCommand::Recache { .. } => format!("caching {} again (cold)\n", s(&result["volume"])),
        CtlCommand::Remove { .. } => format!(
            "removed {}: {} dirty blocks written back, {} blocks dropped, slot {} free\n",
            s(&result["volume"]),
            s(&result["written_back"]),
            s(&result["dropped"]),
            s(&result["slot"])
        ),
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
        CtlCommand::ReplaceCache { .. } => replace_lines(result),
    })
}

/// The reply of `replace-cache`.
fn replace_lines(r: &Value) -> String {
    let n = |k: &str| r[k].as_u64().unwrap_or(0);
    let mut out = format!(
        "cache device {} replaced by {}{}: caching again, cold, {} blocks in {:.3} s\n",
        r["old"].as_str().unwrap_or("-"),
        r["new"].as_str().unwrap_or("-"),
        if r["reformatted"] == Value::Bool(true) { " (reformatted)" } else { "" },
        n("data_blocks"),
        r["seconds"].as_f64().unwrap_or(0.0)
    );
    if n("unused_bytes") > 0 {
        out.push_str(&format!(
            "{} bytes of it unused until a restart reformats it\n",
            n("unused_bytes")
        ));
    }
    if n("lost_blocks") > 0 {
        out.push_str(&format!(
            "{} blocks are still lost: they read EIO until `ember ctl clear-lost VOLUME`\n",
            n("lost_blocks")
        ));
    }
    if let Some(w) = r["warmup"].as_str() {
        out.push_str(&format!("warmup: {w}\n"));
    }
    out
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

/// Cleaning control: what background cleaning does now, at what rate, under which settings.
fn cleaning_line(c: &ember_engine::CleaningStatus) -> String {
    let state = match c.state {
        CleaningState::Resting => "resting",
        CleaningState::Full => "full speed",
        CleaningState::Steering => "steering",
    };
    let rate = |r: u64| if r == 0 { "no cap".to_string() } else { format!("{r} B/s") };
    let now = match (c.state, c.rate) {
        (CleaningState::Resting, _) => String::new(),
        (_, None) => " (unlimited)".into(),
        (_, Some(r)) => format!(" at {r} B/s"),
    };
    let idle = if c.flush_idle_ms == 0 {
        "idle policy off".to_string()
    } else {
        format!(
            "full speed after {} ms idle, else toward {} dirty blocks, at least {} B/s",
            c.flush_idle_ms, c.dirty_target_blocks, c.min_rate
        )
    };
    format!("cleaning {state}{now}; flush rate {}; {idle}\n", rate(c.flush_rate))
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
    if let Some(cl) = &st.cleaning {
        out.push_str(&cleaning_line(cl));
    }
    out.push_str(&st.health.line());
    out.push_str(&format!(
        "connections {} of {}; buffers {} of {} bytes\n\n",
        st.connections, st.max_connections, st.buffer_used, st.buffer_budget
    ));
    out.push_str(&format!(
        "{:<16} {:<32} {:>12} {:>12} {:>8} {:>12} {:>8}  {}\n",
        "VOLUME", "BACKING", "READ HITS", "READ MISSES", "HIT %", "WRITES", "ERRORS", "STATE"
    ));
    for v in &st.volumes {
        out.push_str(&format!(
            "{:<16} {:<32} {:>12} {:>12} {:>8.2} {:>12} {:>8}  {}\n",
            v.name,
            v.backing,
            v.read_hits,
            v.read_misses,
            100.0 * v.hit_ratio,
            v.writes,
            v.io_errors + v.flush_errors + v.cache_read_errors,
            v.state
        ));
    }
    for v in &st.volumes {
        let mut own = Vec::new();
        if let (Some(max), Some(held)) = (v.max_share_blocks, v.share_occupancy) {
            let min = v.min_share_blocks.unwrap_or(0);
            own.push(format!("{held} clean blocks against its share of {min} to {max}"));
        }
        if let Some(p) = &v.own_write_policy {
            own.push(format!("write policy {p}"));
        }
        if let Some(a) = &v.own_admission {
            own.push(format!("admission {a}"));
        }
        if let Some(c) = &v.own_seq_cutoff {
            own.push(format!("sequential cutoff {c}"));
        }
        if !own.is_empty() {
            out.push_str(&format!(
                "{}: {} resident blocks; {}\n",
                v.name,
                v.resident_blocks,
                own.join("; ")
            ));
        }
    }
    out
}
