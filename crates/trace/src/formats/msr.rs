//! MSR-Cambridge block traces (Narayanan et al., "Write off-loading", FAST 2008; SNIA IOTTA).
//!
//! One request per line: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, where
//! Timestamp is a Windows filetime (100 ns ticks since 1601-01-01 UTC), Type is `Read` or
//! `Write`, Offset and Size are bytes and ResponseTime is in ticks (ignored). The volume is
//! named `host_disk`, as the traces' file names do (`web_0`).

use std::io::Write;

use super::{parse_u64, split_fields, to_length, Line};
use crate::{Op, Request, VolumeTable};

/// Filetime ticks between 1601-01-01 and the Unix epoch 1970-01-01.
pub const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;

/// Nanoseconds per filetime tick.
const NS_PER_TICK: u64 = 100;

/// Windows filetime ticks to nanoseconds since the Unix epoch.
pub fn filetime_to_unix_ns(ticks: u64) -> Option<u64> {
    ticks.checked_sub(FILETIME_UNIX_EPOCH)?.checked_mul(NS_PER_TICK)
}

/// Nanoseconds since the Unix epoch to Windows filetime ticks (truncating below 100 ns).
pub fn unix_ns_to_filetime(ns: u64) -> u64 {
    ns / NS_PER_TICK + FILETIME_UNIX_EPOCH
}

/// Parses MSR-Cambridge lines.
#[derive(Debug, Default)]
pub struct MsrParser {
    /// The last (host, disk) seen and its volume id: MSR files hold one volume each, so this
    /// spares a name lookup per line.
    last: Option<(String, u64, u32)>,
}

impl MsrParser {
    /// Parse one line.
    pub fn parse(
        &mut self,
        line: &str,
        lineno: u64,
        volumes: &mut VolumeTable,
    ) -> Result<Line, String> {
        let line = line.trim();
        if line.is_empty() {
            return Ok(Line::NotRequest);
        }
        let (f, n) = split_fields::<6>(line, ',');
        if lineno == 1 && f[0].trim().eq_ignore_ascii_case("timestamp") {
            return Ok(Line::NotRequest);
        }
        if n < 6 {
            return Err(format!(
                "expected 7 fields Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime, found {n}"
            ));
        }
        let ticks = parse_u64(f[0], "Timestamp")?;
        let time_ns = filetime_to_unix_ns(ticks)
            .ok_or_else(|| format!("Timestamp {ticks} is before 1970 (not a Windows filetime)"))?;
        let host = f[1].trim();
        if host.is_empty() {
            return Err("empty Hostname".to_string());
        }
        let disk = parse_u64(f[2], "DiskNumber")?;
        let op = match f[3].trim() {
            t if t.eq_ignore_ascii_case("read") => Op::Read,
            t if t.eq_ignore_ascii_case("write") => Op::Write,
            t => return Err(format!("Type {t:?} is neither Read nor Write")),
        };
        let offset = parse_u64(f[4], "Offset")?;
        let length = to_length(parse_u64(f[5], "Size")?, "Size")?;
        let volume = match &self.last {
            Some((h, d, id)) if h == host && *d == disk => *id,
            _ => {
                let id = volumes.intern(&format!("{host}_{disk}"));
                self.last = Some((host.to_owned(), disk, id));
                id
            }
        };
        Ok(Line::Request(Request { time_ns, volume, op, offset, length }))
    }
}

/// Split a volume name into MSR-Cambridge host and disk number: `web_0` → (`web`, 0); a name
/// without a numeric `_N` suffix is a host with disk 0.
pub fn split_volume_name(name: &str) -> (&str, u64) {
    if let Some((host, disk)) = name.rsplit_once('_') {
        if !host.is_empty() {
            if let Ok(d) = disk.parse::<u64>() {
                return (host, d);
            }
        }
    }
    (name, 0)
}

/// Write one request as an MSR-Cambridge line (ResponseTime 0).
pub fn write_request(
    out: &mut dyn Write,
    r: &Request,
    volumes: &VolumeTable,
) -> std::io::Result<()> {
    let name = volumes.name(r.volume);
    let (host, disk) = split_volume_name(&name);
    let op = if r.op.is_write() { "Write" } else { "Read" };
    writeln!(
        out,
        "{},{},{},{},{},{},0",
        unix_ns_to_filetime(r.time_ns),
        host,
        disk,
        op,
        r.offset,
        r.length
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> (Vec<Result<Line, String>>, VolumeTable) {
        let mut p = MsrParser::default();
        let mut v = VolumeTable::new();
        let out = lines.iter().enumerate().map(|(i, l)| p.parse(l, i as u64 + 1, &mut v)).collect();
        (out, v)
    }

    #[test]
    fn reads_the_published_layout() {
        // First line of MSR-Cambridge web_0.csv (SNIA IOTTA set 388).
        let (out, v) = parse(&[
            "128166372003061629,web,0,Read,6517833728,4096,1811",
            "128166372016382155,prxy,1,Write,3649536,512,4070",
        ]);
        let a = match &out[0] {
            Ok(Line::Request(r)) => *r,
            other => panic!("unexpected {other:?}"),
        };
        // (128166372003061629 - 116444736000000000) * 100 ns.
        assert_eq!(a.time_ns, 1_172_163_600_306_162_900);
        assert_eq!(a.op, Op::Read);
        assert_eq!(a.offset, 6_517_833_728);
        assert_eq!(a.length, 4096);
        assert_eq!(v.name(a.volume), "web_0");
        match &out[1] {
            Ok(Line::Request(r)) => {
                assert_eq!(r.op, Op::Write);
                assert_eq!(v.name(r.volume), "prxy_1");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn rejects_malformed_lines() {
        let (out, _) = parse(&[
            "128166372003061629,web,0,Read,6517833728",
            "128166372003061629,web,0,Trim,0,4096,1",
            "128166372003061629,web,0,Read,0,-4096,1",
            "12x,web,0,Read,0,4096,1",
            "5,web,0,Read,0,4096,1",
        ]);
        let msgs: Vec<String> = out.into_iter().map(|r| r.err().unwrap_or_default()).collect();
        assert!(msgs[0].contains("found 5"), "{}", msgs[0]);
        assert!(msgs[1].contains("\"Trim\""), "{}", msgs[1]);
        assert!(msgs[2].contains("negative Size"), "{}", msgs[2]);
        assert!(msgs[3].contains("Timestamp \"12x\""), "{}", msgs[3]);
        assert!(msgs[4].contains("before 1970"), "{}", msgs[4]);
    }

    #[test]
    fn volume_names_split_back() {
        assert_eq!(split_volume_name("web_0"), ("web", 0));
        assert_eq!(split_volume_name("my_host_12"), ("my_host", 12));
        assert_eq!(split_volume_name("disk"), ("disk", 0));
        assert_eq!(unix_ns_to_filetime(1_172_163_600_306_162_900), 128_166_372_003_061_629);
    }
}
