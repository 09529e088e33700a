//! A deployment's servers on one machine (`ember deploy up|down|status`): each tier an
//! `ember serve --config FILE` process started in the topology file's directory, the array
//! first, each waited for until it says `READY=1` through systemd's notify protocol (a
//! datagram socket in the state directory as its `$NOTIFY_SOCKET`, `crate::notify`); its
//! output in `STATE/TIER.log`, its pid in `STATE/TIER.pid`, its control socket the config
//! file's `control` or `STATE/TIER.ctl`. `down` sends SIGTERM to the client tiers first
//! (each shuts down cleanly, writing its dirty blocks into the array), then to the array.
//! On real hosts each tier is a systemd unit started from the same file.

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::{Deployment, Role, Tier};
use crate::control::{request, Command as Ctl};

/// One tier as `ember deploy status` finds it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TierState {
    /// The tier.
    pub name: String,
    /// `array` or `client`.
    pub role: &'static str,
    /// Its pid, if its process runs.
    pub pid: Option<u32>,
    /// Its control socket.
    pub control: PathBuf,
    /// Its `ember ctl status` reply, if it answered.
    pub status: Option<serde_json::Value>,
    /// Why it did not, if it did not.
    pub error: Option<String>,
}

impl Deployment {
    /// `STATE/TIER.EXT`.
    fn state_file(&self, t: &Tier, ext: &str) -> PathBuf {
        self.state_dir.join(format!("{}.{ext}", t.name))
    }

    /// The tier's control socket: its config file's `control`, else `STATE/TIER.ctl`.
    pub fn control_socket(&self, t: &Tier) -> PathBuf {
        match &t.config.control {
            Some(c) => self.dir.join(c),
            None => self.state_file(t, "ctl"),
        }
    }

    /// The tier's log file.
    pub fn log_file(&self, t: &Tier) -> PathBuf {
        self.state_file(t, "log")
    }

    /// The pid of the tier's running server, from its pid file.
    pub fn running_pid(&self, t: &Tier) -> Option<u32> {
        let text = std::fs::read_to_string(self.state_file(t, "pid")).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        serves(pid).then_some(pid)
    }

    /// The tiers named in `only` (every tier if empty), in the topology's order; an unknown
    /// name is an error.
    pub fn select(&self, only: &[String]) -> anyhow::Result<Vec<&Tier>> {
        if let Some(n) = only.iter().find(|n| !self.tiers.iter().any(|t| &t.name == *n)) {
            bail!("no tier {n} in {}", self.path.display());
        }
        Ok(self.tiers.iter().filter(|t| only.is_empty() || only.contains(&t.name)).collect())
    }

    /// Start the tiers of `only` (every tier if empty), the array first, each waited for (at
    /// most `timeout`) until ready; `exe` is the `ember` binary. If one fails, those started
    /// are stopped again.
    pub fn up(
        &self,
        only: &[String],
        exe: &Path,
        timeout: Duration,
        say: &mut dyn FnMut(&str),
    ) -> anyhow::Result<()> {
        let tiers = self.select(only)?;
        std::fs::create_dir_all(&self.state_dir)
            .with_context(|| format!("creating {}", self.state_dir.display()))?;
        for t in &tiers {
            if let Some(pid) = self.running_pid(t) {
                bail!("tier {} runs already (pid {pid}): `ember deploy down` first", t.name);
            }
        }
        let mut started: Vec<&Tier> = Vec::new();
        for t in tiers {
            match self.start(t, exe, timeout) {
                Ok(pid) => {
                    say(&format!(
                        "{} {}: ready, pid {pid}, log {}",
                        role_name(t.role),
                        t.name,
                        self.log_file(t).display()
                    ));
                    started.push(t);
                }
                Err(e) => {
                    for s in started.iter().rev() {
                        let _ = self.stop(s, timeout);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Start tier `t` and wait until it says READY=1; returns its pid.
    fn start(&self, t: &Tier, exe: &Path, timeout: Duration) -> anyhow::Result<u32> {
        let notify_path = self.state_file(t, "notify");
        let _ = std::fs::remove_file(&notify_path);
        let notify = UnixDatagram::bind(&notify_path)
            .with_context(|| format!("binding {}", notify_path.display()))?;
        notify.set_read_timeout(Some(Duration::from_millis(100)))?;
        let log_path = self.log_file(t);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let mut cmd = Command::new(exe);
        cmd.arg("serve").arg("--config").arg(&t.config_file);
        if t.config.control.is_none() {
            cmd.arg("--control").arg(self.control_socket(t));
        }
        cmd.current_dir(&self.dir)
            .env("NOTIFY_SOCKET", &notify_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {} serve for tier {}", exe.display(), t.name))?;
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        loop {
            match notify.recv(&mut buf) {
                Ok(n) if String::from_utf8_lossy(&buf[..n]).lines().any(|l| l == "READY=1") => {
                    break
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(e).context("reading the notify socket"),
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "tier {} stopped ({status}) before it was ready; the end of {}:\n{}",
                    t.name,
                    log_path.display(),
                    tail(&log_path)
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "tier {} was not ready after {:.0} s; the end of {}:\n{}",
                    t.name,
                    timeout.as_secs_f64(),
                    log_path.display(),
                    tail(&log_path)
                );
            }
        }
        let _ = std::fs::remove_file(&notify_path);
        let pid = child.id();
        std::fs::write(self.state_file(t, "pid"), format!("{pid}\n"))?;
        Ok(pid)
    }

    /// Stop the tiers of `only` (every tier if empty), the clients first (each writes its
    /// dirty blocks into the array as it shuts down), then the array; each waited for at
    /// most `timeout`.
    pub fn down(
        &self,
        only: &[String],
        timeout: Duration,
        say: &mut dyn FnMut(&str),
    ) -> anyhow::Result<()> {
        let mut failed = Vec::new();
        for t in self.select(only)?.into_iter().rev() {
            match self.stop(t, timeout) {
                Ok(Some(pid)) => {
                    say(&format!("{} {}: stopped (pid {pid})", role_name(t.role), t.name))
                }
                Ok(None) => say(&format!("{} {}: not running", role_name(t.role), t.name)),
                Err(e) => failed.push(format!("{}: {e:#}", t.name)),
            }
        }
        if !failed.is_empty() {
            bail!("{}", failed.join("; "));
        }
        Ok(())
    }

    /// SIGTERM to tier `t`'s server and wait for it to end; its pid, or none if it did
    /// not run.
    fn stop(&self, t: &Tier, timeout: Duration) -> anyhow::Result<Option<u32>> {
        let pid_file = self.state_file(t, "pid");
        let Some(pid) = self.running_pid(t) else {
            let _ = std::fs::remove_file(&pid_file);
            return Ok(None);
        };
        let Ok(raw) = libc::pid_t::try_from(pid) else { bail!("pid {pid} out of range") };
        // SAFETY: kill(2) with a pid read from the tier's pid file, checked to be an
        // `ember serve` process (`serves`), and a valid signal number.
        if unsafe { libc::kill(raw, libc::SIGTERM) } != 0 {
            bail!("SIGTERM to pid {pid}: {}", std::io::Error::last_os_error());
        }
        let deadline = Instant::now() + timeout;
        while serves(pid) {
            if Instant::now() > deadline {
                bail!("pid {pid} still runs {:.0} s after SIGTERM", timeout.as_secs_f64());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(&pid_file);
        Ok(Some(pid))
    }

    /// Every tier: its pid and its control socket's status reply.
    pub fn status(&self) -> Vec<TierState> {
        self.tiers
            .iter()
            .map(|t| {
                let control = self.control_socket(t);
                let pid = self.running_pid(t);
                let (status, error) = match pid {
                    None => (None, Some("not running".to_string())),
                    Some(_) => match request(&control, Ctl::Status, &mut |_| {}) {
                        Ok(r) if r.ok == Some(true) => (r.result, None),
                        Ok(r) => (None, r.error.or(Some("no reply".into()))),
                        Err(e) => (None, Some(format!("{e:#}"))),
                    },
                };
                TierState {
                    name: t.name.clone(),
                    role: role_name(t.role),
                    pid,
                    control,
                    status,
                    error,
                }
            })
            .collect()
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Array => "array",
        Role::Client => "client",
    }
}

/// Whether `pid` is a live (not zombie) `ember serve` process.
fn serves(pid: u32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(true);
    !zombie && cmdline.split(|&b| b == 0).any(|a| a == b"serve")
}

/// The last lines of the file `path`.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
