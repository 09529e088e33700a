//! Changes while serving, as an operator makes them (`ember ctl`): a flush on demand
//! ([`flush_all`]), a switch of the write policy ([`switch`] begins it, [`drain`] ends its
//! drain), the other live settings ([`settings`]: admission sieve, write-back tuning,
//! replacement policy; [`seq_cutoff`]: the sequential cutoff; [`volume_settings`]: a volume's
//! own write policy, sieve and cutoff), the volume set ([`volumes`]:
//! attach, uncache, recache, remove), and a snapshot of the whole cache ([`status`]). [`progress`] is the
//! wait they share. Each is a flow above the core (`Arc<Inner>`), like `wb/`; the engine
//! handle (`engine.rs`) calls them and owns their threads (the flusher, a drain's finisher).
//!
//! Every wait here has the exits every wait in the engine has: a flusher error since the wait
//! began (the dirty blocks stay dirty and are retried), a shutdown, a poisoned engine.

pub(crate) mod drain;
pub(crate) mod flush_all;
pub(crate) mod progress;
pub(crate) mod replace;
pub(crate) mod seq_cutoff;
pub(crate) mod settings;
pub(crate) mod status;
pub(crate) mod switch;
#[cfg(test)]
mod tests;
pub(crate) mod volume_settings;
pub(crate) mod volumes;

pub use flush_all::FlushReport;
pub use progress::Progress;
pub use replace::ReplaceReport;
pub use seq_cutoff::SeqCutoffSettings;
pub use settings::WritebackLimits;
pub use status::{Draining, Status, VolumeStatus};
pub use volume_settings::VolumeSettings;
pub use volumes::VolumeChange;

use crate::layout::WriteMode;
use serde::Serialize;
use std::time::Duration;

/// What a write-policy switch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SwitchReport {
    /// The policy before (the former write-back policy, if the call waited for an earlier
    /// switch's drain).
    pub from: WriteMode,
    /// The policy in force now.
    pub to: WriteMode,
    /// Dirty block versions the switch wrote back before it was complete.
    pub drained_blocks: u64,
    /// How long the call took.
    pub took: Duration,
}
