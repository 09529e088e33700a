//! SNIA SPC traces (UMass Trace Repository: Financial1/2, WebSearch1-3).
//!
//! One request per line: `ASU,LBA,Size,Opcode,Timestamp[,...]`, where ASU is the application
//! specific storage unit (the volume), LBA counts 512-byte sectors, Size is bytes, Opcode is
//! `r`/`R` (read) or `w`/`W` (write) and Timestamp is seconds from the start of the trace.

use std::io::Write;

use super::{parse_time_ns, parse_u64, split_fields, to_length, Line, WriteFail, SECTOR_SIZE};
use crate::{Op, Request, TraceError, VolumeTable};

/// Parses SPC lines.
#[derive(Debug, Default)]
pub struct SpcParser {
    last: Option<(String, u32)>,
}

impl SpcParser {
    /// Parse one line.
    pub fn parse(&mut self, line: &str, volumes: &mut VolumeTable) -> Result<Line, String> {
        let line = line.trim();
        if line.is_empty() {
            return Ok(Line::NotRequest);
        }
        let (f, n) = split_fields::<5>(line, ',');
        if n < 5 {
            return Err(format!("expected 5 fields ASU,LBA,Size,Opcode,Timestamp, found {n}"));
        }
        let asu = f[0].trim();
        parse_u64(asu, "ASU")?;
        let lba = parse_u64(f[1], "LBA")?;
        let offset = lba
            .checked_mul(SECTOR_SIZE)
            .ok_or_else(|| format!("LBA {lba} overflows a 64-bit byte offset"))?;
        let length = to_length(parse_u64(f[2], "Size")?, "Size")?;
        let op = match f[3].trim() {
            "r" | "R" => Op::Read,
            "w" | "W" => Op::Write,
            t => return Err(format!("Opcode {t:?} is neither r nor w")),
        };
        let time_ns = parse_time_ns(f[4], 1_000_000_000, "Timestamp")?;
        let volume = match &self.last {
            Some((n, id)) if n == asu => *id,
            _ => {
                let id = volumes.intern(asu);
                self.last = Some((asu.to_owned(), id));
                id
            }
        };
        Ok(Line::Request(Request { time_ns, volume, op, offset, length }))
    }
}

/// Write one request as an SPC line. The volume name must be a number (the ASU) and the offset
/// a multiple of 512; otherwise SPC cannot represent the request.
pub fn write_request(
    out: &mut dyn Write,
    index: usize,
    r: &Request,
    volumes: &VolumeTable,
) -> Result<(), WriteFail> {
    let name = volumes.name(r.volume);
    let asu: u64 = name.parse().map_err(|_| {
        WriteFail::Invalid(TraceError::Invalid(format!(
            "request {}: volume {name:?} is not a number; SPC names volumes by ASU number",
            index + 1
        )))
    })?;
    if !r.offset.is_multiple_of(SECTOR_SIZE) {
        return Err(WriteFail::Invalid(TraceError::Invalid(format!(
            "request {}: offset {} is not a multiple of 512 bytes; SPC addresses sectors",
            index + 1,
            r.offset
        ))));
    }
    let op = if r.op.is_write() { 'w' } else { 'r' };
    let secs = r.time_ns / 1_000_000_000;
    let frac = r.time_ns % 1_000_000_000;
    writeln!(out, "{asu},{},{},{op},{secs}.{frac:09}", r.offset / SECTOR_SIZE, r.length)
        .map_err(WriteFail::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_financial_lines() {
        // Lines in the shape of UMass Financial1.spc.
        let mut p = SpcParser::default();
        let mut v = VolumeTable::new();
        let r = match p.parse("0,303567,3584,w,0.000000", &mut v) {
            Ok(Line::Request(r)) => r,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(r.offset, 303_567 * 512);
        assert_eq!(r.length, 3584);
        assert_eq!(r.op, Op::Write);
        assert_eq!(r.time_ns, 0);
        let r = match p.parse("1,55590,3072,R,0.551080", &mut v) {
            Ok(Line::Request(r)) => r,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(r.time_ns, 551_080_000);
        assert_eq!(r.op, Op::Read);
        assert_eq!(v.name(r.volume), "1");
        assert_eq!(r.volume, 1);
    }

    #[test]
    fn rejects_malformed_lines() {
        let mut p = SpcParser::default();
        let mut v = VolumeTable::new();
        let e = |p: &mut SpcParser, v: &mut VolumeTable, l: &str| {
            p.parse(l, v).err().unwrap_or_default()
        };
        assert!(e(&mut p, &mut v, "0,1,512,x,0.1").contains("\"x\""));
        assert!(e(&mut p, &mut v, "0,1,512,r").contains("found 4"));
        assert!(e(&mut p, &mut v, "0,1,512,r,-1.0").contains("negative Timestamp"));
        assert!(e(&mut p, &mut v, "0,abc,512,r,1.0").contains("LBA \"abc\""));
    }
}
