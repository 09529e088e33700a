//! Exact reuse distance in O(n log n) (Bonfire Figure 3; Mattson's LRU stack distance).
//!
//! The reuse distance of an access is the number of distinct blocks accessed between it and
//! the previous access to the same block (a,b,c,a: 2 for the second a); a first access has
//! none (infinite). It equals the block's depth in an LRU stack, so an LRU cache of `s`
//! blocks hits exactly the accesses with distance `< s` ([`crate::mrc`]).
//!
//! Algorithm (Bennett and Kruskal, 1975): a Fenwick tree over access positions marks, for
//! every block seen, the position of its latest access. The distance of access `i` whose
//! block was last accessed at `p` is the number of marks after `p`: `D - prefix(p)` where `D`
//! is the number of distinct blocks so far (computed as a range sum). Then `p` is unmarked and `i` marked. Positions
//! are renumbered when the tree's window fills ([`reuse_distances`]).
//!
//! - `marks.rs`: the dead positions of the window and their Fenwick tree of word counts;
//! - `distance.rs`: the pass ([`ReusePass`], [`reuse_distances`]) and its tables of latest
//!   positions;
//! - `histogram.rs`: the distances counted into a [`ReuseHistogram`] with Figure 3's groups.

mod distance;
mod histogram;
mod marks;

pub use distance::{reuse_distances, ReusePass, DENSE_SLOTS_PER_KEY};
pub use histogram::{HistogramBuilder, ReuseHistogram, REUSE_BUCKETS};
