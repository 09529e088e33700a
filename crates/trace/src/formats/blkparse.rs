//! blkparse's default text output (blktrace(8), blkparse(1)).
//!
//! Each event line reads `maj,min cpu sequence seconds pid action RWBS sector + count [process]`,
//! for example `  8,0    3        1     0.000000000  4162  Q   R 1234 + 8 [proc]`. One I/O
//! appears several times (Q queued, D issued to the driver, C completed, and others); the reader
//! keeps the lines of one chosen action ([`BlkAction`], default D). RWBS containing `R` is a
//! read and `W` a write; other events (flush-only `FN`, discards `DS`) are not requests. The
//! sector and count are 512-byte sectors; the volume is the device `maj,min`. The per-CPU and
//! total summary blkparse prints at the end is ignored.

use std::fmt;
use std::str::FromStr;

use super::{parse_time_ns, parse_u64, split_tokens, to_length, Line, SECTOR_SIZE};
use crate::{Op, Request, TraceError, VolumeTable};

/// The blkparse action whose events become requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BlkAction {
    /// Q: the request was queued (what the application asked for).
    Q,
    /// D: the request was issued to the driver (what reached the device, after merging).
    #[default]
    D,
    /// C: the request completed.
    C,
}

impl BlkAction {
    /// The action letter as blkparse prints it.
    pub fn letter(self) -> &'static str {
        match self {
            BlkAction::Q => "Q",
            BlkAction::D => "D",
            BlkAction::C => "C",
        }
    }
}

impl fmt::Display for BlkAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.letter())
    }
}

impl FromStr for BlkAction {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "Q" | "q" => Ok(BlkAction::Q),
            "D" | "d" => Ok(BlkAction::D),
            "C" | "c" => Ok(BlkAction::C),
            _ => Err(TraceError::Invalid(format!("blkparse action {s:?} is not one of Q, D, C"))),
        }
    }
}

/// Parses blkparse lines.
#[derive(Debug, Default)]
pub struct BlkparseParser {
    action: BlkAction,
    last: Option<(String, u32)>,
}

/// True if `s` looks like a `major,minor` device number.
fn is_device(s: &str) -> bool {
    match s.split_once(',') {
        Some((a, b)) => {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// True if the line could be a blkparse event line (used to detect the format).
pub fn looks_like_event(line: &str) -> bool {
    let t: Vec<&str> = line.split_whitespace().collect();
    t.len() >= 6 && is_device(t[0]) && t[3].parse::<f64>().is_ok() && t[2].parse::<u64>().is_ok()
}

impl BlkparseParser {
    /// A parser keeping the events of `action`.
    pub fn new(action: BlkAction) -> Self {
        Self { action, last: None }
    }

    /// Parse one line.
    pub fn parse(&mut self, line: &str, volumes: &mut VolumeTable) -> Result<Line, String> {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return Ok(Line::NotRequest);
        }
        let (t, n) = split_tokens::<10>(trimmed);
        if !is_device(t[0]) {
            // blkparse ends with per-CPU blocks ("CPU0 (8,0):") and a "Total (8,0):" block.
            if (t[0].starts_with("CPU") && t[0][3..].bytes().all(|c| c.is_ascii_digit()))
                || t[0] == "Total"
            {
                return Ok(Line::End);
            }
            return Err(format!("expected a device 'major,minor' first, found {:?}", t[0]));
        }
        if n < 6 {
            return Err(format!("expected 'dev cpu seq time pid action ...', found {} fields", n));
        }
        if t[5] != self.action.letter() {
            return Ok(Line::NotRequest);
        }
        if n < 7 {
            return Err(format!("{} event without RWBS field", t[5]));
        }
        let rwbs = t[6];
        let op = if rwbs.contains('R') {
            Op::Read
        } else if rwbs.contains('W') {
            Op::Write
        } else {
            return Ok(Line::NotRequest);
        };
        if n < 10 || t[8] != "+" {
            if rwbs.contains('F') {
                // A flush (possibly with FUA write flags) carries no sector range.
                return Ok(Line::NotRequest);
            }
            return Err(format!("expected 'sector + count' after RWBS {rwbs:?}"));
        }
        let time_ns = parse_time_ns(t[3], 1_000_000_000, "time")?;
        let sector = parse_u64(t[7], "sector")?;
        let count = parse_u64(t[9], "sector count")?;
        let offset = sector
            .checked_mul(SECTOR_SIZE)
            .ok_or_else(|| format!("sector {sector} overflows a 64-bit byte offset"))?;
        let length = to_length(count.saturating_mul(SECTOR_SIZE), "length")?;
        let dev = t[0];
        let volume = match &self.last {
            Some((n, id)) if n == dev => *id,
            _ => {
                let id = volumes.intern(dev);
                self.last = Some((dev.to_owned(), id));
                id
            }
        };
        Ok(Line::Request(Request { time_ns, volume, op, offset, length }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "  8,0    3        1     0.000000000  4162  Q   R 1234 + 8 [proc]
  8,0    3        2     0.000001000  4162  G   R 1234 + 8 [proc]
  8,0    3        3     0.000002000  4162  D   R 1234 + 8 [proc]
  8,16   1        4     0.000500000  4170  D  WS 40 + 16 [kworker/1:1]
  8,0    3        5     0.000600000     0  C   R 1234 + 8 [0]
  8,0    1        6     0.000700000  4170  D  FN [kworker/1:1]
  8,0    1        7     0.000800000  4170  D FWS [jbd2/sda1-8]
  8,0    1        8     0.000900000  4170  D  DS 100 + 8 [fstrim]
CPU3 (8,0):
 Reads Queued:           1,        4KiB\t Writes Queued:           0,        0KiB
Total (8,0):
";

    fn run(action: BlkAction) -> (Vec<Request>, usize, VolumeTable) {
        let mut p = BlkparseParser::new(action);
        let mut v = VolumeTable::new();
        let mut reqs = Vec::new();
        let mut not = 0;
        for l in SAMPLE.lines() {
            match p.parse(l, &mut v) {
                Ok(Line::Request(r)) => reqs.push(r),
                Ok(Line::NotRequest) => not += 1,
                Ok(Line::End) => break,
                Err(e) => panic!("{l}: {e}"),
            }
        }
        (reqs, not, v)
    }

    #[test]
    fn keeps_the_chosen_action() {
        let (d, not, v) = run(BlkAction::D);
        assert_eq!(d.len(), 2);
        assert_eq!(not, 6);
        assert_eq!(
            (d[0].time_ns, d[0].offset, d[0].length, d[0].op),
            (2_000, 1234 * 512, 4096, Op::Read)
        );
        assert_eq!(
            (d[1].time_ns, d[1].offset, d[1].length, d[1].op),
            (500_000, 40 * 512, 8192, Op::Write)
        );
        assert_eq!(v.name(d[1].volume), "8,16");
        let (q, _, _) = run(BlkAction::Q);
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].time_ns, 0);
        let (c, _, _) = run(BlkAction::C);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].time_ns, 600_000);
    }

    #[test]
    fn rejects_malformed_lines() {
        let mut p = BlkparseParser::new(BlkAction::D);
        let mut v = VolumeTable::new();
        let e = |p: &mut BlkparseParser, v: &mut VolumeTable, l: &str| {
            p.parse(l, v).err().unwrap_or_default()
        };
        assert!(e(&mut p, &mut v, "hello world").contains("\"hello\""));
        assert!(e(&mut p, &mut v, "8,0 1 1 0.1 5 D R 12 - 8 [x]").contains("sector + count"));
        assert!(e(&mut p, &mut v, "8,0 1 1 0.1 5 D R x + 8 [x]").contains("sector \"x\""));
        assert!(e(&mut p, &mut v, "8,0 1 1").contains("found 3 fields"));
        assert!("X".parse::<BlkAction>().is_err());
        assert_eq!("q".parse::<BlkAction>().ok(), Some(BlkAction::Q));
    }
}
