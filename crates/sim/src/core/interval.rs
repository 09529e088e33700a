//! Timeline intervals (`--interval`): a span of trace time (`1h`, `10m`, `30s`, `500ms`, `1d`)
//! or a number of requests (`100000req`).

use crate::SimError;
use std::fmt;
use std::str::FromStr;

/// How a run's timeline is cut into intervals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interval {
    /// A span of trace time, in nanoseconds. Interval `k` holds the accesses whose requests
    /// were issued in `[t0 + k*span, t0 + (k+1)*span)`, `t0` being the first request's time.
    Time(u64),
    /// A number of requests: interval `k` holds requests `k*n .. (k+1)*n` (counting only
    /// requests that touch at least one block).
    Requests(u64),
}

const UNITS: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

impl FromStr for Interval {
    type Err = SimError;

    fn from_str(text: &str) -> Result<Self, SimError> {
        let err = |message: &str| SimError::Interval {
            text: text.to_owned(),
            message: message.to_owned(),
        };
        let s = text.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        if num.is_empty() {
            return Err(err("expected a number followed by ns, us, ms, s, m, h, d or req"));
        }
        let n: u64 = num.parse().map_err(|_| err("number too large"))?;
        if n == 0 {
            return Err(err("interval must be positive"));
        }
        let unit = unit.trim();
        if matches!(unit, "req" | "reqs" | "requests") {
            return Ok(Interval::Requests(n));
        }
        let mult = UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|&(_, m)| m)
            .ok_or_else(|| err("unknown unit (use ns, us, ms, s, m, h, d or req)"))?;
        n.checked_mul(mult).map(Interval::Time).ok_or_else(|| err("interval overflows"))
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Interval::Requests(n) => write!(f, "{n}req"),
            Interval::Time(ns) => {
                let (u, m) = UNITS
                    .iter()
                    .rev()
                    .filter(|(u, _)| *u != "min")
                    .find(|(_, m)| ns % m == 0)
                    .copied()
                    .unwrap_or(("ns", 1));
                write!(f, "{}{u}", ns / m)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_times_and_request_counts() {
        assert_eq!("1h".parse(), Ok(Interval::Time(3_600_000_000_000)));
        assert_eq!("10m".parse(), Ok(Interval::Time(600_000_000_000)));
        assert_eq!("10min".parse(), Ok(Interval::Time(600_000_000_000)));
        assert_eq!("30s".parse(), Ok(Interval::Time(30_000_000_000)));
        assert_eq!("500ms".parse(), Ok(Interval::Time(500_000_000)));
        assert_eq!("1d".parse(), Ok(Interval::Time(86_400_000_000_000)));
        assert_eq!("100000req".parse(), Ok(Interval::Requests(100_000)));
    }

    #[test]
    fn rejects_bad_intervals() {
        for bad in
            ["", "h", "0s", "10", "10x", "1.5h", "-1h", "99999999999999999999d", "999999999999d"]
        {
            assert!(bad.parse::<Interval>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn displays_in_the_largest_whole_unit() {
        assert_eq!(Interval::Time(3_600_000_000_000).to_string(), "1h");
        assert_eq!(Interval::Time(90_000_000_000).to_string(), "90s");
        assert_eq!(Interval::Time(600_000_000_000).to_string(), "10m");
        assert_eq!(Interval::Requests(5).to_string(), "5req");
    }
}
