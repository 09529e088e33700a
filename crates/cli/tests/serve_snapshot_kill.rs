//! Crash trials of the performance snapshot: a memory cache under write-through
//! with `--warmup-snapshot` (16-block segments, so segments are written all through the
//! run) serves a backing file; `nbdsh` issues random writes with unique content, some FUA,
//! and FLUSHes (the writer of `crash_model`); ember is killed with SIGKILL at a random
//! moment. The restart preloads from the warmup log and the snapshot; then the whole volume
//! is read *through ember* (preloaded blocks come from the cache, so from the snapshot when
//! it was used), and every byte must hold its value at the last acknowledged FLUSH (or a later
//! acknowledged FUA write), or the value of a write issued after that. Zero violations.
//!
//! The same under write-back-flush (half as many trials), where dirty blocks are never
//! copied. `EMBER_SNAPSHOT_TRIALS=N` sets the trials (default 20).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod crash_model;
mod serve_support;

use crash_model::*;
use ember_nbd::ClientBuilder;
use serve_support::{metric, scrape, Serve, ServeArgs};
use std::path::Path;
use std::time::{Duration, Instant};

const BLOCKS: u64 = 2048;
const VOL: u64 = BLOCKS * 4096;
const OPS: u32 = 600;

fn start(d: &Path, policy: &str) -> Serve {
    let log = d.join("w.log").display().to_string();
    ServeArgs::mem_cache("32M")
        .backing("disk", d.join("backing.img").display())
        .args(["--warmup-log", &log, "--warmup-region", "4K", "--warmup-snapshot"])
        .args(["--warmup-snapshot-staging", "64K", "--warmup-snapshot-size", "8M"])
        .args(["--write-policy", policy])
        .start()
}

struct Outcome {
    violations: Option<(u64, usize)>,
    acked_flushes: u32,
    from_snapshot: f64,
    refused_line: bool,
}

fn trial(seed: u64, policy: &str) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let init: Vec<u8> = (0..VOL).map(|p| content_byte(0, p)).collect();
    std::fs::write(d.join("backing.img"), &init).unwrap();
    let ember = start(d, policy);
    let uri = ember.uri("disk");
    let log = write_then_kill(d, ember, &uri, seed, BLOCKS, OPS, &format!("seed {seed}"));
    let model = Model::from_log(&log, VOL);

    // Restart: the memory cache is empty, the preload runs; wait for it to end.
    let ember = start(d, policy);
    let t = Instant::now();
    while metric(&scrape(&ember.metrics), "ember_warmup_state") == 2.0 {
        assert!(t.elapsed() < Duration::from_secs(60), "seed {seed}: preload never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = ember.output();
    let c = ClientBuilder::new()
        .export("disk")
        .connect_tcp(&ember.nbd)
        .unwrap_or_else(|e| panic!("seed {seed}: connect after the restart: {e}"));
    let mut got = vec![0u8; VOL as usize];
    for (i, piece) in got.chunks_mut(1 << 20).enumerate() {
        c.read(i as u64 * (1 << 20), piece).expect("read after the restart");
    }
    drop(c);
    let from_snapshot =
        metric(&scrape(&ember.metrics), "ember_warmup_preloaded_from_snapshot_blocks_total");
    ember.stop();
    Outcome {
        violations: model.violations(&got),
        acked_flushes: model.acked_flushes,
        from_snapshot,
        refused_line: out.contains("copies older than a logged write"),
    }
}

fn trials(policy: &str, n: u64) {
    let (mut bad, mut flushes, mut from_snap, mut refused) = (0, 0, 0.0, 0);
    let mut sample = Vec::new();
    for t in 0..n {
        let seed = 9100 + t;
        let o = trial(seed, policy);
        flushes += u64::from(o.acked_flushes);
        from_snap += o.from_snapshot;
        refused += u64::from(o.refused_line);
        if let Some((off, words)) = o.violations {
            bad += 1;
            sample.push(format!("seed {seed}: {words} words wrong from byte {off}"));
        }
    }
    println!(
        "snapshot, {policy}: {n} SIGKILL trials, {bad} with violations ({flushes} acknowledged FLUSHes, \
         {from_snap} blocks preloaded from the snapshot, {refused} trials refused stale copies)"
    );
    assert_eq!(bad, 0, "{sample:?}");
    assert!(flushes > 0, "no FLUSH was acknowledged before the kills");
    assert!(from_snap > 0.0, "the snapshot was never used: the trials test nothing of it");
    assert!(refused > 0, "no trial had a copy older than a logged write");
}

fn count() -> Option<u64> {
    if !have_nbdsh() && serve_support::skip_or_fail("nbdsh (libnbd-bin) is not installed") {
        return None;
    }
    Some(std::env::var("EMBER_SNAPSHOT_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(20))
}

#[test]
fn sigkill_with_the_snapshot_loses_nothing_flushed_and_returns_no_stale_copy() {
    if let Some(n) = count() {
        trials("write-through", n);
    }
}

#[test]
fn sigkill_with_the_snapshot_under_write_back_flush() {
    // Dirty blocks are not copied: the snapshot holds only what backing has.
    if let Some(n) = count() {
        trials("write-back-flush", n / 2);
    }
}
