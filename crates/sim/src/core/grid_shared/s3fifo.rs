//! S3-FIFO at every size: per size a small, a main and a ghost queue of entry ids, and per
//! entry (the entries' dense `s3` array) one byte per size (location, 2-bit access counter,
//! stale ghost items). An entry no size holds any more is left to the entries' next sweep.
//!
//! The rules are [`ember_policy::S3Fifo`]'s, step for step (libCacheSim's defaults: `|S| =
//! max(1, floor(0.1 c))`, `|M| = c - |S|`, a ghost of `floor(0.9 c)` keys, move to main at
//! 2 hits, counters saturating at 3, main reinserting with `min(f, 3) - 1`, new blocks to
//! main once `S` is full before the first eviction), so each size's misses and evictions equal
//! its own.
//!
//! The ghost is a FIFO whose keys can also leave from the middle (a ghost hit takes the key
//! out). Here a taken key's item stays in the queue, counted as *stale* in its entry: a key's
//! items are in queue order, and only its newest can be live, so an item popped from the
//! front is stale exactly when its entry's stale count is not zero. The queue is compacted
//! (every stale item dropped) when it grows past twice the ghost's size, or when an entry's
//! 4-bit stale count would overflow.

use std::collections::VecDeque;

use super::entries::{Entries, NIL};
use super::CellCounts;

const LOC: u8 = 0b11;
const SMALL: u8 = 1;
const MAIN: u8 = 2;
const GHOST: u8 = 3;
const FREQ_SHIFT: u8 = 2;
const FREQ: u8 = 0b11 << FREQ_SHIFT;
const STALE_SHIFT: u8 = 4;
const STALE_ONE: u8 = 1 << STALE_SHIFT;
const STALE: u8 = 0xf0;
/// How many of each queue's oldest entries are loaded ahead of the next eviction (it may
/// move or reinsert several, and skip stale ghost items).
const QUEUE_AHEAD: usize = 3;
/// How far from each queue's oldest item (in items) the queue's memory is loaded ahead.
const QUEUE_LINE_AHEAD: usize = 32;
/// Blocks leaving `S` with at least this many hits move to `M`.
const THRESHOLD: u8 = 2;
/// The counter's maximum: `max(THRESHOLD, 3)`.
const MAX_FREQ: u8 = 3;

/// One size's queues.
#[derive(Debug)]
struct Size {
    c: usize,
    small_cap: usize,
    main_cap: usize,
    ghost_cap: usize,
    small: VecDeque<u32>,
    main: VecDeque<u32>,
    ghost: VecDeque<u32>,
    ghost_live: usize,
    has_evicted: bool,
    counts: CellCounts,
}

/// S3-FIFO at several sizes.
#[derive(Debug)]
pub(crate) struct S3Sizes {
    sizes: Vec<Size>,
}

/// Entry `x`'s byte at size `i`.
#[inline(always)]
fn st(es: &Entries, x: u32, i: usize) -> u8 {
    es.s3[es.s3_at(x, i)]
}

/// Set entry `x`'s byte at size `i`.
#[inline(always)]
fn set(es: &mut Entries, x: u32, i: usize, b: u8) {
    let at = es.s3_at(x, i);
    es.s3[at] = b;
}

/// Start loading entry `x`'s bytes.
#[inline(always)]
fn prefetch_st(es: &Entries, x: u32) {
    if let Some(b) = es.s3.get(es.s3_at(x, 0)) {
        ember_policy::prefetch::prefetch(b);
    }
}

#[inline(always)]
fn freq(b: u8) -> u8 {
    (b & FREQ) >> FREQ_SHIFT
}

impl S3Sizes {
    /// S3-FIFO at capacities `caps` (any order).
    pub fn new(caps: &[usize]) -> Self {
        let sizes = caps
            .iter()
            .map(|&c| {
                // As S3Fifo::with_params(c, 0.10, 0.90, 2).
                let small_cap = ((c as f64 * 0.10) as usize).max(1).min(c);
                let ghost_cap = (c as f64 * 0.90) as usize;
                Size {
                    c,
                    small_cap,
                    main_cap: c - small_cap,
                    ghost_cap,
                    small: VecDeque::new(),
                    main: VecDeque::new(),
                    ghost: VecDeque::new(),
                    ghost_live: 0,
                    has_evicted: false,
                    counts: CellCounts::default(),
                }
            })
            .collect();
        Self { sizes }
    }

    /// Simulate an access to entry `x` at every size.
    #[inline(always)]
    pub fn access(&mut self, es: &mut Entries, x: u32, write: bool) {
        for (i, s) in self.sizes.iter_mut().enumerate() {
            let b = st(es, x, i);
            let loc = b & LOC;
            if loc == SMALL || loc == MAIN {
                if write {
                    s.counts.write_hits += 1;
                } else {
                    s.counts.read_hits += 1;
                }
                if freq(b) < MAX_FREQ {
                    set(es, x, i, b + (1 << FREQ_SHIFT));
                }
                continue;
            }
            s.miss(es, i, x);
        }
    }

    /// The counts of size `i` (in the order of [`S3Sizes::new`]'s `caps`).
    pub fn counts(&self, i: usize) -> CellCounts {
        self.sizes[i].counts
    }
}

impl Size {
    /// A miss of `x` at this size (index `i` in the entries' bytes).
    fn miss(&mut self, es: &mut Entries, i: usize, x: u32) {
        if self.c == 0 {
            return;
        }
        let remembered = st(es, x, i) & LOC == GHOST;
        if remembered {
            // Take x out of the ghost: its item stays behind, stale.
            if st(es, x, i) & STALE == STALE {
                self.compact_ghost(es, i);
            }
            let stale = st(es, x, i) & STALE;
            set(es, x, i, stale + STALE_ONE);
            self.ghost_live -= 1;
        }
        if self.small.len() + self.main.len() >= self.c {
            self.evict(es, i);
            self.counts.evictions += 1;
            // The next eviction reads the queues' oldest entries: load them now.
            for q in [&self.small, &self.main, &self.ghost] {
                for j in 0..QUEUE_AHEAD {
                    if let Some(&f) = q.get(j) {
                        prefetch_st(es, f);
                    }
                }
                // And the queue's own line further on (the oldest items were written long
                // ago: out of the caches, and a dozen queues are too many streams for the
                // hardware's prefetcher).
                if let Some(f) = q.get(QUEUE_LINE_AHEAD) {
                    ember_policy::prefetch::prefetch(f);
                }
            }
        }
        let to_main = remembered || (!self.has_evicted && self.small.len() >= self.small_cap);
        let stale = st(es, x, i) & STALE;
        if to_main {
            set(es, x, i, stale | MAIN);
            self.main.push_back(x);
        } else {
            set(es, x, i, stale | SMALL);
            self.small.push_back(x);
        }
    }

    fn evict(&mut self, es: &mut Entries, i: usize) {
        self.has_evicted = true;
        loop {
            if self.main.len() > self.main_cap || self.small.is_empty() {
                self.evict_main(es, i);
                return;
            }
            if self.evict_small(es, i) {
                return;
            }
        }
    }

    /// Move blocks of `S` with enough hits to `M` until one is evicted (true) or `S` is
    /// empty (false).
    fn evict_small(&mut self, es: &mut Entries, i: usize) -> bool {
        while let Some(t) = self.small.pop_front() {
            let b = st(es, t, i);
            if freq(b) >= THRESHOLD {
                set(es, t, i, (b & STALE) | MAIN);
                self.main.push_back(t);
            } else {
                self.ghost_push(es, i, t);
                return true;
            }
        }
        false
    }

    /// Evict from `M`: reinsert blocks with a non-zero counter (decremented) until one with
    /// counter 0 comes up.
    fn evict_main(&mut self, es: &mut Entries, i: usize) {
        while let Some(t) = self.main.pop_front() {
            let b = st(es, t, i);
            let f = freq(b);
            if f == 0 {
                set(es, t, i, b & STALE);
                return;
            }
            set(es, t, i, (b & STALE) | MAIN | ((f.min(3) - 1) << FREQ_SHIFT));
            self.main.push_back(t);
        }
    }

    /// `t` leaves `S` for the ghost, which forgets its oldest live key if full.
    fn ghost_push(&mut self, es: &mut Entries, i: usize, t: u32) {
        let stale = st(es, t, i) & STALE;
        if self.ghost_cap == 0 {
            set(es, t, i, stale);
            return;
        }
        if self.ghost_live >= self.ghost_cap {
            while let Some(g) = self.ghost.pop_front() {
                let b = st(es, g, i);
                if b & STALE != 0 {
                    set(es, g, i, b - STALE_ONE);
                } else {
                    debug_assert_eq!(b & LOC, GHOST);
                    set(es, g, i, 0);
                    self.ghost_live -= 1;
                    break;
                }
            }
        }
        // Popping may have dropped stale items of t itself: read its count again.
        let stale = st(es, t, i) & STALE;
        set(es, t, i, stale | GHOST);
        self.ghost.push_back(t);
        self.ghost_live += 1;
        if self.ghost.len() > 2 * self.ghost_cap + 64 {
            self.compact_ghost(es, i);
        }
    }

    /// Drop every stale item from the ghost queue (each entry's oldest items first).
    #[cold]
    fn compact_ghost(&mut self, es: &mut Entries, i: usize) {
        let mut kept = VecDeque::with_capacity(self.ghost_live);
        while let Some(g) = self.ghost.pop_front() {
            let b = st(es, g, i);
            if b & STALE != 0 {
                set(es, g, i, b - STALE_ONE);
            } else {
                kept.push_back(g);
            }
        }
        debug_assert_eq!(kept.len(), self.ghost_live);
        debug_assert!(kept.iter().all(|&g| g != NIL));
        self.ghost = kept;
    }
}
