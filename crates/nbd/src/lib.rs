//! The NBD protocol (NetworkBlockDevice/nbd doc/proto.md) for ember: what an export must
//! provide ([`Export`]).

pub mod export;

pub use export::{Export, ExportError, ExportFlags, ExportSet};
