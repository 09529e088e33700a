//! The sequential cutoff's flags (Open CAS's `seq-cutoff`), shared by the laboratory
//! (`ember sim`, `ember sievestore`) and the real cache (`ember serve`), so both decide
//! with the same settings (`ember_policy::seq_cutoff`). Off unless a threshold is given.

use clap::Args;
use ember_policy::seq_cutoff::{CutoffPolicy, SeqCutoffConfig, DEFAULT_STREAMS};
use ember_serve::config::SeqCutoffFileSettings;
use ember_serve::parse_size;

/// The sequential cutoff: a missed block that continues a sequential stream (per volume, the
/// last --seq-cutoff-streams streams) past the threshold is not allocated; hits stay hits.
#[derive(Args, Clone, Debug)]
pub struct SeqCutoffArgs {
    /// Sequential cutoff for reads and writes: a stream's blocks beyond its first SIZE bytes
    /// are not allocated on a miss (reads are served from backing, writes go to backing and
    /// are never left dirty). 1M is Open CAS's default threshold. Default: off.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub seq_cutoff: Option<u64>,
    /// The sequential cutoff for read streams only (0: reads never cut); overrides
    /// --seq-cutoff.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub seq_cutoff_read: Option<u64>,
    /// The sequential cutoff for write streams only (0: writes never cut); overrides
    /// --seq-cutoff.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub seq_cutoff_write: Option<u64>,
    /// When the cutoff acts: always, full (only when every cache block holds data, so a cold
    /// cache still fills from a scan; Open CAS's default) or never.
    #[arg(long, value_name = "POLICY", default_value = "full", value_parser = parse_policy)]
    pub seq_cutoff_policy: CutoffPolicy,
    /// Sequential streams tracked per volume (Open CAS tracks 128).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_STREAMS)]
    pub seq_cutoff_streams: usize,
}

impl Default for SeqCutoffArgs {
    /// Off, with the flags' defaults otherwise.
    fn default() -> Self {
        Self {
            seq_cutoff: None,
            seq_cutoff_read: None,
            seq_cutoff_write: None,
            seq_cutoff_policy: CutoffPolicy::Full,
            seq_cutoff_streams: DEFAULT_STREAMS,
        }
    }
}

fn parse_policy(text: &str) -> Result<CutoffPolicy, String> {
    text.parse()
}

impl SeqCutoffArgs {
    /// The read and write thresholds in bytes (0: that direction is never cut).
    pub fn thresholds(&self) -> (u64, u64) {
        let both = self.seq_cutoff.unwrap_or(0);
        (self.seq_cutoff_read.unwrap_or(both), self.seq_cutoff_write.unwrap_or(both))
    }

    /// The policy's settings for a cache of `block_size`-byte blocks.
    pub fn config(&self, block_size: u64) -> SeqCutoffConfig {
        let (read, write) = self.thresholds();
        let mut c = SeqCutoffConfig::from_bytes(self.seq_cutoff_policy, read, write, block_size);
        c.streams = self.seq_cutoff_streams.max(1);
        c
    }

    /// The config file's settings these flags describe.
    pub fn settings(&self) -> SeqCutoffFileSettings {
        let (read, write) = self.thresholds();
        SeqCutoffFileSettings {
            policy: self.seq_cutoff_policy.name().into(),
            read,
            write,
            streams: self.seq_cutoff_streams,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cut: SeqCutoffArgs,
    }

    #[test]
    fn one_flag_sets_both_and_each_overrides_it() {
        let c = Cli::parse_from(["x", "--seq-cutoff", "1M", "--seq-cutoff-write", "0"]);
        assert_eq!(c.cut.thresholds(), (1 << 20, 0));
        let cfg = c.cut.config(4096);
        assert_eq!((cfg.read_blocks, cfg.write_blocks, cfg.policy), (256, 0, CutoffPolicy::Full));
        let off = Cli::parse_from(["x"]);
        assert!(!off.cut.config(4096).is_active());
        assert!(Cli::try_parse_from(["x", "--seq-cutoff-policy", "often"]).is_err());
    }
}
