//! Block I/O traces for ember.
//!
//! A trace is a sequence of [`Request`]s: (time, volume, op, offset, length). The simulator
//! sees each request split into fixed-size blocks ([`Request::blocks`]); a request that touches
//! part of a block touches that block.

pub mod error;
pub mod gen;
pub mod request;
pub mod trace;
pub mod volume;

pub use error::TraceError;
pub use request::{
    block_key, key_block, key_volume, Op, Request, DEFAULT_BLOCK_SIZE, MAX_BLOCK_INDEX,
};
pub use trace::Trace;
pub use volume::VolumeTable;
