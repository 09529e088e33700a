//! Crash trials of the volume commands (docs/reference/control.md), with the real process:
//! `ember serve` starts from a config file with two volumes, `disk` (written by the nbdsh
//! writer of the SIGKILL trials, `crash_model`) and `other` (a known pattern, never written),
//! under a write policy drawn at random; after a random number of the writer's requests
//! `ember ctl` runs one of
//!
//! - `uncache disk` (it writes back every block dirty at the call, so once it returned every
//!   write acknowledged before it was sent is durable),
//! - `remove --force disk` (the writer's later requests fail with ESHUTDOWN, which ends it;
//!   the same durable point once it returned),
//! - `attach third=PATH` (a third backing holding its own pattern),
//!
//! then the server is killed with SIGKILL a random time later: while the command runs, or
//! after it returned. The server restarts from the same file (naming all three volumes: the
//! restart rule attaches what the device does not record and serves an unfinished removal
//! again), every volume is read through NBD, and every byte of `disk` must hold its value at
//! the last durable point or the value of a later write (the durable points of `ctl_kill.rs`,
//! under one policy), `other` and `third` their patterns. When write-back persist was not in
//! force, the backing file of `disk` alone must hold the same.
//!
//! `EMBER_CTL_TRIALS=N` sets the trials per command (default 20; `make crash-long` runs
//! 200). Needs nbdsh (libnbd-bin, installed by `make setup`).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod crash_model;
mod ctl_trial;
mod serve_support;

use crash_model::*;
use ctl_trial::*;
use serve_support::{skip_or_fail, Rng, Serve};
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

const BLOCKS: u64 = 1024;
const VOL: u64 = BLOCKS * 4096;
/// About 1500 data blocks for 1024 + 1024 (+ 1024) volume blocks.
const CACHE: &str = "10MiB";
/// Enough requests that the writer still runs when the command and the kill come.
const OPS: u32 = 2000;
/// The latest kill after the command was sent.
const MAX_DELAY_US: u64 = 300_000;

/// The volume command a trial runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Uncache,
    Remove,
    Attach,
}

/// The byte at `p` of the pattern of volume `seed` (never a writer's content: its first
/// four bytes of each word are 0xFFFFFF00 | seed, no write number reaches that).
fn pattern(seed: u8, p: u64) -> u8 {
    match p % 8 {
        0 => seed,
        1..=3 => 0xFF,
        k => ((p / 8) >> (8 * (k - 4))) as u8,
    }
}

fn patterned(path: &Path, seed: u8) -> Vec<u8> {
    let data: Vec<u8> = (0..VOL).map(|p| pattern(seed, p)).collect();
    std::fs::write(path, &data).unwrap();
    data
}

/// The config file of a trial in `dir` under `policy`, naming `third` too when asked.
fn config(dir: &Path, policy: &str, third: bool) -> String {
    let d = dir.display();
    let mut s = format!(
        "control = \"{d}/ctl.sock\"\n\n\
         [cache]\ndevice = \"{d}/cache.img\"\nsize = \"{CACHE}\"\nformat-if-needed = true\n\n\
         [[volume]]\nname = \"disk\"\nbacking = \"{d}/backing.img\"\n\n\
         [[volume]]\nname = \"other\"\nbacking = \"{d}/other.img\"\n\n"
    );
    if third {
        s += &format!("[[volume]]\nname = \"third\"\nbacking = \"{d}/third.img\"\n\n");
    }
    s += &format!(
        "[listen]\nunix = \"{d}/ember.sock\"\n\n\
         [live]\nwrite-policy = \"{policy}\"\n\n\
         [live.writeback]\nmax-dirty = \"90%\"\nmin-dirty = \"80%\"\n"
    );
    s
}

/// The writer's faults, for a trial of `op`: under `remove --force`, an ESHUTDOWN reply
/// (errno 108) is how the writer learns its export is gone, and ends it; any other error
/// before the kill is a fault, as in every trial.
fn fault(
    op: Op,
    log: &str,
    before_kill: &str,
    exited_early: Option<ExitStatus>,
    status: ExitStatus,
    stderr: &str,
) -> Option<String> {
    let shut = |l: &str| {
        l.starts_with("ERR ")
            && l.contains(" reply ")
            && (l.contains("errno=ESHUTDOWN") || l.contains("errno=108"))
    };
    if op == Op::Remove && log.lines().any(shut) {
        return log
            .lines()
            .find(|l| l.starts_with("ERR ") && !shut(l) && !l.contains(" lost "))
            .map(|l| format!("an error besides ESHUTDOWN: {l}\n{stderr}"));
    }
    writer_fault(log, before_kill, exited_early, status, stderr)
}

fn trial(op: Op, policy: &'static str, seed: u64) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let init: Vec<u8> = (0..VOL).map(|p| content_byte(0, p)).collect();
    std::fs::write(d.join("backing.img"), &init).unwrap();
    let other = patterned(&d.join("other.img"), 1);
    let third = patterned(&d.join("third.img"), 2);
    let cfg = d.join("ember.toml");
    std::fs::write(&cfg, config(d, policy, false)).unwrap();
    let ember = Serve::start_exact(&["--config", cfg.to_str().unwrap()]);
    let uri = format!("nbd+unix:///disk?socket={}", d.join("ember.sock").display());
    let mut r = Rng::new(seed);
    let start_at = 20 + r.below(800) as usize;
    let delay = Duration::from_micros(r.below(MAX_DELAY_US));
    let name = format!("seed {seed}: {op:?} under {policy}, kill {delay:?} after the command");

    let mut writer = spawn_writer(d, &uri, seed, BLOCKS, OPS);
    let writer_done = wait_for_writer(d, &mut writer, start_at);
    let sent = log_lines(d);
    let third_arg = format!("third={}", d.join("third.img").display());
    let args: Vec<&str> = match op {
        Op::Uncache => vec!["uncache", "disk"],
        Op::Remove => vec!["remove", "--force", "disk"],
        Op::Attach => vec!["attach", third_arg.as_str()],
    };
    let k = command_then_kill(d, ember, &mut writer, writer_done, &args, delay, &name);
    let Killed { returned, before_kill, exited_early, served, status, log, stderr } = k;
    if let Some(f) = fault(op, &log, &before_kill, exited_early, status, &stderr) {
        panic!("{name}: {f}\n{served}");
    }
    let landed = if writer_done.is_some() {
        Landed::WriterDone
    } else if returned.is_some() {
        Landed::After
    } else {
        Landed::During
    };
    println!("{name}: the kill landed {landed:?}");
    let window = Window { from: policy, to: policy, sent, returned };
    let flushes = op != Op::Attach;
    let model = Model::from_log(&rewrite(&log, &window, flushes, Check::Contract), VOL);
    let mut violations = None;
    if !window.persist() {
        let backing = std::fs::read(d.join("backing.img")).unwrap();
        violations = model.violations(&backing);
    }
    std::fs::write(&cfg, config(d, policy, true)).unwrap();
    let got = read_after_restart(d, &name, &["disk", "other", "third"], VOL);
    if violations.is_none() {
        violations = model.violations(&got[0]);
    }
    assert!(got[1] == other, "{name}: volume other changed");
    assert!(got[2] == third, "{name}: volume third is not its backing");
    if let Some((off, words)) = violations {
        println!("{name}: {words} words wrong from byte {off}");
    }
    Outcome {
        landed,
        violations,
        flushes: model.acked_flushes,
        durable_points: model.durable_points,
        bytes_checked: model.required_bytes(),
    }
}

fn skip() -> bool {
    if have_nbdsh() {
        return false;
    }
    skip_or_fail("nbdsh (libnbd-bin) is not installed")
}

/// Kill `ember serve` during or after `op`, `trials()` times under write policies drawn at
/// random: nothing acknowledged and durable is lost on any volume.
fn loses_nothing(op: Op, seed0: u64) {
    if skip() {
        return;
    }
    let n = trials();
    let mut r = Rng::new(seed0);
    let (mut bad, mut during, mut after, mut done) = (0, 0, 0, 0);
    let (mut points, mut bytes) = (0u64, 0u64);
    for t in 0..n {
        let policy = POLICIES[r.below(6) as usize];
        let o = trial(op, policy, seed0 + t);
        match o.landed {
            Landed::During => during += 1,
            Landed::After => after += 1,
            Landed::WriterDone => done += 1,
        }
        points += u64::from(o.flushes) + u64::from(o.durable_points);
        bytes += o.bytes_checked;
        bad += u64::from(o.violations.is_some());
    }
    println!(
        "ctl {op:?} (seeds {seed0}..{}): {n} SIGKILL trials; kills during the command {during}, \
         after it returned {after}, after the writer finished {done}; {points} durable FLUSHes \
         and points checked, {bytes} bytes required; {bad} trials with violations",
        seed0 + n
    );
    assert_eq!(bad, 0);
}

ember_testkit::test_cases!(loses_nothing {
    sigkill_during_ctl_uncache_loses_nothing_flushed: (Op::Uncache, 41_000_000),
    sigkill_during_ctl_remove_loses_nothing_flushed: (Op::Remove, 41_100_000),
    sigkill_during_ctl_attach_loses_nothing_flushed: (Op::Attach, 41_200_000),
});
