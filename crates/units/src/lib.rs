//! Sizes and durations as a user writes them, parsed one way for every ember command.
//!
//! - A **size** ([`parse_size`], [`Size`]) follows GNU coreutils (`dd`, `truncate`): a bare
//!   number is bytes; `K`, `M`, `G`, `T`, `P`, `E` and `KiB`, `MiB`, ... are powers of 1024;
//!   `KB`, `MB`, `GB`, `TB`, `PB`, `EB` are powers of 1000; `B` is bytes. Unit letters are
//!   case-insensitive (`b` is bytes too, not `dd`'s 512-byte block). So `4M` is 4,194,304
//!   bytes and `4MB` is 4,000,000.
//! - A **duration** ([`parse_duration`], [`Dur`]) is a number with `ns`, `us`, `ms`, `s`, `m`
//!   or `min`, `h` or `d`; a bare number is seconds ([`parse_duration_in`] takes another unit
//!   for a bare number).
//!
//! Both allow whitespace between the number and the unit, and a fraction when the result is
//! whole (`1.5K` is 1536 bytes, `0.3K` is an error; `1.5ms` is 1,500,000 ns). A result that
//! does not fit is an error, never a wrapped value. Every error names the text and says what
//! is accepted.
//!
//! [`Size`] and [`Dur`] carry the same rules into configuration files: they deserialize from
//! an integer (bytes; seconds) or a string, and serialize as their shortest exact string
//! (`4MiB`, `10min`).

pub mod duration;
pub mod error;
mod number;
pub mod size;
pub mod time_unit;

pub use duration::{parse_duration, parse_duration_in, parse_nonzero_duration, Dur};
pub use error::{Problem, Quantity, UnitError, SIZE_RULE};
pub use size::{parse_nonzero_size, parse_size, Size};
pub use time_unit::TimeUnit;
