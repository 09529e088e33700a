//! Cleaning control's flags for `ember serve` (docs/reference/cleaning.md): a cap on
//! background cleaning and the idle policy, with bcache's PI controller steering the dirty
//! count while requests come. Off unless given: background cleaning at full speed.

use clap::Args;
use ember_serve::config::CleaningFileSettings;
use ember_serve::parse_size;

/// Cleaning control: --flush-rate, --flush-idle, --dirty-target, --flush-min-rate.
#[derive(Args, Clone, Debug)]
pub struct CleaningArgs {
    /// Write-back: cap background cleaning at SIZE bytes a second (0: no cap). A FLUSH,
    /// `ember ctl flush`, a write-policy switch's drain and a clean stop ignore it.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "0")]
    pub flush_rate: u64,
    /// Write-back: clean at full speed (up to --flush-rate) only once no request came for MS
    /// milliseconds; while requests come, steer the dirty count toward --dirty-target with a
    /// PI controller (bcache's writeback rate). 0: off, always full speed.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub flush_idle: u64,
    /// Write-back, under --flush-idle: the dirty count the controller steers toward while
    /// requests come, in blocks or PCT% of the cache [default: 10%].
    #[arg(long, value_name = "BLOCKS|PCT%")]
    pub dirty_target: Option<String>,
    /// Write-back, under --flush-idle: the controller's lowest rate, bytes a second (bcache's
    /// writeback_rate_minimum, 4K).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "4K")]
    pub flush_min_rate: u64,
}

impl CleaningArgs {
    /// The config file's settings these flags describe.
    pub fn settings(&self) -> CleaningFileSettings {
        CleaningFileSettings {
            flush_rate: self.flush_rate,
            flush_idle: self.flush_idle,
            dirty_target: self.dirty_target.clone(),
            min_rate: self.flush_min_rate,
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
        cleaning: CleaningArgs,
    }

    #[test]
    fn off_by_default_and_every_flag_reaches_the_settings() {
        let off = Cli::parse_from(["x"]).cleaning.settings();
        assert_eq!(off, CleaningFileSettings::default());
        let c = Cli::parse_from([
            "x",
            "--flush-rate",
            "64M",
            "--flush-idle",
            "200",
            "--dirty-target",
            "5%",
            "--flush-min-rate",
            "1M",
        ]);
        let s = c.cleaning.settings();
        assert_eq!((s.flush_rate, s.flush_idle, s.min_rate), (64 << 20, 200, 1 << 20));
        assert_eq!(s.dirty_target.as_deref(), Some("5%"));
        assert!(s.config().is_ok());
    }
}
