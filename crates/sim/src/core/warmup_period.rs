//! The uncounted warm-up period (`--warmup-requests`, `--warmup-time`; libCacheSim's
//! `--warmup-sec`): the first requests of a trace run through the cache, whose state evolves
//! as usual, but no counter counts them; counting starts with the first request after it.
//! Not Bonfire's cache warmup (`ember warmup`, [`crate::warmup`]), which loads a cache
//! before a trace.
//!
//! The period ends between requests: after a number of requests (those touching at least
//! one block, as timeline intervals count them), or at the first request issued at least a
//! span of trace time after the first request. Once counting has started it never stops (a
//! later request whose time goes back is counted).

use crate::SimError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How long the uncounted warm-up period lasts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmupPeriod {
    /// No warm-up: every request is counted.
    #[default]
    None,
    /// The first this many requests are not counted.
    Requests(u64),
    /// Requests issued less than this many nanoseconds after the first request are not
    /// counted.
    Time(u64),
}

impl WarmupPeriod {
    /// The period of `--warmup-requests` and `--warmup-time` (at most one of them; 0 or
    /// absent: none).
    pub fn from_flags(requests: Option<u64>, time_ns: Option<u64>) -> Result<Self, SimError> {
        match (requests, time_ns) {
            (Some(_), Some(_)) => Err(SimError::Invalid(
                "give the uncounted warm-up period as requests or as time, not both".into(),
            )),
            (Some(0), None) | (None, Some(0)) | (None, None) => Ok(Self::None),
            (Some(n), None) => Ok(Self::Requests(n)),
            (None, Some(t)) => Ok(Self::Time(t)),
        }
    }

    /// True if every request is counted.
    pub fn is_none(&self) -> bool {
        matches!(self, Self::None | Self::Requests(0) | Self::Time(0))
    }

    /// True if the period is a span of trace time (the requests' times are needed).
    pub fn is_time(&self) -> bool {
        matches!(self, Self::Time(t) if *t > 0)
    }

    /// True if the request numbered `request` (from 0), issued `rel_ns` after the first
    /// request, lies after the period.
    #[inline]
    pub fn over_at(&self, request: u64, rel_ns: u64) -> bool {
        match *self {
            Self::None => true,
            Self::Requests(n) => request >= n,
            Self::Time(t) => rel_ns >= t,
        }
    }
}

impl fmt::Display for WarmupPeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::None => f.write_str("none"),
            Self::Requests(n) => write!(f, "{n} requests"),
            Self::Time(t) => write!(f, "{}", crate::Interval::Time(t)),
        }
    }
}

/// Where counting started, after an uncounted warm-up period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountStart {
    /// Requests before the first counted one (the warm-up's requests).
    pub request: u64,
    /// Block accesses before the first counted one.
    pub access: u64,
    /// Time of the first counted request, in nanoseconds since the first request.
    pub start_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_make_one_period() {
        assert_eq!(WarmupPeriod::from_flags(None, None).unwrap(), WarmupPeriod::None);
        assert_eq!(WarmupPeriod::from_flags(Some(0), None).unwrap(), WarmupPeriod::None);
        assert_eq!(WarmupPeriod::from_flags(Some(5), None).unwrap(), WarmupPeriod::Requests(5));
        assert_eq!(WarmupPeriod::from_flags(None, Some(9)).unwrap(), WarmupPeriod::Time(9));
        assert!(WarmupPeriod::from_flags(Some(1), Some(1)).is_err());
        let t = WarmupPeriod::Time(10);
        assert!(t.is_time() && !t.is_none());
        assert!(!t.over_at(100, 9) && t.over_at(0, 10));
        let r = WarmupPeriod::Requests(3);
        assert!(!r.over_at(2, u64::MAX) && r.over_at(3, 0));
        assert!(WarmupPeriod::None.over_at(0, 0));
        assert_eq!(WarmupPeriod::Time(3_600_000_000_000).to_string(), "1h");
        assert_eq!(r.to_string(), "3 requests");
    }
}
