//! A global allocator that forwards every call to the system allocator and counts the frees
//! of memory holding a watched address: the check that a buffer the kernel may still write
//! into is never freed.
//!
//! A test binary installs it with
//!
//! ```text
//! #[global_allocator]
//! static ALLOCATOR: ember_testkit::watching_alloc::Watching = ember_testkit::watching_alloc::Watching;
//! ```
//!
//! and then watches addresses ([`watch`], [`frees_while`]) and reads the count ([`freed`]).
//! The watch is one per binary: tests that watch take [`exclusive`] first.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// How many addresses can be watched at once.
pub const PLACES: usize = 256;

/// The watched addresses (0: an empty place).
static WATCH: [AtomicUsize; PLACES] = [const { AtomicUsize::new(0) }; PLACES];
/// How many places from the front have been used since the last [`unwatch_all`].
static USED: AtomicUsize = AtomicUsize::new(0);
/// Frees of memory holding a watched address.
static FREED: AtomicUsize = AtomicUsize::new(0);
/// The tests of one binary share the watch: one at a time.
static ONE: Mutex<()> = Mutex::new(());

/// The system allocator, counting frees (and moves by `realloc`) of memory that holds a
/// watched address.
pub struct Watching;

/// Whether the `size` bytes at `ptr` hold a watched address.
fn watched(ptr: *mut u8, size: usize) -> bool {
    let used = USED.load(Ordering::SeqCst).min(PLACES);
    let range = ptr as usize..(ptr as usize).saturating_add(size);
    WATCH[..used].iter().any(|w| {
        let w = w.load(Ordering::SeqCst);
        w != 0 && range.contains(&w)
    })
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if watched(ptr, layout.size()) {
            FREED.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if watched(ptr, layout.size()) {
            FREED.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Hold the watch for this test until the guard drops (a test that failed holding it does
/// not fail the others).
pub fn exclusive() -> MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Watch `addr` from now on; fails the test when all [`PLACES`] places are taken.
pub fn watch(addr: usize) {
    let place = WATCH
        .iter()
        .position(|w| w.compare_exchange(0, addr, Ordering::SeqCst, Ordering::SeqCst).is_ok());
    let Some(place) = place else { panic!("room to watch every kept buffer ({PLACES} places)") };
    USED.fetch_max(place + 1, Ordering::SeqCst);
}

/// Watch nothing.
pub fn unwatch_all() {
    for w in &WATCH {
        w.store(0, Ordering::SeqCst);
    }
    USED.store(0, Ordering::SeqCst);
}

/// How many frees of watched memory there have been since the last [`reset`].
pub fn freed() -> usize {
    FREED.load(Ordering::SeqCst)
}

/// Count frees from zero again.
pub fn reset() {
    FREED.store(0, Ordering::SeqCst);
}

/// Watch only `addr` while `f` runs; how many frees of its memory happened meanwhile.
pub fn frees_while(addr: usize, f: impl FnOnce()) -> usize {
    unwatch_all();
    reset();
    watch(addr);
    f();
    unwatch_all();
    freed()
}
