//! Helpers for the policies' unit tests.

use super::Replacement;
use crate::Access;

/// Drive `policy` with reads of `keys` (vtime = index), returning (hit, evicted) per access.
pub(crate) fn run(policy: &mut dyn Replacement, keys: &[u64]) -> Vec<(bool, Option<u64>)> {
    keys.iter().enumerate().map(|(t, &k)| policy.access(&Access::read(k, t as u64))).collect()
}

/// Number of misses in a [`run`] result.
pub(crate) fn misses(out: &[(bool, Option<u64>)]) -> usize {
    out.iter().filter(|(hit, _)| !hit).count()
}

/// Drive an oracle policy: `next_vtime` computed from the sequence itself.
pub(crate) fn run_with_oracle(
    policy: &mut dyn Replacement,
    keys: &[u64],
) -> Vec<(bool, Option<u64>)> {
    let next = super::next_vtimes(keys);
    keys.iter()
        .enumerate()
        .map(|(t, &k)| {
            let mut a = Access::read(k, t as u64);
            a.next_vtime = next[t];
            policy.access(&a)
        })
        .collect()
}

/// `n` keys from a xorshift stream seeded with `seed`, skewed: half the draws from the first
/// quarter of `universe` keys (a hot set), half from all of them.
pub(crate) fn skewed_keys(n: usize, universe: u64, seed: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x & 1 == 0 {
                (x >> 8) % (universe / 4 + 1)
            } else {
                (x >> 8) % universe
            }
        })
        .collect()
}

/// An LRU of capacity 3 over `a b c a d`: `d` evicts `b`, the least recently used, and the
/// order left is `d a c`. `keys` lists a policy's resident keys, newest first.
pub(crate) fn check_evicts_least_recently_used<P: Replacement>(
    mut lru: P,
    keys: fn(&P) -> Vec<u64>,
) {
    assert_eq!(lru.capacity(), 3);
    let out = run(&mut lru, &[1, 2, 3, 1, 4]);
    assert_eq!(
        out,
        vec![(false, None), (false, None), (false, None), (true, None), (false, Some(2))]
    );
    assert_eq!(keys(&lru), vec![4, 1, 3]);
}
