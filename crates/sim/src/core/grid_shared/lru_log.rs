//! LRU at every size in one log of accesses (Mattson et al.'s inclusion property: the cache of
//! size `c` holds exactly the `c` most recently used keys).
//!
//! The log is [`ember_policy::LruLog`]'s idea with one tail per size: entry ids in the order
//! of their accesses, a liveness bit per place (set while the place holds its entry's latest
//! access), and each entry's latest place in its entry's row. Size `i`'s cache is the live
//! places from its tail `tails[i]` to the head, so an access whose latest place `p` lies at or
//! past `tails[i]` hits size `i`; a smaller size's tail is never behind a larger one's, so the
//! sizes that hit are the largest ones, from the first whose tail is at or before `p`. The
//! access clears `p`'s bit and appends at the head; every size it missed that is full evicts
//! its tail's first live place (its least recently used key) by moving its tail past it. Only
//! the largest size's victim leaves the log (its bit cleared, its entry left to the next sweep
//! if no other cell holds it); a smaller size's victim stays resident in the larger ones. So
//! an access reads one entry's place and, per eviction, the liveness bitmap in
//! order: no linked list, and no entry but the largest size's victim is touched. When the
//! head reaches the end of the log, the live places slide down to its start in order (their
//! entries re-pointed, every tail moved to its place among them). Each size's misses and
//! evictions equal [`ember_policy::Lru`]'s at that capacity.

use super::entries::{Entries, NIL};
use super::CellCounts;

/// How far ahead of the largest size's tail (in places) a victim-to-be's row is loaded.
const AHEAD: usize = 16;

/// The log and one tail per size.
#[derive(Debug)]
pub(crate) struct LruTails {
    /// Capacities in ascending order.
    caps: Vec<usize>,
    /// Each size's tail: its oldest resident key is the first live place from here
    /// (`usize::MAX` for a size of capacity 0, which holds nothing).
    tails: Vec<usize>,
    /// Keys each size holds.
    lens: Vec<usize>,
    /// Entry ids in access order.
    log: Vec<u32>,
    /// One bit per place of `log`: set while the place is its entry's latest access.
    live: Vec<u64>,
    /// The next place to append at.
    head: usize,
    /// Accesses by the first size they hit (index `caps.len()`: none), for reads and for
    /// writes.
    hist: Vec<[u64; 2]>,
    /// Evictions per size.
    evictions: Vec<u64>,
}

impl LruTails {
    /// A log for capacities `caps`, sorted ascending.
    pub fn new(caps: Vec<usize>) -> Self {
        debug_assert!(caps.windows(2).all(|w| w[0] <= w[1]));
        let n = caps.len();
        let largest = caps.last().copied().unwrap_or(0);
        // As LruLog's narrow log: 3.5 times the capacity, a compaction every 2.5 capacities
        // of appends at least.
        let places =
            if largest == 0 { 0 } else { (largest * 3 + largest.div_ceil(2)).max(largest + 1) };
        Self {
            tails: caps.iter().map(|&c| if c == 0 { usize::MAX } else { 0 }).collect(),
            lens: vec![0; n],
            log: vec![NIL; places],
            live: vec![0; places.div_ceil(64)],
            head: 0,
            hist: vec![[0; 2]; n + 1],
            evictions: vec![0; n],
            caps,
        }
    }

    #[inline(always)]
    fn is_live(&self, p: usize) -> bool {
        self.live[p / 64] >> (p % 64) & 1 != 0
    }

    /// The first live place at or after `from` (there must be one).
    #[inline(always)]
    fn next_live(&self, from: usize) -> usize {
        let mut w = from / 64;
        let mut bits = self.live[w] & (u64::MAX << (from % 64));
        while bits == 0 {
            w += 1;
            bits = self.live[w];
        }
        w * 64 + bits.trailing_zeros() as usize
    }

    /// Simulate an access to entry `x` at every size.
    #[inline(always)]
    pub fn access(&mut self, es: &mut Entries, x: u32, write: bool) {
        let k = self.caps.len();
        let p = es.lru_place(x);
        let mut level = k;
        if p != NIL {
            let p = p as usize;
            level = (0..k).find(|&i| p >= self.tails[i]).unwrap_or(k);
        }
        self.hist[level][write as usize] += 1;
        if self.log.is_empty() || (p != NIL && p as usize + 1 == self.head) {
            // No size holds a key, or the key is the most recent already: nothing moves.
            return;
        }
        if p != NIL {
            let p = p as usize;
            self.live[p / 64] &= !(1 << (p % 64));
        }
        for i in 0..level {
            if self.caps[i] == 0 {
                continue;
            }
            if self.lens[i] < self.caps[i] {
                self.lens[i] += 1;
                continue;
            }
            let q = self.next_live(self.tails[i]);
            self.tails[i] = q + 1;
            self.evictions[i] += 1;
            if i == k - 1 {
                self.leave(es, q);
            }
        }
        if self.head == self.log.len() {
            self.compact(es);
        }
        let h = self.head;
        self.log[h] = x;
        self.live[h / 64] |= 1 << (h % 64);
        es.set_lru_place(x, h as u32);
        self.head = h + 1;
    }

    /// The largest size evicts the entry at place `q`: out of the log. The victim-to-be
    /// ahead starts loading.
    #[inline(always)]
    fn leave(&mut self, es: &mut Entries, q: usize) {
        let v = self.log[q];
        self.live[q / 64] &= !(1 << (q % 64));
        es.set_lru_place(v, NIL);
        if let Some(&a) = self.log.get(q + AHEAD).filter(|_| q + AHEAD < self.head) {
            es.prefetch_row(a);
        }
    }

    /// Slide the live places down to the start of the log, in order, re-pointing their
    /// entries; each tail moves to the place of the first live place at or after it.
    #[cold]
    #[inline(never)]
    fn compact(&mut self, es: &mut Entries) {
        let k = self.caps.len();
        let lo = self.tails[k - 1];
        // Sizes by ascending tail (descending size), skipping capacity 0.
        let mut next_size = k;
        let mut w = 0usize;
        for r in lo..self.head {
            if !self.is_live(r) {
                continue;
            }
            while next_size > 0 && self.tails[next_size - 1] <= r {
                next_size -= 1;
                self.tails[next_size] = w;
            }
            let id = self.log[r];
            self.log[w] = id;
            es.set_lru_place(id, w as u32);
            w += 1;
        }
        while next_size > 0 && self.tails[next_size - 1] != usize::MAX {
            next_size -= 1;
            self.tails[next_size] = w;
        }
        self.live.fill(0);
        self.live[..w / 64].fill(u64::MAX);
        if !w.is_multiple_of(64) {
            self.live[w / 64] = (1u64 << (w % 64)) - 1;
        }
        self.head = w;
    }

    /// (read hits, write hits, evictions) of size `i` (ascending order).
    pub fn counts(&self, i: usize) -> CellCounts {
        let (mut r, mut w) = (0, 0);
        for h in &self.hist[..=i] {
            r += h[0];
            w += h[1];
        }
        CellCounts { read_hits: r, write_hits: w, evictions: self.evictions[i] }
    }
}
