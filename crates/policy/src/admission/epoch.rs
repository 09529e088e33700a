//! Discrete sieves: choose a batch of blocks at the end of each epoch (SieveStore section 3.2's
//! access-count-based discrete batch-allocation, and the section 5.1 baselines built the same
//! way).
//!
//! The sieve only counts and chooses; a cache manager owns residency: at each epoch's end it
//! asks [`EpochSieve::end_epoch`] for the chosen blocks, batch-allocates those not resident,
//! drops the resident ones not chosen, and keeps (does not move) those chosen again.

/// A sieve that chooses the cache's contents once per epoch.
pub trait EpochSieve: Send {
    /// Short lowercase name, as used on the command line (`sievestore-d`, `ideal`, ...).
    fn name(&self) -> &'static str;

    /// Record one block access of the current epoch.
    fn observe(&mut self, access: &crate::Access);

    /// The epoch is over: the blocks chosen for residency, with their access counts in the
    /// epoch, most wanted first (a manager with too little room keeps a prefix). Counts are
    /// reset for the next epoch.
    fn end_epoch(&mut self) -> Vec<(u64, u64)>;

    /// True for an oracle that knows an epoch's accesses in advance: its choice from epoch
    /// `i`'s accesses is resident *during* epoch `i` (the ideal sieve). Otherwise the choice
    /// is resident during epoch `i + 1`.
    fn oracle(&self) -> bool {
        false
    }

    /// Bytes of the sieve's own state (counts of the epoch so far).
    fn memory_bytes(&self) -> usize {
        0
    }
}

/// Per-epoch access counts shared by the discrete sieves.
#[derive(Clone, Debug, Default)]
pub struct EpochCounts {
    counts: super::key_hash::KeyMap<u64>,
}

impl EpochCounts {
    /// Count one access to `key`.
    #[inline]
    pub fn add(&mut self, key: u64) {
        *self.counts.entry(key).or_insert(0) += 1;
    }

    /// Take the epoch's counts, sorted by count descending then key ascending (a
    /// deterministic order), leaving the table empty.
    pub fn take_sorted(&mut self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self.counts.drain().collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Distinct blocks counted so far.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// True if nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Bytes of the table (key, count and a control byte per bucket).
    pub fn memory_bytes(&self) -> usize {
        self.counts.capacity() * (8 + 8 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sort_by_popularity_then_key() {
        let mut c = EpochCounts::default();
        for k in [5, 3, 5, 9, 3, 5, 1] {
            c.add(k);
        }
        assert_eq!(c.len(), 4);
        assert_eq!(c.take_sorted(), vec![(5, 3), (3, 2), (1, 1), (9, 1)]);
        assert!(c.is_empty());
    }
}
