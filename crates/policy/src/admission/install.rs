//! The batch allocation of a discrete sieve's choice (SieveStore, ISCA 2010, section 3.2):
//! at an epoch's end the chosen blocks, most wanted first and cut to the cache's capacity,
//! become the cache's contents for the next epoch.
//!
//! - A chosen block not resident is one allocation-write: a *move*.
//! - A chosen block already resident stays where it is: its replacement and its allocation
//!   cancel (a *cancelled move*).
//! - A resident block not chosen leaves.
//!
//! The simulator's batch manager (`ember sievestore`) and the real cache's epoch thread
//! (`ember serve` with SieveStore-D or RandSieve-BlkD) both apply this rule through
//! [`install`]; what each does with the moves (count them, or stage them in the background)
//! is its own.

use super::key_hash::{key_map, KeyMap};

/// An epoch's choice made into the cache's next contents.
#[derive(Clone, Debug, Default)]
pub struct Installation {
    /// The blocks resident for the next epoch.
    pub chosen: KeyMap<()>,
    /// Chosen blocks that were not resident, most wanted first: one allocation-write each.
    pub moves: Vec<u64>,
    /// Chosen blocks already resident, most wanted first: their moves cancel.
    pub cancelled: Vec<u64>,
}

impl Installation {
    /// True if `key` is resident for the next epoch (a resident block for which this is
    /// false leaves the cache).
    #[inline]
    pub fn keeps(&self, key: u64) -> bool {
        self.chosen.contains_key(&key)
    }
}

/// Install `chosen` (blocks with their counts, most wanted first, as
/// [`super::EpochSieve::end_epoch`] gives them) into a cache of `capacity` blocks whose
/// current contents `resident` tells: the first `capacity` chosen blocks are kept, each
/// either a move or a cancelled move. A block chosen twice counts once.
pub fn install(
    chosen: Vec<(u64, u64)>,
    capacity: usize,
    resident: impl Fn(u64) -> bool,
) -> Installation {
    let mut out = Installation { chosen: key_map(), moves: Vec::new(), cancelled: Vec::new() };
    for (k, _) in chosen.into_iter().take(capacity) {
        if out.chosen.insert(k, ()).is_some() {
            continue;
        }
        if resident(k) {
            out.cancelled.push(k);
        } else {
            out.moves.push(k);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SieveStore section 3.2: chosen blocks beyond the capacity are dropped, a resident
    /// block chosen again is not moved, and every other chosen block is one move.
    #[test]
    fn moves_cancels_and_cuts_to_the_capacity() {
        let resident = [1u64, 2];
        let chosen = vec![(1, 30), (4, 20), (2, 10), (5, 5)];
        let i = install(chosen, 3, |k| resident.contains(&k));
        assert_eq!(i.moves, vec![4]);
        assert_eq!(i.cancelled, vec![1, 2]);
        assert!(i.keeps(1) && i.keeps(2) && i.keeps(4));
        assert!(!i.keeps(5), "beyond the capacity");
        assert_eq!(i.chosen.len(), 3);
    }

    #[test]
    fn an_empty_choice_or_cache_keeps_nothing() {
        assert!(install(Vec::new(), 10, |_| true).chosen.is_empty());
        let i = install(vec![(7, 1)], 0, |_| false);
        assert!(i.chosen.is_empty() && i.moves.is_empty() && i.cancelled.is_empty());
    }

    #[test]
    fn a_block_chosen_twice_counts_once() {
        let i = install(vec![(3, 2), (3, 2), (8, 1)], 10, |k| k == 8);
        assert_eq!((i.moves, i.cancelled), (vec![3], vec![8]));
    }
}
