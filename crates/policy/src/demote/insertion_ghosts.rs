//! The read and demoted ghost caches of DEMOTE-ADAPT (Wong and Wilkes section 5.1, Figure 8):
//! "a pair of ghost caches to simulate the performance of hypothetical array caches that only
//! inserted blocks from a particular source—either demotions or disk reads. Just like the real
//! cache, each ghost cache was updated on READs to track hits and execute its LRU policy."
//!
//! The *read ghost* is an LRU set of block keys the size of the array cache that every READ
//! reaching the array updates: a ghost hit counts and refreshes the key, a ghost miss inserts
//! it (the hypothetical cache reads it from disk). The *demoted ghost*, also array-sized,
//! inserts (or refreshes) every demoted block, aborted or not, and on READs only counts and
//! refreshes its hits. The insertion point of a source, 0 at the discard end and 1 at the
//! keep end, is "the ratio of the hit rates seen by their respective ghost caches to the total
//! hit rate across all ghost caches"; before either ghost has hit, the points are DEMOTE's
//! (read blocks at 0, demoted blocks at 1). Hit counts accumulate over the whole run.

/// The ghost hit counts and the insertion points they give. The ghost key lists themselves
/// live in the array's [`super::SegmentedQueue`] ([`super::SegmentedQueue::with_ghosts`]),
/// sharing its index so that one hash lookup serves the cache and both ghosts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InsertionGhosts {
    read_hits: u64,
    demoted_hits: u64,
}

impl InsertionGhosts {
    /// No hits yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A READ reached the array and hit in the read ghost (`read_hit`) and/or the demoted
    /// ghost (`demoted_hit`).
    #[inline]
    pub fn record(&mut self, read_hit: bool, demoted_hit: bool) {
        self.read_hits += read_hit as u64;
        self.demoted_hits += demoted_hit as u64;
    }

    /// READ hits in the read ghost so far.
    pub fn read_hits(&self) -> u64 {
        self.read_hits
    }

    /// READ hits in the demoted ghost so far.
    pub fn demoted_hits(&self) -> u64 {
        self.demoted_hits
    }

    /// Insertion point of read blocks in [0, 1]: read-ghost hits over all ghost hits (0 before
    /// any ghost hit).
    #[inline]
    pub fn read_point(&self) -> f64 {
        match self.read_hits + self.demoted_hits {
            0 => 0.0,
            t => self.read_hits as f64 / t as f64,
        }
    }

    /// Insertion point of demoted blocks in [0, 1]: demoted-ghost hits over all ghost hits
    /// (1 before any ghost hit).
    #[inline]
    pub fn demoted_point(&self) -> f64 {
        match self.read_hits + self.demoted_hits {
            0 => 1.0,
            t => self.demoted_hits as f64 / t as f64,
        }
    }

    /// The segment for insertion point `p` among `segments`: `floor(p * N_segs)`, with
    /// `p = 1` in the last segment (section 5.1: "multiplying the calculated insertion point
    /// by N_segs, and inserting the block at the tail of that segment").
    #[inline]
    pub fn segment(p: f64, segments: usize) -> usize {
        ((p * segments as f64) as usize).min(segments.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_follow_relative_ghost_hits() {
        let mut g = InsertionGhosts::new();
        assert_eq!((g.read_point(), g.demoted_point()), (0.0, 1.0));
        g.record(true, false);
        g.record(false, true);
        g.record(true, true);
        assert_eq!((g.read_hits(), g.demoted_hits()), (2, 2));
        assert_eq!(g.read_point(), 0.5);
        g.record(false, false);
        g.record(false, true);
        assert_eq!((g.read_hits(), g.demoted_hits()), (2, 3));
        assert!((g.demoted_point() - 0.6).abs() < 1e-12);
        assert!((g.read_point() - 0.4).abs() < 1e-12);
    }

    #[test]
    fn segment_index_of_points() {
        assert_eq!(InsertionGhosts::segment(0.0, 10), 0);
        assert_eq!(InsertionGhosts::segment(0.09, 10), 0);
        assert_eq!(InsertionGhosts::segment(0.5, 10), 5);
        assert_eq!(InsertionGhosts::segment(1.0, 10), 9);
        assert_eq!(InsertionGhosts::segment(1.0, 1), 0);
    }
}
