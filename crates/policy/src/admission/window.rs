//! Sliding-window counters discretized into `k` sub-windows (SieveStore section 3.3).
//!
//! "Logically, the IMCT and MCT track the number of misses over the past W time units ...
//! we discretize the time window into k subwindows of W/k hours each. The implementation uses
//! k counters to track the misses in each subwindow and a counter to track the last time the
//! counters were updated. If during a miss, the current time window is larger than the
//! last-updated counter by k or more, then all counters are inferred to be stale and zeroed."
//!
//! Counters are `u8` and saturate at 255, which is far above any threshold the paper uses.

/// The largest number of sub-windows a window may be split into.
pub const MAX_SUBWINDOWS: usize = 16;

/// Count one event at sub-window `now` in the ring `counts` (one counter per sub-window, `k =
/// counts.len()`) last updated at sub-window `last`, and return the window's total.
///
/// Sub-windows between `last` and `now` are zeroed (they saw no event); if `now` is `k` or
/// more past `last`, every counter is stale and zeroed. A `now` earlier than `last` (an
/// out-of-order trace) counts into `last`'s sub-window.
#[inline]
pub fn bump(counts: &mut [u8], last: &mut u64, now: u64) -> u32 {
    let k = counts.len() as u64;
    if now >= last.saturating_add(k) {
        counts.fill(0);
    } else {
        let mut s = *last + 1;
        while s <= now {
            counts[(s % k) as usize] = 0;
            s += 1;
        }
    }
    let now = now.max(*last);
    *last = now;
    let c = &mut counts[(now % k) as usize];
    *c = c.saturating_add(1);
    counts.iter().map(|&c| c as u32).sum()
}

/// True if a ring last updated at sub-window `last` holds only stale counts at `now`.
#[inline]
pub fn is_stale(k: usize, last: u64, now: u64) -> bool {
    now >= last.saturating_add(k as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_within_the_window_and_forgets_older_subwindows() {
        let mut c = [0u8; 4];
        let mut last = 0;
        assert_eq!(bump(&mut c, &mut last, 10), 1);
        assert_eq!(bump(&mut c, &mut last, 10), 2);
        assert_eq!(bump(&mut c, &mut last, 12), 3);
        // Sub-window 13 still sees 10..=13: all three events.
        assert_eq!(bump(&mut c, &mut last, 13), 4);
        // At 14, sub-window 10 (two events) has slid out.
        assert_eq!(bump(&mut c, &mut last, 14), 3);
        // k or more sub-windows later, everything is stale.
        assert_eq!(bump(&mut c, &mut last, 18), 1);
        assert!(is_stale(4, 18, 22));
        assert!(!is_stale(4, 18, 21));
    }

    #[test]
    fn out_of_order_time_counts_into_the_last_subwindow() {
        let mut c = [0u8; 4];
        let mut last = 0;
        bump(&mut c, &mut last, 20);
        assert_eq!(bump(&mut c, &mut last, 19), 2);
        assert_eq!(last, 20);
    }
}
