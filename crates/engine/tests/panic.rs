//! A panic inside a request (here: a cache device that panics once, in the
//! allocation-write of a read miss) must never leave a mapped-but-unfilled cache block
//! readable. Before the fix the read miss had mapped the key to a reused cache block (still
//! holding the evicted block's bytes) and the unwind skipped the cleanup, so the next read of
//! the key returned the other block's bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::MemDevice;
use ember_engine::{Device, Engine, StartKind, WriteMode, WritebackConfig};
use ember_testkit::devices::{PanicOnce, Wrap};
use ember_testkit::engine::{format, open_lru};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

const BS: u64 = 4096;
const VOL: u64 = 1024 * BS;

/// Block `b`'s bytes on the backing volume: every byte names its block.
fn block(b: u64) -> Vec<u8> {
    (0..BS).map(|i| (b as u8).wrapping_mul(37).wrapping_add((i % 251) as u8)).collect()
}

/// An engine over a cache device that panics once armed (a faulting driver, a bug).
fn open(cache: Arc<Wrap<PanicOnce>>, backing: Arc<MemDevice>, mode: WriteMode) -> Engine {
    let volumes: Vec<(&str, Arc<dyn Device>)> = vec![("v", backing)];
    open_lru(cache, volumes, mode, WritebackConfig::default()).unwrap()
}

fn panic_in_a_fill_then_read(mode: WriteMode) {
    let bytes: Vec<u8> = (0..VOL / BS).flat_map(block).collect();
    let backing = Arc::new(MemDevice::from_bytes(bytes));
    let cache = Arc::new(PanicOnce::new(MemDevice::new(1 << 20)));
    let g = format(cache.as_ref(), &[("v", VOL)], Some(0)).geometry;
    let cap = g.data_blocks;
    assert!(cap + 1 < VOL / BS, "the volume must be larger than the cache");
    let engine = open(cache.clone(), backing.clone(), mode);
    let v = engine.volume("v").unwrap();
    let mut buf = vec![0u8; BS as usize];
    // Fill the cache: blocks 0..cap, each in its own cache block.
    for b in 0..cap {
        v.read(b * BS, &mut buf).unwrap();
        assert!(buf == block(b), "block {b}");
    }
    // The next miss evicts block 0 (LRU) and reuses its cache block, which still holds block
    // 0's bytes; the allocation-write of the new block panics.
    let key = cap;
    cache.arm();
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut b = vec![0u8; BS as usize];
        v.read(key * BS, &mut b)
    }));
    assert!(r.is_err(), "the cache write panicked");
    assert!(!cache.armed.load(SeqCst));
    // The next read of the key: backing's bytes, or an error, never block 0's bytes.
    let mut again = vec![0u8; BS as usize];
    match v.read(key * BS, &mut again) {
        Ok(()) => {
            assert!(again != block(0), "read of block {key} returned block 0's bytes");
            assert!(again == block(key), "read of block {key} after the panic: wrong bytes");
        }
        Err(e) => eprintln!("read after the panic failed (allowed): {e}"),
    }
    // Every other block reads right (or fails), and a restart starts cold and correct.
    for b in [1, cap / 2, cap - 1, key + 1] {
        if v.read(b * BS, &mut again).is_ok() {
            assert!(again == block(b), "block {b} after the panic: wrong bytes");
        }
    }
    let _ = engine.shutdown();
    drop(v);
    drop(engine);
    let engine = open(cache, backing, mode);
    assert_ne!(engine.open_report().start, StartKind::Warm, "no warm start after a panic");
    let v = engine.volume("v").unwrap();
    for b in [0, 1, key, key + 1] {
        v.read(b * BS, &mut again).unwrap();
        assert!(again == block(b), "block {b} after the restart: wrong bytes");
    }
    engine.shutdown().unwrap();
}

ember_testkit::test_cases!(panic_in_a_fill_then_read {
    a_panic_in_a_fill_never_serves_another_blocks_bytes_write_through: (WriteMode::WriteThrough),
    a_panic_in_a_fill_never_serves_another_blocks_bytes_write_back: (WriteMode::WriteBackPersist),
});
