//! The array side of Wong and Wilkes' exclusive caching: an array cache that serves client
//! READS and accepts DEMOTEs, placing each block according to its [`Scheme`].
//!
//! | scheme | READ hit | READ miss (disk read) | DEMOTE |
//! |---|---|---|---|
//! | NONE-LRU | keep end | keep end | (none sent) |
//! | DEMOTE-LRU | keep end | keep end | keep end |
//! | DEMOTE | discard end | discard end | keep end |
//! | DEMOTE-SLRU | protected keep end | probationary keep end | probationary keep end |
//! | DEMOTE-ADAPT-* | keep end of the read segment | keep end of the read segment | keep end of the demoted segment |
//!
//! DEMOTE "puts blocks it has sent to a client at the head" (section 1.2), so a READ hit,
//! which sends the block, moves it to the discard end. The adaptive schemes generalise that:
//! a block sent to a client (hit or disk read) goes to the read insertion segment chosen by
//! the ghosts ([`InsertionGhosts`]), a demoted block to the demoted one.
//!
//! A DEMOTE is *aborted* — no data moves — when the array already holds the block or cannot
//! make room for it (a cache of capacity 0): "the array short-circuits the operation ... if it
//! already has a copy of the block cached, or if it cannot immediately make space for it"
//! (section 1.1). By default ([`ArrayConfig::refresh_aborted`]) an aborted DEMOTE of a held
//! block still moves it to where a demoted block goes, as LRU treats any reference: for
//! DEMOTE-LRU "the array uses the traditional LRU cache management for both demoted and
//! recently read blocks" (section 1.2).

use super::{
    Ghost, InsertionGhosts, Position, Scheme, SegmentLayout, SegmentedQueue, DEFAULT_SEGMENTS,
};
use crate::replacement::DemoteOutcome;

/// Configuration of an [`ArrayCache`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ArrayConfig {
    /// Capacity in blocks (N_a).
    pub capacity: usize,
    /// The cache-management scheme.
    pub scheme: Scheme,
    /// N_segs of the adaptive schemes (paper: 10).
    pub segments: usize,
    /// Fraction of the queue protected under DEMOTE-SLRU.
    pub slru_protected: f64,
    /// On a DEMOTE of a block the array already holds, move that block to the demoted-block
    /// position (the transfer is still aborted). Default true: DEMOTE-LRU then treats a
    /// DEMOTE as an LRU reference, which is what reproduces Table 2's DEMOTE-LRU column
    /// (21 % RANDOM, 4 % ZIPF; without it 13.6 % and 3.0 %, see docs/reference/laboratory.md).
    pub refresh_aborted: bool,
}

/// DEMOTE-SLRU's default protected fraction: one half (section 5.1 found the best size
/// "either very small (less than 8 % of the total), or quite large (over 50 %)").
pub const DEFAULT_SLRU_PROTECTED: f64 = 0.5;

impl ArrayConfig {
    /// `capacity` blocks under `scheme` with N_segs = 10 and a half-protected SLRU.
    pub fn new(capacity: usize, scheme: Scheme) -> Self {
        Self {
            capacity,
            scheme,
            segments: DEFAULT_SEGMENTS,
            slru_protected: DEFAULT_SLRU_PROTECTED,
            refresh_aborted: true,
        }
    }

    /// The segment layout the scheme uses.
    pub fn layout(&self) -> SegmentLayout {
        match self.scheme {
            Scheme::NoneLru | Scheme::DemoteLru | Scheme::Demote => SegmentLayout::Uniform(1),
            Scheme::DemoteSlru => SegmentLayout::Slru { protected: self.slru_protected },
            Scheme::DemoteAdaptUni => SegmentLayout::Uniform(self.segments),
            Scheme::DemoteAdaptExp => SegmentLayout::Exponential(self.segments),
        }
    }
}

/// An array cache under one scheme.
#[derive(Clone, Debug)]
pub struct ArrayCache {
    config: ArrayConfig,
    queue: SegmentedQueue,
    ghosts: Option<InsertionGhosts>,
    segments: usize,
}

impl ArrayCache {
    /// An empty array cache; fails if the segment layout is invalid.
    pub fn new(config: ArrayConfig) -> Result<Self, String> {
        let layout = config.layout();
        layout.validate()?;
        let caps = layout.caps(config.capacity);
        let adaptive = config.scheme.adaptive();
        let ghosts = adaptive.then(InsertionGhosts::new);
        let ghost_capacity = if adaptive { config.capacity } else { 0 };
        Ok(Self {
            config,
            queue: SegmentedQueue::with_ghosts(config.capacity, &caps, ghost_capacity),
            ghosts,
            segments: caps.len(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ArrayConfig {
        &self.config
    }

    /// The cached blocks, from the keep end to the discard end (O(n)).
    pub fn keys(&self) -> Vec<u64> {
        self.queue.keys()
    }

    /// Number of cached blocks.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True if nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// True if `key` is cached.
    pub fn contains(&self, key: u64) -> bool {
        self.queue.contains(key)
    }

    /// The ghost hit counts of an adaptive scheme.
    pub fn ghosts(&self) -> Option<&InsertionGhosts> {
        self.ghosts.as_ref()
    }

    /// True if ghost `ghost` remembers `key` (adaptive schemes).
    pub fn ghost_contains(&self, ghost: Ghost, key: u64) -> bool {
        self.queue.ghost_contains(ghost, key)
    }

    /// Where a block sent to a client goes.
    #[inline]
    fn read_position(&self) -> Position {
        match self.config.scheme {
            Scheme::NoneLru | Scheme::DemoteLru => Position::Keep(0),
            Scheme::Demote => Position::Discard,
            Scheme::DemoteSlru => Position::Keep(0),
            Scheme::DemoteAdaptUni | Scheme::DemoteAdaptExp => {
                let p = self.ghosts.as_ref().map_or(0.0, |g| g.read_point());
                Position::Keep(InsertionGhosts::segment(p, self.segments))
            }
        }
    }

    /// Where a demoted block goes.
    #[inline]
    fn demote_position(&self) -> Position {
        match self.config.scheme {
            Scheme::DemoteAdaptUni | Scheme::DemoteAdaptExp => {
                let p = self.ghosts.as_ref().map_or(1.0, |g| g.demoted_point());
                Position::Keep(InsertionGhosts::segment(p, self.segments))
            }
            Scheme::DemoteSlru => Position::Keep(0),
            _ => Position::Keep(self.segments - 1),
        }
    }

    /// Hint that `key` will be READ or DEMOTEd soon: starts loading its index entry.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        self.queue.prefetch(key);
    }

    /// A client READ of `key` that missed in the client: returns true on an array hit. On a
    /// miss the block is read from disk and cached at the scheme's read position.
    #[inline]
    pub fn read(&mut self, key: u64) -> bool {
        self.read_evicting(key).0
    }

    /// [`ArrayCache::read`], also returning the block ejected to make room for a disk-read
    /// block (the real array tier frees its cache block).
    #[inline]
    pub fn read_evicting(&mut self, key: u64) -> (bool, Option<u64>) {
        let mut e = self.queue.entry(key);
        if let Some(g) = self.ghosts.as_mut() {
            // The read ghost inserts what it misses (a cache of disk-read blocks would read
            // it); the demoted ghost only counts and refreshes its hits.
            let read_hit = self.queue.ghost_touch(&mut e, Ghost::Read, true);
            let demoted_hit = self.queue.ghost_touch(&mut e, Ghost::Demoted, false);
            g.record(read_hit, demoted_hit);
        }
        let hit = self.queue.queued(&e);
        let pos = match self.config.scheme {
            Scheme::DemoteSlru if hit => Position::Keep(1),
            _ => self.read_position(),
        };
        let ejected = self.queue.place(&mut e, pos);
        (hit, ejected.filter(|&k| k != key))
    }

    /// A client DEMOTEs clean block `key`.
    #[inline]
    pub fn demote(&mut self, key: u64) -> DemoteOutcome {
        self.demote_evicting(key).0
    }

    /// [`ArrayCache::demote`], also returning the block ejected to make room for a stored
    /// one.
    #[inline]
    pub fn demote_evicting(&mut self, key: u64) -> (DemoteOutcome, Option<u64>) {
        let mut e = self.queue.entry(key);
        if self.ghosts.is_some() {
            self.queue.ghost_touch(&mut e, Ghost::Demoted, true);
        }
        if self.queue.capacity() == 0 {
            return (DemoteOutcome::Aborted, None);
        }
        let held = self.queue.queued(&e);
        if held && !self.config.refresh_aborted {
            return (DemoteOutcome::Aborted, None);
        }
        let pos = self.demote_position();
        let ejected = self.queue.place(&mut e, pos);
        if held {
            (DemoteOutcome::Aborted, None)
        } else {
            (DemoteOutcome::Stored, ejected)
        }
    }

    /// Forget `key` (the real array tier invalidates a block: TRIM, a partial write, a failed
    /// fill). Returns whether it was cached. The ghosts keep their memory of it.
    pub fn remove(&mut self, key: u64) -> bool {
        self.queue.remove(key)
    }

    /// Bytes reserved for the queue and the ghosts' keys.
    pub fn memory_bytes(&self) -> usize {
        self.queue.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(cap: usize, scheme: Scheme) -> ArrayCache {
        ArrayCache::new(ArrayConfig::new(cap, scheme)).unwrap()
    }

    #[test]
    fn none_lru_caches_reads_lru() {
        let mut a = array(2, Scheme::NoneLru);
        assert!(!a.read(1));
        assert!(!a.read(2));
        assert!(a.read(1));
        assert!(!a.read(3)); // ejects 2
        assert_eq!(a.keys(), vec![3, 1]);
    }

    #[test]
    fn demote_sends_reads_to_the_discard_end() {
        // Figure 1 / section 1.2: read blocks at the head, demoted blocks at the tail.
        let mut a = array(3, Scheme::Demote);
        assert_eq!(a.demote(10), DemoteOutcome::Stored);
        assert_eq!(a.demote(11), DemoteOutcome::Stored);
        assert!(!a.read(1));
        assert_eq!(a.keys(), vec![11, 10, 1]);
        assert_eq!(a.demote(12), DemoteOutcome::Stored); // full: ejects 1, the read block
        assert_eq!(a.keys(), vec![12, 11, 10]);
        assert!(a.read(11)); // a hit is sent to the client: to the discard end
        assert_eq!(a.keys(), vec![12, 10, 11]);
        assert_eq!(a.demote(10), DemoteOutcome::Aborted); // already held: to the keep end
        assert_eq!(a.keys(), vec![10, 12, 11]);
        let mut fixed = ArrayCache::new(ArrayConfig {
            refresh_aborted: false,
            ..ArrayConfig::new(3, Scheme::Demote)
        })
        .unwrap();
        fixed.demote(1);
        fixed.demote(2);
        assert_eq!(fixed.demote(1), DemoteOutcome::Aborted);
        assert_eq!(fixed.keys(), vec![2, 1]);
    }

    #[test]
    fn demote_lru_treats_both_alike() {
        let mut a = array(2, Scheme::DemoteLru);
        a.read(1);
        a.demote(2);
        a.read(3); // ejects 1
        assert_eq!(a.keys(), vec![3, 2]);
    }

    #[test]
    fn slru_protects_read_hits() {
        let mut a = array(4, Scheme::DemoteSlru); // protected 2
        a.read(1);
        a.demote(2);
        assert!(a.read(1)); // to protected
        a.read(3);
        a.read(4);
        a.read(5); // ejects 2, the oldest probationary block
        assert!(a.contains(1) && !a.contains(2));
    }

    #[test]
    fn adapt_moves_insertion_points_with_ghost_hits() {
        let mut a = array(100, Scheme::DemoteAdaptUni);
        // Only demoted blocks get re-read: demoted point 1, read point 0.
        for k in 0..50 {
            a.demote(k);
        }
        for k in 0..50 {
            assert!(a.read(k));
        }
        let g = a.ghosts().unwrap();
        assert_eq!((g.read_hits(), g.demoted_hits()), (0, 50));
        assert_eq!(a.read_position(), Position::Keep(0));
        assert_eq!(a.demote_position(), Position::Keep(9));
        // Now blocks re-read after a disk read: the read point rises.
        for _ in 0..2 {
            for k in 1000..1075 {
                a.read(k);
            }
        }
        let g = a.ghosts().unwrap();
        // The first pass pushes 25 of the 50 earlier keys out of the 100-key read ghost; the
        // second pass hits all 75.
        assert_eq!(g.read_hits(), 75);
        assert_eq!(a.read_position(), Position::Keep(6)); // 75 / 125 -> segment 6
        assert_eq!(a.demote_position(), Position::Keep(4)); // 50 / 125 -> segment 4
    }

    /// The adaptive schemes' READ hits, DEMOTE outcomes and ejections on a seeded stream of
    /// READs and DEMOTEs (a skewed key draw, one DEMOTE in three), as the queue with the
    /// ghosts threaded through its nodes gives them: a change of the structure's layout must
    /// leave every count as it is.
    #[test]
    fn adaptive_counts_on_a_seeded_stream_are_pinned() {
        let mut got = Vec::new();
        for scheme in [Scheme::DemoteAdaptExp, Scheme::DemoteAdaptUni] {
            let mut a = array(2000, scheme);
            let mut x: u64 = 0x2545_F491_4F6C_DD1D;
            let (mut hits, mut stored, mut ejected) = (0u64, 0u64, 0u64);
            for _ in 0..400_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key =
                    if x & 3 == 0 { (x >> 8) % 20_000 } else { ((x >> 8) % 3000).pow(2) / 3000 };
                if (x >> 40).is_multiple_of(3) {
                    let (o, e) = a.demote_evicting(key);
                    stored += u64::from(o == DemoteOutcome::Stored);
                    ejected += u64::from(e.is_some());
                } else {
                    let (h, e) = a.read_evicting(key);
                    hits += u64::from(h);
                    ejected += u64::from(e.is_some());
                }
            }
            got.push((hits, stored, ejected));
        }
        eprintln!("{got:?}");
        assert_eq!(got, PINNED_ADAPTIVE_COUNTS);
    }

    /// [`adaptive_counts_on_a_seeded_stream_are_pinned`]'s counts (EXP, then UNI).
    const PINNED_ADAPTIVE_COUNTS: [(u64, u64, u64); 2] =
        [(140_168, 63_033, 187_352), (139_805, 63_310, 187_992)];

    #[test]
    fn zero_capacity_aborts_demotes() {
        let mut a = array(0, Scheme::Demote);
        assert_eq!(a.demote(1), DemoteOutcome::Aborted);
        assert!(!a.read(1));
        assert!(!a.read(1));
    }
}
