//! Child processes with a deadline: a hang fails the test instead of stalling the run, and a
//! failure shows what the process printed.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A minute: the deadline of most commands the tests run.
pub const MIN: Duration = Duration::from_secs(60);

/// What a command printed, and how it exited.
#[derive(Debug)]
pub struct Output {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Output {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Panic with everything it printed unless it succeeded (`what`: the command); returns
    /// itself.
    pub fn ok(self, what: &str) -> Output {
        assert!(
            self.status.success(),
            "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panic with what it printed if it succeeded (`what`: the command); returns its stderr.
    pub fn fails(self, what: &str) -> String {
        assert!(!self.status.success(), "{what} should fail:\n{}\n{}", self.stdout, self.stderr);
        self.stderr
    }
}

/// Send `signal` to `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// Whether a process `pid` exists (signal 0 reaches it).
pub fn alive(pid: u32) -> bool {
    // SAFETY: kill(pid, 0) only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// Wait for `child` at most `timeout`; kill it (and panic) past that.
pub fn wait_child(child: &mut Child, timeout: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} did not finish within {timeout:?}; killed");
            }
        }
    }
}

/// Read all of `r` on a thread of its own (so a full pipe never blocks the child).
pub fn collect(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = r.read_to_end(&mut s);
        s
    })
}

fn text(h: Option<JoinHandle<Vec<u8>>>) -> String {
    let bytes = h.and_then(|h| h.join().ok()).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Wait for a spawned `child` (its stdout piped) at most `timeout`, collecting its stdout;
/// kill it and panic past that.
pub fn wait_stdout(mut child: Child, timeout: Duration, what: &str) -> (ExitStatus, Vec<u8>) {
    let stdout = child.stdout.take().map(collect);
    let status = wait_child(&mut child, timeout, what);
    (status, stdout.and_then(|h| h.join().ok()).unwrap_or_default())
}

/// Run `command` (no stdin) with a timeout; returns what it printed, whatever its exit status.
pub fn run_status(command: &mut Command, timeout: Duration) -> Output {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let out = child.stdout.take().map(collect);
    let err = child.stderr.take().map(collect);
    let status = wait_child(&mut child, timeout, &program);
    Output { status, stdout: text(out), stderr: text(err) }
}

/// Run `command` with a timeout; panic with its output unless it succeeds. Returns stdout.
pub fn run(command: &mut Command, timeout: Duration) -> String {
    let what = format!("{command:?}");
    run_status(command, timeout).ok(&what).stdout
}

/// `program ARGS…` as a command.
pub fn command<S: AsRef<OsStr>>(program: impl AsRef<OsStr>, args: &[S]) -> Command {
    let mut c = Command::new(program);
    c.args(args);
    c
}

/// The words of `line`, split at white space: a command line written as one string.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The words of `line` (split at white space), each `{}` replaced by the next of `paths`: a
/// command line written as one string, its file names beside it.
pub fn cmdline(line: &str, paths: &[&Path]) -> Vec<OsString> {
    let mut paths = paths.iter();
    let args: Vec<OsString> = line
        .split_whitespace()
        .map(|w| match w {
            "{}" => paths.next().map(|p| p.as_os_str().to_owned()).unwrap_or_default(),
            w => OsString::from(w),
        })
        .collect();
    assert!(paths.next().is_none(), "more paths than {{}} in {line:?}");
    args
}
