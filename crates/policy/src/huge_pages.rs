//! Ask the kernel for transparent huge pages over a large table that is read at random (an
//! index probed once an access): with 4 KiB pages nearly every probe of a table of tens of
//! megabytes also misses the TLB. Where THP is `madvise` (this machine), nothing happens
//! without the request; where it is `always` or `never`, the request changes nothing.

/// Tables smaller than this are left alone (a few TLB entries cover them).
const MIN_BYTES: usize = 4 << 20;

/// A vector of `n` copies of `value` whose memory was advised huge pages before it was
/// first written (advice given after the pages are touched would wait for the kernel's
/// background collapsing).
pub fn filled<T: Clone>(n: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise(v.as_ptr() as usize, n * std::mem::size_of::<T>());
    v.resize(n, value);
    v
}

/// Advise huge pages for the `len` bytes at `start` (whole 2 MiB pages inside them only); a
/// no-op off Linux or below [`MIN_BYTES`]. Advice only: failure is ignored.
fn advise(start: usize, len: usize) {
    if len < MIN_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let first = start.next_multiple_of(HUGE);
        let end = (start + len) / HUGE * HUGE;
        if end > first {
            // SAFETY: the range lies inside the caller's allocation; MADV_HUGEPAGE changes no
            // contents, only how the kernel backs the pages.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
}
