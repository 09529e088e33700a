//! The hit path allocates (almost) nothing: a 4 KiB read hit through `Volume::read` and
//! through `Volume::read_if_resident` (the NBD server's hit path) makes no heap allocation of
//! its own ("no per-request Vec", fixed-size arrays, no allocation in the stripe
//! locks). Counted by a global allocator that counts only on the test's thread, while that
//! thread reads.
//!
//! The bound is 0.25 allocations per hit, not 0: the cache state's clean LRU (a `BTreeMap`,
//! `crates/engine/src/state.rs`, not part of this path's rewrite) moves the hit block to its
//! newest end, which allocates a tree node every seven hits or so (0.14 per hit measured, all
//! of them 192-byte nodes). Before the rewrite the path made 6.1 allocations per hit
//! (24,571 in 4,000: the plan, dirty, filled and bad vectors, the run lists, the stripe
//! index and guard vectors).

use ember_engine::device::MemDevice;
use ember_engine::WriteMode;
use ember_testkit::engine::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

struct Counting;

thread_local! {
    /// Counting on this thread, and the allocations counted (per thread: tests run in
    /// parallel).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the thread-local flag
// and counter allocate nothing (const-initialised `Cell` thread-locals).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get) - before
}

const BLOCKS: u64 = 64;
const HITS: u64 = 4000;

#[test]
fn a_read_hit_allocates_nothing_of_its_own() {
    let rig = Rig::new(Arc::new(MemDevice::new(4 << 20)), 1, BLOCKS, 3);
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let model = rig.model();
    let mut buf = vec![0u8; BS as usize];
    for b in 0..BLOCKS {
        v.read(b * BS, &mut buf).unwrap(); // miss: fills the block
    }
    let hits0 = engine.stats().total.read_hits;
    let mut wrong = 0;
    let n = allocations(|| {
        for i in 0..HITS {
            let b = (i * 17) % BLOCKS;
            v.read(b * BS, &mut buf).unwrap();
            wrong += u64::from(buf[..] != model[0][(b * BS) as usize..((b + 1) * BS) as usize]);
        }
    });
    assert_eq!(wrong, 0, "every hit returned the block's data");
    assert_eq!(engine.stats().total.read_hits - hits0, HITS, "every read was a hit");
    let per_hit = n as f64 / HITS as f64;
    assert!(per_hit < 0.25, "Volume::read: {n} allocations in {HITS} hits ({per_hit:.2} per hit)");
}

#[test]
fn the_servers_hit_path_allocates_nothing_of_its_own() {
    let rig = Rig::new(Arc::new(MemDevice::new(4 << 20)), 1, BLOCKS, 5);
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let model = rig.model();
    let mut buf = vec![0u8; BS as usize];
    assert!(v.read_if_resident(0, &mut buf).is_none(), "nothing is resident yet");
    assert_eq!(engine.stats().total.read_requests, 0, "a declined hit counts nothing");
    for b in 0..BLOCKS {
        v.read(b * BS, &mut buf).unwrap();
    }
    let mut wrong = 0;
    let n = allocations(|| {
        for i in 0..HITS {
            let b = (i * 29) % BLOCKS;
            v.read_if_resident(b * BS, &mut buf).unwrap().unwrap();
            wrong += u64::from(buf[..] != model[0][(b * BS) as usize..((b + 1) * BS) as usize]);
        }
    });
    assert_eq!(wrong, 0, "every hit returned the block's data");
    let s = engine.stats().total;
    assert_eq!(s.read_requests, BLOCKS + HITS, "each served hit is one READ request");
    assert_eq!(s.read_hits, HITS);
    let per_hit = n as f64 / HITS as f64;
    assert!(per_hit < 0.25, "read_if_resident: {n} allocations in {HITS} hits ({per_hit:.2})");
}
