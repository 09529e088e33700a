//! What can be wrong with a size or a duration as written, and the message that says so.

use crate::time_unit::TimeUnit;
use std::fmt;

/// The accepted forms of a size, in one sentence (for error messages and `--help`).
pub const SIZE_RULE: &str = "a size is bytes with an optional unit: K/M/G/T/P/E = \
    KiB/MiB/GiB/TiB/PiB/EiB (powers of 1024), KB/MB/GB/TB/PB/EB = \
    10^3/10^6/10^9/10^12/10^15/10^18, B = bytes (e.g. 4096, 64K, 1.5GiB, 100MB)";

/// What was being parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// A byte count ([`crate::parse_size`]).
    Size,
    /// A duration whose bare number is in the given unit ([`crate::parse_duration_in`]).
    Duration(TimeUnit),
}

/// Why a text is not a valid size or duration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// Nothing but whitespace.
    Empty,
    /// The text does not start with a number (`abc`, `-1`, `.5`, `1.`).
    NotANumber,
    /// The number is followed by something that is not a unit.
    UnknownUnit(String),
    /// The fraction leaves part of a byte or of a nanosecond (`0.3K`, `1.5ns`).
    NotWhole,
    /// More significant digits after the decimal point than are ever needed (over 38).
    TooPrecise,
    /// The value does not fit (a size in 64 bits, a duration in `std::time::Duration`).
    TooLarge,
    /// Zero where the caller needs at least one byte or one nanosecond.
    Zero,
}

/// A size or duration that could not be parsed: the text, what it was meant to be and why
/// it is not; its message ends with the accepted forms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError {
    /// The text as given.
    pub text: String,
    /// What it was parsed as.
    pub quantity: Quantity,
    /// What is wrong with it.
    pub problem: Problem,
}

impl UnitError {
    pub(crate) fn new(text: &str, quantity: Quantity, problem: Problem) -> Self {
        Self { text: text.to_owned(), quantity, problem }
    }

    /// What is wrong and what is accepted, without the text (for a caller that names the
    /// text itself).
    pub fn reason(&self) -> String {
        let problem = match (&self.problem, self.quantity) {
            (Problem::Empty, _) => "empty".to_owned(),
            (Problem::NotANumber, _) => "not a number".to_owned(),
            (Problem::UnknownUnit(u), _) => format!("unknown unit {u:?}"),
            (Problem::NotWhole, Quantity::Size) => "not a whole number of bytes".to_owned(),
            (Problem::NotWhole, Quantity::Duration(_)) => {
                "not a whole number of nanoseconds".to_owned()
            }
            (Problem::TooPrecise, _) => "too many digits after the decimal point".to_owned(),
            (Problem::TooLarge, _) => "too large".to_owned(),
            (Problem::Zero, Quantity::Size) => "must be at least 1 byte".to_owned(),
            (Problem::Zero, Quantity::Duration(_)) => "must be longer than 0".to_owned(),
        };
        match self.quantity {
            Quantity::Size => format!("{problem}; {SIZE_RULE}"),
            Quantity::Duration(bare) => format!(
                "{problem}; a duration is a number with a unit: ns, us, ms, s, m or min, h, d \
                 (a bare number is {}; e.g. 500ms, 1.5h)",
                bare.name()
            ),
        }
    }
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.quantity {
            Quantity::Size => "size",
            Quantity::Duration(_) => "duration",
        };
        write!(f, "{what} {:?}: {}", self.text, self.reason())
    }
}

impl std::error::Error for UnitError {}
