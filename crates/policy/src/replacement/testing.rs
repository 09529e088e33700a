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
