//! What can stop a [`super::Plan`]: an invalid request, or the trace or the temporary files of
//! the next-access pass failing. Each error names the file or the step.

use crate::SimError;
use ember_trace::TraceError;
use std::path::PathBuf;

/// A plan could not run.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The request is invalid (no policy, no size, a zero block size, a size in percent of
    /// the working set over a pipe, ...).
    #[error("{0}")]
    Invalid(String),
    /// A parameter the simulator refused.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The trace could not be opened.
    #[error("opening trace {}", path.display())]
    Open {
        /// The trace file.
        path: PathBuf,
        /// Why.
        #[source]
        source: TraceError,
    },
    /// The trace could not be read.
    #[error("reading trace {}", path.display())]
    Read {
        /// The trace file.
        path: PathBuf,
        /// Why.
        #[source]
        source: TraceError,
    },
    /// The temporary files of the next-access pass could not be created.
    #[error("creating temporary files for OPT in {} (set TMPDIR)", dir.display())]
    SpoolCreate {
        /// The temporary directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The trace could not be written to the temporary files.
    #[error("writing the trace to temporary files for OPT")]
    SpoolWrite(#[source] std::io::Error),
    /// The backward pass over the temporary files failed.
    #[error("computing next-access times for OPT")]
    NextAccess(#[source] std::io::Error),
    /// The temporary files could not be read back.
    #[error("reading the temporary files of OPT's next-access times")]
    SpoolRead(#[source] std::io::Error),
}
