//! Errors of opening, formatting, inspecting and shutting down a cache.

use crate::layout::LayoutError;

/// Why an engine operation (not a client request) failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The on-device layout could not be read or written.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A device failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The configuration does not fit the formatted cache device.
    #[error("{0}")]
    Config(String),
    /// `shutdown` was already called.
    #[error("the engine is already shut down")]
    ShutDown,
}
