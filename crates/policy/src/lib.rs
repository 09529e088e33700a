//! ember's cache decisions, shared by the simulator (`ember sim`) and the real cache
//! (`ember serve`): replacement orders ([`replacement`]). Nothing here does I/O, spawns
//! threads or reads a clock: time arrives in each [`Access`].

pub mod access;
pub mod replacement;

pub use access::{Access, NEVER};
pub use replacement::Replacement;
