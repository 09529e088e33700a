//! The policies and cache sizes of a simulation grid, as `ember sim` and `ember sievestore`
//! take them (`--policy lru,arc --size 1%,64MiB,1000`): blank items are skipped. And the
//! uncounted warm-up period (`--warmup-requests`, `--warmup-time`), the same flags on
//! `ember sim`, `ember sievestore` and `ember demote`.

use clap::Args;
use ember_policy::replacement::Spec;
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

/// The replacement policies of `--policy`, each with its parameters (`lruk:k=3`), in the
/// order given.
pub fn policies(items: &[String]) -> anyhow::Result<Vec<Spec>> {
    Ok(items
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.parse::<Spec>())
        .collect::<Result<_, _>>()?)
}

/// The parser of `--policy`'s items: each a policy spec, checked as it is read (the error
/// names the policy, the parameter and what it accepts); `help` prints every policy with its
/// parameters and citation and exits, as `--help` does.
#[derive(Clone, Copy, Debug)]
pub struct PolicyArg;

impl clap::builder::TypedValueParser for PolicyArg {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        use clap::error::ErrorKind;
        let text = value.to_string_lossy();
        if text.trim().eq_ignore_ascii_case("help") {
            return Err(clap::Error::raw(
                ErrorKind::DisplayHelp,
                ember_policy::replacement::catalog::help(),
            ));
        }
        if !text.trim().is_empty() {
            if let Err(e) = text.parse::<Spec>() {
                let msg = format!("invalid value '{text}' for '--policy': {e}\n");
                return Err(clap::Error::raw(ErrorKind::ValueValidation, msg).with_cmd(cmd));
            }
        }
        Ok(text.into_owned())
    }
}

/// True if `argv` (after the program name) is `sim ... --policy help` (or `--policy=help`):
/// the list of policies is asked for, and no trace is needed to print it.
pub fn asks_policy_help(argv: &[String]) -> bool {
    let is_help = |a: &str| a.trim().eq_ignore_ascii_case("help");
    argv.first().is_some_and(|c| c == "sim")
        && (argv.windows(2).any(|w| w[0] == "--policy" && is_help(&w[1]))
            || argv.iter().any(|a| a.strip_prefix("--policy=").is_some_and(is_help)))
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
        use ember_policy::Kind;
        let specs = policies(&v(&["lru", " ", "s3fifo", "slru:4:lcs"])).unwrap();
        assert_eq!(specs[..2], [Spec::from(Kind::Lru), Spec::from(Kind::S3Fifo)]);
        assert_eq!(specs[2].to_string(), "slru:segments=4:insert=lcs");
        assert!(policies(&v(&["lru", "mru"])).is_err());
        assert!(policies(&v(&["slru:segments=0"])).is_err());
        assert!(asks_policy_help(&v(&["sim", "--policy", "help"])));
        assert!(asks_policy_help(&v(&["sim", "t.csv", "--policy=help"])));
        assert!(!asks_policy_help(&v(&["sim", "--policy", "lru", "help"])));
        assert!(!asks_policy_help(&v(&["serve", "--policy", "help"])));
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
