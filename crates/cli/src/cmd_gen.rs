//! `ember trace gen`: synthetic traces.

use clap::Subcommand;

/// The generators of `ember trace gen`.
#[derive(Subcommand)]
pub enum GenCommand {
    /// A storage ensemble over several days (SieveStore section 2): MSR volume names, skewed
    /// and drifting popularity.
    Ensemble(crate::cmd_sievestore::GenEnsembleArgs),
}

/// Run `ember trace gen`.
pub fn run(cmd: GenCommand) -> anyhow::Result<()> {
    match cmd {
        GenCommand::Ensemble(a) => crate::cmd_sievestore::gen_ensemble(&a),
    }
}
