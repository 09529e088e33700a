//! Crash correctness: a seeded workload (open, requests, clean shutdown, warm reopen, more
//! requests, clean shutdown, reopen, requests, kill) is cut by a power failure of the cache
//! device at many points; unsynced cache writes are lost or torn. After power comes back, the
//! cache must open and read back exactly what backing holds (it may come back cold, never
//! stale), and every acknowledged write must be there.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::fault::PowerCut;
use ember_engine::device::{FaultDevice, MemDevice};
use ember_engine::{StartKind, WriteMode};
use ember_testkit::engine::*;
use std::sync::Arc;

const BLOCKS: u64 = 64;
const OPS: usize = 90;

struct Outcome {
    /// The request that failed (power cut), if any.
    failed: Option<Req>,
    ios: u64,
    /// I/O counts at which a clean shutdown had just completed.
    clean_at: Vec<u64>,
}

/// Run the workload; stop at the first failure (the machine died).
fn workload(
    rig: &Rig,
    fault: &FaultDevice,
    seed: u64,
    mode: WriteMode,
    model: &mut [Vec<u8>],
) -> Outcome {
    let mut r = rng(seed);
    let mut clean_at = Vec::new();
    for phase in 0..3 {
        let Ok(engine) = rig.open(mode) else {
            return Outcome { failed: None, ios: fault.io_count(), clean_at };
        };
        let ex = exports(&engine, rig);
        for _ in 0..OPS {
            let req = random_req(&mut r, 2, 0, BLOCKS, 50);
            if issue(&ex, &req).is_err() {
                return Outcome { failed: Some(req), ios: fault.io_count(), clean_at };
            }
            apply(model, &req);
        }
        if phase < 2 {
            if engine.shutdown().is_err() {
                return Outcome { failed: None, ios: fault.io_count(), clean_at };
            }
            clean_at.push(fault.io_count());
        }
        // Phase 2 ends without shutdown: kill -9.
    }
    Outcome { failed: None, ios: fault.io_count(), clean_at }
}

/// One run with the power cut at the `cut`-th cache I/O (None: no cut). Returns how the
/// cache started after the crash, and the workload's I/O count.
fn run(seed: u64, mode: WriteMode, cut: Option<(u64, PowerCut)>) -> (StartKind, u64, Vec<u64>) {
    // 384 KiB of cache for 2 x 256 KiB of volumes.
    let fault = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(384 * 1024))).unwrap());
    let rig = Rig::new(fault.clone(), 2, BLOCKS, seed);
    let mut model = rig.model();
    let base = fault.io_count();
    if let Some((n, pc)) = cut {
        fault.cut_power_at(n, pc);
    }
    let out = workload(&rig, &fault, seed, mode, &mut model);
    fault.revive();
    let truth = rig.model();
    // Every acknowledged write is on backing; only the failed request's range may differ.
    for (v, (t, m)) in truth.iter().zip(&model).enumerate() {
        let skip = match &out.failed {
            Some(Req::Write { vol, off, data, .. }) if *vol == v => {
                *off as usize..*off as usize + data.len()
            }
            Some(Req::Trim { vol, off, len } | Req::Zeroes { vol, off, len }) if *vol == v => {
                *off as usize..(*off + *len) as usize
            }
            _ => 0..0,
        };
        let bad = (0..t.len()).find(|i| !skip.contains(i) && t[*i] != m[*i]);
        assert_eq!(bad, None, "seed {seed} cut {cut:?}: acknowledged byte lost on vol{v}");
    }
    let engine = rig.open(mode).unwrap_or_else(|e| panic!("seed {seed} cut {cut:?}: reopen: {e}"));
    let start = engine.open_report().start.clone();
    let ex = exports(&engine, &rig);
    if let Err(e) = verify(&ex, &truth, 2 * BS as usize + 7) {
        panic!("seed {seed} cut {cut:?} ({start:?} start, {:?}): {e}", engine.open_report());
    }
    // And the recovered cache keeps working across a clean restart.
    engine.shutdown().unwrap();
    drop(ex);
    let engine = rig.open(mode).unwrap();
    assert_eq!(engine.open_report().start, StartKind::Warm);
    verify(&exports(&engine, &rig), &truth, BS as usize).unwrap();
    (start, out.ios - base, out.clean_at.iter().map(|c| c - base).collect())
}

fn sweep(seed: u64, mode: WriteMode) {
    // A run without a cut ends in kill -9: the next start is cold.
    let (start, total, clean_at) = run(seed, mode, None);
    assert_eq!(start, StartKind::Cold, "kill -9 leaves the clean flag cleared");
    assert!(total > 300, "the workload does I/O on the cache: {total}");
    let mut warm = 0;
    let mut cold = 0;
    let points = 40u64;
    // Evenly spread cuts, plus the I/Os just before and after each clean shutdown ends
    // (the superblock write, and the next open's clearing of the clean flag).
    let mut cuts: Vec<u64> =
        (0..points).map(|i| 1 + i * total / points + (seed * 7 + i) % 3).collect();
    for c in &clean_at {
        cuts.extend((c.saturating_sub(2)..c + 5).filter(|&n| n > 0));
    }
    for (i, n) in cuts.into_iter().enumerate() {
        let i = i as u64;
        let survive = if i.is_multiple_of(2) { 0.0 } else { 0.5 };
        let (start, _, _) = run(seed, mode, Some((n, PowerCut { survive, seed: seed ^ i })));
        match start {
            StartKind::Warm => warm += 1,
            StartKind::Cold => cold += 1,
            StartKind::Fresh => {}
        }
    }
    // The sweep hits both kinds of moment: between a clean shutdown and the next open's
    // first write (warm) and while running (cold).
    assert!(warm > 0 && cold > 0, "seed {seed}: warm {warm}, cold {cold}");
}

#[test]
fn power_cuts_never_leave_stale_data_write_through() {
    for seed in [1, 2] {
        sweep(seed, WriteMode::WriteThrough);
    }
}

#[test]
fn power_cuts_never_leave_stale_data_write_around() {
    sweep(3, WriteMode::WriteAround);
}
