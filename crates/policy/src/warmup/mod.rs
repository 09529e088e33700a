//! Warmup selectors: which regions a new cache is preloaded with (Bonfire, Zhang et al., FAST
//! 2013, section 4.2).
//!
//! A selector observes the history (the accessed regions, in order, with their times) and
//! picks `k` distinct regions to warm a new cache with. A *region* is a run of blocks of the
//! warmup region size (Bonfire: 4 KiB or 1 MiB; 1 MiB by default); the caller maps block
//! keys to region numbers. [`WarmupSelector::select`] returns the regions in *preload order*:
//! least valuable first, so that inserting them in that order into an LRU cache leaves the
//! most valuable at the most-recently-used end. No I/O: the simulator and the real cache's
//! preloader both call these.
//!
//! - [`LastK`]: the last `k` regions accessed (the hourly pattern; imitates an LRU state);
//! - [`FirstK`]: the first `k` regions of the history (the daily pattern: the same period of
//!   the previous day);
//! - [`TopK`]: the `k` most frequently accessed regions;
//! - [`RandomK`]: `k` regions drawn uniformly from those accessed.

pub mod first_k;
pub mod last_k;
pub mod random_k;
pub mod top_k;

pub use first_k::FirstK;
pub use last_k::LastK;
pub use random_k::RandomK;
pub use top_k::TopK;

use std::fmt;
use std::str::FromStr;

/// A warmup selector.
pub trait WarmupSelector: Send {
    /// The paper's name (`Last-K`, ...).
    fn name(&self) -> &'static str;

    /// Observe one access to `region` at `time_ns` (history, in trace order).
    fn observe(&mut self, region: u64, time_ns: u64);

    /// Up to `k` distinct observed regions, least valuable first (preload order).
    fn select(&self, k: usize) -> Vec<u64>;

    /// Forget the history.
    fn clear(&mut self);
}

/// The four selectors by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SelectorKind {
    /// [`LastK`].
    LastK,
    /// [`FirstK`].
    FirstK,
    /// [`TopK`].
    TopK,
    /// [`RandomK`].
    RandomK,
}

impl SelectorKind {
    /// All four, in the paper's order.
    pub const ALL: [SelectorKind; 4] =
        [SelectorKind::LastK, SelectorKind::FirstK, SelectorKind::TopK, SelectorKind::RandomK];

    /// A new selector of this kind (`seed` drives [`RandomK`]).
    pub fn build(self, seed: u64) -> Box<dyn WarmupSelector> {
        match self {
            SelectorKind::LastK => Box::new(LastK::new()),
            SelectorKind::FirstK => Box::new(FirstK::new()),
            SelectorKind::TopK => Box::new(TopK::new()),
            SelectorKind::RandomK => Box::new(RandomK::new(seed)),
        }
    }

    /// The paper's name.
    pub fn name(self) -> &'static str {
        match self {
            SelectorKind::LastK => "Last-K",
            SelectorKind::FirstK => "First-K",
            SelectorKind::TopK => "Top-K",
            SelectorKind::RandomK => "Random-K",
        }
    }
}

impl fmt::Display for SelectorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown selector name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownSelector(pub String);

impl fmt::Display for UnknownSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown warmup selector {:?} (expected last-k, first-k, top-k or random-k)",
            self.0
        )
    }
}

impl std::error::Error for UnknownSelector {}

impl FromStr for SelectorKind {
    type Err = UnknownSelector;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "last-k" | "lastk" | "last" => Ok(SelectorKind::LastK),
            "first-k" | "firstk" | "first" => Ok(SelectorKind::FirstK),
            "top-k" | "topk" | "top" => Ok(SelectorKind::TopK),
            "random-k" | "randomk" | "random" => Ok(SelectorKind::RandomK),
            _ => Err(UnknownSelector(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for k in SelectorKind::ALL {
            assert_eq!(k.name().parse::<SelectorKind>(), Ok(k));
            assert_eq!(k.build(1).name(), k.name());
        }
        assert!("lru".parse::<SelectorKind>().is_err());
    }
}
