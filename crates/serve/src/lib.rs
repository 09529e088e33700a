//! The NBD adapter of ember's engine. The engine speaks its own types ([`ember_engine::Volume`],
//! [`ember_engine::EngineError`]); this crate joins it to `ember-nbd`:
//!
//! - [`VolumeExport`] / [`EngineExports`]: engine volumes as NBD exports (`ember serve`);
//! - [`NbdDevice`]: an export of an upstream NBD server as a backing (or cache) device;
//! - [`open_spec`]: a device named on a command line (NBD URI or path).

mod demote_queue;
mod export;
mod nbd_device;
mod spec;

pub mod stale;
pub use demote_queue::{DemoteQueue, DemoteReplies};
pub use export::{to_export_error, EngineExports, VolumeExport};
pub use nbd_device::NbdDevice;
pub use spec::open_spec;
