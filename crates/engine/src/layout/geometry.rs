//! Where each region of the cache device lies.

use super::{LayoutError, ENTRY_SIZE, SUPERBLOCK_SIZE};
use serde::Serialize;

/// Region offsets and lengths in bytes; every region starts on a block boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Geometry {
    /// Cache block size in bytes (a power of two, at least 4096).
    pub block_size: u32,
    /// Bytes of one checkpoint slot (header block + one entry per data block, block-rounded).
    pub checkpoint_len: u64,
    /// Offset of checkpoint slot A.
    pub checkpoint_a: u64,
    /// Offset of checkpoint slot B.
    pub checkpoint_b: u64,
    /// Offset of the logical journal.
    pub journal_offset: u64,
    /// Length of the journal region: the logical journal, then the volume records
    /// (`records_len` bytes at its tail, layout version 2).
    pub journal_len: u64,
    /// Bytes at the tail of the journal region that hold the volume records' two copies
    /// (`layout/volume_records.rs`); 0 in layout version 1 and when the journal is too small
    /// to spare them.
    pub records_len: u64,
    /// Offset of the warmup log.
    pub warmup_offset: u64,
    /// Length of the warmup log (0: none).
    pub warmup_len: u64,
    /// Offset of the data region.
    pub data_offset: u64,
    /// Number of cache blocks in the data region.
    pub data_blocks: u64,
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl Geometry {
    /// Lay out a device of `device_size` bytes with as many data blocks as fit.
    pub fn compute(
        device_size: u64,
        block_size: u32,
        journal_len: u64,
        warmup_len: u64,
    ) -> Result<Self, LayoutError> {
        if block_size < 4096 || !block_size.is_power_of_two() {
            return Err(LayoutError::Invalid(format!(
                "block size {block_size} must be a power of two of at least 4096"
            )));
        }
        let bs = block_size as u64;
        let journal_len = round_up(journal_len, bs);
        let warmup_len = round_up(warmup_len, bs);
        let fixed = round_up(2 * SUPERBLOCK_SIZE, bs) + journal_len + warmup_len + 2 * bs;
        let avail = device_size.saturating_sub(fixed);
        // Each data block costs its own bytes plus one entry in each checkpoint slot.
        let mut n = avail / (bs + 2 * ENTRY_SIZE);
        loop {
            let g = Self::with_blocks(block_size, journal_len, warmup_len, n);
            if g.end() <= device_size && n > 0 {
                return Ok(g);
            }
            if n == 0 {
                return Err(LayoutError::Invalid(format!(
                    "device of {device_size} bytes is too small for any data block \
                     (superblocks, checkpoints, a {journal_len}-byte journal and a \
                     {warmup_len}-byte warmup log take {} bytes)",
                    Self::with_blocks(block_size, journal_len, warmup_len, 1).data_offset
                )));
            }
            n -= 1;
        }
    }

    fn with_blocks(block_size: u32, journal_len: u64, warmup_len: u64, n: u64) -> Self {
        let bs = block_size as u64;
        let checkpoint_len = bs + round_up(n * ENTRY_SIZE, bs);
        let checkpoint_a = round_up(2 * SUPERBLOCK_SIZE, bs);
        let checkpoint_b = checkpoint_a + checkpoint_len;
        let journal_offset = checkpoint_b + checkpoint_len;
        let warmup_offset = journal_offset + journal_len;
        let data_offset = warmup_offset + warmup_len;
        Self {
            block_size,
            checkpoint_len,
            checkpoint_a,
            checkpoint_b,
            journal_offset,
            journal_len,
            records_len: super::volume_records::records_len_for(block_size, journal_len),
            warmup_offset,
            warmup_len,
            data_offset,
            data_blocks: n,
        }
    }

    /// This geometry without a volume-records area (layout version 1's reading of it: the
    /// whole journal region is journal).
    pub fn without_records(mut self) -> Self {
        self.records_len = 0;
        self
    }

    /// Offset of the volume records' area (the tail of the journal region).
    pub fn records_offset(&self) -> u64 {
        self.journal_offset + self.journal_len - self.records_len
    }

    /// Bytes of the logical journal proper: the journal region minus the volume records.
    pub fn journal_bytes(&self) -> u64 {
        self.journal_len - self.records_len
    }

    /// First byte past the data region.
    pub fn end(&self) -> u64 {
        self.data_offset + self.data_blocks * self.block_size as u64
    }

    /// Byte offset of cache block `c` on the device.
    pub fn block_offset(&self, c: u32) -> u64 {
        self.data_offset + c as u64 * self.block_size as u64
    }

    /// Offset of checkpoint slot `slot` (0 = A, 1 = B).
    pub fn checkpoint_offset(&self, slot: u32) -> u64 {
        if slot == 0 {
            self.checkpoint_a
        } else {
            self.checkpoint_b
        }
    }

    /// Check the regions are ordered, aligned and inside a device of `device_size` bytes.
    pub fn validate(&self, device_size: u64) -> Result<(), String> {
        let bs = self.block_size as u64;
        if self.block_size < 4096 || !self.block_size.is_power_of_two() {
            return Err(format!("block size {}", self.block_size));
        }
        // Sizes read from a device may be anything: refuse those whose layout overflows 64
        // bits before computing it (wrapped offsets could put data over the superblocks).
        let fits = self
            .data_blocks
            .checked_mul(ENTRY_SIZE)
            .and_then(|e| e.checked_add(3 * bs + 2 * SUPERBLOCK_SIZE))
            .and_then(|c| c.checked_mul(2))
            .and_then(|c| c.checked_add(self.journal_len))
            .and_then(|c| c.checked_add(self.warmup_len))
            .and_then(|c| c.checked_add(self.data_blocks.checked_mul(bs)?));
        if fits.is_none() {
            return Err("region sizes overflow 64 bits".into());
        }
        let mut expect =
            Self::with_blocks(self.block_size, self.journal_len, self.warmup_len, self.data_blocks);
        // Version 1 and a journal too small to spare it have no records area.
        if self.records_len == 0 {
            expect.records_len = 0;
        }
        if *self != expect {
            return Err(format!("regions are not where the layout puts them: {self:?}"));
        }
        if !self.journal_len.is_multiple_of(bs) || !self.warmup_len.is_multiple_of(bs) {
            return Err("regions not block-aligned".into());
        }
        if self.end() > device_size {
            return Err(format!(
                "data region ends at {} beyond the device size {device_size}",
                self.end()
            ));
        }
        if self.data_blocks > u32::MAX as u64 {
            return Err(format!("{} data blocks exceed 2^32", self.data_blocks));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_the_device_without_overlap() {
        let size = 64 << 20;
        let g = Geometry::compute(size, 4096, 4 << 20, 0).unwrap();
        assert!(g.end() <= size);
        // One more block would not fit.
        let bigger = Geometry::with_blocks(4096, g.journal_len, 0, g.data_blocks + 1);
        assert!(bigger.end() > size, "{} blocks is the most that fit", g.data_blocks);
        assert!(g.checkpoint_len >= 4096 + g.data_blocks * ENTRY_SIZE);
        assert_eq!(g.checkpoint_b, g.checkpoint_a + g.checkpoint_len);
        assert_eq!(g.data_offset % 4096, 0);
        g.validate(size).unwrap();
        // 64 MiB minus 4 MiB of journal leaves about 60 MiB of data at 4 KiB blocks.
        assert!(g.data_blocks > 15_000 && g.data_blocks < 15_360, "{}", g.data_blocks);
    }

    #[test]
    fn rejects_tiny_devices_and_odd_block_sizes() {
        assert!(Geometry::compute(16 * 1024, 4096, 0, 0).is_err());
        let e = Geometry::compute(2 << 20, 4096, 4 << 20, 0).unwrap_err();
        assert!(e.to_string().contains("too small for any data block"), "{e}");
        let tiny = Geometry::compute(32 * 1024, 4096, 0, 0).unwrap();
        assert_eq!(
            tiny.data_blocks, 2,
            "32 KiB = 8 KiB superblocks + 2 x 8 KiB checkpoints + 2 blocks"
        );
        assert!(Geometry::compute(1 << 20, 3000, 0, 0).is_err());
        assert!(Geometry::compute(1 << 20, 2048, 0, 0).is_err());
    }
}
