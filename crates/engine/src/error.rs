//! Errors of the engine: opening, formatting, inspecting and shutting down a cache, and the
//! block requests of a volume handle.

use crate::config::DirtyLimitError;
use crate::layout::LayoutError;

/// Why an engine operation or a block request failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The on-device layout could not be read or written.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A device failed. (Transparent: the message is the I/O error's own, shown once.)
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The configuration does not fit the formatted cache device.
    #[error("{0}")]
    Config(String),
    /// The write-back tuning's dirty thresholds do not fit the cache device.
    #[error(transparent)]
    DirtyLimit(#[from] DirtyLimitError),
    /// `shutdown` was already called (or is in progress: requests are refused).
    #[error("the engine is already shut down")]
    ShutDown,
    /// A block request is invalid for its volume (for example beyond its end).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A change while serving that cannot be made (a switch to a write policy the cache
    /// device cannot hold, a replacement policy whose state cannot be rebuilt, ...): the
    /// reason. Nothing was changed.
    #[error("{0}")]
    Refused(String),
}
