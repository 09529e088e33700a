//! A wait for the flusher ends once the cache device is given up: the device tripped
//! (`health/`), so the flusher writes nothing more back, and no request may come to make the
//! switch into degraded mode (whose error generation would end the wait).

use super::sync_group_tests::{grouped, SyncGate};
use super::tests::{block, devices, open, BS};
use crate::health::DegradeCause;
use crate::WriteMode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `flush_all` waits for epoch 1's sync (held), the cache trips meanwhile, the sync returns:
/// epoch 1 is clean, epoch 2 never will be, and the call must say so instead of waiting.
#[test]
fn a_flush_on_demand_ends_when_the_cache_trips_while_it_waits() {
    let (cache, mem) = devices();
    let gate = Arc::new(SyncGate::new(mem));
    let e = Arc::new(open(cache, gate.clone(), WriteMode::OrderedWriteBack, grouped()).unwrap());
    let v = e.volume("v").unwrap();
    for b in 0..8u64 {
        v.write(b * BS, &block(1 + b as u8), false).unwrap();
    }
    v.flush().unwrap(); // ordered: closes epoch 1, writes nothing back
    for b in 8..16u64 {
        v.write(b * BS, &block(50 + b as u8), false).unwrap();
    }
    gate.arm();
    // A thread of its own, not a scope: a call that never returns must fail this test, not
    // hang it.
    let e2 = e.clone();
    let flush = std::thread::spawn(move || e2.flush_all(&mut |_| {}));
    gate.wait_caught();
    // A failed cache-device sync trips the cache at once; no request comes after it.
    e.inner.health.trip(DegradeCause::SyncFailed, "the test's cache sync failed".into());
    gate.release();
    let t0 = Instant::now();
    while !flush.is_finished() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "flush_all still waits for a flusher that writes nothing more back"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let err = flush.join().unwrap().unwrap_err();
    assert!(err.to_string().contains("given up"), "{err}");
}
