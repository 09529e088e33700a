//! Crash trials of the changes made through the control socket, with the real process:
//! `ember serve` starts from a config file (a cache file, a backing file, a Unix socket and
//! a control socket), the nbdsh writer of the SIGKILL trials (`crash_model`: random writes
//! with unique content, some FUA, FLUSHes, each request logged before it is sent and each
//! reply after) runs, and after a random number of its requests `ember ctl` runs one of
//!
//! - `flush` (under each of the six write policies in turn),
//! - `set write-policy TO` (a pair of write policies: every pair in turn once the trials
//!   outnumber the pairs, else pairs drawn at random),
//! - `reload` after an edit of the file that changes the write policy (to a random one, the
//!   same included), the dirty thresholds, the flusher's order and the connection limit;
//!
//! then the server is killed with SIGKILL a random time later (the seed, the delay and where
//! the kill landed are printed when a trial fails): while the command runs, or after it
//! returned. The server restarts from the same file on the same cache file (recovery), the
//! whole volume is read through NBD, and every byte must hold its value at the last durable
//! point, or the value of a write issued after it. When write-back persist was never in
//! force, the backing file alone must hold the same (the cache thrown away). Durable points:
//!
//! - a FLUSH (or a FUA write) acknowledged while every policy that may have been in force
//!   during it promises durability at a FLUSH (not ordered or unsafe write-back); a FLUSH
//!   that overlaps the switch counts only when both sides promise it;
//! - every acknowledged write while only write-through or write-around may have been in
//!   force (they write backing before they acknowledge);
//! - a `ctl flush` that returned, and a switch into write-through or write-around that
//!   returned (its drain left nothing dirty): for every write acknowledged before the
//!   command was sent, under every policy.
//!
//! A command that fails while the server runs fails the trial, as does any error the writer
//! sees before the kill. The negative control counts every acknowledged write under unsafe
//! write-back as required, which a crash must break (its FLUSH writes nothing back and the
//! flusher idles below the dirty thresholds): the check can fail.
//!
//! `EMBER_CTL_TRIALS=N` sets the trials per operation (default 20; `make crash-long` runs
//! 200, which covers every pair of write policies several times). Needs nbdsh (libnbd-bin,
//! installed by `make setup`).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod crash_model;
mod ctl_trial;
mod serve_support;

use crash_model::*;
use ctl_trial::*;
use serve_support::{skip_or_fail, Rng, Serve};
use std::path::Path;
use std::time::Duration;

const BS: u64 = 4096;
const BLOCKS: u64 = 2048;
const VOL: u64 = BLOCKS * BS;
/// 12 MiB of cache with the default 4 MiB journal: about 2000 data blocks for 2048 volume
/// blocks; with the dirty thresholds at 80-90 % the flusher mostly idles, so a flush or a
/// drain has hundreds of blocks to write back.
const CACHE: &str = "12MiB";
/// Enough requests that the writer still runs when the command and the kill come.
const OPS: u32 = 3000;
/// The latest kill, after the command was sent: flushes and drains of this cache take
/// tens to a few hundred milliseconds, so kills land inside and after them.
const MAX_DELAY_US: u64 = 400_000;

/// The control command a trial runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `ember ctl flush` under the policy in force.
    Flush,
    /// `ember ctl set write-policy TO`.
    Set,
    /// `ember ctl reload` after an edit of the file.
    Reload,
}

/// The config file of a trial in `dir`, under `policy`; `edited` changes what a reload
/// changes besides the policy.
fn config(dir: &Path, policy: &str, edited: bool) -> String {
    let d = dir.display();
    let (max, min, order, conns) =
        if edited { ("95%", "85%", "lru", 64) } else { ("90%", "80%", "ascending", 128) };
    format!(
        "control = \"{d}/ctl.sock\"\n\n\
         [cache]\ndevice = \"{d}/cache.img\"\nsize = \"{CACHE}\"\nformat-if-needed = true\n\n\
         [[volume]]\nname = \"disk\"\nbacking = \"{d}/backing.img\"\n\n\
         [listen]\nunix = \"{d}/ember.sock\"\n\n\
         [live]\nwrite-policy = \"{policy}\"\n\n\
         [live.writeback]\nmax-dirty = \"{max}\"\nmin-dirty = \"{min}\"\nflush-order = \"{order}\"\n\n\
         [live.limits]\nmax-connections = {conns}\n"
    )
}

fn trial(op: Op, from: &'static str, to: &'static str, check: Check, seed: u64) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let init: Vec<u8> = (0..VOL).map(|p| content_byte(0, p)).collect();
    std::fs::write(d.join("backing.img"), &init).unwrap();
    let cfg = d.join("ember.toml");
    std::fs::write(&cfg, config(d, from, false)).unwrap();
    let ember = Serve::start_exact(&["--config", cfg.to_str().unwrap()]);
    let uri = format!("nbd+unix:///disk?socket={}", d.join("ember.sock").display());
    let mut r = Rng::new(seed);
    let start_at = 20 + r.below(1200) as usize;
    let delay = Duration::from_micros(r.below(MAX_DELAY_US));
    let name = format!("seed {seed}: {op:?} {from} -> {to}, kill {delay:?} after the command");

    let mut writer = spawn_writer(d, &uri, seed, BLOCKS, OPS);
    let writer_done = wait_for_writer(d, &mut writer, start_at);
    if op == Op::Reload {
        std::fs::write(&cfg, config(d, to, true)).unwrap();
    }
    let sent = log_lines(d);
    let args: Vec<&str> = match op {
        Op::Flush => vec!["flush"],
        Op::Set => vec!["set", "write-policy", to],
        Op::Reload => vec!["reload"],
    };
    let k = command_then_kill(d, ember, &mut writer, writer_done, &args, delay, &name);
    let Killed { returned, before_kill, exited_early, served, status, log, stderr } = k;
    if let Some(fault) = writer_fault(&log, &before_kill, exited_early, status, &stderr) {
        panic!("{name}: {fault}\n{served}");
    }
    if op == Op::Reload && returned.is_some() {
        let out = std::fs::read_to_string(d.join("ctl.out")).unwrap_or_default();
        assert!(!out.contains("refused"), "{name}: the reload refused a change:\n{out}");
    }
    let landed = if writer_done.is_some() {
        Landed::WriterDone
    } else if returned.is_some() {
        Landed::After
    } else {
        Landed::During
    };
    println!("{name}: the kill landed {landed:?}");
    let window = Window { from, to, sent, returned };
    let model = Model::from_log(&rewrite(&log, &window, op == Op::Flush, check), VOL);
    let mut violations = None;
    if !window.persist() {
        // The cache thrown away: backing alone.
        let backing = std::fs::read(d.join("backing.img")).unwrap();
        violations = model.violations(&backing);
    }
    if violations.is_none() {
        violations = model.violations(&read_after_restart(d, &name, &["disk"], VOL)[0]);
    }
    if let (Some((off, words)), Check::Contract) = (violations, check) {
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

/// The (from, to) of each of `n` trials of `op`, drawn with `seed`.
fn plan(op: Op, n: u64, seed: u64) -> Vec<(&'static str, &'static str)> {
    let mut r = Rng::new(seed);
    match op {
        Op::Flush => (0..n).map(|t| POLICIES[t as usize % 6]).map(|p| (p, p)).collect(),
        Op::Set => {
            let mut pairs: Vec<_> = POLICIES
                .iter()
                .flat_map(|&a| POLICIES.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
                .collect();
            // A shuffle: fewer trials than pairs draw distinct pairs at random; more cover
            // every pair in turn.
            for i in (1..pairs.len()).rev() {
                pairs.swap(i, r.below(i as u64 + 1) as usize);
            }
            (0..n as usize).map(|t| pairs[t % pairs.len()]).collect()
        }
        Op::Reload => {
            (0..n).map(|_| (POLICIES[r.below(6) as usize], POLICIES[r.below(6) as usize])).collect()
        }
    }
}

/// Run a trial of `op` for each (from, to) of `plan`, seeded from `seed0` on; prints what
/// they covered and returns the trials with violations.
fn run(op: Op, check: Check, plan: &[(&'static str, &'static str)], seed0: u64) -> u64 {
    let n = plan.len() as u64;
    let mut bad = 0;
    let (mut during, mut after, mut done) = (0, 0, 0);
    let (mut flushes, mut points, mut bytes) = (0u64, 0u64, 0u64);
    for (t, &(from, to)) in plan.iter().enumerate() {
        let seed = seed0 + t as u64;
        let o = trial(op, from, to, check, seed);
        match o.landed {
            Landed::During => during += 1,
            Landed::After => after += 1,
            Landed::WriterDone => done += 1,
        }
        flushes += u64::from(o.flushes);
        points += u64::from(o.durable_points);
        bytes += o.bytes_checked;
        bad += u64::from(o.violations.is_some());
    }
    println!(
        "ctl {op:?} ({check:?}, seeds {seed0}..{}): {n} SIGKILL trials; kills during the \
         command {during}, after it returned {after}, after the writer finished {done}; \
         {flushes} durable FLUSHes and {points} durable points checked, {bytes} bytes \
         required; {bad} trials with violations",
        seed0 + n
    );
    bad
}

fn skip() -> bool {
    if have_nbdsh() {
        return false;
    }
    skip_or_fail("nbdsh (libnbd-bin) is not installed")
}

/// Kill `ember serve` during or after `op`, `trials()` times: nothing acknowledged and
/// durable is lost.
fn loses_nothing(op: Op, seed0: u64) {
    if skip() {
        return;
    }
    assert_eq!(run(op, Check::Contract, &plan(op, trials(), seed0), seed0), 0);
}

ember_testkit::test_cases!(loses_nothing {
    sigkill_during_ctl_flush_loses_nothing_flushed: (Op::Flush, 39_000_000),
    sigkill_during_ctl_set_write_policy_loses_nothing_flushed: (Op::Set, 39_100_000),
    sigkill_during_ctl_reload_loses_nothing_flushed: (Op::Reload, 39_200_000),
});

/// The negative control: counting unsafe write-back's acknowledged but unflushed writes as
/// required must find them lost (its FLUSH writes nothing back, and the flusher idles below
/// the dirty thresholds).
#[test]
fn sigkill_check_catches_acknowledged_but_unflushed_writes_counted_as_required() {
    if skip() {
        return;
    }
    let unsafe_wb = ("unsafe-write-back", "unsafe-write-back");
    let bad = run(Op::Flush, Check::Blind, &[unsafe_wb; 3], 39_300_000);
    assert!(bad > 0, "no acknowledged-but-unflushed write was lost: the check is blind");
}
