//! Random concurrent reads, writes, trims and flushes from several threads on two volumes
//! sharing a small cache, checked byte for byte against a reference model, before and after a
//! warm restart.
//!
//! Each thread owns groups of 8 blocks (group % threads == thread) and writes only there, so
//! the model is exact; every thread reads anywhere, so read-miss fills of one thread race with
//! writes, trims and evictions of the others on the same blocks. A fill that installed data
//! older than a racing write would be caught when the owner reads its block back.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::MemDevice;
use ember_engine::{StartKind, WriteMode};
use ember_testkit::engine::*;
use rand::Rng;
use std::sync::{Arc, Mutex};

const THREADS: u64 = 4;
const BLOCKS: u64 = 256;
const GROUP: u64 = 8;

fn run(mode: WriteMode, seed: u64) {
    let (rig, engine, ex, model) = workload(mode, seed);
    check_v1(mode, seed, rig, engine, ex, model);
}

type Run = (Rig, ember_engine::Engine, Vec<ember_engine::Volume>, Vec<Vec<u8>>);

/// The concurrent workload; returns the model of every acknowledged write.
fn workload(mode: WriteMode, seed: u64) -> Run {
    // 512 KiB of cache for 2 x 1 MiB of volumes: evictions all the time.
    let mut rig = Rig::new(Arc::new(MemDevice::new(512 * 1024)), 2, BLOCKS, seed);
    rig.jitter = true;
    let model = Arc::new(Mutex::new(rig.model()));
    let engine = rig.open(mode).unwrap();
    let ex = exports(&engine, &rig);
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (ex, model, failures) = (ex.clone(), model.clone(), failures.clone());
            s.spawn(move || {
                let mut r = rng(seed * 100 + t);
                for i in 0..700 {
                    // A group this thread owns, or (for reads) any group.
                    let own = r.gen_range(0..BLOCKS / GROUP / THREADS) * THREADS + t;
                    let req = random_req(&mut r, 2, own * GROUP, own * GROUP + GROUP, 40);
                    let req = match req {
                        Req::Read { vol, .. } if r.gen_bool(0.5) => {
                            // A read spanning other threads' groups (fills racing their writes).
                            let off = r.gen_range(0..(BLOCKS - 24) * BS);
                            Req::Read { vol, off, len: r.gen_range(1..24 * BS as usize) }
                        }
                        other => other,
                    };
                    // Own-range requests are applied to the model after acknowledgement;
                    // no other thread changes those bytes.
                    let got = match issue(&ex, &req) {
                        Ok(g) => g,
                        Err(e) => {
                            failures.lock().unwrap().push(format!("t{t} #{i} {req:?}: {e}"));
                            return;
                        }
                    };
                    let mut m = model.lock().unwrap();
                    apply(&mut m, &req);
                    if let (Req::Read { vol, off, .. }, Some(got)) = (&req, got) {
                        // Check the bytes of groups this thread owns (stable under races).
                        for (k, &g) in got.iter().enumerate() {
                            let byte = *off as usize + k;
                            let group = byte as u64 / BS / GROUP;
                            if group % THREADS == t && g != m[*vol][byte] {
                                failures.lock().unwrap().push(format!(
                                    "t{t} #{i} vol{vol} byte {byte}: got {g:#04x} want {:#04x}",
                                    m[*vol][byte]
                                ));
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    let f = failures.lock().unwrap();
    assert!(f.is_empty(), "{mode:?} seed {seed}: {:?}", &f[..f.len().min(3)]);
    let model = model.lock().unwrap().clone();
    drop(f);
    (rig, engine, ex, model)
}

fn check_v1(
    mode: WriteMode,
    _seed: u64,
    rig: Rig,
    engine: ember_engine::Engine,
    ex: Vec<ember_engine::Volume>,
    model: Vec<Vec<u8>>,
) {
    assert_eq!(model, rig.model(), "backing holds every acknowledged write");
    let s = engine.stats();
    assert!(s.total.read_hits > 100, "the cache served hits: {:?}", s.total);
    assert!(s.total.evictions > 100, "and was under pressure: {:?}", s.total);
    assert!(s.total.invalidations > 10, "{:?}", s.total);
    verify(&ex, &model, 3 * BS as usize + 17).unwrap();
    engine.shutdown().unwrap();
    drop(ex);
    let engine = rig.open(mode).unwrap();
    assert_eq!(engine.open_report().start, StartKind::Warm);
    assert!(engine.open_report().loaded_blocks > 50);
    let ex = exports(&engine, &rig);
    // The last thing read before shutdown was the end of vol1 (the verify scan), so the
    // warm cache holds its last `capacity` blocks: reading the last 100 hits every time.
    let tail = 100 * BS as usize;
    let mut got = vec![0u8; tail];
    ex[1].read(BLOCKS * BS - tail as u64, &mut got).unwrap();
    assert_eq!(got, model[1][model[1].len() - tail..]);
    let s = engine.stats();
    assert_eq!((s.total.read_hits, s.total.read_misses), (100, 0), "warm restart serves hits");
    verify(&ex, &model, BS as usize).unwrap();
}

/// Write-back: reads matched the model during the run (checked in `workload`); then the
/// engine, after FLUSHes, a clean stop and a restart, still serves the model; backing holds
/// it once the dirty blocks are written back (a clean stop under write-back flush, a
/// write-through open after write-back persist).
fn run_wb(mode: WriteMode, seed: u64) {
    let (rig, engine, ex, model) = workload(mode, seed);
    let s = engine.stats();
    assert!(s.total.dirty_writes > 100, "{mode:?}: {:?}", s.total);
    assert!(s.total.read_hits > 100 && s.total.evictions > 100, "{mode:?}: {:?}", s.total);
    verify(&ex, &model, 3 * BS as usize + 17).unwrap();
    for e in &ex {
        e.flush().unwrap();
    }
    verify(&ex, &model, BS as usize).unwrap();
    engine.shutdown().unwrap();
    drop((ex, engine));
    let engine = rig.open(mode).unwrap();
    assert_eq!(engine.open_report().start, StartKind::Warm);
    let ex = exports(&engine, &rig);
    verify(&ex, &model, 5 * BS as usize).unwrap();
    engine.shutdown().unwrap();
    drop((ex, engine));
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    assert_eq!(model, rig.model(), "{mode:?}: backing holds every acknowledged write");
    drop(engine);
}

#[test]
fn concurrent_write_through_matches_the_model() {
    for seed in 1..=3 {
        run(WriteMode::WriteThrough, seed);
    }
}

#[test]
fn concurrent_write_back_flush_matches_the_model() {
    for seed in 21..=22 {
        run_wb(WriteMode::WriteBackFlush, seed);
    }
}

#[test]
fn concurrent_write_back_persist_matches_the_model() {
    for seed in 31..=32 {
        run_wb(WriteMode::WriteBackPersist, seed);
    }
}

#[test]
fn concurrent_ordered_write_back_matches_the_model() {
    for seed in 41..=42 {
        run_wb(WriteMode::OrderedWriteBack, seed);
    }
}

#[test]
fn concurrent_write_around_matches_the_model() {
    for seed in 11..=12 {
        run(WriteMode::WriteAround, seed);
    }
}
