//! A checkpoint: the whole block map written to one of two slots. In version 1 a checkpoint
//! is written at clean shutdown (the clean map, so a restart is warm); write-back persist will
//! write the dirty map here too, with the logical journal covering barriers in between
//! (thesis 4.2.2 and 5.3).
//!
//! Slot layout: one header block (magic, generation, entry count, CRC-32C of the entries,
//! CRC-32C of the header), then 16-byte entries in replacement order, coldest first.
//!
//! The entries' flags are encoded and decoded here (a dirty entry carries its stored epoch).
//! Imports the epoch arithmetic (`epoch.rs`), the layout's helpers and the device: nothing
//! above the layout.

use super::epoch::{stored, Unwrap};
use super::{put_u32, put_u64, Geometry, LayoutError, Le, Superblock, ENTRY_SIZE};
use crate::device::{io_context, Device};

/// Magic of a checkpoint header.
pub const MAGIC: &[u8; 8] = b"EMBERCKP";
/// Entry flag: the cached block is dirty (newer than backing). Never set in version 1's
/// write-through and write-around; write-back will set it.
pub const ENTRY_DIRTY: u32 = 1;

/// Checkpoint flags of a dirty entry: bit 0, and the epoch's low 16 bits in bits 16..32.
pub(crate) fn dirty_flags(epoch: u64) -> u32 {
    ENTRY_DIRTY | (u32::from(stored(epoch)) << 16)
}

/// The stored epoch of a dirty entry's flags (bits 16..32, as `dirty_flags` sets them).
pub fn flags_epoch(flags: u32) -> u16 {
    (flags >> 16) as u16
}

/// The [`Unwrap`] of the stored epochs of the dirty entries of `entries`.
pub fn unwrap_dirty(entries: &[MapEntry]) -> Unwrap {
    Unwrap::new(entries.iter().filter(|e| e.flags & ENTRY_DIRTY != 0).map(|e| flags_epoch(e.flags)))
}

/// One map entry: which volume block a cache block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapEntry {
    /// Block key (`layout::block_key(volume, block)`).
    pub key: u64,
    /// Cache block index in the data region.
    pub cache_block: u32,
    /// [`ENTRY_DIRTY`]; bits 16..32 will hold the dirty epoch (thesis 4.4.2).
    pub flags: u32,
}

/// A checkpoint as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Generation (thesis 5.3).
    pub generation: u64,
    /// The entries, coldest first.
    pub entries: Vec<MapEntry>,
}

fn encode_entries(entries: &[MapEntry]) -> Vec<u8> {
    let mut b = vec![0u8; entries.len() * ENTRY_SIZE as usize];
    for (i, e) in entries.iter().enumerate() {
        let at = i * ENTRY_SIZE as usize;
        put_u64(&mut b, at, e.key);
        put_u32(&mut b, at + 8, e.cache_block);
        put_u32(&mut b, at + 12, e.flags);
    }
    b
}

impl Checkpoint {
    /// Write into `slot` (0 or 1) of `dev`; returns the CRC-32C of the entries. The caller
    /// syncs before pointing a superblock at it.
    pub fn write(
        dev: &dyn Device,
        geometry: &Geometry,
        slot: u32,
        generation: u64,
        entries: &[MapEntry],
    ) -> Result<u32, LayoutError> {
        if entries.len() as u64 > geometry.data_blocks {
            return Err(LayoutError::Invalid(format!(
                "{} entries exceed the {} data blocks",
                entries.len(),
                geometry.data_blocks
            )));
        }
        let base = geometry.checkpoint_offset(slot);
        let bs = geometry.block_size as u64;
        let body = encode_entries(entries);
        let crc = crc32c::crc32c(&body);
        for (i, piece) in body.chunks(1 << 20).enumerate() {
            let off = base + bs + (i as u64) * (1 << 20);
            dev.write_at(off, piece)
                .map_err(|e| io_context(dev, "checkpoint write", off, piece.len() as u64, e))?;
        }
        let mut h = vec![0u8; bs as usize];
        h[0..8].copy_from_slice(MAGIC);
        put_u64(&mut h, 8, generation);
        put_u64(&mut h, 16, entries.len() as u64);
        put_u32(&mut h, 24, crc);
        let hcrc = crc32c::crc32c(&h[..28]);
        put_u32(&mut h, 28, hcrc);
        dev.write_at(base, &h)
            .map_err(|e| io_context(dev, "checkpoint header write", base, bs, e))?;
        Ok(crc)
    }

    /// Read the checkpoint the superblock `sb` names (its slot, generation, entry count and
    /// CRC), as [`Checkpoint::read`].
    pub fn read_named(dev: &dyn Device, sb: &Superblock) -> Result<Self, LayoutError> {
        Self::read(
            dev,
            &sb.geometry,
            sb.checkpoint_slot,
            sb.checkpoint_generation,
            sb.checkpoint_entries,
            sb.checkpoint_crc,
        )
    }

    /// Read `slot` and check it is the checkpoint the superblock describes (generation, count,
    /// CRC). Any mismatch is [`LayoutError::Corrupt`].
    pub fn read(
        dev: &dyn Device,
        geometry: &Geometry,
        slot: u32,
        generation: u64,
        count: u64,
        crc: u32,
    ) -> Result<Self, LayoutError> {
        let corrupt = |detail: String| LayoutError::Corrupt {
            device: dev.describe(),
            what: "checkpoint",
            detail: format!("slot {slot}: {detail}"),
        };
        if slot > 1 {
            return Err(corrupt("no such slot".into()));
        }
        if count > geometry.data_blocks {
            return Err(corrupt(format!(
                "{count} entries exceed {} data blocks",
                geometry.data_blocks
            )));
        }
        let base = geometry.checkpoint_offset(slot);
        let bs = geometry.block_size as u64;
        let mut h = vec![0u8; bs as usize];
        dev.read_at(base, &mut h)
            .map_err(|e| io_context(dev, "checkpoint header read", base, bs, e))?;
        let le = Le(&h);
        if &h[0..8] != MAGIC {
            return Err(corrupt("no checkpoint magic".into()));
        }
        if crc32c::crc32c(&h[..28]) != le.u32(28) {
            return Err(corrupt("header checksum mismatch".into()));
        }
        if le.u64(8) != generation || le.u64(16) != count || le.u32(24) != crc {
            return Err(corrupt(format!(
                "header (generation {}, {} entries, crc {:#010x}) is not the one the superblock \
                 names (generation {generation}, {count} entries, crc {crc:#010x})",
                le.u64(8),
                le.u64(16),
                le.u32(24)
            )));
        }
        let mut body = vec![0u8; (count * ENTRY_SIZE) as usize];
        dev.read_at(base + bs, &mut body)
            .map_err(|e| io_context(dev, "checkpoint read", base + bs, body.len() as u64, e))?;
        if crc32c::crc32c(&body) != crc {
            return Err(corrupt("entries checksum mismatch".into()));
        }
        let le = Le(&body);
        let entries = (0..count as usize)
            .map(|i| {
                let at = i * ENTRY_SIZE as usize;
                MapEntry { key: le.u64(at), cache_block: le.u32(at + 8), flags: le.u32(at + 12) }
            })
            .collect();
        Ok(Self { generation, entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    #[test]
    fn write_read_round_trip_and_corruption() {
        let g = Geometry::compute(4 << 20, 4096, 0, 0).unwrap();
        let dev = MemDevice::new(4 << 20);
        let entries: Vec<MapEntry> = (0..300u32)
            .map(|i| MapEntry { key: (1u64 << 48) | (i as u64 * 3), cache_block: i, flags: 0 })
            .collect();
        let crc = Checkpoint::write(&dev, &g, 1, 9, &entries).unwrap();
        let cp = Checkpoint::read(&dev, &g, 1, 9, 300, crc).unwrap();
        assert_eq!(cp.entries, entries);
        assert_eq!(cp.generation, 9);
        // The other slot holds nothing.
        assert!(Checkpoint::read(&dev, &g, 0, 9, 300, crc).is_err());
        // A stale generation is refused.
        let e = Checkpoint::read(&dev, &g, 1, 10, 300, crc).unwrap_err();
        assert!(e.to_string().contains("generation 9"), "{e}");
        // A flipped entry byte is caught.
        dev.write_at(g.checkpoint_b + 4096 + 17, &[0x55]).unwrap();
        let e = Checkpoint::read(&dev, &g, 1, 9, 300, crc).unwrap_err();
        assert!(e.to_string().contains("entries checksum mismatch"), "{e}");
    }
}
