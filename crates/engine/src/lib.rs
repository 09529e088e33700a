//! ember's real cache (`ember serve`): a cache device in front of one or more backing volumes.
//! The engine speaks its own types; the NBD adapter (`ember-serve`) exports its volumes.
//!
//! - [`device`]: the [`Device`] abstraction and its implementations (file or block device,
//!   memory, fault-injecting wrapper).
//! - [`layout`]: the on-device layout, version 2 (superblock, checkpoints, journal, data, the
//!   block key encoding, recovery decoding).
//! - [`Engine`]: format, inspect, open, [`Volume`] handles, stats, shutdown.
//!
//! Decisions (admission, replacement) come from `ember-policy`; the engine only does I/O,
//! locking and bookkeeping. docs/design/engine.md draws the files and the lock order.

mod admin;
mod backing;
mod batch;
mod cleaning_cell;
mod clock;
pub mod config;
mod core;
pub mod device;
mod engine;
mod engine_health;
pub mod error;
#[doc(hidden)]
pub mod fuzz_entry;
mod gate;
pub mod health;
mod io;
pub mod layout;
pub mod live;
mod open;
pub mod report;
mod state;
pub mod stats;
mod stripes;
mod volume_info;
mod volume_set;
pub mod warmup;
pub mod wb;
mod write_policy;

pub use admin::ShutdownReport;
pub use cleaning_cell::{CleaningState, CleaningStatus, DEFAULT_MIN_RATE};
pub use config::{
    DirtyLimit, DirtyLimitError, DirtyThreshold, EngineConfig, FormatSpec, ReplacementFactory,
    VolumeConfig, VolumeSpec,
};
pub use device::Device;
pub use engine::Engine;
pub use error::EngineError;
pub use health::{DegradeCause, DegradedRecord, DegradedSink, HealthConfig, HealthStatus};
pub use io::{HitRead, HitStart, Volume, CHUNK_BLOCKS};
pub use layout::{BackingRecord, VolumeState, WriteMode};
pub use live::{
    Draining, FlushReport, Progress, ReplaceReport, SeqCutoffSettings, Status, SwitchReport,
    VolumeChange, VolumeSettings, VolumeStatus, WritebackLimits,
};
pub use open::{OpenReport, StartKind};
pub use report::Report;
pub use stats::{DirtyStats, Stats, VolumeStats};
pub use warmup::{SnapshotOptions, WarmupOptions, WarmupSize, WarmupStart, WarmupStats};
pub use wb::{CleaningConfig, CleaningError, WritebackConfig};
