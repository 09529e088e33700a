//! Crash trials with a real process: the real `ember serve` binary serves a backing file
//! through a cache file (formatted once, at the first start, with `--format-if-needed`);
//! `nbdsh` issues random writes with unique content (every 8-byte word holds the write's
//! number and its position), some FUA, and FLUSHes, logging each request before it is sent
//! and each reply; ember is killed with SIGKILL at a random moment. Then:
//!
//! - write-back persist restarts on the same cache file and recovers (checkpoint + journal);
//! - write-back flush and write-through are checked on the backing file alone, the cache
//!   file thrown away;
//!
//! and every byte must hold its value at the last acknowledged FLUSH (or at a later
//! acknowledged FUA write of it), or the value of a write issued after that. Zero violations.
//! Unsafe write-back, checked the same way, must be caught losing acknowledged writes.
//!
//! The writer itself is checked too: an error it sees while the server still runs (an error
//! reply, or a connection the server dropped) fails the trial, as does a writer that exits
//! before the kill without finishing or whose exit the log does not explain. Only the loss
//! of the connection after the SIGKILL is expected.
//!
//! `EMBER_CRASH_TRIALS=N` sets the trials per safe policy (CI default 5); the long run is
//! `EMBER_CRASH_TRIALS=1000 cargo test --release -p ember-cli --test writeback_kill -- --nocapture`.
//! Needs nbdsh (libnbd-bin, installed by `make setup`); run through Debian's python
//! (`/usr/bin` first in PATH).

mod serve_support;

use ember_nbd::ClientBuilder;
use serve_support::{Rng, Serve};
use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const BS: u64 = 4096;
const BLOCKS: u64 = 2048;
const VOL: u64 = BLOCKS * BS;
/// 6 MiB of cache with the default 4 MiB journal: about 480 data blocks for 2048 volume
/// blocks, so eviction, max_dirty fallbacks and the flusher all run.
const CACHE: &str = "6M";
const OPS: u32 = 600;

const WRITER: &str = r#"
import random, struct
rnd = random.Random(SEED)
log = open(LOG, "w", buffering=1)
def content(i, off, length):
    n = length // 8
    w0 = off // 8
    vals = []
    for w in range(w0, w0 + n):
        vals.append(i)
        vals.append(w)
    return struct.pack("<%dI" % (2 * n), *vals)
def failed(i, e):
    # dead: the connection is gone (the server was killed); alive: the server answered
    # with an error.
    lost = h.aio_is_dead() or h.aio_is_closed()
    msg = str(e).replace("\n", " ")
    log.write("ERR %d %s errno=%s %s\n" % (i, "lost" if lost else "reply", e.errno, msg))
    raise e
for i in range(1, OPS + 1):
    if rnd.random() < 0.12:
        log.write("FI %d\n" % i)
        try:
            h.flush()
        except nbd.Error as e:
            failed(i, e)
        log.write("FA %d\n" % i)
        continue
    blk = rnd.randrange(BLOCKS)
    nb = min(rnd.randint(1, 4), BLOCKS - blk)
    off = blk * 4096
    length = nb * 4096
    if rnd.random() < 0.2:
        off += 8 * rnd.randrange(512)
        length = min(length, BLOCKS * 4096 - off)
    fua = rnd.random() < 0.05
    log.write("WI %d %d %d %d\n" % (i, off, length, int(fua)))
    try:
        h.pwrite(content(i, off, length), off, nbd.CMD_FLAG_FUA if fua else 0)
    except nbd.Error as e:
        failed(i, e)
    log.write("WA %d\n" % i)
log.write("DONE\n")
"#;

/// Byte `p` of the volume as written by write number `i` (0: the initial content).
fn content_byte(i: u32, p: u64) -> u8 {
    let w = ((p / 8) as u32).to_le_bytes();
    let i = i.to_le_bytes();
    let k = (p % 8) as usize;
    if k < 4 {
        i[k]
    } else {
        w[k - 4]
    }
}

fn debian_path() -> String {
    format!("/usr/bin:{}", std::env::var("PATH").unwrap_or_default())
}

fn have_nbdsh() -> bool {
    Command::new("/usr/bin/nbdsh")
        .env("PATH", debian_path())
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `ember serve` on the trial's cache file and backing, listening on a Unix socket only.
fn start(dir: &Path, policy: &str) -> Serve {
    let sock = dir.join("ember.sock");
    let _ = std::fs::remove_file(&sock);
    let cache = dir.join("cache.img").display().to_string();
    let backing = format!("disk={}", dir.join("backing.img").display());
    let sock = sock.display().to_string();
    Serve::start_exact(&[
        "--cache",
        &cache,
        "--cache-size",
        CACHE,
        "--format-if-needed",
        "--backing",
        &backing,
        "--unix",
        &sock,
        "--write-policy",
        policy,
    ])
}

/// Wait for `child` at most `timeout`, then SIGKILL it; returns its status.
fn reap(child: &mut std::process::Child, timeout: Duration) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return st;
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            return child.wait().expect("wait nbdsh");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What the writer reported, checked against the one failure it may see: the connection
/// lost after the SIGKILL. `exited_early` is the writer's status if it exited before the
/// kill. Returns a description of what went wrong, if anything did.
fn writer_fault(
    log: &str,
    before_kill: &str,
    exited_early: Option<ExitStatus>,
    status: ExitStatus,
    stderr: &str,
) -> Option<String> {
    if let Some(line) = before_kill.lines().find(|l| l.starts_with("ERR ")) {
        return Some(format!("the writer saw an error before the SIGKILL: {line}\n{stderr}"));
    }
    if let Some(line) = log.lines().find(|l| l.starts_with("ERR ") && !l.contains(" lost ")) {
        return Some(format!("an error reply from the server: {line}\n{stderr}"));
    }
    let done = log.lines().any(|l| l == "DONE");
    if let Some(st) = exited_early {
        if !(st.success() && done) {
            return Some(format!("the writer exited before the SIGKILL ({st}):\n{stderr}"));
        }
    }
    if status.success() != done {
        return Some(format!("writer exit {status} does not match its log:\n{stderr}"));
    }
    if !status.success() && !log.lines().any(|l| l.starts_with("ERR ")) {
        return Some(format!("the writer failed ({status}) without a logged error:\n{stderr}"));
    }
    None
}

/// What each byte may hold (see the module doc).
struct Model {
    latest: Vec<u32>,
    base: Vec<u32>,
    pending: Vec<(u32, u64, u64)>,
    floor: Vec<u32>,
    acked_flushes: u32,
}

impl Model {
    /// Replay the writer's log. Granularity: 8-byte words (writes are word-aligned).
    fn from_log(text: &str) -> Self {
        let words = (VOL / 8) as usize;
        let mut m = Model {
            latest: vec![0; words],
            base: vec![0; words],
            pending: Vec::new(),
            floor: vec![0; words],
            acked_flushes: 0,
        };
        let mut issued: Option<(u32, u64, u64, bool)> = None;
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                ["WI", i, off, len, fua] => {
                    let w = (i.parse().unwrap(), off.parse().unwrap(), len.parse().unwrap());
                    m.pending.push(w);
                    issued = Some((w.0, w.1, w.2, *fua == "1"));
                }
                ["WA", _] => {
                    if let Some((i, off, len, fua)) = issued.take() {
                        let r = (off / 8) as usize..((off + len) / 8) as usize;
                        m.latest[r.clone()].iter_mut().for_each(|x| *x = i);
                        if fua {
                            m.base[r.clone()].iter_mut().for_each(|x| *x = i);
                            let idx = m.pending.len() as u32;
                            m.floor[r].iter_mut().for_each(|x| *x = idx);
                        }
                    }
                }
                ["FA", _] => {
                    m.base.copy_from_slice(&m.latest);
                    m.pending.clear();
                    m.floor.iter_mut().for_each(|x| *x = 0);
                    m.acked_flushes += 1;
                }
                _ => {}
            }
        }
        m
    }

    /// Words holding none of their allowed values: (first byte offset, count).
    fn violations(&self, got: &[u8]) -> Option<(u64, usize)> {
        let mut first = None;
        let mut n = 0;
        for (w, chunk) in got.chunks(8).enumerate() {
            let p = w as u64 * 8;
            let holds = |i: u32| (0..8).all(|k| chunk[k] == content_byte(i, p + k as u64));
            if holds(self.base[w]) {
                continue;
            }
            let from = (self.floor[w] as usize).min(self.pending.len());
            let ok = self.pending[from..]
                .iter()
                .any(|&(i, off, len)| p >= off && p < off + len && holds(i));
            if !ok {
                first.get_or_insert(p);
                n += 1;
            }
        }
        first.map(|f| (f, n))
    }
}

struct Outcome {
    violations: Option<(u64, usize)>,
    acked_flushes: u32,
    recovered_dirty: u64,
}

fn trial(policy: &str, seed: u64) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let init: Vec<u8> = (0..VOL).map(|p| content_byte(0, p)).collect();
    std::fs::write(d.join("backing.img"), &init).unwrap();
    let ember = start(d, policy);
    let script = WRITER
        .replace("SEED", &seed.to_string())
        .replace("BLOCKS", &BLOCKS.to_string())
        .replace("OPS", &OPS.to_string())
        .replace("LOG", &format!("{:?}", d.join("writer.log").display().to_string()));
    std::fs::write(d.join("writer.py"), script).unwrap();
    let uri = format!("nbd+unix:///disk?socket={}", d.join("ember.sock").display());
    let mut writer = Command::new("/usr/bin/nbdsh")
        .env("PATH", debian_path())
        .arg("-u")
        .arg(&uri)
        .arg("-c")
        .arg(format!("exec(open({:?}).read())", d.join("writer.py").display().to_string()))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("writer.err")).unwrap())
        .spawn()
        .expect("spawn nbdsh");
    // Kill after a random number of the writer's log lines (requests sent or answered),
    // plus up to 3 ms, so kills land anywhere in the run, also inside a FLUSH.
    let mut r = Rng::new(seed);
    let target = 4 + r.below(2 * OPS as u64 - 4) as usize;
    let t0 = Instant::now();
    let exited_early = loop {
        let lines = std::fs::read_to_string(d.join("writer.log")).map_or(0, |s| s.lines().count());
        let exited = writer.try_wait().ok().flatten();
        if lines >= target || t0.elapsed() > Duration::from_secs(30) || exited.is_some() {
            break exited;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    std::thread::sleep(Duration::from_micros(r.below(3000)));
    let before_kill = std::fs::read_to_string(d.join("writer.log")).unwrap_or_default();
    let served = ember.output();
    if let Err(st) = ember.kill() {
        panic!("seed {seed}: ember serve exited by itself ({st}) before the SIGKILL:\n{served}");
    }
    let status = reap(&mut writer, Duration::from_secs(30));
    let log = std::fs::read_to_string(d.join("writer.log")).unwrap_or_default();
    let stderr = std::fs::read_to_string(d.join("writer.err")).unwrap_or_default();
    if let Some(fault) = writer_fault(&log, &before_kill, exited_early, status, &stderr) {
        panic!("seed {seed} ({policy}): {fault}");
    }
    let model = Model::from_log(&log);
    let mut recovered_dirty = 0;
    let got = if policy == "write-back-persist" {
        // Recoverable failure: the same cache file.
        let ember = start(d, policy);
        let c = ClientBuilder::new()
            .export("disk")
            .connect_unix(d.join("ember.sock"))
            .unwrap_or_else(|e| panic!("seed {seed}: connect after recovery: {e}"));
        let mut got = vec![0u8; VOL as usize];
        for (i, piece) in got.chunks_mut(1 << 20).enumerate() {
            c.read(i as u64 * (1 << 20), piece).expect("read after recovery");
        }
        drop(c);
        let e2 = ember.stop(); // SIGTERM: a clean stop, checked
        if let Some(n) = e2.split("recovered ").nth(1).and_then(|s| s.split(' ').next()) {
            recovered_dirty = n.parse().unwrap_or(0);
        }
        got
    } else {
        // Destructive failure: the cache file is thrown away; backing alone.
        std::fs::read(d.join("backing.img")).unwrap()
    };
    Outcome {
        violations: model.violations(&got),
        acked_flushes: model.acked_flushes,
        recovered_dirty,
    }
}

fn trials() -> u64 {
    std::env::var("EMBER_CRASH_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(5)
}

fn run(policy: &str, n: u64) -> (u64, u64, u64, Vec<String>) {
    let mut bad = 0;
    let mut flushes = 0;
    let mut recovered = 0;
    let mut sample = Vec::new();
    for t in 0..n {
        let seed = 7000 + t;
        let o = trial(policy, seed);
        flushes += u64::from(o.acked_flushes);
        recovered += o.recovered_dirty;
        if let Some((off, words)) = o.violations {
            bad += 1;
            if sample.len() < 3 {
                sample.push(format!("seed {seed}: {words} words wrong from byte {off}"));
            }
        }
        if (t + 1) % 50 == 0 {
            println!("{policy}: {} trials, {bad} with violations so far", t + 1);
            let _ = std::io::stdout().flush();
        }
    }
    println!(
        "{policy}: {n} SIGKILL trials, {bad} with violations ({flushes} acknowledged FLUSHes \
         checked, {recovered} dirty blocks recovered)"
    );
    (bad, flushes, recovered, sample)
}

fn skip() -> bool {
    if have_nbdsh() {
        return false;
    }
    serve_support::skip_or_fail("nbdsh (libnbd-bin) is not installed")
}

#[test]
fn sigkill_write_back_persist_recovers_from_the_cache_file() {
    if skip() {
        return;
    }
    let (bad, flushes, recovered, sample) = run("write-back-persist", trials());
    assert_eq!(bad, 0, "{sample:?}");
    assert!(flushes > 0, "no FLUSH was acknowledged before the kills");
    assert!(recovered > 0, "no trial had dirty blocks to recover");
}

#[test]
fn sigkill_write_back_flush_loses_nothing_flushed_with_the_cache_thrown_away() {
    if skip() {
        return;
    }
    let (bad, flushes, _, sample) = run("write-back-flush", trials());
    assert_eq!(bad, 0, "{sample:?}");
    assert!(flushes > 0);
}

#[test]
fn sigkill_write_through_loses_nothing_flushed_with_the_cache_thrown_away() {
    if skip() {
        return;
    }
    let (bad, flushes, _, sample) = run("write-through", trials());
    assert_eq!(bad, 0, "{sample:?}");
    assert!(flushes > 0);
}

#[test]
fn sigkill_unsafe_write_back_is_caught_losing_acknowledged_writes() {
    if skip() {
        return;
    }
    // The negative control: the same check must fail on the policy that ignores FLUSH.
    let (bad, _, _, _) = run("unsafe-write-back", 3);
    assert!(bad > 0, "unsafe write-back lost nothing: the check is blind");
}
