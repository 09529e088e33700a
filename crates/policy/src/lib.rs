//! ember's cache decisions, shared by the simulator (`ember sim`) and the real cache
//! (`ember serve`): replacement orders ([`replacement`]), admission sieves ([`admission`]),
//! the sequential cutoff ([`seq_cutoff`]) and the volumes' shares of the cache ([`shares`]).
//! Nothing here does I/O, spawns threads or reads a clock: time arrives in each [`Access`].

pub mod access;
pub mod admission;
pub mod demote;
pub mod ghost;
pub mod huge_pages;
pub mod keymap;
pub mod node_ring;
pub mod prefetch;
pub mod replacement;
pub mod ring;
pub mod seq_cutoff;
pub mod shares;
pub mod slab;
pub mod warmup;

pub use access::{Access, NEVER};
pub use admission::Admission;
pub use replacement::{
    build, Arc, Clock, Fifo, Kind, Lru, Opt, Replacement, S3Fifo, Sieve, Slru, Spec, TwoQ,
};
