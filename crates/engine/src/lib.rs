//! ember's real cache (`ember serve`): a cache device in front of one or more backing volumes,
//! exported over NBD.
//!
//! - [`device`]: the [`Device`] abstraction and its implementations (file or block device,
//!   memory, fault-injecting wrapper, upstream NBD server).
//! - [`layout`]: the on-device layout, version 1 (superblock, checkpoints, journal, data).
//! - [`Engine`]: format, inspect, open, serve ([`ember_nbd::ExportSet`]), stats, shutdown.
//!
//! Decisions (admission, replacement) come from `ember-policy`; the engine only does I/O,
//! locking and bookkeeping.

pub mod config;
pub mod device;
pub mod engine;
pub mod error;
#[doc(hidden)]
pub mod fuzz_entry;
mod gate;
pub mod layout;
pub mod report;
mod state;
pub mod stats;
mod stripes;
mod volume;
pub mod writeback;

pub use config::{EngineConfig, FormatSpec, ReplacementFactory, VolumeConfig, VolumeSpec};
pub use device::Device;
pub use engine::{Engine, OpenReport, ShutdownReport, StartKind};
pub use error::EngineError;
pub use layout::WriteMode;
pub use report::Report;
pub use stats::{DirtyStats, Stats, VolumeStats};
pub use volume::CHUNK_BLOCKS;
pub use writeback::WritebackConfig;
