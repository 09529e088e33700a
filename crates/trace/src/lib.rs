//! Block I/O traces for ember.
//!
//! A trace is a sequence of [`Request`]s: (time, volume, op, offset, length). The simulator
//! sees each request split into fixed-size blocks ([`Request::blocks`]); a request that touches
//! part of a block touches that block.

pub mod blocks;
pub mod decompress_thread;
pub mod direct_read;
pub mod error;
pub mod formats;
#[doc(hidden)]
pub mod fuzz_entry;
pub mod gen;
pub mod next_access;
pub mod open;
pub mod request;
pub mod trace;
pub mod volume;
pub mod write;

pub use blocks::{BlockChunk, BlockReader, FLAG_FIRST, FLAG_WRITE};
pub use error::TraceError;
pub use formats::blkparse::BlkAction;
pub use formats::csv::{CsvColumns, OffsetUnit, TimeUnit};
pub use formats::oracle_general::OracleGeneralRecord;
pub use formats::Format;
pub use next_access::{NextAccess, NextAccessReader, Spool, NO_NEXT};
pub use open::{
    detect_format, for_each_oracle_general, open, read_oracle_general_keys,
    read_oracle_general_records, read_trace, ReadOptions, ReadStats, TraceReader,
};
pub use request::{
    block_key, key_block, key_volume, Op, Request, DEFAULT_BLOCK_SIZE, MAX_BLOCK_INDEX,
};
pub use trace::Trace;
pub use volume::VolumeTable;
pub use write::{check_oracle_general_block_size, write_oracle_general, write_trace, TraceWriter};
