//! Errors raised while reading or writing traces. Every error names where it happened.

use std::path::{Path, PathBuf};

/// An error while reading or writing a trace, with enough context to find the bad input.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// An I/O error on a trace file.
    #[error("{path}: {source}")]
    Io {
        /// The file being read or written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A record that does not follow the format's definition.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file being read.
        path: PathBuf,
        /// 1-based line number for text formats, 1-based record number for binary formats.
        line: u64,
        /// What was wrong.
        message: String,
    },
    /// The format could not be determined or is not supported for this operation.
    #[error("{path}: {message}")]
    Format {
        /// The file concerned.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// An invalid option (for example a bad column mapping or generator parameter).
    #[error("{0}")]
    Invalid(String),
}

/// An I/O error on the trace file `path`.
pub(crate) fn io_err(path: &Path, source: std::io::Error) -> TraceError {
    TraceError::Io { path: path.to_owned(), source }
}
