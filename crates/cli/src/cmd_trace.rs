//! `ember trace info` and `ember trace convert`.

use clap::Args;
use std::path::PathBuf;

/// Arguments of `ember trace info`.
#[derive(Args)]
pub struct InfoArgs {
    /// The trace file.
    pub trace: PathBuf,
}

/// Arguments of `ember trace convert`.
#[derive(Args)]
pub struct ConvertArgs {
    /// The input trace.
    pub input: PathBuf,
    /// The output file.
    pub output: PathBuf,
}

/// Run `ember trace info`.
pub fn info(_args: InfoArgs) -> anyhow::Result<()> {
    anyhow::bail!("trace info: not built yet")
}

/// Run `ember trace convert`.
pub fn convert(_args: ConvertArgs) -> anyhow::Result<()> {
    anyhow::bail!("trace convert: not built yet")
}
