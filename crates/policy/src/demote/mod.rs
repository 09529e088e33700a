//! The array side of exclusive caching with DEMOTE (Wong and Wilkes, *My cache or yours?
//! Making storage more exclusive*, USENIX ATC 2002): cache-management [`Scheme`]s, an
//! [`ArrayCache`] that serves READS and accepts DEMOTEs, the [`SegmentedQueue`] that gives
//! O(1) insertion at any of N_segs segments, the [`SegmentLayout`]s (uniform, exponential,
//! SLRU), the read/demoted [`InsertionGhosts`] of the adaptive schemes and whether a sieved
//! array admits DEMOTEs through its sieve ([`DemoteAdmission`]).
//!
//! The client side's rule, which clean blocks a client tier ejects and demotes
//! ([`new_version_room`]), is here too, for the real client tier and the
//! laboratory's alike; the laboratory's client caches and the clients over the array live
//! in `ember-sim`'s `demote` module.

pub mod array_cache;
pub mod array_replacement;
pub mod client_ejection;
pub mod demote_admission;
pub mod insertion_ghosts;
pub mod scheme;
pub mod segment_layout;
pub mod segmented_queue;

pub use crate::replacement::DemoteOutcome;
pub use array_cache::{ArrayCache, ArrayConfig, DEFAULT_SLRU_PROTECTED};
pub use array_replacement::ArrayReplacement;
pub use client_ejection::new_version_room;
pub use demote_admission::{DemoteAdmission, UnknownDemoteAdmission};
pub use insertion_ghosts::InsertionGhosts;
pub use scheme::{Scheme, UnknownScheme};
pub use segment_layout::{SegmentLayout, DEFAULT_SEGMENTS, MAX_SEGMENTS};
pub use segmented_queue::{Entry, Ghost, Position, SegmentedQueue};
