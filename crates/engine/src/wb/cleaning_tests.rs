//! Cleaning control in a running engine: background cleaning under a cap writes at most
//! cap × time plus one batch, and a flush on demand ignores the cap; under the idle policy,
//! the controller's slow rate while requests come and full speed once they stop.
//!
//! The idle time is a second: the test thread's requests come every 5 ms, and a stall of
//! that thread as long as the idle time (a loaded machine) would be quiet to the flusher.

use super::tests::{block, devices, open, BS};
use crate::{CleaningConfig, CleaningState, DirtyLimit, Engine, WriteMode, WritebackConfig};
use std::time::{Duration, Instant};

const BLOCKS: u64 = 64;

/// The idle policy's quiet time in these tests.
const IDLE: Duration = Duration::from_secs(1);

/// The flusher idles until the test lowers min dirty.
fn resting() -> WritebackConfig {
    WritebackConfig {
        max_dirty: Some(DirtyLimit::Blocks(200)),
        min_dirty: Some(DirtyLimit::Blocks(100)),
        max_epochs: 4,
        batch_blocks: 4,
        lru_flush_order: false,
    }
}

/// An engine with every block of the volume dirty and the flusher resting.
fn dirty_engine() -> Engine {
    let (cache, backing) = devices();
    let e = open(cache, backing, WriteMode::WriteBackFlush, resting()).unwrap();
    let v = e.volume("v").unwrap();
    for b in 0..BLOCKS {
        v.write(b * BS, &block(b as u8 + 1), false).unwrap();
    }
    assert_eq!(e.dirty_stats().dirty_blocks, BLOCKS);
    e
}

fn start_cleaning(e: &Engine) {
    let wb = WritebackConfig { min_dirty: Some(DirtyLimit::Blocks(0)), ..resting() };
    e.set_writeback(&wb).unwrap();
}

fn flushed(e: &Engine) -> u64 {
    e.stats().total.flushed_blocks
}

#[test]
fn background_cleaning_under_the_cap_writes_at_most_cap_times_time_plus_one_batch() {
    let e = dirty_engine();
    // Eight blocks a second: a paced batch is one block (a tenth of a second of it).
    let cap_blocks = 8.0;
    let c = CleaningConfig { flush_rate: 8 * BS, min_rate: BS, ..Default::default() };
    e.set_cleaning(&c).unwrap();
    let t0 = Instant::now();
    start_cleaning(&e);
    let batch = 1.0;
    while t0.elapsed() < Duration::from_millis(1500) {
        let n = flushed(&e) as f64;
        let allowed = cap_blocks * t0.elapsed().as_secs_f64() + batch;
        assert!(n <= allowed, "{n} blocks flushed after {:?} (at most {allowed})", t0.elapsed());
        std::thread::sleep(Duration::from_millis(20));
    }
    let n = flushed(&e);
    assert!(n >= 4, "background cleaning goes on under the cap: {n} blocks");
    let s = e.cleaning();
    assert_eq!((s.state, s.rate, s.flush_rate), (CleaningState::Full, Some(8 * BS), 8 * BS));
    assert_eq!(e.status().cleaning, s);
    // A flush on demand is never slowed by the cap: the rest (some 50 blocks, six seconds
    // at the cap) at once.
    let r = e.flush_all(&mut |_| {}).unwrap();
    assert!(r.took < Duration::from_secs(2), "{r:?}");
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
}

#[test]
fn the_idle_policy_steers_while_requests_come_and_cleans_at_full_speed_once_they_stop() {
    let e = dirty_engine();
    let c = CleaningConfig {
        flush_idle: IDLE,
        dirty_target: Some(DirtyLimit::Blocks(0)),
        min_rate: BS,
        ..Default::default()
    };
    e.set_cleaning(&c).unwrap();
    let v = e.volume("v").unwrap();
    let mut buf = vec![0u8; BS as usize];
    let t0 = Instant::now();
    start_cleaning(&e);
    // Requests every 5 ms for a second: 256 KiB over a target of 0 asks for 6.4 KiB/s (the
    // proportional term; the integral adds little in a second), under two blocks a second.
    let mut last_request = Instant::now();
    while t0.elapsed() < Duration::from_secs(1) {
        last_request = Instant::now();
        v.read(0, &mut buf).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let busy = flushed(&e);
    assert!(busy <= 6, "{busy} blocks flushed while requests came");
    assert_eq!(e.cleaning().state, CleaningState::Steering);
    // Quiet: full speed once the idle time has passed since the last request, not before.
    while e.dirty_stats().dirty_blocks > 0 {
        assert!(last_request.elapsed() < Duration::from_secs(6), "{:?}", e.cleaning());
        std::thread::sleep(Duration::from_millis(10));
    }
    let quiet = last_request.elapsed();
    assert!(quiet >= IDLE.mul_f64(0.9), "clean after {quiet:?} of quiet");
    assert_eq!(flushed(&e), BLOCKS);
    // The settings are checked against the cache.
    let bad = CleaningConfig { dirty_target: Some(DirtyLimit::Blocks(1 << 40)), ..c };
    assert!(e.set_cleaning(&bad).is_err());
    let bad = CleaningConfig { flush_rate: 4096, min_rate: 8192, ..c };
    assert!(e.set_cleaning(&bad).is_err());
    assert_eq!(e.cleaning().flush_idle_ms, 1000, "a refused change changes nothing");
}

/// The idle policy's case that spares the foreground: the dirty count at or below the
/// target while requests come. The controller then asks for its minimum rate, so background
/// cleaning writes at most min rate × time plus one batch, however much is dirty above
/// min dirty; once the requests stop, it cleans at full speed.
#[test]
fn at_or_below_the_target_requests_hold_cleaning_to_the_minimum_rate() {
    let e = dirty_engine();
    let c = CleaningConfig {
        flush_idle: IDLE,
        dirty_target: Some(DirtyLimit::Blocks(BLOCKS)),
        min_rate: BS,
        ..Default::default()
    };
    e.set_cleaning(&c).unwrap();
    let v = e.volume("v").unwrap();
    let mut buf = vec![0u8; BS as usize];
    let t0 = Instant::now();
    start_cleaning(&e);
    while t0.elapsed() < Duration::from_millis(1500) {
        v.read(0, &mut buf).unwrap();
        let n = flushed(&e) as f64;
        let allowed = t0.elapsed().as_secs_f64() + 1.0;
        assert!(n <= allowed, "{n} blocks flushed after {:?} (at most {allowed})", t0.elapsed());
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = e.cleaning();
    assert_eq!((s.state, s.rate), (CleaningState::Steering, Some(BS)), "{s:?}");
    // Quiet: full speed.
    let quiet = Instant::now();
    while e.dirty_stats().dirty_blocks > 0 {
        assert!(quiet.elapsed() < Duration::from_secs(6), "{:?}", e.cleaning());
        std::thread::sleep(Duration::from_millis(10));
    }
}
