//! The policies and cache sizes of a simulation grid, as `ember sim` and `ember sievestore`
//! take them (`--policy lru,arc --size 1%,64MiB,1000`): blank items are skipped. And the
//! uncounted warm-up period (`--warmup-requests`, `--warmup-time`), the same flags on
//! `ember sim`, `ember sievestore` and `ember demote`.

use clap::Args;
use ember_policy::Kind;
use ember_sim::{Capacity, WarmupPeriod};

/// The uncounted warm-up period: the first requests of the trace run through the cache,
/// whose state evolves as usual, but no counter counts them. Not Bonfire's cache warmup
/// (`ember warmup`), which preloads a cache.
#[derive(Args, Clone, Debug, Default)]
pub struct WarmupArgs {
    /// The uncounted warm-up period, in requests (not Bonfire's cache warmup, `ember
    /// warmup`): the first N requests run through the cache, whose state evolves, but are
    /// not counted; the counters start after them.
    #[arg(long, value_name = "N")]
    pub warmup_requests: Option<u64>,
    /// The uncounted warm-up period, in trace time (as libCacheSim's --warmup-sec; not
    /// Bonfire's cache warmup, `ember warmup`): requests issued less than SPAN after the first
    /// one run through the cache but are not counted. Units ns, us, ms, s, m, h, d; a bare
    /// number is seconds.
    #[arg(long, value_name = "SPAN", value_parser = parse_span, conflicts_with = "warmup_requests")]
    pub warmup_time: Option<u64>,
}

impl WarmupArgs {
    /// The period the flags give (none without them).
    pub fn period(&self) -> anyhow::Result<WarmupPeriod> {
        Ok(WarmupPeriod::from_flags(self.warmup_requests, self.warmup_time)?)
    }

    /// True if either flag was given.
    pub fn given(&self) -> bool {
        self.warmup_requests.is_some() || self.warmup_time.is_some()
    }
}

/// A span of trace time in nanoseconds (`ember_units` durations).
fn parse_span(text: &str) -> Result<u64, String> {
    let d = ember_units::parse_duration(text).map_err(|e| e.to_string())?;
    u64::try_from(d.as_nanos()).map_err(|_| format!("duration {text:?}: too large"))
}

/// The replacement policies of `--policy`, in the order given.
pub fn policies(items: &[String]) -> anyhow::Result<Vec<Kind>> {
    Ok(items
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.parse::<Kind>())
        .collect::<Result<_, _>>()?)
}

/// The cache sizes of `--size`, in the order given: each as written (trimmed) and parsed.
pub fn sizes(items: &[String]) -> anyhow::Result<Vec<(String, Capacity)>> {
    items
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| Ok((s.trim().to_owned(), s.parse::<Capacity>()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn blank_items_are_skipped_and_bad_ones_are_errors() {
        assert_eq!(policies(&v(&["lru", " ", "s3fifo"])).unwrap(), [Kind::Lru, Kind::S3Fifo]);
        assert!(policies(&v(&["lru", "mru"])).is_err());
        let s = sizes(&v(&[" 1% ", "", "1000", "64MiB"])).unwrap();
        let names: Vec<&str> = s.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(names, ["1%", "1000", "64MiB"]);
        assert_eq!(s[1].1, Capacity::Blocks(1000));
        assert_eq!(s[2].1.blocks(4096, 0), 16384);
        assert!(sizes(&v(&["10 bananas"])).is_err());
    }

    #[test]
    fn warmup_flags_parse_to_one_period() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            w: WarmupArgs,
        }
        let p = |a: &[&str]| {
            let mut argv = vec!["x"];
            argv.extend_from_slice(a);
            Cli::try_parse_from(argv).map(|c| c.w.period().unwrap())
        };
        assert_eq!(p(&[]).unwrap(), WarmupPeriod::None);
        assert_eq!(p(&["--warmup-requests", "100"]).unwrap(), WarmupPeriod::Requests(100));
        assert_eq!(p(&["--warmup-time", "1h"]).unwrap(), WarmupPeriod::Time(3_600_000_000_000));
        assert_eq!(p(&["--warmup-time", "90"]).unwrap(), WarmupPeriod::Time(90_000_000_000));
        assert!(p(&["--warmup-time", "1h", "--warmup-requests", "5"]).is_err());
        assert!(p(&["--warmup-time", "soon"]).is_err());
    }
}
