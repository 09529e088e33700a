//! The crash-trial model shared by the SIGKILL tests: the nbdsh writer (random writes with
//! unique content, some FUA, and FLUSHes, each request logged before it is sent and each
//! reply after), the content each write puts in each byte, and the model of what every byte
//! may hold after a crash under the NBD crash contract: its value at the last acknowledged
//! FLUSH (or a later acknowledged FUA write of it), or the value of a write issued after
//! that.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

pub use crate::serve_support::have_nbdsh;
use crate::serve_support::{debian_path, Rng, Serve};
use std::path::Path;
use std::process::ExitStatus;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const WRITER: &str = r#"
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
pub fn content_byte(i: u32, p: u64) -> u8 {
    let w = ((p / 8) as u32).to_le_bytes();
    let i = i.to_le_bytes();
    let k = (p % 8) as usize;
    if k < 4 {
        i[k]
    } else {
        w[k - 4]
    }
}

/// Wait for `child` at most `timeout`, then SIGKILL it; returns its status.
pub fn reap(child: &mut std::process::Child, timeout: Duration) -> ExitStatus {
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

/// [`WRITER`] (seeded by `seed`, over `blocks` blocks, `ops` operations) started under
/// `nbdsh` against `uri`, in `dir`: it logs to `dir/writer.log`, its stderr goes to
/// `dir/writer.err`.
pub fn spawn_writer(
    dir: &Path,
    uri: &str,
    seed: u64,
    blocks: u64,
    ops: u32,
) -> std::process::Child {
    let script = WRITER
        .replace("SEED", &seed.to_string())
        .replace("BLOCKS", &blocks.to_string())
        .replace("OPS", &ops.to_string())
        .replace("LOG", &format!("{:?}", dir.join("writer.log").display().to_string()));
    std::fs::write(dir.join("writer.py"), script).unwrap();
    Command::new("/usr/bin/nbdsh")
        .env("PATH", debian_path())
        .arg("-u")
        .arg(uri)
        .arg("-c")
        .arg(format!("exec(open({:?}).read())", dir.join("writer.py").display().to_string()))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("writer.err")).unwrap())
        .spawn()
        .expect("spawn nbdsh")
}

/// The writer's run and the SIGKILL of one trial (seeded by `seed`, named `trial` in a
/// panic): [`WRITER`] over `blocks` blocks, `ops` operations, runs under `nbdsh` against
/// `uri`, in `dir`; `ember` is killed after a random number of the writer's log lines
/// (requests sent or answered) plus up to 3 ms, so kills land anywhere in the run, also
/// inside a FLUSH. Returns the writer's log, checked by [`writer_fault`] (a fault panics, as
/// does a server that exited by itself before the kill).
pub fn write_then_kill(
    dir: &Path,
    ember: Serve,
    uri: &str,
    seed: u64,
    blocks: u64,
    ops: u32,
    trial: &str,
) -> String {
    let mut writer = spawn_writer(dir, uri, seed, blocks, ops);
    let mut r = Rng::new(seed);
    let target = 4 + r.below(2 * ops as u64 - 4) as usize;
    let t0 = Instant::now();
    let exited_early = loop {
        let lines =
            std::fs::read_to_string(dir.join("writer.log")).map_or(0, |s| s.lines().count());
        let exited = writer.try_wait().ok().flatten();
        if lines >= target || t0.elapsed() > Duration::from_secs(30) || exited.is_some() {
            break exited;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    std::thread::sleep(Duration::from_micros(r.below(3000)));
    let before_kill = std::fs::read_to_string(dir.join("writer.log")).unwrap_or_default();
    let served = ember.output();
    if let Err(st) = ember.kill() {
        panic!("{trial}: ember serve exited by itself ({st}) before the SIGKILL:\n{served}");
    }
    let status = reap(&mut writer, Duration::from_secs(30));
    let log = std::fs::read_to_string(dir.join("writer.log")).unwrap_or_default();
    let stderr = std::fs::read_to_string(dir.join("writer.err")).unwrap_or_default();
    if let Some(fault) = writer_fault(&log, &before_kill, exited_early, status, &stderr) {
        panic!("{trial}: {fault}");
    }
    log
}

/// What the writer reported, checked against the one failure it may see: the connection
/// lost after the SIGKILL. `exited_early` is the writer's status if it exited before the
/// kill. Returns a description of what went wrong, if anything did.
pub fn writer_fault(
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
pub struct Model {
    pub latest: Vec<u32>,
    base: Vec<u32>,
    pending: Vec<(u32, u64, u64)>,
    floor: Vec<u32>,
    pub acked_flushes: u32,
    /// `DP` lines replayed (durable points other than FLUSHes).
    pub durable_points: u32,
    /// The writes issued in each epoch (between two FLUSHes), for ordered write-back's
    /// check: (write number, offset, length).
    epochs: Vec<Vec<(u32, u64, u64)>>,
}

impl Model {
    /// Replay the writer's log. Granularity: 8-byte words (writes are word-aligned).
    pub fn from_log(text: &str, vol: u64) -> Self {
        let words = (vol / 8) as usize;
        let mut m = Model {
            latest: vec![0; words],
            base: vec![0; words],
            pending: Vec::new(),
            floor: vec![0; words],
            acked_flushes: 0,
            durable_points: 0,
            epochs: vec![Vec::new()],
        };
        let mut issued: Option<(u32, u64, u64, bool)> = None;
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                ["WI", i, off, len, fua] => {
                    let w = (i.parse().unwrap(), off.parse().unwrap(), len.parse().unwrap());
                    m.pending.push(w);
                    if let Some(e) = m.epochs.last_mut() {
                        e.push(w);
                    }
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
                // The writer is sequential: every write before a FLUSH was acknowledged
                // before it was issued, every later one is issued after its reply.
                ["FI", _] => m.epochs.push(Vec::new()),
                ["FA", _] => {
                    m.base.copy_from_slice(&m.latest);
                    m.pending.clear();
                    m.floor.iter_mut().for_each(|x| *x = 0);
                    m.acked_flushes += 1;
                }
                // A durable point the writer did not ask for (a flush on demand that
                // returned): every write acknowledged before it is required; a write in
                // flight across it may or may not have landed.
                ["DP"] => {
                    m.base.copy_from_slice(&m.latest);
                    m.pending.clear();
                    if let Some((i, off, len, _)) = issued {
                        m.pending.push((i, off, len));
                    }
                    m.floor.iter_mut().for_each(|x| *x = 0);
                    m.durable_points += 1;
                }
                _ => {}
            }
        }
        m
    }

    /// Bytes a durable point requires to hold a written value (not the initial content).
    pub fn required_bytes(&self) -> u64 {
        self.base.iter().filter(|&&i| i != 0).count() as u64 * 8
    }

    /// Words holding none of their allowed values: (first byte offset, count).
    pub fn violations(&self, got: &[u8]) -> Option<(u64, usize)> {
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

impl Model {
    /// Ordered write-back's promise (prefix consistency at epoch granularity): for some
    /// epoch E, every word holds its value after all epochs before E, or the value of a
    /// write issued in E (any subset of E's writes). Returns how many epochs the newest such
    /// E lies behind the writer's last, or the words that fit no epoch for the E that fits
    /// best: (first byte offset, count).
    pub fn prefix_lag(&self, got: &[u8]) -> Result<usize, (u64, usize)> {
        let mut state = vec![0u32; self.latest.len()];
        let mut newest = None;
        let mut best = (usize::MAX, 0u64);
        for (e, writes) in self.epochs.iter().enumerate() {
            let mut first = None;
            let mut n = 0;
            for (w, chunk) in got.chunks(8).enumerate() {
                let p = w as u64 * 8;
                let holds = |i: u32| (0..8).all(|k| chunk[k] == content_byte(i, p + k as u64));
                if holds(state[w]) {
                    continue;
                }
                if !writes.iter().any(|&(i, off, len)| p >= off && p < off + len && holds(i)) {
                    first.get_or_insert(p);
                    n += 1;
                }
            }
            match first {
                None => newest = Some(e),
                Some(f) if n < best.0 => best = (n, f),
                Some(_) => {}
            }
            for &(i, off, len) in writes {
                state[(off / 8) as usize..((off + len) / 8) as usize]
                    .iter_mut()
                    .for_each(|x| *x = i);
            }
        }
        match newest {
            Some(e) => Ok(self.epochs.len() - 1 - e),
            None => Err((best.1, best.0)),
        }
    }
}
