//! The flags of `ember serve` that decide when the cache device is given up and where the
//! record of degraded mode is kept (docs/reference/degraded.md).

use std::path::PathBuf;

use clap::Args;
use ember_serve::config::HealthSettings;

/// When the cache device is given up (degraded mode: every request goes to backing).
#[derive(Args, Clone, Debug)]
pub struct HealthArgs {
    /// Give the cache device up once its decayed count of I/O errors reaches N (bcache's
    /// io_error_limit; 0: never by count). A device that is gone (ENODEV, ENXIO), a failed
    /// sync and a timeout give it up at once.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub io_error_limit: u32,
    /// The error count halves every DURATION (bcache's io_error_halflife, in time rather than
    /// I/Os; 0: errors are never forgotten).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_secs)]
    pub io_error_halflife: f64,
    /// A cache-device I/O not complete after DURATION fails and gives the device up (a hung
    /// device). Each I/O then runs on a helper thread (a copy and two thread switches per
    /// I/O). Default: 0, no timeout.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_secs)]
    pub io_timeout: f64,
    /// Where the state file (degraded flag, blocks lost with the device) is kept, synced,
    /// outside the cache device. Default: the config file's directory, else the control
    /// socket's.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Reformat the cache device if the state file says it failed (it starts cold). Without
    /// it such a device is refused: a device that comes back is never used as it is.
    #[arg(long)]
    pub reformat_failed_cache: bool,
}

/// A duration (`500ms`, `2s`, `1m`; a bare number is seconds) as seconds.
fn parse_secs(s: &str) -> Result<f64, String> {
    ember_units::parse_duration(s).map(|d| d.as_secs_f64()).map_err(|e| e.to_string())
}

impl HealthArgs {
    /// The settings these flags describe.
    pub fn settings(&self) -> HealthSettings {
        HealthSettings {
            io_error_limit: self.io_error_limit,
            io_error_halflife: self.io_error_halflife,
            io_timeout: self.io_timeout,
            state_dir: self.state_dir.clone(),
        }
    }
}
