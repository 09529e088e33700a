//! Block I/O traces for ember.
//!
//! A trace is a sequence of [`Request`]s: (time, volume, op, offset, length). The simulator
//! sees each request split into fixed-size blocks ([`Request::blocks`]); a request that touches
//! part of a block touches that block.

pub mod block_chunk;
pub mod blocks;
mod bytes;
pub mod compression;
pub mod decompress_thread;
pub mod detect;
pub mod direct_read;
pub mod error;
pub mod formats;
#[doc(hidden)]
pub mod fuzz_entry;
pub mod gen;
pub mod next_access;
pub mod open;
pub mod oracle_general_file;
pub mod request;
mod splitter;
mod stream_bytes;
pub mod trace;
pub mod volume;
pub mod write;

pub use block_chunk::{BlockChunk, FLAG_FIRST, FLAG_WRITE};
pub use blocks::BlockReader;
pub use detect::{detect_format, format_from_name};
pub use error::TraceError;
pub use formats::blkparse::BlkAction;
pub use formats::csv::{CsvColumns, OffsetUnit, TimeUnit};
pub use formats::oracle_general::OracleGeneralRecord;
pub use formats::Format;
pub use next_access::{NextAccess, NextAccessReader, Spool, NO_NEXT};
pub use open::{open, read_trace, ReadOptions, ReadStats, TraceReader};
pub use oracle_general_file::{
    for_each_oracle_general, read_oracle_general_keys, read_oracle_general_records,
};
pub use request::{
    block_key, key_block, key_volume, Op, Request, DEFAULT_BLOCK_SIZE, MAX_BLOCK_INDEX,
};
pub use trace::Trace;
pub use volume::VolumeTable;
pub use write::{check_oracle_general_block_size, write_oracle_general, write_trace, TraceWriter};
