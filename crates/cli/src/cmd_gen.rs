//! `ember trace gen`: synthetic traces.

use clap::Subcommand;

/// The generators of `ember trace gen`.
#[derive(Subcommand)]
pub enum GenCommand {}

/// Run `ember trace gen`.
pub fn run(cmd: GenCommand) -> anyhow::Result<()> {
    match cmd {}
}
