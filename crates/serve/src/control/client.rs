//! The client side of the control protocol, for `ember ctl` and tests: send one request,
//! read progress lines and the reply. And where a server's control socket is by default.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

use super::protocol::{Command, Progress, Reply, Request};

/// The directory of the default control sockets.
pub const RUN_DIR: &str = "/run/ember";

/// The control socket a server listens on when none is configured: under systemd
/// `$RUNTIME_DIRECTORY/ember.sock` (its first directory), else `/run/ember/NAME.sock`
/// (`ember` without a name).
pub fn default_socket(name: Option<&str>) -> PathBuf {
    if let Some(dirs) = std::env::var_os("RUNTIME_DIRECTORY") {
        let dirs = dirs.to_string_lossy().into_owned();
        if let Some(first) = dirs.split(':').find(|d| !d.is_empty()) {
            return Path::new(first).join("ember.sock");
        }
    }
    Path::new(RUN_DIR).join(format!("{}.sock", name.unwrap_or("ember")))
}

/// The socket `ember ctl` talks to without `--control`: with a name, `/run/ember/NAME.sock`
/// or (under systemd, `RuntimeDirectory=ember/NAME`) `/run/ember/NAME/ember.sock`; without
/// one, the only socket of either form in `/run/ember`.
pub fn find_socket(name: Option<&str>) -> anyhow::Result<PathBuf> {
    let run = Path::new(RUN_DIR);
    if let Some(n) = name {
        let candidates = [run.join(format!("{n}.sock")), run.join(n).join("ember.sock")];
        return candidates
            .iter()
            .find(|p| p.exists())
            .cloned()
            .ok_or_else(|| anyhow!("no control socket for {n:?}: neither {} nor {} exists (is the server running? --control PATH)", candidates[0].display(), candidates[1].display()));
    }
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(run) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "sock") {
                found.push(p);
            } else if p.join("ember.sock").exists() {
                found.push(p.join("ember.sock"));
            }
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!(
            "no control socket in {RUN_DIR} (is the server running? --control PATH or --name NAME)"
        ),
        _ => bail!(
            "several servers in {RUN_DIR} ({}): say which with --name NAME or --control PATH",
            found.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Send `command` to the server at `socket`; `on_progress` sees each progress line; the
/// final reply (which may be an error reply).
pub fn request(
    socket: &Path,
    command: Command,
    on_progress: &mut dyn FnMut(Progress),
) -> anyhow::Result<Reply> {
    let mut stream = UnixStream::connect(socket).with_context(|| {
        format!(
            "cannot connect to the control socket {} (is the server running?)",
            socket.display()
        )
    })?;
    let mut line = Request::new(command).to_line();
    line.push('\n');
    stream.write_all(line.as_bytes()).context("sending the request")?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut text = String::new();
        if reader.read_line(&mut text).context("reading the reply")? == 0 {
            bail!("the server closed the control connection without a reply");
        }
        let reply: Reply = serde_json::from_str(text.trim())
            .with_context(|| format!("not a reply: {}", text.trim()))?;
        if let Some(p) = reply.progress {
            on_progress(p);
        }
        if reply.is_final() {
            return Ok(reply);
        }
    }
}
