//! Durations: `500ms`, `30s`, `10m`, `1.5h`, `1d`; a bare number is seconds, or the unit a
//! caller names ([`parse_duration_in`]).

use crate::error::{Problem, Quantity, UnitError};
use crate::number::split;
use crate::time_unit::TimeUnit;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Parse a duration: a number with `ns`, `us`, `ms`, `s`, `m` or `min`, `h` or `d`; a bare
/// number is seconds. Whitespace may separate number and unit; a fraction is accepted when
/// the result is a whole number of nanoseconds (`1.5h`, `0.25s`).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(ember_units::parse_duration("10m"), Ok(Duration::from_secs(600)));
/// assert_eq!(ember_units::parse_duration("90"), Ok(Duration::from_secs(90)));
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    parse_duration_in(text, TimeUnit::Secs)
}

/// [`parse_duration`] with a bare number in `bare` (a flag whose number has always meant
/// milliseconds, say, keeps that meaning).
pub fn parse_duration_in(text: &str, bare: TimeUnit) -> Result<Duration, UnitError> {
    let err = |p| UnitError::new(text, Quantity::Duration(bare), p);
    let (number, suffix) = split(text).map_err(err)?;
    let unit = if suffix.is_empty() {
        bare
    } else {
        TimeUnit::from_suffix(suffix).ok_or_else(|| err(Problem::UnknownUnit(suffix.into())))?
    };
    let ns = number.times(unit.nanos()).map_err(err)?;
    let secs = u64::try_from(ns / NANOS_PER_SEC).map_err(|_| err(Problem::TooLarge))?;
    Ok(Duration::new(secs, (ns % NANOS_PER_SEC) as u32))
}

/// [`parse_duration`], refusing zero (a period, an interval).
pub fn parse_nonzero_duration(text: &str) -> Result<Duration, UnitError> {
    match parse_duration(text)? {
        Duration::ZERO => {
            Err(UnitError::new(text, Quantity::Duration(TimeUnit::Secs), Problem::Zero))
        }
        d => Ok(d),
    }
}

/// A duration that reads and writes as a user writes it ([`parse_duration`]); displayed in
/// its largest exact unit (`10min`, `1500ms`), deserialized from an integer (seconds) or a
/// string, serialized as the string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

impl Dur {
    /// The duration.
    pub fn duration(self) -> Duration {
        self.0
    }
}

impl From<Duration> for Dur {
    fn from(d: Duration) -> Self {
        Dur(d)
    }
}

impl From<Dur> for Duration {
    fn from(d: Dur) -> Duration {
        d.0
    }
}

impl FromStr for Dur {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Self, UnitError> {
        parse_duration(text).map(Dur)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        if ns == 0 {
            return write!(f, "0s");
        }
        let unit = TimeUnit::ALL
            .into_iter()
            .find(|u| ns.is_multiple_of(u128::from(u.nanos())))
            .unwrap_or(TimeUnit::Nanos);
        write!(f, "{}{}", ns / u128::from(unit.nanos()), unit.symbol())
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct DurVisitor;

impl Visitor<'_> for DurVisitor {
    type Value = Dur;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a number of seconds or a string such as \"10min\" (ns, us, ms, s, m, h, d)")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
        Ok(Dur(Duration::from_secs(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
        u64::try_from(v)
            .map(|s| Dur(Duration::from_secs(s)))
            .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
        v.parse().map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(n: u64) -> Duration {
        Duration::from_nanos(n)
    }

    #[test]
    fn every_unit() {
        let cases = [
            ("7ns", ns(7)),
            ("7us", Duration::from_micros(7)),
            ("7µs", Duration::from_micros(7)),
            ("7ms", Duration::from_millis(7)),
            ("7s", Duration::from_secs(7)),
            ("7m", Duration::from_secs(420)),
            ("7min", Duration::from_secs(420)),
            ("7h", Duration::from_secs(7 * 3600)),
            ("7d", Duration::from_secs(7 * 86_400)),
            ("7", Duration::from_secs(7)),
            (" 7 ms ", Duration::from_millis(7)),
            ("0", Duration::ZERO),
            ("0ns", Duration::ZERO),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    /// The durations the commands' flags were written with keep their values.
    #[test]
    fn the_commands_durations() {
        assert_eq!(parse_duration("1d"), Ok(ns(86_400_000_000_000)));
        assert_eq!(parse_duration("10m"), Ok(ns(600_000_000_000)));
        assert_eq!(parse_duration("2500s"), Ok(ns(2_500_000_000_000)));
        assert_eq!(parse_duration("100"), Ok(ns(100_000_000_000)));
        assert_eq!(parse_duration("8h"), Ok(Duration::from_secs(8 * 3600)));
        assert_eq!(parse_duration("10ms"), Ok(Duration::from_millis(10)));
        assert!(parse_duration("5y").is_err());
    }

    #[test]
    fn units_are_lower_case() {
        for bad in ["1S", "1MS", "1H", "1D", "1Min"] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(matches!(e.problem, Problem::UnknownUnit(_)), "{bad}");
        }
    }

    #[test]
    fn fractions_only_when_whole() {
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse_duration("0.000000001"), Ok(ns(1)));
        assert_eq!(parse_duration("0.1m"), Ok(Duration::from_secs(6)));
        for bad in ["1.5ns", "0.0000000001", "0.0001us"] {
            let e = parse_duration(bad).expect_err(bad);
            assert_eq!(e.problem, Problem::NotWhole, "{bad}");
            assert!(e.to_string().contains("whole number of nanoseconds"), "{e}");
        }
    }

    #[test]
    fn overflow_is_an_error() {
        let max = format!("{}", u64::MAX);
        assert_eq!(parse_duration(&max), Ok(Duration::from_secs(u64::MAX)));
        assert_eq!(parse_duration(&format!("{max}.999999999")), Ok(Duration::MAX));
        for bad in ["18446744073709551616", "18446744073709551615m", "999999999999999999999d"] {
            let e = parse_duration(bad).expect_err(bad);
            assert_eq!(e.problem, Problem::TooLarge, "{bad}");
            assert!(e.to_string().contains("too large"), "{e}");
        }
    }

    #[test]
    fn a_bare_number_takes_the_callers_unit() {
        assert_eq!(parse_duration_in("0.2", TimeUnit::Millis), Ok(Duration::from_micros(200)));
        assert_eq!(parse_duration_in("0.2s", TimeUnit::Millis), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration_in("7", TimeUnit::Days), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration_in("36h", TimeUnit::Days), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_duration_in("30", TimeUnit::Mins), Ok(Duration::from_secs(1800)));
        for u in TimeUnit::ALL {
            assert_eq!(parse_duration_in("3", u), Ok(ns(3 * u.nanos())));
            assert_eq!(parse_duration(&format!("3{}", u.symbol())), Ok(ns(3 * u.nanos())));
            let e = parse_duration_in("x", u).expect_err("x");
            assert!(e.to_string().contains(&format!("a bare number is {}", u.name())), "{e}");
        }
    }

    #[test]
    fn converts_to_a_float_in_a_unit() {
        assert_eq!(TimeUnit::Millis.of(Duration::from_micros(200)), 0.2);
        assert_eq!(TimeUnit::Millis.of(Duration::from_micros(160)), 0.16);
        assert_eq!(TimeUnit::Secs.of(Duration::from_millis(1500)), 1.5);
        assert_eq!(TimeUnit::Days.of(Duration::from_secs(36 * 3600)), 1.5);
        assert_eq!(TimeUnit::Days.of(Duration::from_secs(7 * 86_400)), 7.0);
    }

    #[test]
    fn errors_name_the_text_and_the_rule() {
        let cases = [
            ("", Problem::Empty),
            ("s", Problem::NotANumber),
            ("-1s", Problem::NotANumber),
            ("5y", Problem::UnknownUnit("y".into())),
            ("1e3s", Problem::UnknownUnit("e3s".into())),
            ("10 sec", Problem::UnknownUnit("sec".into())),
        ];
        for (text, problem) in cases {
            let e = parse_duration(text).expect_err(text);
            assert_eq!(e.problem, problem, "{text:?}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("duration {text:?}: ")), "{msg}");
            assert!(msg.contains("ns, us, ms, s, m or min, h, d"), "{msg}");
            assert!(msg.contains("a bare number is seconds"), "{msg}");
        }
    }

    #[test]
    fn nonzero_refuses_zero_only() {
        assert_eq!(parse_nonzero_duration("1ns"), Ok(ns(1)));
        for zero in ["0", "0s", "0.0h"] {
            let e = parse_nonzero_duration(zero).expect_err(zero);
            assert_eq!(e.problem, Problem::Zero);
            assert!(e.to_string().contains("longer than 0"), "{e}");
        }
    }

    #[test]
    fn displays_the_largest_exact_unit() {
        let cases = [
            (Duration::ZERO, "0s"),
            (ns(1), "1ns"),
            (ns(1500), "1500ns"),
            (Duration::from_micros(1500), "1500us"),
            (Duration::from_millis(10), "10ms"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(600), "10min"),
            (Duration::from_secs(8 * 3600), "8h"),
            (Duration::from_secs(86_400), "1d"),
            (Duration::from_secs(36 * 3600), "36h"),
            (Duration::MAX, "18446744073709551615999999999ns"),
        ];
        for (d, want) in cases {
            assert_eq!(Dur(d).to_string(), want);
            if d != Duration::MAX {
                assert_eq!(want.parse::<Dur>(), Ok(Dur(d)), "{want} round trip");
            }
        }
    }

    #[test]
    fn serde_takes_an_integer_or_a_string_and_writes_the_string() {
        let d: Dur = serde_json::from_str("90").expect("integer");
        assert_eq!(d, Dur(Duration::from_secs(90)));
        let d: Dur = serde_json::from_str("\"8h\"").expect("string");
        assert_eq!(serde_json::to_string(&d).expect("serialize"), "\"8h\"");
        let e = serde_json::from_str::<Dur>("\"1.5ns\"").expect_err("fraction");
        assert!(e.to_string().contains("whole number of nanoseconds"), "{e}");
        assert!(serde_json::from_str::<Dur>("-1").is_err());
        assert!(serde_json::from_str::<Dur>("null").is_err());
    }
}
