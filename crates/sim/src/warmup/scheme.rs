//! The schemes of Bonfire's warmup study (section 4.2): a *cold* cache warmed on demand, an
//! *always-warm* cache running since the start of the trace, and new caches preloaded by a
//! warmup selector (Last-K, First-K, Top-K, Random-K).

use ember_policy::warmup::SelectorKind;
use std::fmt;

/// A warmup scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// A new, empty cache filled on demand.
    Cold,
    /// A cache that has been running since the beginning of the trace.
    AlwaysWarm,
    /// A new cache preloaded from the previous period by a selector.
    Warmed(SelectorKind),
}

impl Scheme {
    /// Name as printed (`cold`, `always-warm`, `Last-K`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Cold => "cold",
            Scheme::AlwaysWarm => "always-warm",
            Scheme::Warmed(k) => k.name(),
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Scheme::Cold.to_string(), "cold");
        assert_eq!(Scheme::AlwaysWarm.name(), "always-warm");
        assert_eq!(Scheme::Warmed(SelectorKind::FirstK).name(), "First-K");
    }
}
