//! `ember sim`.

use clap::Args;
use std::path::PathBuf;

/// Arguments of `ember sim`.
#[derive(Args)]
pub struct SimArgs {
    /// The trace file.
    #[arg(long)]
    pub trace: PathBuf,
}

/// Run `ember sim`.
pub fn run(_args: SimArgs) -> anyhow::Result<()> {
    anyhow::bail!("sim: not built yet")
}
