//! The block key as the on-device layout stores it: volume number in the high 16 bits, block
//! index in the low 48 bits (checkpoint entries, journal entries, the map in memory).
//!
//! The layout owns this encoding. It happens to agree with `ember_trace::block_key` today, but
//! the disk format must never change because the trace crate did: the test below pins it.

/// Bits of the block index in a key.
pub const BLOCK_BITS: u32 = 48;
/// Largest block index a key holds.
pub const MAX_BLOCK_INDEX: u64 = (1 << BLOCK_BITS) - 1;

/// The key of block `block` of volume `volume` (superblock volume index). Block indices
/// above [`MAX_BLOCK_INDEX`] are folded (only reachable with petabyte volumes at 4 KiB blocks;
/// a volume that large cannot be formatted).
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

    /// Pins the on-device key encoding: changing it changes the meaning of every checkpoint and
    /// journal on disk, so it needs a layout version bump, never a silent edit.
    #[test]
    fn key_encoding_is_pinned() {
        assert_eq!(block_key(0, 0), 0);
        assert_eq!(block_key(1, 0), 0x0001_0000_0000_0000);
        assert_eq!(block_key(3, 0xABCDEF), 0x0003_0000_00AB_CDEF);
        assert_eq!(block_key(31, MAX_BLOCK_INDEX), 0x001F_FFFF_FFFF_FFFF);
        assert_eq!(key_volume(0x0003_0000_00AB_CDEF), 3);
        assert_eq!(key_block(0x0003_0000_00AB_CDEF), 0xABCDEF);
        for (v, b) in [(0u32, 0u64), (7, 12_345_678), (31, MAX_BLOCK_INDEX)] {
            let k = block_key(v, b);
            assert_eq!((key_volume(k), key_block(k)), (v, b));
        }
    }
}
