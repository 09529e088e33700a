//! ember's NBD server in process, test exports and a raw protocol speaker.

pub mod exports;
pub mod raw;
pub mod server;

pub use ember_nbd;
pub use exports::{FaultyExport, GateExport, PendingReads};
pub use raw::{request_header, Raw, IHAVEOPT, NBDMAGIC, REPLY_MAGIC};
pub use server::{assert_works, pattern, serve_mem, serve_with, TestServer};

/// What an export's write-side request returns: done, or the error.
pub type Outcome = Result<(), ember_nbd::ExportError>;
