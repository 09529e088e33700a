//! Byte counts: `4096`, `64K`, `1.5GiB`, `100MB` (the rule of GNU coreutils' `dd` and
//! `truncate`, with `B` and `b` both bytes).

use crate::error::{Problem, Quantity, UnitError, SIZE_RULE};
use crate::number::split;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// The binary units, largest first, for [`Size`]'s display.
const BINARY: [(&str, u64); 6] = [
    ("EiB", 1 << 60),
    ("PiB", 1 << 50),
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
];

/// Bytes per unit, for a unit written in any case; `None` for an unknown unit.
fn unit_bytes(unit: &str) -> Option<u64> {
    let power = |base: u64, k: u32| base.pow(k);
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => power(1024, 1),
        "m" | "mib" => power(1024, 2),
        "g" | "gib" => power(1024, 3),
        "t" | "tib" => power(1024, 4),
        "p" | "pib" => power(1024, 5),
        "e" | "eib" => power(1024, 6),
        "kb" => power(1000, 1),
        "mb" => power(1000, 2),
        "gb" => power(1000, 3),
        "tb" => power(1000, 4),
        "pb" => power(1000, 5),
        "eb" => power(1000, 6),
        _ => return None,
    })
}

/// Parse a byte count: a bare number is bytes; `K`, `M`, `G`, `T`, `P`, `E` and `KiB`,
/// `MiB`, ... are powers of 1024; `KB`, `MB`, ... powers of 1000; `B` is bytes. Unit letters
/// are case-insensitive; whitespace may separate number and unit; a fraction is accepted when
/// the result is a whole number of bytes (`1.5K` = 1536, `0.3K` is an error).
///
/// ```
/// assert_eq!(ember_units::parse_size("4M"), Ok(4 << 20));
/// assert_eq!(ember_units::parse_size("4MB"), Ok(4_000_000));
/// assert!(ember_units::parse_size("4X").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let err = |p| UnitError::new(text, Quantity::Size, p);
    let (number, unit) = split(text).map_err(err)?;
    let bytes = unit_bytes(unit).ok_or_else(|| err(Problem::UnknownUnit(unit.to_owned())))?;
    let v = number.times(bytes).map_err(err)?;
    u64::try_from(v).map_err(|_| err(Problem::TooLarge))
}

/// [`parse_size`], refusing zero (a block size, a region, a bandwidth).
pub fn parse_nonzero_size(text: &str) -> Result<u64, UnitError> {
    match parse_size(text)? {
        0 => Err(UnitError::new(text, Quantity::Size, Problem::Zero)),
        n => Ok(n),
    }
}

/// A byte count that reads and writes as a user writes it ([`parse_size`]); displayed in
/// its shortest exact binary form (`4MiB`, `1536B`), deserialized from an integer (bytes) or
/// a string, serialized as the string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl Size {
    /// The number of bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl From<u64> for Size {
    fn from(bytes: u64) -> Self {
        Size(bytes)
    }
}

impl From<Size> for u64 {
    fn from(s: Size) -> u64 {
        s.0
    }
}

impl FromStr for Size {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Self, UnitError> {
        parse_size(text).map(Size)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        match BINARY.iter().find(|&&(_, m)| n != 0 && n.is_multiple_of(m)) {
            Some(&(unit, m)) => write!(f, "{}{unit}", n / m),
            None => write!(f, "{n}B"),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = Size;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a number of bytes or a string such as \"64MiB\" ({SIZE_RULE})")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
        Ok(Size(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
        u64::try_from(v).map(Size).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
        v.parse().map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SizeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KI: u64 = 1 << 10;
    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;
    const TI: u64 = 1 << 40;
    const PI: u64 = 1 << 50;
    const EI: u64 = 1 << 60;

    #[test]
    fn every_unit_in_every_case() {
        let binary = [("k", KI), ("m", MI), ("g", GI), ("t", TI), ("p", PI), ("e", EI)];
        for (letter, m) in binary {
            let up = letter.to_ascii_uppercase();
            for unit in [letter.to_owned(), up.clone(), format!("{up}iB"), format!("{letter}ib")] {
                assert_eq!(parse_size(&format!("3{unit}")), Ok(3 * m), "3{unit}");
                assert_eq!(parse_size(&format!("3 {unit}")), Ok(3 * m), "3 {unit}");
            }
            assert_eq!(parse_size(&format!("3{}IB", up)), Ok(3 * m));
        }
        let decimal = [("k", 3), ("m", 6), ("g", 9), ("t", 12), ("p", 15), ("e", 18)];
        for (letter, e) in decimal {
            let m = 10u64.pow(e);
            let up = letter.to_ascii_uppercase();
            for unit in
                [format!("{up}B"), format!("{letter}b"), format!("{letter}B"), format!("{up}b")]
            {
                assert_eq!(parse_size(&format!("2{unit}")), Ok(2 * m), "2{unit}");
            }
        }
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert_eq!(parse_size("4096b"), Ok(4096));
        assert_eq!(parse_size("  4096 B "), Ok(4096));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("0K"), Ok(0));
    }

    #[test]
    fn binary_and_decimal_units_differ() {
        assert_eq!(parse_size("4M"), Ok(4_194_304));
        assert_eq!(parse_size("4MiB"), Ok(4_194_304));
        assert_eq!(parse_size("4MB"), Ok(4_000_000));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("1kB"), Ok(1000));
    }

    /// The byte counts the commands' flags were written with keep their values.
    #[test]
    fn the_commands_sizes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65_536));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("128KiB"), Ok(128 << 10));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("lots").is_err());
        let unknown = parse_size("3X").expect_err("3X");
        assert!(unknown.to_string().contains("unknown unit"), "{unknown}");
        let large = parse_size("99999999999T").expect_err("too large");
        assert!(large.to_string().contains("too large"), "{large}");
    }

    #[test]
    fn fractions_only_when_whole() {
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("1.5 MiB"), Ok(3 << 19));
        assert_eq!(parse_size("0.5k"), Ok(512));
        assert_eq!(parse_size("2.5MB"), Ok(2_500_000));
        assert_eq!(parse_size("1.0"), Ok(1));
        assert_eq!(parse_size("0.001KB"), Ok(1));
        for bad in ["0.3K", "1.5", "1.5B", "0.0001KB", "1.1K"] {
            let e = parse_size(bad).expect_err(bad);
            assert_eq!(e.problem, Problem::NotWhole, "{bad}");
            assert!(e.to_string().contains("whole number of bytes"), "{e}");
        }
    }

    #[test]
    fn overflow_is_an_error() {
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_size("15EiB"), Ok(15 << 60));
        assert_eq!(parse_size("18EB"), Ok(18_000_000_000_000_000_000));
        for bad in ["18446744073709551616", "16E", "19EB", "16384P", "99999999999999999999999"] {
            assert_eq!(parse_size(bad).map_err(|e| e.problem), Err(Problem::TooLarge), "{bad}");
        }
        assert_eq!(parse_size("15.9999E").map_err(|e| e.problem), Err(Problem::NotWhole));
        assert_eq!(parse_size("15.5E"), Ok(31 << 59));
    }

    #[test]
    fn errors_name_the_text_and_the_rule() {
        let cases = [
            ("", Problem::Empty),
            ("  ", Problem::Empty),
            ("MiB", Problem::NotANumber),
            ("-1", Problem::NotANumber),
            ("+1", Problem::NotANumber),
            (".5K", Problem::NotANumber),
            ("1.K", Problem::NotANumber),
            ("1e3", Problem::UnknownUnit("e3".into())),
            ("4X", Problem::UnknownUnit("X".into())),
            ("4 M B", Problem::UnknownUnit("M B".into())),
            ("4Mi", Problem::UnknownUnit("Mi".into())),
            ("4ZiB", Problem::UnknownUnit("ZiB".into())),
            ("10%", Problem::UnknownUnit("%".into())),
            ("4bytes", Problem::UnknownUnit("bytes".into())),
        ];
        for (text, problem) in cases {
            let e = parse_size(text).expect_err(text);
            assert_eq!(e.problem, problem, "{text:?}");
            assert_eq!(e.quantity, Quantity::Size);
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("size {text:?}: ")), "{msg}");
            assert!(msg.contains("KB/MB/GB") && msg.contains("KiB/MiB/GiB"), "{msg}");
        }
    }

    /// The region sizes and bandwidths the commands' flags were written with.
    #[test]
    fn the_commands_nonzero_sizes() {
        assert_eq!(parse_nonzero_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_nonzero_size("4K"), Ok(4096));
        assert_eq!(parse_nonzero_size("128KiB"), Ok(128 << 10));
        assert_eq!(parse_nonzero_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_nonzero_size("4096"), Ok(4096));
        assert!(parse_nonzero_size("0").is_err());
        assert!(parse_nonzero_size("1XB").is_err());
    }

    #[test]
    fn nonzero_refuses_zero_only() {
        assert_eq!(parse_nonzero_size("1"), Ok(1));
        assert_eq!(parse_nonzero_size("1MiB"), Ok(MI));
        for zero in ["0", "0K", "0.0MB"] {
            let e = parse_nonzero_size(zero).expect_err(zero);
            assert_eq!(e.problem, Problem::Zero);
            assert!(e.to_string().contains("at least 1 byte"), "{e}");
        }
        assert_eq!(parse_nonzero_size("x").map_err(|e| e.problem), Err(Problem::NotANumber));
    }

    #[test]
    fn displays_the_shortest_exact_binary_form() {
        let cases = [
            (0, "0B"),
            (1, "1B"),
            (1000, "1000B"),
            (1024, "1KiB"),
            (1536, "1536B"),
            (4 * MI, "4MiB"),
            (4_000_000, "4000000B"),
            (3 * MI / 2, "1536KiB"),
            (GI, "1GiB"),
            (5 * TI, "5TiB"),
            (7 * PI, "7PiB"),
            (15 * EI, "15EiB"),
            (u64::MAX, "18446744073709551615B"),
        ];
        for (n, want) in cases {
            assert_eq!(Size(n).to_string(), want);
            assert_eq!(want.parse::<Size>(), Ok(Size(n)), "{want} round trip");
        }
    }

    #[test]
    fn serde_takes_an_integer_or_a_string_and_writes_the_string() {
        let s: Size = serde_json::from_str("4096").expect("integer");
        assert_eq!(s, Size(4096));
        let s: Size = serde_json::from_str("\"4MB\"").expect("string");
        assert_eq!(s, Size(4_000_000));
        let s: Size = serde_json::from_str("\"4M\"").expect("string");
        assert_eq!(serde_json::to_string(&s).expect("serialize"), "\"4MiB\"");
        let e = serde_json::from_str::<Size>("\"0.3K\"").expect_err("fraction");
        assert!(e.to_string().contains("whole number of bytes"), "{e}");
        assert!(serde_json::from_str::<Size>("-1").is_err());
        assert!(serde_json::from_str::<Size>("1.5").is_err());
        assert!(serde_json::from_str::<Size>("true").is_err());
    }
}
