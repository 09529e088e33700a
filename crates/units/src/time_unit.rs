//! Units of time: their symbols, names and lengths in nanoseconds.

use std::time::Duration;

/// A unit of time, for the bare number of [`crate::parse_duration_in`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// Nanoseconds (`ns`).
    Nanos,
    /// Microseconds (`us`).
    Micros,
    /// Milliseconds (`ms`).
    Millis,
    /// Seconds (`s`).
    Secs,
    /// Minutes (`m`, `min`).
    Mins,
    /// Hours (`h`).
    Hours,
    /// Days of 24 hours (`d`).
    Days,
}

impl TimeUnit {
    /// Every unit, largest first.
    pub const ALL: [TimeUnit; 7] = [
        TimeUnit::Days,
        TimeUnit::Hours,
        TimeUnit::Mins,
        TimeUnit::Secs,
        TimeUnit::Millis,
        TimeUnit::Micros,
        TimeUnit::Nanos,
    ];

    /// Nanoseconds in one of this unit.
    pub fn nanos(self) -> u64 {
        match self {
            TimeUnit::Nanos => 1,
            TimeUnit::Micros => 1_000,
            TimeUnit::Millis => 1_000_000,
            TimeUnit::Secs => 1_000_000_000,
            TimeUnit::Mins => 60_000_000_000,
            TimeUnit::Hours => 3_600_000_000_000,
            TimeUnit::Days => 86_400_000_000_000,
        }
    }

    /// The unit as written after a number (`ms`, `min`).
    pub fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Nanos => "ns",
            TimeUnit::Micros => "us",
            TimeUnit::Millis => "ms",
            TimeUnit::Secs => "s",
            TimeUnit::Mins => "min",
            TimeUnit::Hours => "h",
            TimeUnit::Days => "d",
        }
    }

    /// The unit's name in a sentence (`milliseconds`).
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Nanos => "nanoseconds",
            TimeUnit::Micros => "microseconds",
            TimeUnit::Millis => "milliseconds",
            TimeUnit::Secs => "seconds",
            TimeUnit::Mins => "minutes",
            TimeUnit::Hours => "hours",
            TimeUnit::Days => "days",
        }
    }

    /// The unit a suffix names (lower case, as written), or `None`.
    pub(crate) fn from_suffix(suffix: &str) -> Option<TimeUnit> {
        Some(match suffix {
            "ns" => TimeUnit::Nanos,
            "us" | "µs" => TimeUnit::Micros,
            "ms" => TimeUnit::Millis,
            "s" => TimeUnit::Secs,
            "m" | "min" => TimeUnit::Mins,
            "h" => TimeUnit::Hours,
            "d" => TimeUnit::Days,
            _ => return None,
        })
    }

    /// `d` in this unit, as a float (`0.2` for 200 µs in milliseconds): for the models that
    /// compute in floating point.
    pub fn of(self, d: Duration) -> f64 {
        d.as_nanos() as f64 / self.nanos() as f64
    }
}
