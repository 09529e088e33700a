//! What the SIGKILL trials of control commands share (`ctl_kill.rs`, `ctl_volume_kill.rs`):
//! the six write policies and what each promises, the window in which a command ran, the
//! writer's log rewritten into the durable points the model checks, `ember ctl` started
//! against a trial's socket, and the volumes read back through a restarted server.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use crate::serve_support::{ember, Serve};
use ember_nbd::ClientBuilder;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The six write policies.
pub const POLICIES: [&str; 6] = [
    "write-through",
    "write-around",
    "write-back-flush",
    "write-back-persist",
    "ordered-write-back",
    "unsafe-write-back",
];

/// Does a FLUSH (or FUA write) acknowledged under `policy` promise every acknowledged write?
pub fn flush_durable(policy: &str) -> bool {
    !matches!(policy, "ordered-write-back" | "unsafe-write-back")
}

/// Does `policy` write backing before it acknowledges a write?
pub fn through(policy: &str) -> bool {
    matches!(policy, "write-through" | "write-around")
}

/// What a trial checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The durable points of the module comment.
    Contract,
    /// The negative control: every acknowledged write counts as required.
    Blind,
}

/// Where the SIGKILL landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landed {
    /// While `ember ctl` ran (sent, or on its way).
    During,
    /// After it returned.
    After,
    /// The writer had finished before the command was sent (no overlap with the writes).
    WriterDone,
}

/// When the command ran, in lines of the writer's log: `sent` lines were there when it was
/// sent, `returned` when its return was seen (`None`: the kill came first).
pub struct Window {
    /// The policy in force before the command.
    pub from: &'static str,
    /// The policy in force after it.
    pub to: &'static str,
    /// Log lines there when it was sent.
    pub sent: usize,
    /// Log lines there when its return was seen.
    pub returned: Option<usize>,
}

impl Window {
    /// The policies that may have been in force over the request logged at lines `a..=b`.
    pub fn policies(&self, a: usize, b: usize) -> Vec<&'static str> {
        let mut p = Vec::new();
        if self.returned.is_none_or(|r| a < r) {
            p.push(self.from);
        }
        if b >= self.sent {
            p.push(self.to);
        }
        p
    }

    /// Write-back persist may have been in force.
    pub fn persist(&self) -> bool {
        self.from == "write-back-persist" || self.to == "write-back-persist"
    }
}

/// The writer's log rewritten for the model: a FLUSH or FUA not durable under the policies
/// that may have been in force loses its mark, a write under write-through or write-around
/// alone is marked FUA (required once acknowledged), and a returned command that leaves
/// nothing dirty adds a durable point (`DP`) where it was sent (`flushes`: the command writes
/// back everything dirty at its call, as `flush` does; a switch into write-through or
/// write-around does too). `Check::Blind` marks every acknowledged write FUA.
pub fn rewrite(log: &str, w: &Window, flushes: bool, check: Check) -> String {
    let lines: Vec<&str> = log.lines().collect();
    // Each request's lines: the answer's line for the line, and back.
    let mut answer = vec![None; lines.len()];
    let mut open: Option<usize> = None;
    for (n, l) in lines.iter().enumerate() {
        if l.starts_with("WI ") || l.starts_with("FI ") {
            open = Some(n);
        } else if l.starts_with("WA ") || l.starts_with("FA ") {
            if let Some(a) = open.take() {
                answer[a] = Some(n);
            }
        }
    }
    let cleans = flushes || through(w.to);
    let mut out = String::new();
    let mut issued_flush: Option<usize> = None;
    for (n, l) in lines.iter().enumerate() {
        if cleans && w.returned.is_some() && n == w.sent {
            out.push_str("DP\n");
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            ["WI", i, off, len, fua] => {
                let b = answer[n].unwrap_or(usize::MAX);
                let ps = w.policies(n, b);
                let required = check == Check::Blind || ps.iter().all(|p| through(p));
                let fua_kept = *fua == "1" && ps.iter().all(|p| flush_durable(p));
                let mark = if required || fua_kept { 1 } else { 0 };
                out.push_str(&format!("WI {i} {off} {len} {mark}\n"));
            }
            ["FI", _] => {
                issued_flush = Some(n);
                out.push_str(l);
                out.push('\n');
            }
            ["FA", _] => {
                let a = issued_flush.take().unwrap_or(n);
                if w.policies(a, n).iter().all(|p| flush_durable(p)) {
                    out.push_str(l);
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    if cleans && w.returned.is_some() && w.sent >= lines.len() {
        out.push_str("DP\n");
    }
    out
}

pub fn log_lines(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("writer.log")).map_or(0, |s| s.lines().count())
}

/// Trials per operation: `EMBER_CTL_TRIALS` (200 in `make crash-long`), else 20.
pub fn trials() -> u64 {
    std::env::var("EMBER_CTL_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(20)
}

/// One trial's outcome.
pub struct Outcome {
    /// Where the kill landed.
    pub landed: Landed,
    /// The first wrong byte and the words wrong, if any.
    pub violations: Option<(u64, usize)>,
    /// Durable FLUSHes the model counted.
    pub flushes: u32,
    /// Durable points the model counted.
    pub durable_points: u32,
    /// Bytes the model required.
    pub bytes_checked: u64,
}

/// `ember ctl --control DIR/ctl.sock ARGS`, started.
pub fn spawn_ctl(dir: &Path, args: &[&str]) -> Child {
    Command::new(ember())
        .arg("ctl")
        .arg("--control")
        .arg(dir.join("ctl.sock"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("ctl.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("ctl.err")).unwrap())
        .spawn()
        .expect("spawn ember ctl")
}

/// The whole of each of `exports` (`size` bytes each) read through a restarted server (from
/// the same file, on the same cache file), stopped cleanly after.
pub fn read_after_restart(dir: &Path, trial: &str, exports: &[&str], size: u64) -> Vec<Vec<u8>> {
    let _ = std::fs::remove_file(dir.join("ember.sock"));
    let _ = std::fs::remove_file(dir.join("ctl.sock"));
    let cfg = dir.join("ember.toml");
    let ember = Serve::start_exact(&["--config", cfg.to_str().unwrap()]);
    let mut out = Vec::new();
    for export in exports {
        let c = ClientBuilder::new()
            .export(export)
            .connect_unix(dir.join("ember.sock"))
            .unwrap_or_else(|e| panic!("{trial}: connect to {export} after the restart: {e}"));
        let mut got = vec![0u8; size as usize];
        for (i, piece) in got.chunks_mut(1 << 20).enumerate() {
            c.read(i as u64 * (1 << 20), piece)
                .unwrap_or_else(|e| panic!("{trial}: read {export} after the restart: {e}"));
        }
        out.push(got);
    }
    ember.stop();
    out
}

/// Wait until the writer has logged `start_at` acknowledgements, ended, or 30 s passed;
/// returns its exit status if it ended.
pub fn wait_for_writer(dir: &Path, writer: &mut Child, start_at: usize) -> Option<ExitStatus> {
    let t0 = Instant::now();
    loop {
        let exited = writer.try_wait().ok().flatten();
        if log_lines(dir) >= start_at || exited.is_some() || t0.elapsed() > Duration::from_secs(30)
        {
            return exited;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// What a trial saw from its command to the SIGKILL and the reaping of its processes.
pub struct Killed {
    /// The writer's logged acknowledgements when the command returned, if it returned (with
    /// success: a failure panics) before the SIGKILL.
    pub returned: Option<usize>,
    /// The writer's log at the SIGKILL.
    pub before_kill: String,
    /// The writer's exit status, if it had ended by the SIGKILL.
    pub exited_early: Option<ExitStatus>,
    /// What the server printed.
    pub served: String,
    /// The writer's exit status once reaped.
    pub status: ExitStatus,
    /// The writer's whole log.
    pub log: String,
    /// The writer's stderr.
    pub stderr: String,
}

/// Send `ember ctl ARGS`, SIGKILL the server `delay` later and reap the command and the
/// writer. Panics (naming the trial `name`) if the command fails while the server runs or
/// if the server exited by itself.
pub fn command_then_kill(
    dir: &Path,
    ember: Serve,
    writer: &mut Child,
    writer_done: Option<ExitStatus>,
    args: &[&str],
    delay: Duration,
    name: &str,
) -> Killed {
    let mut ctl = spawn_ctl(dir, args);
    let sent_at = Instant::now();
    let mut returned = None;
    while sent_at.elapsed() < delay {
        if returned.is_none() {
            if let Ok(Some(st)) = ctl.try_wait() {
                let lines = log_lines(dir);
                let err = std::fs::read_to_string(dir.join("ctl.err")).unwrap_or_default();
                assert!(st.success(), "{name}: ember ctl failed ({st}) while serving:\n{err}");
                returned = Some(lines);
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let before_kill = std::fs::read_to_string(dir.join("writer.log")).unwrap_or_default();
    let exited_early = writer.try_wait().ok().flatten().or(writer_done);
    let served = ember.output();
    if let Err(st) = ember.kill() {
        panic!("{name}: ember serve exited by itself ({st}) before the SIGKILL:\n{served}");
    }
    let _ = crate::crash_model::reap(&mut ctl, Duration::from_secs(30));
    let status = crate::crash_model::reap(writer, Duration::from_secs(30));
    Killed {
        returned,
        before_kill,
        exited_early,
        served,
        status,
        log: std::fs::read_to_string(dir.join("writer.log")).unwrap_or_default(),
        stderr: std::fs::read_to_string(dir.join("writer.err")).unwrap_or_default(),
    }
}
