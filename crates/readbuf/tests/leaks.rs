//! A buffer the kernel may still write into is never freed: a dropped `Lent` leaks its
//! memory, and so does a dropped `ReadBuf` marked registered with a ring; a buffer back from
//! its loan, or whose mark was cleared, is freed as usual.
//!
//! This binary's allocator counts frees of the blocks that hold a watched address.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ember_readbuf::ReadBuf;

/// The address watched (0: none), and how many frees covered it.
static WATCH: AtomicUsize = AtomicUsize::new(0);
static FREED: AtomicUsize = AtomicUsize::new(0);
/// The tests share the watch: one at a time.
static ONE: Mutex<()> = Mutex::new(());

/// The system allocator, counting frees of the block holding the watched address.
struct Watching;

fn covers(ptr: *mut u8, size: usize) -> bool {
    let w = WATCH.load(Ordering::SeqCst);
    w != 0 && (ptr as usize..ptr as usize + size).contains(&w)
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
        if covers(ptr, layout.size()) {
            FREED.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if covers(ptr, layout.size()) {
            FREED.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Watching = Watching;

/// Watch `b`'s memory; how many frees of it happen while `f` drops it.
fn frees_while(b: ReadBuf, f: impl FnOnce(ReadBuf)) -> usize {
    WATCH.store(b.as_ptr() as usize, Ordering::SeqCst);
    FREED.store(0, Ordering::SeqCst);
    f(b);
    WATCH.store(0, Ordering::SeqCst);
    FREED.load(Ordering::SeqCst)
}

#[test]
fn a_dropped_loan_leaks_its_buffer() {
    let _one = ONE.lock().unwrap();
    let freed = frees_while(ReadBuf::new(8192), |b| {
        // Dropped at the end of this block, unreaped.
        let _lent = b.lend();
    });
    assert_eq!(freed, 0, "a buffer a read may still write into was freed");
}

#[test]
fn a_buffer_back_from_its_loan_is_freed() {
    let _one = ONE.lock().unwrap();
    let freed = frees_while(ReadBuf::new(8192), |b| {
        // SAFETY: nothing was started into it.
        drop(unsafe { b.lend().reclaim() })
    });
    assert_eq!(freed, 1);
}

#[test]
fn a_registered_buffer_is_leaked_until_its_mark_is_cleared() {
    let _one = ONE.lock().unwrap();
    let freed = frees_while(ReadBuf::new(4096), |mut b| {
        b.set_registered();
        drop(b)
    });
    assert_eq!(freed, 0, "a buffer still registered with a ring was freed");
    let freed = frees_while(ReadBuf::new(4096), |mut b| {
        b.set_registered();
        // SAFETY: no ring registered it.
        unsafe { b.clear_registered() };
        drop(b)
    });
    assert_eq!(freed, 1);
    let freed = frees_while(ReadBuf::new(4096), |mut b| {
        b.set_registered();
        // SAFETY: nothing was started into it.
        drop(unsafe { b.lend().reclaim() })
    });
    assert_eq!(freed, 0, "the mark holds across a loan");
}
