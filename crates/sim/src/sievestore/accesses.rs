//! A trace's block accesses as the sieves see them: one [`Access`] per block a request
//! touches, numbered by virtual time, with no oracle information.

use ember_policy::{Access, NEVER};
use ember_trace::Request;

/// Every block access of `requests` as an [`Access`] (no oracle information).
pub fn accesses(requests: &[Request], block_size: u64) -> impl Iterator<Item = Access> + '_ {
    let mut vtime = 0u64;
    requests
        .iter()
        .flat_map(move |r| {
            let (time_ns, op) = (r.time_ns, r.op);
            r.block_keys(block_size).map(move |key| (key, time_ns, op))
        })
        .map(move |(key, time_ns, op)| {
            let a = Access { key, time_ns, op, vtime, next_vtime: NEVER };
            vtime += 1;
            a
        })
}

/// The access of block `key` by `r` at virtual time `*vtime`, which advances.
#[inline]
pub(crate) fn access(r: &Request, key: u64, vtime: &mut u64) -> Access {
    let a = Access { key, time_ns: r.time_ns, op: r.op, vtime: *vtime, next_vtime: NEVER };
    *vtime += 1;
    a
}
