//! What a policy is told about one block access.

use ember_trace::Op;

/// Marks a block that is never accessed again (for [`Access::next_vtime`]).
pub const NEVER: u64 = u64::MAX;

/// One access to one block, as a policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The block's cache key (volume and block index, see [`ember_trace::block_key`]).
    pub key: u64,
    /// Time of the access in nanoseconds (the caller's clock; the trace's time in simulation).
    pub time_ns: u64,
    /// Read or write.
    pub op: Op,
    /// Virtual time: the index of this block access in the stream, starting at 0.
    pub vtime: u64,
    /// Virtual time of the next access to the same block, or [`NEVER`]. Only oracle
    /// policies (Belady's OPT, the ideal sieve) read it; others ignore it.
    pub next_vtime: u64,
}

impl Access {
    /// A read of `key` at virtual time `vtime` with no time or oracle information.
    pub fn read(key: u64, vtime: u64) -> Self {
        Self { key, time_ns: 0, op: Op::Read, vtime, next_vtime: NEVER }
    }
}
