//! A buffer the kernel may still write into is never freed: a dropped `Lent` leaks its
//! memory, and so does a dropped `ReadBuf` marked registered with a ring; a buffer back from
//! its loan, or whose mark was cleared, is freed as usual.
//!
//! This binary's allocator counts frees of the blocks that hold a watched address.

use ember_readbuf::ReadBuf;
use ember_testkit::watching_alloc::{self, exclusive, Watching};

#[global_allocator]
static ALLOCATOR: Watching = Watching;

/// Watch `b`'s memory; how many frees of it happen while `f` drops it.
fn frees_while(b: ReadBuf, f: impl FnOnce(ReadBuf)) -> usize {
    watching_alloc::frees_while(b.as_ptr() as usize, || f(b))
}

#[test]
fn a_dropped_loan_leaks_its_buffer() {
    let _one = exclusive();
    let freed = frees_while(ReadBuf::new(8192), |b| {
        // Dropped at the end of this block, unreaped.
        let _lent = b.lend();
    });
    assert_eq!(freed, 0, "a buffer a read may still write into was freed");
}

#[test]
fn a_buffer_back_from_its_loan_is_freed() {
    let _one = exclusive();
    let freed = frees_while(ReadBuf::new(8192), |b| {
        // SAFETY: nothing was started into it.
        drop(unsafe { b.lend().reclaim() })
    });
    assert_eq!(freed, 1);
}

#[test]
fn a_registered_buffer_is_leaked_until_its_mark_is_cleared() {
    let _one = exclusive();
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
