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
//! Ordered write-back promises less and is checked for that: restarted on the same cache
//! file it starts cold and serves exactly the backing file, which must hold every write of
//! the epochs before some FLUSH and a subset of the next epoch's writes (prefix
//! consistency); unsafe write-back must be caught breaking that order.
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
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod crash_model;
mod serve_support;

use crash_model::*;

use ember_nbd::ClientBuilder;
use serve_support::serve_on_unix;
use std::io::Write;

const BS: u64 = 4096;
const BLOCKS: u64 = 2048;
const VOL: u64 = BLOCKS * BS;
/// 6 MiB of cache with the default 4 MiB journal: about 480 data blocks for 2048 volume
/// blocks, so eviction, max_dirty fallbacks and the flusher all run.
const CACHE: &str = "6M";
const OPS: u32 = 600;

struct Outcome {
    violations: Option<(u64, usize)>,
    acked_flushes: u32,
    recovered_dirty: u64,
    /// Ordered write-back: epochs backing lay behind the writer.
    lag: Option<usize>,
}

/// What a trial checks after the kill.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Every write acknowledged before the last acknowledged FLUSH (or FUA) is there.
    Durable,
    /// A prefix of the writer's epochs and part of the next (ordered write-back).
    Prefix,
}

fn trial(policy: &str, check: Check, seed: u64) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let init: Vec<u8> = (0..VOL).map(|p| content_byte(0, p)).collect();
    std::fs::write(d.join("backing.img"), &init).unwrap();
    let ember = serve_on_unix(d, CACHE, policy);
    let uri = format!("nbd+unix:///disk?socket={}", d.join("ember.sock").display());
    let trial = format!("seed {seed} ({policy})");
    let log = write_then_kill(d, ember, &uri, seed, BLOCKS, OPS, &trial);
    let model = Model::from_log(&log, VOL);
    let mut recovered_dirty = 0;
    let got = if policy == "write-back-persist" {
        // Recoverable failure: the same cache file.
        let ember = serve_on_unix(d, CACHE, policy);
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
    } else if policy == "ordered-write-back" {
        // Recoverable failure: restarted on the same cache file, the cache starts cold and
        // serves what backing holds; that is also what losing the cache file leaves.
        let backing = std::fs::read(d.join("backing.img")).unwrap();
        let ember = serve_on_unix(d, CACHE, policy);
        let c = ClientBuilder::new()
            .export("disk")
            .connect_unix(d.join("ember.sock"))
            .unwrap_or_else(|e| panic!("seed {seed}: connect after the restart: {e}"));
        let mut got = vec![0u8; VOL as usize];
        for (i, piece) in got.chunks_mut(1 << 20).enumerate() {
            c.read(i as u64 * (1 << 20), piece).expect("read after the restart");
        }
        drop(c);
        let out = ember.stop();
        assert!(out.contains("not clean"), "seed {seed}: the restart was not cold:\n{out}");
        assert!(got == backing, "seed {seed}: the restarted cache serves other than backing");
        got
    } else {
        // Destructive failure: the cache file is thrown away; backing alone.
        std::fs::read(d.join("backing.img")).unwrap()
    };
    let (violations, lag) = match check {
        Check::Durable => (model.violations(&got), None),
        Check::Prefix => match model.prefix_lag(&got) {
            Ok(lag) => (None, Some(lag)),
            Err(v) => (Some(v), None),
        },
    };
    Outcome { violations, acked_flushes: model.acked_flushes, recovered_dirty, lag }
}

fn trials() -> u64 {
    std::env::var("EMBER_CRASH_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(5)
}

fn run(policy: &str, check: Check, n: u64) -> (u64, u64, u64, Vec<String>) {
    let mut lags = Vec::new();
    let mut bad = 0;
    let mut flushes = 0;
    let mut recovered = 0;
    let mut sample = Vec::new();
    for t in 0..n {
        let seed = 7000 + t;
        let o = trial(policy, check, seed);
        lags.extend(o.lag);
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
    if !lags.is_empty() {
        println!(
            "{policy}: backing held a prefix of the writer's epochs in {} trials, {:.2} epochs \
             behind on average (max {})",
            lags.len(),
            lags.iter().sum::<usize>() as f64 / lags.len() as f64,
            lags.iter().max().unwrap_or(&0)
        );
    }
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
    let (bad, flushes, recovered, sample) = run("write-back-persist", Check::Durable, trials());
    assert_eq!(bad, 0, "{sample:?}");
    assert!(flushes > 0, "no FLUSH was acknowledged before the kills");
    assert!(recovered > 0, "no trial had dirty blocks to recover");
}

/// Kill `ember serve` under `policy` during writes, `trials()` times: `check` finds nothing
/// wrong, and FLUSHes were acknowledged before the kills.
fn loses_nothing(policy: &str, check: Check) {
    if skip() {
        return;
    }
    let (bad, flushes, _, sample) = run(policy, check, trials());
    assert_eq!(bad, 0, "{sample:?}");
    assert!(flushes > 0);
}

ember_testkit::test_cases!(loses_nothing {
    sigkill_write_back_flush_loses_nothing_flushed_with_the_cache_thrown_away: (
        "write-back-flush",
        Check::Durable
    ),
    sigkill_write_through_loses_nothing_flushed_with_the_cache_thrown_away: (
        "write-through",
        Check::Durable
    ),
    sigkill_ordered_write_back_leaves_backing_a_consistent_older_state: (
        "ordered-write-back",
        Check::Prefix
    ),
});

/// The negative controls: `check` must catch unsafe write-back (which ignores FLUSH) in
/// `trials` kills; `blind` says what it means when it does not.
fn catches_unsafe_write_back(check: Check, trials: u64, blind: &str) {
    if skip() {
        return;
    }
    let (bad, _, _, _) = run("unsafe-write-back", check, trials);
    assert!(bad > 0, "{blind}");
}

ember_testkit::test_cases!(catches_unsafe_write_back {
    sigkill_unsafe_write_back_is_caught_losing_acknowledged_writes: (
        Check::Durable,
        3,
        "unsafe write-back lost nothing: the check is blind"
    ),
    // Ascending-order flushing across the writer's epochs and write-through fallbacks past
    // older dirty blocks. Caught in 19 of 30 trials when measured, so 8 trials miss it with
    // odds of 3 in 10,000.
    sigkill_unsafe_write_back_is_caught_breaking_epoch_order: (
        Check::Prefix,
        8,
        "unsafe write-back kept epoch order: the prefix check is blind"
    ),
});
