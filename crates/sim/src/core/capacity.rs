//! Cache sizes as a user writes them: blocks (`1000`), bytes (`64MiB`, `1GiB`, `512KB`) or a
//! percentage of the trace's working-set size (`1%`, `10%`), where the working-set size (WSS)
//! is the number of distinct blocks the trace touches.

use crate::SimError;
use std::fmt;
use std::str::FromStr;

/// A cache size before it is resolved against a block size and a working-set size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Capacity {
    /// A number of blocks (`1000`, or `1000blocks`).
    Blocks(u64),
    /// A number of bytes (`64MiB`, `512KB`, `4096B`, `1.5G`), as [`ember_units::parse_size`]
    /// reads them: SI suffixes (`KB`, `MB`, `GB`, ...) are powers of 1000, IEC suffixes
    /// (`KiB`, `MiB`, `GiB`, ..., also `K`, `M`, `G`) powers of 1024.
    Bytes(u64),
    /// A percentage of the working-set size in blocks (`1%`, `0.5%`, `100%`).
    Percent(f64),
}

impl Capacity {
    /// The capacity in blocks for a cache of `block_size`-byte blocks over a trace of `wss`
    /// distinct blocks. Bytes round down to whole blocks, percentages to the nearest block;
    /// the result is at least 1 block.
    pub fn blocks(&self, block_size: u64, wss: u64) -> u64 {
        let b = match *self {
            Capacity::Blocks(b) => b,
            Capacity::Bytes(bytes) => bytes / block_size.max(1),
            Capacity::Percent(p) => (wss as f64 * p / 100.0).round() as u64,
        };
        b.max(1)
    }
}

impl FromStr for Capacity {
    type Err = SimError;

    fn from_str(text: &str) -> Result<Self, SimError> {
        let err = |message: &str| SimError::Capacity {
            text: text.to_owned(),
            message: message.to_owned(),
        };
        let s = text.trim();
        if let Some(p) = s.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| err("expected a number before %"))?;
            if !v.is_finite() || v <= 0.0 {
                return Err(err("percentage must be positive"));
            }
            return Ok(Capacity::Percent(v));
        }
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        if num.is_empty() {
            return Err(err("expected a number of blocks, bytes (64MiB) or a percentage (1%)"));
        }
        let bytes = |text: &str| {
            ember_units::parse_size(text).map(Capacity::Bytes).map_err(|e| {
                err(&format!("{}; or blocks (1000) or % of the working set (1%)", e.reason()))
            })
        };
        let c = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "blk" | "blks" | "block" | "blocks" => {
                Capacity::Blocks(num.parse().map_err(|_| err("number too large"))?)
            }
            "bytes" => bytes(num)?,
            _ => bytes(s)?,
        };
        match c {
            Capacity::Blocks(0) | Capacity::Bytes(0) => Err(err("size must be positive")),
            c => Ok(c),
        }
    }
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Capacity::Blocks(b) => write!(f, "{b}"),
            Capacity::Bytes(b) => write!(f, "{b}B"),
            Capacity::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Parse a comma-separated list of sizes (`1%,10%,64MiB`).
pub fn parse_capacities(list: &str) -> Result<Vec<Capacity>, SimError> {
    list.split(',').filter(|s| !s.trim().is_empty()).map(str::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_blocks_bytes_and_percent() {
        assert_eq!("1000".parse::<Capacity>(), Ok(Capacity::Blocks(1000)));
        assert_eq!("1000blocks".parse::<Capacity>(), Ok(Capacity::Blocks(1000)));
        assert_eq!("64MiB".parse::<Capacity>(), Ok(Capacity::Bytes(64 << 20)));
        assert_eq!("1GiB".parse::<Capacity>(), Ok(Capacity::Bytes(1 << 30)));
        assert_eq!("2G".parse::<Capacity>(), Ok(Capacity::Bytes(2 << 30)));
        assert_eq!("512KB".parse::<Capacity>(), Ok(Capacity::Bytes(512_000)));
        assert_eq!("4096B".parse::<Capacity>(), Ok(Capacity::Bytes(4096)));
        assert_eq!("1%".parse::<Capacity>(), Ok(Capacity::Percent(1.0)));
        assert_eq!(" 0.5% ".parse::<Capacity>(), Ok(Capacity::Percent(0.5)));
    }

    #[test]
    fn rejects_bad_sizes() {
        for bad in ["", "abc", "0", "0%", "-1%", "10XB", "%", "99999999999999999999999", "1e%"] {
            assert!(bad.parse::<Capacity>().is_err(), "{bad:?} should not parse");
        }
        assert!("20000000TiB".parse::<Capacity>().is_err());
    }

    /// Byte forms are [`ember_units::parse_size`]'s; a bare number stays blocks.
    #[test]
    fn bytes_follow_the_size_rule() {
        assert_eq!("4M".parse::<Capacity>(), Ok(Capacity::Bytes(4 << 20)));
        assert_eq!("4MB".parse::<Capacity>(), Ok(Capacity::Bytes(4_000_000)));
        assert_eq!("1.5K".parse::<Capacity>(), Ok(Capacity::Bytes(1536)));
        assert_eq!("4 KiB".parse::<Capacity>(), Ok(Capacity::Bytes(4096)));
        assert_eq!("4096bytes".parse::<Capacity>(), Ok(Capacity::Bytes(4096)));
        assert_eq!("4096".parse::<Capacity>(), Ok(Capacity::Blocks(4096)));
        let e = "0.3K".parse::<Capacity>().expect_err("part of a byte");
        assert!(e.to_string().contains("whole number of bytes"), "{e}");
        let e = "10XB".parse::<Capacity>().expect_err("unknown unit");
        assert!(e.to_string().contains("KB/MB/GB") && e.to_string().contains("1%"), "{e}");
    }

    #[test]
    fn resolves_against_block_size_and_wss() {
        assert_eq!(Capacity::Blocks(1000).blocks(4096, 5), 1000);
        assert_eq!(Capacity::Bytes(64 << 20).blocks(4096, 0), 16_384);
        assert_eq!(Capacity::Bytes(512_000).blocks(4096, 0), 125);
        assert_eq!(Capacity::Percent(1.0).blocks(4096, 123_456), 1235);
        assert_eq!(Capacity::Percent(10.0).blocks(512, 1000), 100);
        // Never zero: a tiny share of a tiny trace is still one block.
        assert_eq!(Capacity::Percent(1.0).blocks(4096, 10), 1);
        assert_eq!(Capacity::Bytes(100).blocks(4096, 10), 1);
    }

    #[test]
    fn parses_lists() {
        let l = parse_capacities("1%,10%,64MiB").unwrap();
        assert_eq!(
            l,
            vec![Capacity::Percent(1.0), Capacity::Percent(10.0), Capacity::Bytes(64 << 20)]
        );
        assert!(parse_capacities("1%,x").is_err());
    }
}
