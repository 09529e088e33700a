//! Power-cut trials of the write policies (Qin's table 3.1).
//!
//! A seeded client issues random writes (unique random content, whole and partial blocks,
//! some FUA), reads (checked against what was acknowledged), WRITE_ZEROES, TRIMs and FLUSHes
//! to one volume, while the flusher runs. At a random I/O (counted over the cache device and
//! backing together) the power fails on *both*: every write not yet synced is dropped (or,
//! in some trials, each 512-byte sector of it kept or dropped at random: torn). Then:
//!
//! - write-back persist recovers from the same cache device (a second power cut may hit the
//!   recovery itself, which must then succeed on the next try: idempotent replay);
//! - write-back flush and write-through recover from backing alone, the cache thrown away;
//!
//! and every byte must hold the value it had at the last acknowledged FLUSH (or at an
//! acknowledged FUA write of it after that), or the value of a write issued after that point.
//! Zero violations. Since correctness must rest on flushes, not write order, the devices
//! here reorder and drop freely between syncs.
//!
//! Unsafe write-back is run through the same check as the negative control: it must be
//! caught losing acknowledged writes, which shows the check can fail.
//!
//! The client is checked as well as the data: any error it sees before the power fails
//! (an error from a healthy engine on healthy devices) fails the trial, and the uncut
//! calibration run must complete every one of its requests. Cut points are drawn from the
//! calibration run's I/O count, and a client whose cut has not come when its requests are done
//! goes on issuing requests until it does, so every trial is cut mid-run (checked).
//!
//! `EMBER_POWER_TRIALS=N` sets the trials per safe policy (CI default 150; unsafe: 40).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::fault::PowerCut;
use ember_engine::{VolumeStats, WriteMode};
use ember_testkit::engine::{rng, BS};
use ember_testkit::power::{client, Bench, Model, Plain, OPS, VOL};
use rand::Rng;
use std::sync::atomic::Ordering::SeqCst;

/// What a trial checks after the cut.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Every write acknowledged before the last acknowledged FLUSH (or FUA) is there.
    Durable,
    /// Backing is a consistent older state: a prefix of epochs plus part of the next
    /// (ordered write-back; acknowledged FLUSHes are not durable).
    Prefix,
}

/// One trial: returns (violating bytes, whether the cut happened), and adds the engine's
/// counters to `seen` and, under [`Check::Prefix`], the epochs backing lags behind the
/// client to `lags`. Panics if the client saw an error before the cut.
fn trial(
    mode: WriteMode,
    check: Check,
    seed: u64,
    cut_after: u64,
    pc: PowerCut,
    seen: &mut VolumeStats,
    lags: &mut Vec<usize>,
) -> (Option<(usize, usize)>, bool) {
    let bench = Bench::new(seed);
    let init = bench.backing_mem.snapshot();
    bench.power.arm(cut_after, pc);
    let model = match bench.open(mode) {
        Ok(e) => {
            let (model, _) = client(&e, seed, init, &bench.power, &mut Plain)
                .unwrap_or_else(|err| panic!("seed {seed} ({}): {err}", mode.name()));
            seen.add(&e.stats().total);
            // Drop = crash: nothing more is written (the flusher stops).
            drop(e);
            model
        }
        // The power failed while opening: nothing was acknowledged.
        Err(err) => {
            assert!(bench.power.fired(), "seed {seed}: open failed before the power cut: {err}");
            Model::new(init)
        }
    };
    let cut = bench.power.fired() && bench.cache.is_dead();
    bench.power.revive();
    let got = match mode {
        WriteMode::WriteBackPersist => {
            // Sometimes the power fails again during recovery; the next one must succeed.
            let mut r = rng(seed ^ 0x5EC);
            if cut && r.gen_bool(0.3) {
                bench.power.arm(r.gen_range(1..40), PowerCut::DROP_ALL);
                drop(bench.open(mode));
                bench.power.revive();
            }
            let e = bench.open(mode).expect("recovery");
            let v = e.volume("v").unwrap();
            let mut got = vec![0u8; VOL as usize];
            v.read(0, &mut got).unwrap();
            // The recovered dirty blocks must reach backing: a clean stop, then a
            // write-through open (which writes recovered dirty blocks to backing first).
            e.shutdown().expect("clean stop after recovery");
            drop(e);
            let e = bench.open(WriteMode::WriteThrough).expect("reopen");
            drop(e);
            assert_eq!(
                bench.backing_mem.snapshot(),
                got,
                "seed {seed}: recovered data did not reach backing intact"
            );
            got
        }
        WriteMode::OrderedWriteBack => {
            // Recoverable failure: restarted on the same cache device, the cache starts cold
            // (its map is not persisted) and serves exactly what backing holds.
            let backing = bench.backing_mem.snapshot();
            let e = bench.open(mode).expect("restart after the power cut");
            assert_ne!(
                e.open_report().start,
                ember_engine::StartKind::Warm,
                "seed {seed}: {}",
                e.open_report().reason
            );
            let v = e.volume("v").unwrap();
            let mut got = vec![0u8; VOL as usize];
            v.read(0, &mut got).unwrap();
            drop(e);
            assert!(got == backing, "seed {seed}: the restarted cache serves other than backing");
            // Destructive failure: backing alone, the same bytes.
            backing
        }
        // Destructive failure: the cache device is gone; backing alone must hold it.
        _ => bench.backing_mem.snapshot(),
    };
    match check {
        Check::Durable => (model.violations(&got), cut),
        Check::Prefix => match model.prefix_epoch(&got) {
            Ok(e) => {
                lags.push(model.epochs.len() - 1 - e);
                (None, cut)
            }
            Err(v) => (Some(v), cut),
        },
    }
}

fn trials() -> u64 {
    std::env::var("EMBER_POWER_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(150)
}

/// Runs `n` trials of `mode`; returns (trials with a cut, trials with violations, a sample,
/// the engines' summed counters).
fn run(mode: WriteMode, check: Check, n: u64) -> (u64, u64, Vec<String>, VolumeStats) {
    // Calibrate: the I/O count of an uncut run, which must complete every request, bounds
    // the cut points.
    let total = {
        let bench = Bench::new(1);
        let e = bench.open(mode).expect("open");
        let init = bench.backing_mem.snapshot();
        let (_, done) = client(&e, 1, init, &bench.power, &mut Plain)
            .unwrap_or_else(|err| panic!("calibration run ({}): {err}", mode.name()));
        assert_eq!(done, OPS, "the calibration run ({}) completed {done} of {OPS}", mode.name());
        drop(e);
        bench.power.ios.load(SeqCst).max(10)
    };
    let mut cuts = 0;
    let mut bad = 0;
    let mut sample = Vec::new();
    let mut seen = VolumeStats::default();
    let mut lags = Vec::new();
    for t in 0..n {
        let seed = 1000 + t;
        let mut r = rng(seed ^ 0xC07);
        let at = r.gen_range(1..=total);
        let pc = if t % 3 == 2 { PowerCut { survive: 0.5, seed } } else { PowerCut::DROP_ALL };
        let (v, cut) = trial(mode, check, seed, at, pc, &mut seen, &mut lags);
        cuts += u64::from(cut);
        if let Some((off, count)) = v {
            bad += 1;
            if sample.len() < 3 {
                sample.push(format!(
                    "seed {seed} cut at I/O {at}: {count} bytes wrong from byte {off} (block {})",
                    off as u64 / BS
                ));
            }
        }
    }
    println!(
        "{}: {n} power-cut trials ({cuts} cut mid-run), {bad} with violations; {} dirty \
         block writes, {} written through, {} flushed, {} journal commits, {} checkpoints",
        mode.name(),
        seen.dirty_writes,
        seen.write_through_fallbacks,
        seen.flushed_blocks,
        seen.journal_commits,
        seen.persist_checkpoints
    );
    if check == Check::Prefix && !lags.is_empty() {
        println!(
            "{}: backing held a prefix of the epochs in {} trials, behind the client by {:.2} \
             epochs on average (max {}, {} trials fully caught up)",
            mode.name(),
            lags.len(),
            lags.iter().sum::<usize>() as f64 / lags.len() as f64,
            lags.iter().max().unwrap_or(&0),
            lags.iter().filter(|&&l| l == 0).count()
        );
    }
    (cuts, bad, sample, seen)
}

#[test]
fn write_back_persist_survives_power_cuts_with_the_cache_device() {
    let n = trials();
    let (cuts, bad, sample, seen) = run(WriteMode::WriteBackPersist, Check::Durable, n);
    assert_eq!(bad, 0, "{sample:?}");
    // The trials exercised every path: dirty writes, write-through fallbacks, the flusher,
    // journal commits and checkpoints.
    assert!(seen.dirty_writes > 0 && seen.write_through_fallbacks > 0, "{seen:?}");
    assert!(seen.flushed_blocks > 0, "{seen:?}");
    assert!(seen.journal_commits > 0 && seen.persist_checkpoints > 0, "{seen:?}");
    // Cut points lie within the calibration run's I/O count and a client goes on until its
    // cut comes: every trial is cut mid-run.
    assert_eq!(cuts, n, "only {cuts} of {n} trials were cut mid-run");
}

#[test]
fn write_back_flush_survives_power_cuts_from_backing_alone() {
    let n = trials();
    let (cuts, bad, sample, seen) = run(WriteMode::WriteBackFlush, Check::Durable, n);
    assert_eq!(bad, 0, "{sample:?}");
    assert!(seen.dirty_writes > 0 && seen.write_through_fallbacks > 0, "{seen:?}");
    assert!(seen.flushed_blocks > 0, "{seen:?}");
    // Cut points lie within the calibration run's I/O count and a client goes on until its
    // cut comes: every trial is cut mid-run.
    assert_eq!(cuts, n, "only {cuts} of {n} trials were cut mid-run");
}

#[test]
fn write_through_survives_power_cuts_from_backing_alone() {
    let n = trials();
    let (cuts, bad, sample, _) = run(WriteMode::WriteThrough, Check::Durable, n);
    assert_eq!(bad, 0, "{sample:?}");
    // Cut points lie within the calibration run's I/O count and a client goes on until its
    // cut comes: every trial is cut mid-run.
    assert_eq!(cuts, n, "only {cuts} of {n} trials were cut mid-run");
}

#[test]
fn unsafe_write_back_is_caught_losing_acknowledged_writes() {
    // The negative control: the same check, on the policy that ignores FLUSH, must fail.
    let (_, bad, _, _) = run(WriteMode::UnsafeWriteBack, Check::Durable, 40);
    assert!(bad > 0, "unsafe write-back lost nothing in 40 power cuts: the check is blind");
}

/// Ordered write-back (Koller et al.; thesis table 3.1, third row): after a power cut,
/// with the cache device lost (destructive) or restarted on it (recoverable, the cache
/// starts cold), backing holds every write of the epochs before some epoch E and any subset
/// of E's writes: consistent, older. Durability of acknowledged FLUSHes is not promised,
/// and the durability check finds the loss (so FLUSH really returns without waiting).
#[test]
fn ordered_write_back_keeps_backing_a_consistent_older_state_through_power_cuts() {
    let n = trials();
    let (cuts, bad, sample, seen) = run(WriteMode::OrderedWriteBack, Check::Prefix, n);
    assert_eq!(bad, 0, "{sample:?}");
    assert!(seen.dirty_writes > 0 && seen.flushed_blocks > 0, "{seen:?}");
    // No write falls back to write-through: a write waits for the flusher instead.
    assert_eq!(seen.write_through_fallbacks, 0, "{seen:?}");
    // Requests that go to backing directly, behind the older epochs, were exercised.
    assert!(seen.trims > 0 && seen.write_zeroes > 0 && seen.admission_refusals > 0, "{seen:?}");
    assert_eq!(cuts, n, "only {cuts} of {n} trials were cut mid-run");
    let (_, lost, _, _) = run(WriteMode::OrderedWriteBack, Check::Durable, 40);
    assert!(lost > 0, "ordered write-back lost no acknowledged FLUSH in 40 power cuts");
}

/// The negative control of the prefix check: unsafe write-back ignores FLUSH, so its
/// flusher writes blocks of different client epochs in ascending block order, and its
/// write-through fallbacks overtake older dirty blocks. The check must catch it.
#[test]
fn unsafe_write_back_is_caught_breaking_epoch_order() {
    let (_, bad, _, _) = run(WriteMode::UnsafeWriteBack, Check::Prefix, 40);
    assert!(bad > 0, "unsafe write-back kept epoch order in 40 power cuts: the check is blind");
}
