//! The request record and block splitting.

use serde::{Deserialize, Serialize};

/// The default cache block size: 4 KiB.
pub const DEFAULT_BLOCK_SIZE: u64 = 4096;

/// Number of low bits of a block key that hold the block index; the bits above hold the volume.
pub const BLOCK_BITS: u32 = 48;

/// The largest block index a key can hold.
pub const MAX_BLOCK_INDEX: u64 = (1 << BLOCK_BITS) - 1;

/// The direction of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// A read.
    Read,
    /// A write.
    Write,
}

impl Op {
    /// True for [`Op::Write`].
    #[inline]
    pub fn is_write(self) -> bool {
        matches!(self, Op::Write)
    }
}

/// One block I/O request as recorded in a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Time of the request in nanoseconds. Formats with absolute time (MSR-Cambridge) give
    /// nanoseconds since the Unix epoch; others give nanoseconds since their own origin.
    pub time_ns: u64,
    /// The volume (backing device) the request addresses, an index into the trace's
    /// [`crate::VolumeTable`].
    pub volume: u32,
    /// Read or write.
    pub op: Op,
    /// Byte offset of the first byte.
    pub offset: u64,
    /// Length in bytes. A zero-length request touches no block.
    pub length: u32,
}

impl Request {
    /// The blocks this request touches, as a range of block indices within its volume.
    ///
    /// A request touching any byte of a block touches that block.
    #[inline]
    pub fn blocks(&self, block_size: u64) -> std::ops::Range<u64> {
        if self.length == 0 {
            let b = self.offset / block_size;
            return b..b;
        }
        let first = self.offset / block_size;
        let last = (self.offset + self.length as u64 - 1) / block_size;
        first..last + 1
    }

    /// The cache keys of the blocks this request touches (volume and block index combined
    /// by [`block_key`]).
    #[inline]
    pub fn block_keys(&self, block_size: u64) -> impl Iterator<Item = u64> + '_ {
        let volume = self.volume;
        self.blocks(block_size).map(move |b| block_key(volume, b))
    }
}

/// The cache key of block `block` of volume `volume`: the volume in the high 16 bits, the
/// block index in the low 48 bits. Block indices above [`MAX_BLOCK_INDEX`] are folded (only
/// reachable with petabyte offsets at 4 KiB blocks).
#[inline]
pub fn block_key(volume: u32, block: u64) -> u64 {
    ((volume as u64) << BLOCK_BITS) | (block & MAX_BLOCK_INDEX)
}

/// The volume of a key built by [`block_key`].
#[inline]
pub fn key_volume(key: u64) -> u32 {
    (key >> BLOCK_BITS) as u32
}

/// The block index of a key built by [`block_key`].
#[inline]
pub fn key_block(key: u64) -> u64 {
    key & MAX_BLOCK_INDEX
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(offset: u64, length: u32) -> Request {
        Request { time_ns: 0, volume: 3, op: Op::Read, offset, length }
    }

    #[test]
    fn partial_blocks_count_as_touched() {
        assert_eq!(req(0, 4096).blocks(4096), 0..1);
        assert_eq!(req(1, 4096).blocks(4096), 0..2);
        assert_eq!(req(4095, 2).blocks(4096), 0..2);
        assert_eq!(req(8192, 512).blocks(4096), 2..3);
        assert_eq!(req(8192, 0).blocks(4096).count(), 0);
    }

    #[test]
    fn keys_round_trip() {
        let k = block_key(7, 123_456);
        assert_eq!(key_volume(k), 7);
        assert_eq!(key_block(k), 123_456);
        let keys: Vec<u64> = req(4096, 8192).block_keys(4096).collect();
        assert_eq!(keys, vec![block_key(3, 1), block_key(3, 2)]);
    }
}
