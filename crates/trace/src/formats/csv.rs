//! CSV traces with a column mapping, in the manner of libCacheSim's csv reader.
//!
//! Columns are numbered from 1. Only the offset column is required: without a time column
//! every request has time 0, without a size column every request is one block long, without
//! an op column every request is a read, without a volume column everything is volume `0`.
//! The default mapping reads what [`write_request`] writes:
//! `time_ns,volume,op,offset,length` with a header line.

use std::fmt;
use std::io::Write;
use std::str::FromStr;

use super::{parse_time_ns, parse_u64, to_length, Line, WriteFail, SECTOR_SIZE};
use crate::{Op, Request, TraceError, VolumeTable};

/// The unit of a CSV time column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeUnit {
    /// Seconds.
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Nanoseconds.
    #[default]
    Ns,
}

impl TimeUnit {
    /// Nanoseconds in one unit.
    pub fn ns(self) -> u64 {
        match self {
            TimeUnit::S => 1_000_000_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::Us => 1_000,
            TimeUnit::Ns => 1,
        }
    }
}

impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeUnit::S => "s",
            TimeUnit::Ms => "ms",
            TimeUnit::Us => "us",
            TimeUnit::Ns => "ns",
        })
    }
}

impl FromStr for TimeUnit {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "s" | "sec" | "secs" | "seconds" => Ok(TimeUnit::S),
            "ms" => Ok(TimeUnit::Ms),
            "us" | "µs" => Ok(TimeUnit::Us),
            "ns" => Ok(TimeUnit::Ns),
            _ => Err(TraceError::Invalid(format!("time unit {s:?} is not one of s, ms, us, ns"))),
        }
    }
}

/// The unit of a CSV offset column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffsetUnit {
    /// Bytes.
    #[default]
    Bytes,
    /// 512-byte sectors (logical block numbers).
    Sectors,
    /// Cache blocks of the reading block size (an object id per block, as in key-value
    /// traces).
    Blocks,
}

impl fmt::Display for OffsetUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OffsetUnit::Bytes => "bytes",
            OffsetUnit::Sectors => "sectors",
            OffsetUnit::Blocks => "blocks",
        })
    }
}

impl FromStr for OffsetUnit {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "bytes" | "byte" | "b" => Ok(OffsetUnit::Bytes),
            "sectors" | "sector" | "lba" => Ok(OffsetUnit::Sectors),
            "blocks" | "block" => Ok(OffsetUnit::Blocks),
            _ => Err(TraceError::Invalid(format!(
                "offset unit {s:?} is not one of bytes, sectors, blocks"
            ))),
        }
    }
}

/// Which CSV column holds what (1-based), and how to read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvColumns {
    /// Time column.
    pub time: Option<usize>,
    /// Offset (or block / object id) column; required.
    pub offset: usize,
    /// Size in bytes.
    pub size: Option<usize>,
    /// Operation.
    pub op: Option<usize>,
    /// Volume name.
    pub volume: Option<usize>,
    /// Whether the first line is a header; `None` detects it (a first line whose offset field
    /// is not a number is a header).
    pub has_header: Option<bool>,
    /// Field delimiter; `None` detects it from the first line as libCacheSim does (the most
    /// frequent of tab, comma, `|`, `:`, weighted 4, 3, 2, 1).
    pub delimiter: Option<u8>,
    /// Unit of the time column.
    pub time_unit: TimeUnit,
    /// Unit of the offset column.
    pub offset_unit: OffsetUnit,
    /// Op values meaning read (compared case-insensitively).
    pub read_values: Vec<String>,
    /// Op values meaning write (compared case-insensitively).
    pub write_values: Vec<String>,
}

impl Default for CsvColumns {
    fn default() -> Self {
        Self {
            time: Some(1),
            volume: Some(2),
            op: Some(3),
            offset: 4,
            size: Some(5),
            has_header: None,
            delimiter: None,
            time_unit: TimeUnit::Ns,
            offset_unit: OffsetUnit::Bytes,
            read_values: vec!["r".into(), "read".into(), "get".into()],
            write_values: vec!["w".into(), "write".into(), "set".into()],
        }
    }
}

impl CsvColumns {
    /// Check the mapping: columns are 1-based and distinct.
    pub fn validate(&self) -> Result<(), TraceError> {
        let cols = [Some(self.offset), self.time, self.size, self.op, self.volume];
        let mut seen = Vec::new();
        for c in cols.into_iter().flatten() {
            if c == 0 {
                return Err(TraceError::Invalid(
                    "csv columns are numbered from 1; 0 is not a column".into(),
                ));
            }
            if seen.contains(&c) {
                return Err(TraceError::Invalid(format!("csv column {c} is mapped twice")));
            }
            seen.push(c);
        }
        Ok(())
    }
}

/// libCacheSim's delimiter detection: the most frequent of tab, comma, `|`, `:` in the first
/// line, weighted 4, 3, 2, 1; comma if none occurs.
pub fn detect_delimiter(first_line: &str) -> u8 {
    let cands = [(b'\t', 4), (b',', 3), (b'|', 2), (b':', 1)];
    let mut best = (b',', 0);
    for (d, w) in cands {
        let n = first_line.bytes().filter(|&b| b == d).count() * w;
        if n > best.1 {
            best = (d, n);
        }
    }
    best.0
}

/// Parses mapped CSV lines.
#[derive(Debug)]
pub struct CsvParser {
    cols: CsvColumns,
    block_size: u64,
    delimiter: Option<u8>,
    last: Option<(String, u32)>,
    n_fields: usize,
}

impl CsvParser {
    /// A parser for `cols` (checked with [`CsvColumns::validate`]), with `block_size` for
    /// block offsets and missing sizes.
    pub fn new(cols: CsvColumns, block_size: u64) -> Result<Self, TraceError> {
        cols.validate()?;
        let n_fields = [Some(cols.offset), cols.time, cols.size, cols.op, cols.volume]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(1);
        Ok(Self { delimiter: cols.delimiter, cols, block_size, last: None, n_fields })
    }

    /// Parse one line (`lineno` is 1-based).
    pub fn parse(
        &mut self,
        line: &str,
        lineno: u64,
        volumes: &mut VolumeTable,
    ) -> Result<Line, String> {
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            return Ok(Line::NotRequest);
        }
        let delim = match self.delimiter {
            Some(d) => d,
            None => {
                let d = detect_delimiter(line);
                self.delimiter = Some(d);
                d
            }
        } as char;
        let f: Vec<&str> = line.split(delim).map(|s| s.trim().trim_matches('"')).collect();
        if lineno == 1 {
            let header = match self.cols.has_header {
                Some(h) => h,
                None => f.get(self.cols.offset - 1).is_some_and(|s| s.parse::<u64>().is_err()),
            };
            if header {
                return Ok(Line::NotRequest);
            }
        }
        if f.len() < self.n_fields {
            return Err(format!("expected at least {} fields, found {}", self.n_fields, f.len()));
        }
        let c = &self.cols;
        let raw = parse_u64(f[c.offset - 1], "offset")?;
        let offset = match c.offset_unit {
            OffsetUnit::Bytes => Some(raw),
            OffsetUnit::Sectors => raw.checked_mul(SECTOR_SIZE),
            OffsetUnit::Blocks => raw.checked_mul(self.block_size),
        }
        .ok_or_else(|| format!("offset {raw} {} overflows a 64-bit byte offset", c.offset_unit))?;
        let time_ns = match c.time {
            Some(t) => parse_time_ns(f[t - 1], c.time_unit.ns(), "time")?,
            None => 0,
        };
        let length = match c.size {
            Some(s) => to_length(parse_u64(f[s - 1], "size")?, "size")?,
            None => to_length(self.block_size, "block size")?,
        };
        let op = match c.op {
            Some(o) => {
                let v = f[o - 1];
                if c.read_values.iter().any(|x| x.eq_ignore_ascii_case(v)) {
                    Op::Read
                } else if c.write_values.iter().any(|x| x.eq_ignore_ascii_case(v)) {
                    Op::Write
                } else {
                    return Err(format!(
                        "op {v:?} is neither a read value ({}) nor a write value ({})",
                        c.read_values.join("/"),
                        c.write_values.join("/")
                    ));
                }
            }
            None => Op::Read,
        };
        let name = match c.volume {
            Some(v) => f[v - 1],
            None => "0",
        };
        if name.is_empty() {
            return Err("empty volume name".to_string());
        }
        let volume = match &self.last {
            Some((n, id)) if n == name => *id,
            _ => {
                let id = volumes.intern(name);
                self.last = Some((name.to_owned(), id));
                id
            }
        };
        Ok(Line::Request(Request { time_ns, volume, op, offset, length }))
    }
}

/// The header line [`write_request`] lines follow.
pub const HEADER: &str = "time_ns,volume,op,offset,length";

/// Write one request in the default mapping (`time_ns,volume,op,offset,length`).
pub fn write_request(
    out: &mut dyn Write,
    index: usize,
    r: &Request,
    volumes: &VolumeTable,
) -> Result<(), WriteFail> {
    let name = volumes.name(r.volume);
    if name.contains([',', '"', '\n', '\r']) || name.trim() != name || name.is_empty() {
        return Err(WriteFail::Invalid(TraceError::Invalid(format!(
            "request {}: volume name {name:?} cannot be written as a CSV field",
            index + 1
        ))));
    }
    let op = if r.op.is_write() { "write" } else { "read" };
    writeln!(out, "{},{},{},{},{}", r.time_ns, name, op, r.offset, r.length)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(p: &mut CsvParser, v: &mut VolumeTable, line: &str, n: u64) -> Request {
        match p.parse(line, n, v) {
            Ok(Line::Request(r)) => r,
            other => panic!("{line}: unexpected {other:?}"),
        }
    }

    #[test]
    fn default_mapping_reads_its_own_output() {
        let mut p = CsvParser::new(CsvColumns::default(), 4096).unwrap_or_else(|e| panic!("{e}"));
        let mut v = VolumeTable::new();
        assert_eq!(p.parse(HEADER, 1, &mut v), Ok(Line::NotRequest));
        let r = req(&mut p, &mut v, "1500,web_0,write,8192,4096", 2);
        assert_eq!(
            r,
            Request { time_ns: 1500, volume: 0, op: Op::Write, offset: 8192, length: 4096 }
        );
        assert_eq!(v.name(0), "web_0");
    }

    #[test]
    fn libcachesim_style_mapping() {
        // cloudPhysicsIO.csv from libCacheSim: version,time,op,size,lbn with hex SCSI ops.
        let cols = CsvColumns {
            time: Some(2),
            op: Some(3),
            size: Some(4),
            offset: 5,
            volume: None,
            time_unit: TimeUnit::S,
            offset_unit: OffsetUnit::Sectors,
            read_values: vec!["28".into()],
            write_values: vec!["2a".into()],
            ..CsvColumns::default()
        };
        let mut p = CsvParser::new(cols, 4096).unwrap_or_else(|e| panic!("{e}"));
        let mut v = VolumeTable::new();
        assert_eq!(p.parse("version,time,op,size,lbn", 1, &mut v), Ok(Line::NotRequest));
        let r = req(&mut p, &mut v, "1,5633898,2a,512,42932745", 2);
        assert_eq!(r.time_ns, 5_633_898_000_000_000);
        assert_eq!(r.op, Op::Write);
        assert_eq!(r.offset, 42_932_745 * 512);
        assert_eq!(r.length, 512);
        assert_eq!(v.name(r.volume), "0");
    }

    #[test]
    fn block_ids_without_size_and_tab_delimiter() {
        let cols = CsvColumns {
            time: None,
            op: None,
            size: None,
            volume: None,
            offset: 2,
            has_header: Some(false),
            offset_unit: OffsetUnit::Blocks,
            ..CsvColumns::default()
        };
        let mut p = CsvParser::new(cols, 4096).unwrap_or_else(|e| panic!("{e}"));
        let mut v = VolumeTable::new();
        let r = req(&mut p, &mut v, "x\t7", 1);
        assert_eq!((r.offset, r.length, r.op, r.time_ns), (7 * 4096, 4096, Op::Read, 0));
    }

    #[test]
    fn rejects_malformed_lines_and_mappings() {
        let mut p = CsvParser::new(CsvColumns::default(), 4096).unwrap_or_else(|e| panic!("{e}"));
        let mut v = VolumeTable::new();
        let mut e = |l: &str| p.parse(l, 2, &mut v).err().unwrap_or_default();
        assert!(e("1,a,read,0").contains("found 4"));
        assert!(e("1,a,trim,0,512").contains("op \"trim\""));
        assert!(e("1,a,read,0,-512").contains("negative size"));
        assert!(e("x,a,read,0,512").contains("time \"x\""));
        let bad = CsvColumns { time: Some(4), ..CsvColumns::default() };
        assert!(bad.validate().is_err());
        let zero = CsvColumns { offset: 0, ..CsvColumns::default() };
        assert!(zero.validate().is_err());
        assert_eq!(detect_delimiter("a\tb\tc"), b'\t');
        assert_eq!(detect_delimiter("a|b|c"), b'|');
        assert_eq!(detect_delimiter("abc"), b',');
    }
}
