//! Errors of the simulator: bad sizes, bad intervals, bad stream parameters.

/// An error raised while preparing or configuring a simulation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// A cache size that could not be parsed (`--size`).
    #[error("bad cache size {text:?}: {message}")]
    Capacity {
        /// The text given.
        text: String,
        /// What was wrong.
        message: String,
    },
    /// An interval that could not be parsed (`--interval`).
    #[error("bad interval {text:?}: {message}")]
    Interval {
        /// The text given.
        text: String,
        /// What was wrong.
        message: String,
    },
    /// An invalid parameter (for example a zero block size).
    #[error("{0}")]
    Invalid(String),
}
