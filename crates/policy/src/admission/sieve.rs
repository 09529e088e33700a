//! A built sieve of either kind: a per-miss sieve ([`Admission`]), which a cache asks on
//! every miss, or a discrete one ([`EpochSieve`]) with its epoch, whose choice a cache
//! batch-allocates at each epoch's end ([`super::install()`]). [`super::SieveSpec::build`]
//! makes one.

use super::{Admission, EpochSieve};

/// A built sieve of either kind.
pub enum Sieve {
    /// A per-miss sieve (the simulator runs it under LRU, as the paper's simulator does).
    Continuous(Box<dyn Admission>),
    /// A batch allocator with its epoch length.
    Discrete(Box<dyn EpochSieve>, u64),
}
