//! Belady's MIN extended with selective allocation, the counter-example of SieveStore
//! section 3.1: on a miss the block is allocated only if its next use is earlier than the
//! next use of some resident block (the resident block used farthest in the future is then
//! evicted). This maximizes hits but, as the paper shows, does not minimize
//! allocation-writes.

use ember_policy::NEVER;
use std::collections::{BTreeSet, HashMap};

/// What a run of [`belady_selective`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BeladyOutcome {
    /// Block accesses.
    pub accesses: u64,
    /// Hits.
    pub hits: u64,
    /// Allocation-writes (misses that were allocated).
    pub allocation_writes: u64,
}

/// The next-use virtual time of every access of `keys` ([`NEVER`] when not used again).
pub fn next_uses(keys: &[u64]) -> Vec<u64> {
    let mut next = vec![NEVER; keys.len()];
    let mut seen: HashMap<u64, u64> = HashMap::new();
    for (i, &k) in keys.iter().enumerate().rev() {
        if let Some(&j) = seen.get(&k) {
            next[i] = j;
        }
        seen.insert(k, i as u64);
    }
    next
}

/// Simulate Belady's selective allocation over the block stream `keys` with a cache of
/// `capacity` blocks.
pub fn belady_selective(keys: &[u64], capacity: usize) -> BeladyOutcome {
    let next = next_uses(keys);
    let mut out = BeladyOutcome::default();
    // Resident blocks: key -> next use, and the same ordered by next use.
    let mut resident: HashMap<u64, u64> = HashMap::new();
    let mut by_next: BTreeSet<(u64, u64)> = BTreeSet::new();
    for (i, &k) in keys.iter().enumerate() {
        out.accesses += 1;
        let nu = next[i];
        if let Some(old) = resident.get_mut(&k) {
            out.hits += 1;
            by_next.remove(&(*old, k));
            *old = nu;
            by_next.insert((nu, k));
            continue;
        }
        if capacity == 0 || nu == NEVER {
            continue;
        }
        if resident.len() < capacity {
            resident.insert(k, nu);
            by_next.insert((nu, k));
            out.allocation_writes += 1;
            continue;
        }
        if let Some(&(far, victim)) = by_next.iter().next_back() {
            if nu < far {
                by_next.remove(&(far, victim));
                resident.remove(&victim);
                resident.insert(k, nu);
                by_next.insert((nu, k));
                out.allocation_writes += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_uses_point_forward() {
        assert_eq!(next_uses(&[1, 2, 1, 1]), vec![2, NEVER, 3, NEVER]);
    }

    #[test]
    fn never_allocates_a_block_without_reuse_and_keeps_the_sooner_one() {
        // Capacity 1: 1 is reused soon, 2 never -> 2 bypasses.
        let o = belady_selective(&[1, 2, 1], 1);
        assert_eq!(o, BeladyOutcome { accesses: 3, hits: 1, allocation_writes: 1 });
    }
}
