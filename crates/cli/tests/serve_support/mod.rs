//! Shared by the `serve_*` and `replay_*` end-to-end tests: the built `ember` binary run as
//! `ember serve` (stopped by pid with SIGTERM, killed on drop), nbdkit as a daemon (stopped
//! by the pid in its pidfile), commands run with a timeout, and generated traces whose
//! expected content can be written straight to a backing file.

#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ember_replay::pattern;

/// The `ember` binary under test.
pub fn ember() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ember"))
}

/// Send `signal` to `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
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

/// Wait for a spawned `child` (its stdout piped) at most `timeout`, collecting its stdout;
/// kill it and panic past that, so a hang fails the test instead of stalling the run.
pub fn wait_stdout(mut child: Child, timeout: Duration, what: &str) -> (ExitStatus, Vec<u8>) {
    let stdout = child.stdout.take().map(|mut r| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            s
        })
    });
    let status = wait_child(&mut child, timeout, what);
    (status, stdout.and_then(|h| h.join().ok()).unwrap_or_default())
}

/// What a command printed.
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

fn collect(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = r.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    })
}

/// Run `command` with a timeout; returns what it printed, whatever its exit status.
pub fn run_status(command: &mut Command, timeout: Duration) -> Output {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let out = collect(child.stdout.take().unwrap());
    let err = collect(child.stderr.take().unwrap());
    let status = wait_child(&mut child, timeout, &program);
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Run `command` with a timeout; panic with its output unless it succeeds. Returns stdout.
pub fn run(command: &mut Command, timeout: Duration) -> String {
    let program = format!("{:?}", command);
    let o = run_status(command, timeout);
    assert!(
        o.status.success(),
        "{program} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        o.status,
        o.stdout,
        o.stderr
    );
    o.stdout
}

/// A running `ember serve`.
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
    pub fn start(args: &[&str]) -> Serve {
        let mut all = args.to_vec();
        all.extend(["--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]);
        Serve::start_exact(&all)
    }

    /// Start `ember serve` with exactly `args` (e.g. `--unix PATH` alone, no TCP listener);
    /// returns once it printed `ready` (panics after 30 s).
    pub fn start_exact(args: &[&str]) -> Serve {
        let mut child = Command::new(ember())
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ember serve");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let (lines, tx) = (lines.clone(), tx.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line.clone());
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
                    panic!(
                        "ember serve did not become ready:\n{}",
                        lines.lock().unwrap().join("\n")
                    );
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
        let mut child = self.child.take().expect("running");
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
        let mut child = self.child.take().expect("running");
        signal(child.id(), libc::SIGTERM);
        let status = wait_child(&mut child, Duration::from_secs(60), "ember serve after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
        let text = self.lines.lock().unwrap().join("\n");
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

/// nbdkit run as a daemon on a Unix socket, stopped by the pid in its pidfile.
pub struct Nbdkit {
    pid: Option<u32>,
    /// The socket.
    pub socket: PathBuf,
}

impl Nbdkit {
    /// `nbdkit -P PIDFILE -U SOCKET ARGS…` in `dir`; returns when the pidfile holds a pid.
    pub fn start(dir: &Path, args: &[&str]) -> Nbdkit {
        let socket = dir.join("nbdkit.sock");
        let pidfile = dir.join("nbdkit.pid");
        let out = run_status(
            Command::new("nbdkit").arg("-P").arg(&pidfile).arg("-U").arg(&socket).args(args),
            Duration::from_secs(30),
        );
        assert!(out.status.success(), "nbdkit failed: {}\n{}", out.stdout, out.stderr);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pid = std::fs::read_to_string(&pidfile).ok().and_then(|s| s.trim().parse().ok());
            if let Some(pid) = pid {
                if socket.exists() {
                    return Nbdkit { pid: Some(pid), socket };
                }
            }
            assert!(Instant::now() < deadline, "nbdkit wrote no pidfile");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `nbd+unix:///?socket=…`.
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// SIGTERM, wait until the process is gone (SIGKILL after 10 s).
    pub fn stop(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        signal(pid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        // SAFETY: kill(pid, 0) only checks that the process exists.
        while unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 {
            if Instant::now() > deadline {
                signal(pid, libc::SIGKILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A small deterministic generator (xorshift64*), so traces need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// One trace request: (volume, is_write, offset, length).
pub type Req = (String, bool, u64, u32);

/// Write `reqs` as a CSV trace (`time_ns,volume,op,offset,size`, 1 ms apart) for
/// `ember replay --format csv`.
pub fn write_csv_trace(path: &Path, reqs: &[Req]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for (i, (v, w, off, len)) in reqs.iter().enumerate() {
        writeln!(f, "{},{v},{},{off},{len}", i as u64 * 1_000_000, if *w { "w" } else { "r" })
            .unwrap();
    }
    f.flush().unwrap();
}

/// Reads of `blocks` distinct 4 KiB blocks (of a volume of `volume_blocks`), in random order.
pub fn random_block_reads(volume: &str, blocks: u64, volume_blocks: u64, seed: u64) -> Vec<Req> {
    let mut rng = Rng::new(seed);
    let mut all: Vec<u64> = (0..volume_blocks).collect();
    rng.shuffle(&mut all);
    all.truncate(blocks as usize);
    all.into_iter().map(|b| (volume.to_string(), false, b * 4096, 4096)).collect()
}

/// Create a backing file of `size` bytes holding the replay pattern (generation 0, export 0,
/// `seed`) everywhere: what `ember replay --prefill` would have written, written beneath the
/// cache, so `--assume-prefilled --seed SEED` verifies every read from the first one.
pub fn patterned_backing(path: &Path, size: u64, seed: u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let chunk = 1u64 << 20;
    let mut buf = vec![0u8; chunk as usize];
    let mut at = 0;
    while at < size {
        let n = chunk.min(size - at) as usize;
        pattern::fill(&mut buf[..n], 0, at / 512, 0, seed);
        f.write_all(&buf[..n]).unwrap();
        at += n as u64;
    }
    f.flush().unwrap();
}

/// `ember replay … --json`; returns the parsed report (panics unless it succeeds).
pub fn replay_json(args: &[&str]) -> serde_json::Value {
    let out =
        run(Command::new(ember()).arg("replay").args(args).arg("--json"), Duration::from_secs(120));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("replay JSON: {e}\n{out}"))
}

/// `sha256sum` of a file.
pub fn sha256(path: &Path) -> String {
    let out = run(Command::new("sha256sum").arg(path), Duration::from_secs(60));
    out.split_whitespace().next().unwrap_or_default().to_string()
}

/// A sparse file of `size` bytes.
pub fn sparse_file(path: &Path, size: u64) {
    let f = std::fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
}

/// Metrics of a running server as parsed samples.
pub fn scrape(addr: &str) -> Vec<ember_replay::Sample> {
    ember_replay::MetricsUrl::parse(addr).unwrap().scrape().unwrap()
}

/// Sum of a metric over its label sets.
pub fn metric(samples: &[ember_replay::Sample], name: &str) -> f64 {
    ember_replay::scrape::sum(samples, name)
}

/// Whether this run must not skip anything: under `make test` (which sets
/// `EMBER_REQUIRE_TOOLS=1` after `scripts/setup.sh` installed every tool) and in CI (`CI` set
/// to anything but empty, `0` or `false`; `.ci/run` exports `CI=true`).
pub fn must_not_skip() -> bool {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"));
    set("CI") || set("EMBER_REQUIRE_TOOLS")
}

/// A test that cannot run here (`why`): fails under `make test` and in CI, where every tool
/// was installed; otherwise returns `true` (skip) after printing the skip on stderr directly,
/// past the test harness's output capture, so it shows in `cargo test` output as well.
pub fn skip_or_fail(why: &str) -> bool {
    assert!(
        !must_not_skip(),
        "{why}: this test must run under `make test` and in CI (scripts/setup.sh installs \
         what it needs)"
    );
    let test = std::thread::current().name().unwrap_or("test").to_string();
    // Not eprintln!: the harness captures it for passing tests; a direct write is shown.
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED {test}: {why}. Run `make setup`, or `make test` (which fails instead \
         of skipping). ***\n"
    );
    true
}

/// Replay `trace` (`format`: csv, msr) onto export `disk` of `serve` with `ember replay`
/// (backing prefilled by [`patterned_backing`] with `seed`), every read verified; returns
/// the server's (hits, misses) over the replay.
pub fn replay_verified(trace: &Path, format: &str, serve: &Serve, seed: &str) -> (u64, u64) {
    let r = replay_json(&[
        trace.to_str().unwrap(),
        "--format",
        format,
        "--server",
        &serve.uri("disk"),
        "--assume-prefilled",
        "--seed",
        seed,
        "--metrics-url",
        &serve.metrics,
    ]);
    assert_eq!(r["verification"]["reads_failed"], 0, "{r:#}");
    assert_eq!(r["verification"]["reads_unverifiable"], 0, "{r:#}");
    let s = &r["server_metrics"];
    (s["hits"].as_u64().unwrap(), s["misses"].as_u64().unwrap())
}

/// Wait until `serve`'s warmup state (`ember_warmup_state`) is `state` (3: preload done);
/// panics after a minute.
pub fn wait_warmup_state(serve: &Serve, state: f64) {
    let t = Instant::now();
    loop {
        let v = metric(&scrape(&serve.metrics), "ember_warmup_state");
        if v == state {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "warmup state {v}, waiting for {state}:\n{}",
            serve.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run `ember serve ARGS --listen 127.0.0.1:0`, which must fail (at start); returns its stderr.
pub fn serve_fails(args: &[&str]) -> String {
    let mut all = vec!["serve"];
    all.extend(args);
    all.extend(["--listen", "127.0.0.1:0"]);
    let out = run_status(Command::new(ember()).args(&all), Duration::from_secs(60));
    assert!(!out.status.success(), "ember serve {args:?} should fail:\n{}", out.stdout);
    out.stderr
}
