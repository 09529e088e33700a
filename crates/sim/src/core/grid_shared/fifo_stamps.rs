//! FIFO at every size without a queue: a key is in the FIFO cache of capacity `c` iff fewer
//! than `c` keys were inserted into that cache after it (a FIFO evicts in insertion order and
//! a hit moves nothing). So each size keeps an insertion counter, and each entry the counter's
//! value just after its own insertion (its *stamp*): a hit at size `i` is
//! `ins[i] - stamp[i] < cap[i]`, and a miss at a full size is one eviction. No ring, and no
//! eviction touches the victim's entry; an entry that no cell holds any more is freed by the
//! next sweep of the slab ([`super::entries::Entries`]). Misses and evictions equal
//! [`ember_policy::Fifo`]'s at each capacity.
//!
//! The counters are `u32` and compared with wrapping arithmetic: a stamp is exact while fewer
//! than 2^32 - `cap` insertions followed it, so the sweeps (at least one every 2^30 accesses)
//! renew the stamps of the keys a size no longer holds to "just expired" ([`FifoStamps::renew`]).

use super::{CellCounts, MAX_SIZES};

/// Every FIFO size's insertion counter and counts. Each entry's stamps (one `u32` per size)
/// live in the entries' rows; every method takes them as a slice.
#[derive(Debug, Default)]
pub(crate) struct FifoStamps {
    /// FIFO sizes.
    n: usize,
    caps: [u32; MAX_SIZES],
    /// Insertions into each size so far.
    inserted: [u64; MAX_SIZES],
    counts: [CellCounts; MAX_SIZES],
}

impl FifoStamps {
    /// FIFO at capacities `caps` (any order, each below 2^31, at most [`MAX_SIZES`]).
    pub fn new(caps: &[usize]) -> Self {
        debug_assert!(caps.len() <= MAX_SIZES);
        let mut s = Self { n: caps.len().min(MAX_SIZES), ..Self::default() };
        for (c, &cap) in s.caps.iter_mut().zip(caps) {
            *c = u32::try_from(cap).unwrap_or(u32::MAX >> 1).min(u32::MAX >> 1);
        }
        s
    }

    /// FIFO sizes (stamps per entry).
    #[inline(always)]
    pub fn sizes(&self) -> usize {
        self.n
    }

    /// True if no FIFO size is simulated.
    #[inline(always)]
    pub fn is_none(&self) -> bool {
        self.n == 0
    }

    /// The insertion counter of size `i`.
    #[inline(always)]
    fn ins(&self, i: usize) -> u32 {
        self.inserted[i] as u32
    }

    /// True if size `i` holds the key whose stamps are `st`.
    #[inline(always)]
    fn holds(&self, st: &[u32], i: usize) -> bool {
        self.ins(i).wrapping_sub(st[i]) < self.caps[i]
    }

    /// True if any FIFO size holds the key whose stamps are `st`.
    #[inline(always)]
    pub fn holds_any(&self, st: &[u32]) -> bool {
        (0..self.n).any(|i| self.holds(st, i))
    }

    /// Stamp a new key as held by no size.
    #[inline(always)]
    pub fn fresh(&self, st: &mut [u32]) {
        for (i, s) in st.iter_mut().enumerate().take(self.n) {
            *s = self.ins(i).wrapping_sub(self.caps[i]);
        }
    }

    /// Renew the stamps of the sizes that no longer hold the key to "just expired", so that
    /// the wrapping counters stay exact for another 2^31 insertions.
    pub fn renew(&self, st: &mut [u32]) {
        for i in 0..self.n {
            if !self.holds(st, i) {
                st[i] = self.ins(i).wrapping_sub(self.caps[i]);
            }
        }
    }

    /// Simulate an access at every size to the key whose stamps are `st`.
    #[inline(always)]
    pub fn access(&mut self, st: &mut [u32], write: bool) {
        for i in 0..self.n {
            if self.holds(st, i) {
                if write {
                    self.counts[i].write_hits += 1;
                } else {
                    self.counts[i].read_hits += 1;
                }
                continue;
            }
            let cap = self.caps[i];
            if cap == 0 {
                continue;
            }
            if self.inserted[i] >= u64::from(cap) {
                // Full: the insertion pushes out the oldest key.
                self.counts[i].evictions += 1;
            }
            self.inserted[i] += 1;
            st[i] = self.ins(i);
        }
    }

    /// The counts of size `i` (in the order of [`FifoStamps::new`]'s `caps`).
    pub fn counts(&self, i: usize) -> CellCounts {
        self.counts[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Across the wrap of the `u32` counter, hits, misses and evictions equal a plain queue's.
    #[test]
    fn stamps_equal_a_queue_across_the_counter_wrap() {
        let cap = 3usize;
        let mut f = FifoStamps::new(&[cap]);
        f.inserted[0] = u64::from(u32::MAX) - 5;
        let mut es = vec![[0u32; 1]; 8];
        for st in &mut es {
            f.fresh(st);
        }
        // The counter says the cache is full already: of keys outside `es`.
        let mut q: VecDeque<usize> = (100..100 + cap).collect();
        let (mut hits, mut evictions) = (0u64, 0u64);
        let mut r = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            // Skewed over 8 keys: key 0 half the time.
            let x = if r & 1 == 0 { 0 } else { (r >> 8) as usize % 8 };
            if q.contains(&x) {
                hits += 1;
            } else {
                if q.len() == cap {
                    q.pop_front();
                    evictions += 1;
                }
                q.push_back(x);
            }
            f.access(&mut es[x], false);
            for (k, st) in es.iter().enumerate() {
                assert_eq!(f.holds(st, 0), q.contains(&k), "key {k}");
            }
        }
        assert!(f.inserted[0] > u64::from(u32::MAX), "the counter wrapped");
        assert_eq!(f.counts(0).read_hits, hits);
        assert_eq!(f.counts(0).evictions, evictions);
        assert!(hits > 0 && evictions > 0);
    }

    /// A key expired long ago stays expired after 2^32 more insertions, as long as a sweep
    /// renews its stamp at least every 2^30 of them.
    #[test]
    fn renewed_stamps_stay_expired_past_two_to_the_32_insertions() {
        let mut f = FifoStamps::new(&[1000]);
        let mut st = [0u32; 1];
        f.fresh(&mut st);
        f.access(&mut st, false);
        assert!(f.holds(&st, 0));
        for _ in 0..4 {
            f.inserted[0] += 1 << 30;
            assert!(!f.holds(&st, 0));
            f.renew(&mut st);
        }
        f.inserted[0] += 5;
        assert!(!f.holds(&st, 0), "a stale stamp read as resident");
    }
}
