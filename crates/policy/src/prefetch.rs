//! A software prefetch of one cache line: the simulator's loops start loading what an access
//! a few steps ahead will read, so that memory latency overlaps other work.

/// Start loading the cache line holding `r` into every cache level. Only a hint: it never
/// faults, changes nothing observable, and is a no-op off x86-64.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of the x86-64 baseline, so the instruction exists; a prefetch never
    // faults, and `r` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch(
            (r as *const T).cast::<i8>(),
            std::arch::x86_64::_MM_HINT_T0,
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
