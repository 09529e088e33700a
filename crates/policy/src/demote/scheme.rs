//! The array cache-management schemes of Wong and Wilkes, *My cache or yours?*, USENIX ATC
//! 2002 (sections 1.2 and 5.1; Figure 1), all with LRU client caches.

use std::fmt;
use std::str::FromStr;

/// How clients and the array manage the array cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Scheme {
    /// NONE-LRU, the baseline: no demotions; the array caches what it reads, LRU.
    NoneLru,
    /// DEMOTE-LRU: clients demote the clean blocks they eject; the array treats demoted and
    /// read blocks alike (LRU, both at the keep end).
    DemoteLru,
    /// DEMOTE: blocks the array sends to a client go to the discard end (head) of its queue,
    /// demoted blocks to the keep end (tail).
    Demote,
    /// DEMOTE with an SLRU array (section 5.1's intermediate step): read and demoted blocks
    /// enter the keep end of the probationary segment, READ hits move to the protected one.
    DemoteSlru,
    /// DEMOTE-ADAPT-UNI: ghost caches pick the insertion segment of read and demoted blocks;
    /// uniform segments.
    DemoteAdaptUni,
    /// DEMOTE-ADAPT-EXP: as DEMOTE-ADAPT-UNI with exponentially growing segments.
    DemoteAdaptExp,
}

impl Scheme {
    /// Every scheme, baseline first.
    pub const ALL: [Scheme; 6] = [
        Scheme::NoneLru,
        Scheme::DemoteLru,
        Scheme::Demote,
        Scheme::DemoteSlru,
        Scheme::DemoteAdaptUni,
        Scheme::DemoteAdaptExp,
    ];

    /// The paper's name (NONE-LRU, DEMOTE-LRU, DEMOTE, DEMOTE-SLRU, DEMOTE-ADAPT-UNI,
    /// DEMOTE-ADAPT-EXP).
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::NoneLru => "NONE-LRU",
            Scheme::DemoteLru => "DEMOTE-LRU",
            Scheme::Demote => "DEMOTE",
            Scheme::DemoteSlru => "DEMOTE-SLRU",
            Scheme::DemoteAdaptUni => "DEMOTE-ADAPT-UNI",
            Scheme::DemoteAdaptExp => "DEMOTE-ADAPT-EXP",
        }
    }

    /// True if clients demote the blocks they eject.
    pub fn demotes(&self) -> bool {
        *self != Scheme::NoneLru
    }

    /// True if the array keeps read and demoted ghost caches.
    pub fn adaptive(&self) -> bool {
        matches!(self, Scheme::DemoteAdaptUni | Scheme::DemoteAdaptExp)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheme name that is not one of [`Scheme::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheme `{0}` (known: none-lru, demote-lru, demote, demote-slru, demote-adapt-uni, demote-adapt-exp)")]
pub struct UnknownScheme(pub String);

impl FromStr for Scheme {
    type Err = UnknownScheme;

    /// Case-insensitive paper names; `_` may stand for `-`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.trim().to_ascii_uppercase().replace('_', "-");
        Scheme::ALL
            .into_iter()
            .find(|k| k.name() == norm)
            .ok_or_else(|| UnknownScheme(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Scheme::ALL {
            assert_eq!(s.name().parse::<Scheme>(), Ok(s));
            assert_eq!(s.name().to_lowercase().replace('-', "_").parse::<Scheme>(), Ok(s));
        }
        assert!("demote-mru".parse::<Scheme>().is_err());
        assert!(!Scheme::NoneLru.demotes());
        assert!(Scheme::DemoteLru.demotes());
        assert!(Scheme::DemoteAdaptExp.adaptive() && !Scheme::Demote.adaptive());
    }
}
