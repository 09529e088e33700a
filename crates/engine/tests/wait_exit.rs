//! Every wait in the engine has an exit on error and on shutdown. Under
//! write-back flush, a write past the epoch cap waits for the flusher; with a backing that
//! fails every write the flusher never succeeds, and that wait used to loop forever (and with
//! it the clean shutdown, which drains the requests in flight).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::{FaultDevice, IoKind, MemDevice};
use ember_engine::{Device, DirtyLimit, Engine, EngineError, WriteMode, WritebackConfig};
use ember_testkit::devices::PanicOnce;
use ember_testkit::engine::{format, open_lru};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BS: u64 = 4096;
const VOL: u64 = 64 * BS;
/// Generous: the exits are taken within a few flusher retries (100 ms apart).
const BOUND: Duration = Duration::from_secs(10);

fn open(backing: Arc<FaultDevice>) -> Engine {
    open_mode(
        backing,
        WriteMode::WriteBackFlush,
        WritebackConfig { max_epochs: 1, ..Default::default() },
    )
}

/// An engine over a 2 MiB memory cache (no journal) and `backing`.
fn open_mode(backing: Arc<dyn Device>, mode: WriteMode, wb: WritebackConfig) -> Engine {
    let cache: Arc<dyn Device> = Arc::new(MemDevice::new(2 << 20));
    format(cache.as_ref(), &[("v", VOL)], Some(0));
    open_lru(cache, vec![("v", backing)], mode, wb).unwrap()
}

/// Run `f` on a thread; its result, or None if it did not return within `bound`.
fn bounded<T: Send + 'static>(
    bound: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(bound).ok()
}

#[test]
fn a_write_past_the_epoch_cap_fails_when_flushing_fails_and_shutdown_returns() {
    let backing = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(VOL))).unwrap());
    let engine = Arc::new(open(backing.clone()));
    let v = engine.volume("v").unwrap();
    // Every backing write fails from now on.
    backing.fail_nth(1, &[IoKind::Write], true);
    v.write(0, &[7u8; BS as usize], false).unwrap(); // dirty in epoch 1: no backing write yet
                                                     // The FLUSH closes epoch 1; the flusher cannot write it, so the FLUSH fails (EIO).
    let t = Instant::now();
    let v2 = v.clone();
    let flushed = bounded(BOUND, move || v2.flush()).expect("FLUSH returned");
    assert!(
        matches!(flushed, Err(EngineError::Io(_))),
        "FLUSH over a failing backing: {flushed:?}"
    );
    // Epoch 1 is still dirty and epoch 2 is current: a write is past the cap of one epoch.
    let v3 = v.clone();
    let wrote = bounded(BOUND, move || v3.write(BS, &[8u8; BS as usize], false));
    let wrote = wrote.expect("a write past the epoch cap returned while flushing kept failing");
    match &wrote {
        Err(EngineError::Io(e)) => {
            assert!(e.to_string().contains("injected fault"), "the flusher's error: {e}")
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
    // The data written before the cap is still readable (it stays dirty in the cache).
    let mut buf = vec![0u8; BS as usize];
    v.read(0, &mut buf).unwrap();
    assert_eq!(buf, vec![7u8; BS as usize]);
    // The clean shutdown returns (with the flusher's error: the dirty block cannot be written).
    let e2 = engine.clone();
    let down = bounded(BOUND, move || e2.shutdown()).expect("shutdown returned");
    assert!(down.is_err(), "a shutdown that cannot write dirty blocks reports it: {down:?}");
    eprintln!("all exits taken in {:?}", t.elapsed());
}

#[test]
fn a_write_waiting_at_the_epoch_cap_exits_on_shutdown() {
    // A shutdown that begins while a write waits at the cap: the write returns (not
    // acknowledged), and so does the shutdown.
    let backing = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(VOL))).unwrap());
    let engine = Arc::new(open(backing.clone()));
    let v = engine.volume("v").unwrap();
    backing.fail_nth(1, &[IoKind::Write], true);
    v.write(0, &[7u8; BS as usize], false).unwrap();
    let v2 = v.clone();
    assert!(bounded(BOUND, move || v2.flush()).expect("FLUSH returned").is_err());
    // A write now waits at the cap; begin the shutdown while it waits.
    let v3 = v.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(v3.write(BS, &[8u8; BS as usize], false));
    });
    std::thread::sleep(Duration::from_millis(50));
    let e2 = engine.clone();
    let down = bounded(BOUND, move || e2.shutdown()).expect("shutdown returned");
    assert!(down.is_err(), "dirty data could not reach backing: {down:?}");
    let wrote = rx.recv_timeout(BOUND).expect("the waiting write returned");
    assert!(wrote.is_err(), "the waiting write was not acknowledged: {wrote:?}");
    // After shutdown every request is refused.
    assert!(matches!(v.write(0, &[1u8; 512], false), Err(EngineError::ShutDown)));
}

/// Ordered write-back: a write past max_dirty waits for the flusher (it never falls back to
/// write-through), and a TRIM waits for the older epochs; over a backing that fails every
/// write both end with the flusher's error, and the shutdown returns.
#[test]
fn ordered_write_back_waits_end_when_flushing_fails_and_shutdown_returns() {
    let backing = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(VOL))).unwrap());
    let wb =
        WritebackConfig { max_dirty: Some(DirtyLimit::Blocks(4)), ..WritebackConfig::default() };
    let engine = Arc::new(open_mode(backing.clone(), WriteMode::OrderedWriteBack, wb));
    let v = engine.volume("v").unwrap();
    backing.fail_nth(1, &[IoKind::Write], true);
    v.write(0, &[7u8; 4 * BS as usize], false).unwrap(); // 4 dirty blocks: max_dirty
    v.flush().unwrap(); // closes the epoch, waits for nothing
    let v2 = v.clone();
    let wrote = bounded(BOUND, move || v2.write(8 * BS, &[8u8; BS as usize], false))
        .expect("a write past max_dirty returned while flushing kept failing");
    match &wrote {
        Err(EngineError::Io(e)) => {
            assert!(e.to_string().contains("injected fault"), "the flusher's error: {e}")
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
    let v3 = v.clone();
    let trimmed = bounded(BOUND, move || v3.trim(10 * BS, BS, false)).expect("TRIM returned");
    assert!(matches!(trimmed, Err(EngineError::Io(_))), "TRIM behind a failing epoch: {trimmed:?}");
    assert_eq!(engine.stats().total.write_through_fallbacks, 0);
    let mut buf = vec![0u8; BS as usize];
    v.read(0, &mut buf).unwrap();
    assert_eq!(buf, vec![7u8; BS as usize], "the dirty data stays readable");
    let e2 = engine.clone();
    let down = bounded(BOUND, move || e2.shutdown()).expect("shutdown returned");
    assert!(down.is_err(), "a shutdown that cannot write dirty blocks reports it: {down:?}");
}

#[test]
fn a_panic_in_the_flusher_ends_every_wait() {
    let backing = Arc::new(PanicOnce::new(MemDevice::new(VOL)));
    let engine = Arc::new(open_mode(
        backing.clone(),
        WriteMode::WriteBackFlush,
        WritebackConfig { max_epochs: 1, ..WritebackConfig::default() },
    ));
    let v = engine.volume("v").unwrap();
    v.write(0, &[7u8; BS as usize], false).unwrap();
    backing.arm();
    // The flusher's backing write panics: the FLUSH waiting for it fails, and so does
    // everything after (the engine stopped serving), in bounded time.
    let v2 = v.clone();
    let flushed = bounded(BOUND, move || v2.flush()).expect("FLUSH returned");
    assert!(matches!(flushed, Err(EngineError::Io(_))), "{flushed:?}");
    let v3 = v.clone();
    let wrote = bounded(BOUND, move || v3.write(BS, &[8u8; BS as usize], false))
        .expect("a write after the flusher died returned");
    let msg = format!("{:?}", wrote.expect_err("not acknowledged"));
    assert!(msg.contains("panicked"), "{msg}");
    let v4 = v.clone();
    let flushed = bounded(BOUND, move || v4.flush()).expect("a second FLUSH returned");
    assert!(flushed.is_err());
    let e2 = engine.clone();
    assert!(bounded(BOUND, move || e2.shutdown()).expect("shutdown returned").is_err());
}
