//! A regular trace file read in passes, each from the start and from any thread: how the
//! experiments that need several passes (`ember sievestore --experiment`, `ember demote`)
//! stream a trace instead of holding it. A pipe cannot be read twice; its callers
//! read it into memory instead.

use ember_trace::{ReadOptions, Request, TraceError};

use crate::trace_args::TraceInput;

/// A regular trace file read in passes, from any thread; counts the malformed records skipped
/// (the most any pass skipped).
pub struct FilePasses<'a> {
    input: &'a TraceInput,
    opts: ReadOptions,
    skipped: std::sync::atomic::AtomicU64,
}

impl<'a> FilePasses<'a> {
    /// Passes over `input`.
    pub fn new(input: &'a TraceInput) -> Self {
        Self { input, opts: input.read_options(), skipped: Default::default() }
    }

    /// The trace's path.
    pub fn path(&self) -> &std::path::Path {
        self.input.path()
    }

    /// One pass over the trace.
    pub fn open(
        &self,
    ) -> Result<Box<dyn Iterator<Item = Result<Request, TraceError>> + Send + '_>, TraceError> {
        let mut reader = ember_trace::open(self.input.path(), &self.opts)?;
        let skipped = &self.skipped;
        Ok(Box::new(std::iter::from_fn(move || {
            let next = reader.next();
            if next.is_none() {
                skipped.fetch_max(reader.skipped(), std::sync::atomic::Ordering::Relaxed);
            }
            next
        })))
    }

    /// The most malformed records any pass skipped.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(std::sync::atomic::Ordering::Relaxed)
    }
}
