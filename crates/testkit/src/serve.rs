//! `ember serve` as a child process: started with arguments, ready once it printed `ready`,
//! its `export` and `metrics` lines read, stopped with SIGTERM (checked clean) or SIGKILL,
//! and everything it printed shown when a test fails.

use std::ffi::OsStr;
use std::fmt::Display;
use std::io::{BufRead, BufReader, Read};
use std::ops::Deref;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ember::ember;
use crate::process::{run_status, signal, wait_child};

/// The arguments of an `ember serve`, built a piece at a time.
#[derive(Clone, Debug, Default)]
pub struct ServeArgs(pub Vec<String>);

impl ServeArgs {
    /// `--cache CACHE --cache-size SIZE --format-if-needed`: a cache file, made if missing.
    pub fn file_cache(cache: impl AsRef<Path>, size: &str) -> ServeArgs {
        let cache = cache.as_ref().display().to_string();
        ServeArgs::default().args(["--cache", &cache, "--cache-size", size, "--format-if-needed"])
    }

    /// `--cache mem:SIZE`: a memory cache.
    pub fn mem_cache(size: &str) -> ServeArgs {
        ServeArgs::default().args(["--cache", &format!("mem:{size}")])
    }

    /// `--backing NAME=TARGET` (a path or a URI).
    pub fn backing(self, name: &str, target: impl Display) -> ServeArgs {
        self.args(["--backing", &format!("{name}={target}")])
    }

    /// One more argument.
    pub fn arg(mut self, a: impl Display) -> ServeArgs {
        self.0.push(a.to_string());
        self
    }

    /// More arguments.
    pub fn args<S: Display>(mut self, args: impl IntoIterator<Item = S>) -> ServeArgs {
        self.0.extend(args.into_iter().map(|a| a.to_string()));
        self
    }

    /// The arguments as string slices.
    pub fn strs(&self) -> Vec<&str> {
        self.0.iter().map(String::as_str).collect()
    }

    /// [`Serve::start`] with these arguments.
    pub fn start(&self) -> Serve {
        Serve::start(&self.0)
    }

    /// [`Serve::start_exact`] with these arguments.
    pub fn start_exact(&self) -> Serve {
        Serve::start_exact(&self.0)
    }
}

impl Deref for ServeArgs {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.0
    }
}

/// A running `ember serve`, killed on drop.
pub struct Serve {
    child: Option<Child>,
    /// host:port of the NBD listener.
    pub nbd: String,
    /// host:port of the metrics endpoint.
    pub metrics: String,
    /// Everything printed so far (stdout and stderr).
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    /// Start `ember serve` with `args` plus `--listen 127.0.0.1:0 --metrics 127.0.0.1:0`;
    /// returns once it printed `ready` (panics after 30 s).
    pub fn start<S: AsRef<OsStr>>(args: &[S]) -> Serve {
        let mut all: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
        all.extend(["--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"].map(OsStr::new));
        Serve::start_exact(&all)
    }

    /// Start `ember serve` with exactly `args` (e.g. `--unix PATH` alone, no TCP listener);
    /// returns once it printed `ready` (panics after 30 s).
    pub fn start_exact<S: AsRef<OsStr>>(args: &[S]) -> Serve {
        let mut child = Command::new(ember())
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn ember serve: {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        let streams = [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
        ];
        for stream in streams.into_iter().flatten() {
            let (lines, tx) = (lines.clone(), tx.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if let Ok(mut l) = lines.lock() {
                        l.push(line.clone());
                    }
                    let _ = tx.send(line);
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut nbd, mut metrics) = (String::new(), String::new());
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("ember serve: metrics http://") {
                        metrics = rest.trim_end_matches("/metrics").to_string();
                    }
                    if let Some(i) = line.find(" nbd://") {
                        let rest = &line[i + 7..];
                        nbd = rest.split('/').next().unwrap_or_default().to_string();
                    }
                    if line == "ember serve: ready" {
                        break;
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let printed = lines.lock().map(|l| l.join("\n")).unwrap_or_default();
                    panic!("ember serve did not become ready:\n{printed}");
                }
            }
        }
        Serve { child: Some(child), nbd, metrics, lines }
    }

    /// `nbd://HOST:PORT/EXPORT`.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd://{}/{}", self.nbd, export)
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Everything the server printed so far (stdout and stderr).
    pub fn output(&self) -> String {
        self.lines.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// SIGKILL (no drain, no clean shutdown) and reap. Returns `Err(status)` if the server
    /// had already exited by itself before the kill (a crash the caller must not mistake for
    /// the kill).
    pub fn kill(mut self) -> Result<(), ExitStatus> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        let early = child.try_wait().ok().flatten();
        let _ = child.kill();
        let _ = child.wait();
        match early {
            Some(status) => Err(status),
            None => Ok(()),
        }
    }

    /// SIGTERM, wait (at most 60 s), check the exit is clean; returns everything printed.
    pub fn stop(mut self) -> String {
        let Some(mut child) = self.child.take() else { return self.output() };
        signal(child.id(), libc::SIGTERM);
        let status = wait_child(&mut child, Duration::from_secs(60), "ember serve after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
        let text = self.output();
        assert!(status.success(), "ember serve exited with {status}:\n{text}");
        assert!(text.contains("clean shutdown"), "{text}");
        text
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Run `ember serve ARGS --listen 127.0.0.1:0`, which must fail (at start); returns its stderr.
pub fn serve_fails<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S]) -> String {
    let mut c = Command::new(ember());
    c.arg("serve").args(args).args(["--listen", "127.0.0.1:0"]);
    let out = run_status(&mut c, Duration::from_secs(60));
    assert!(!out.status.success(), "ember serve {args:?} should fail:\n{}", out.stdout);
    out.stderr
}
