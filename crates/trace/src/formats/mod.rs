//! The trace formats ember reads and writes, one file per format.
//!
//! Each text format provides a line parser, each binary format a fixed-size record decoder;
//! [`crate::open()`] drives them over a (possibly decompressed) file.

pub mod blkparse;
pub mod csv;
pub mod ember;
pub mod msr;
pub mod oracle_general;
pub mod spc;
pub mod vscsi;
pub mod warmup_log;

use std::fmt;
use std::str::FromStr;

use crate::TraceError;

/// Bytes in a disk sector, the unit of SPC LBAs, blkparse sectors and vscsi LBNs.
pub const SECTOR_SIZE: u64 = 512;

/// A trace file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// MSR-Cambridge CSV: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    MsrCsv,
    /// SNIA SPC (UMass Financial / WebSearch): `ASU,LBA,Size,Opcode,Timestamp`.
    SpcCsv,
    /// blkparse's default text output.
    Blkparse,
    /// VMware vscsi binary, versions 1 and 2.
    Vscsi,
    /// libCacheSim's oracleGeneral binary: 24-byte records with next-access times.
    OracleGeneral,
    /// CSV with a configurable column mapping ([`crate::CsvColumns`]).
    Csv,
    /// ember's own compact binary format (see docs/reference/trace-formats.md).
    Ember,
    /// The warmup log `ember serve --warmup-log` writes ([`warmup_log`]; read only).
    WarmupLog,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 8] = [
        Format::MsrCsv,
        Format::SpcCsv,
        Format::Blkparse,
        Format::Vscsi,
        Format::OracleGeneral,
        Format::Csv,
        Format::Ember,
        Format::WarmupLog,
    ];

    /// The short name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::MsrCsv => "msr",
            Format::SpcCsv => "spc",
            Format::Blkparse => "blkparse",
            Format::Vscsi => "vscsi",
            Format::OracleGeneral => "oracle-general",
            Format::Csv => "csv",
            Format::Ember => "ember",
            Format::WarmupLog => "warmup-log",
        }
    }

    /// True if [`crate::write_trace`] can write this format.
    pub fn is_writable(self) -> bool {
        matches!(
            self,
            Format::MsrCsv | Format::SpcCsv | Format::Csv | Format::OracleGeneral | Format::Ember
        )
    }

    /// True for the binary formats (fixed-size records).
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Vscsi | Format::OracleGeneral | Format::Ember)
    }

    /// The format a file extension names, if it names one unambiguously (`.csv` does not:
    /// MSR-Cambridge and plain CSV share it, so content decides).
    pub fn from_extension(ext: &str) -> Option<Format> {
        match ext.to_ascii_lowercase().as_str() {
            "msr" => Some(Format::MsrCsv),
            "spc" => Some(Format::SpcCsv),
            "blkparse" => Some(Format::Blkparse),
            "vscsi" => Some(Format::Vscsi),
            "oraclegeneral" | "oracle-general" | "oracle_general" => Some(Format::OracleGeneral),
            "ember" => Some(Format::Ember),
            "wlog" => Some(Format::WarmupLog),
            _ => None,
        }
    }

    /// The extension [`crate::write_trace`] users conventionally give this format.
    pub fn extension(self) -> &'static str {
        match self {
            Format::MsrCsv => "csv",
            Format::SpcCsv => "spc",
            Format::Blkparse => "blkparse",
            Format::Vscsi => "vscsi",
            Format::OracleGeneral => "oracleGeneral.bin",
            Format::Csv => "csv",
            Format::Ember => "ember",
            Format::WarmupLog => "wlog",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        let f = match lower.as_str() {
            "msr" | "msr-csv" | "msrcsv" => Format::MsrCsv,
            "spc" | "spc-csv" | "spccsv" => Format::SpcCsv,
            "blkparse" => Format::Blkparse,
            "vscsi" => Format::Vscsi,
            "oracle-general" | "oraclegeneral" | "oracle_general" => Format::OracleGeneral,
            "csv" => Format::Csv,
            "ember" => Format::Ember,
            "warmup-log" | "warmuplog" | "wlog" => Format::WarmupLog,
            _ => {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                return Err(TraceError::Invalid(format!(
                    "unknown trace format {s:?} (known: {})",
                    names.join(", ")
                )));
            }
        };
        Ok(f)
    }
}

/// What one line of a text trace holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// A request.
    Request(crate::Request),
    /// A line that is well formed but not a request: a header, an empty line, a blkparse
    /// event of another action, a flush.
    NotRequest,
    /// The end of the trace's records (blkparse's closing summary); the rest is ignored.
    End,
}

/// Why writing a request failed: the sink, or a request the format cannot hold.
#[derive(Debug)]
pub enum WriteFail {
    /// The output failed.
    Io(std::io::Error),
    /// The request cannot be written in this format.
    Invalid(TraceError),
}

impl From<std::io::Error> for WriteFail {
    fn from(e: std::io::Error) -> Self {
        WriteFail::Io(e)
    }
}

/// The first `N` fields of `line` split at `delim`, and the total number of fields, without
/// allocating.
#[inline]
pub(crate) fn split_fields<const N: usize>(line: &str, delim: char) -> ([&str; N], usize) {
    let mut f = [""; N];
    let mut n = 0;
    for s in line.split(delim) {
        if n < N {
            f[n] = s;
        }
        n += 1;
    }
    (f, n)
}

/// The first `N` whitespace-separated tokens of `line`, and the total number of tokens.
#[inline]
pub(crate) fn split_tokens<const N: usize>(line: &str) -> ([&str; N], usize) {
    let mut f = [""; N];
    let mut n = 0;
    for s in line.split_ascii_whitespace() {
        if n < N {
            f[n] = s;
        }
        n += 1;
    }
    (f, n)
}

/// Parse an unsigned decimal integer field, naming the field in the error.
pub(crate) fn parse_u64(field: &str, what: &str) -> Result<u64, String> {
    let t = field.trim();
    if let Some(rest) = t.strip_prefix('-') {
        if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("negative {what} {t:?}"));
        }
    }
    t.parse::<u64>().map_err(|_| format!("{what} {t:?} is not a non-negative integer"))
}

/// Parse a non-negative decimal number of seconds (or other unit) field as f64.
pub(crate) fn parse_nonneg_f64(field: &str, what: &str) -> Result<f64, String> {
    let t = field.trim();
    let v: f64 = t.parse().map_err(|_| format!("{what} {t:?} is not a number"))?;
    if !v.is_finite() {
        return Err(format!("{what} {t:?} is not finite"));
    }
    if v < 0.0 {
        return Err(format!("negative {what} {t:?}"));
    }
    Ok(v)
}

/// Parse a non-negative decimal time in a unit of `unit_ns` nanoseconds to nanoseconds,
/// exactly for plain decimals (`1172163600.000001500`) and through f64 for exponent notation.
pub(crate) fn parse_time_ns(field: &str, unit_ns: u64, what: &str) -> Result<u64, String> {
    let t = field.trim();
    let overflow = || format!("{what} {t:?} overflows 64-bit nanoseconds");
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !int.is_empty() && digits(int) && digits(frac) {
        let whole: u64 = int.parse().map_err(|_| overflow())?;
        let mut ns = whole.checked_mul(unit_ns).ok_or_else(overflow)?;
        // The fraction, rounded half up to the nearest nanosecond. Its first 20 digits
        // decide that (a unit is at most 10^9 ns, and dropping later digits cannot move a
        // value across a half), and keep `num * unit_ns * 2` within u128.
        let mut num: u128 = 0;
        let mut denom: u128 = 1;
        for b in frac.bytes().take(20) {
            num = num * 10 + u128::from(b - b'0');
            denom *= 10;
        }
        let v = (num * u128::from(unit_ns) * 2 + denom) / (denom * 2);
        ns = ns.checked_add(u64::try_from(v).map_err(|_| overflow())?).ok_or_else(overflow)?;
        return Ok(ns);
    }
    let v = parse_nonneg_f64(t, what)? * unit_ns as f64;
    if v >= u64::MAX as f64 {
        return Err(overflow());
    }
    Ok(v.round() as u64)
}

/// A byte length that must fit a request's `u32` length.
pub(crate) fn to_length(v: u64, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{what} {v} exceeds the 4 GiB request limit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().ok(), Some(f));
            assert_eq!(f.to_string(), f.name());
        }
        assert_eq!("oracleGeneral".parse::<Format>().ok(), Some(Format::OracleGeneral));
        assert!("parquet".parse::<Format>().is_err());
    }

    #[test]
    fn field_parsers_reject_bad_input() {
        assert_eq!(parse_u64(" 42 ", "size"), Ok(42));
        assert_eq!(parse_u64("-5", "size"), Err("negative size \"-5\"".to_string()));
        assert!(parse_u64("4k", "size").is_err());
        assert_eq!(parse_nonneg_f64("1.5", "t"), Ok(1.5));
        assert!(parse_nonneg_f64("-1.5", "t").is_err());
        assert!(parse_nonneg_f64("nan", "t").is_err());
        assert_eq!(
            parse_time_ns("1172163600.000001500", 1_000_000_000, "t"),
            Ok(1_172_163_600_000_001_500)
        );
        assert_eq!(parse_time_ns("1172163600001000448", 1, "t"), Ok(1_172_163_600_001_000_448));
        assert_eq!(parse_time_ns("0.5", 1_000, "t"), Ok(500));
        assert_eq!(parse_time_ns("1.5e3", 1, "t"), Ok(1500));
        assert!(parse_time_ns("-1", 1, "t").is_err());
        assert!(parse_time_ns("x", 1, "t").is_err());
        assert!(parse_time_ns("99999999999999999999", 1, "t").is_err());
        assert!(to_length(1 << 33, "size").is_err());
    }
}
