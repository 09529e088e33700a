//! The logical journal of write-back persist (thesis 4.2.2, 5.3, table 5.1).
//!
//! The journal region is a sequence of blocks. Each starts with a 16-byte header (magic,
//! CRC-32C of the block computed with the CRC field zero, and the *base generation*: the
//! checkpoint generation the journal extends), followed by 16-byte entries:
//!
//! | bits of word 0 | bits of word 1 | entry |
//! |---|---|---|
//! | op 1 (low 12), volume block (16..64) | cache block (0..32), volume (32..48), epoch (48..64) | insert |
//! | op 2, volume block | volume (32..48) | delete |
//! | op 3 | generation | commit |
//!
//! A barrier appends its entries and a commit in new blocks (a block holding a commit is
//! never rewritten, so a torn write cannot destroy an acknowledged barrier), syncs, and is
//! acknowledged. Recovery replays blocks in order while their magic, CRC and base generation
//! are right, applying a barrier's entries only when its commit is found and carries the next
//! generation; the first anything else ends the journal. A checkpoint gets a generation above
//! every commit and restarts the journal at block 0, so replay is idempotent and never applies
//! a block of an earlier cycle.

use super::key::{block_key, key_block, key_volume};
use super::{put_u32, put_u64, Geometry, LayoutError, Le, ENTRY_SIZE};
use crate::device::{io_context, Device};

/// Magic of a journal block ("EMBJ").
pub const MAGIC: u32 = 0x4A42_4D45;
/// Bytes of a block header.
pub const HEADER: usize = 16;
const OP_INSERT: u64 = 1;
const OP_DELETE: u64 = 2;
const OP_COMMIT: u64 = 3;

/// One journal entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JournalEntry {
    /// `key` is dirty in `cache_block`, written in `epoch` (low 16 bits kept).
    Insert {
        /// Block key.
        key: u64,
        /// Cache block.
        cache_block: u32,
        /// Epoch.
        epoch: u16,
    },
    /// `key` is no longer in the dirty map.
    Delete {
        /// Block key.
        key: u64,
    },
    /// The barrier's entries before this one are complete; the map is at `generation`.
    Commit {
        /// Generation.
        generation: u64,
    },
}

impl JournalEntry {
    fn encode(self) -> (u64, u64) {
        match self {
            JournalEntry::Insert { key, cache_block, epoch } => (
                OP_INSERT | (key_block(key) << 16),
                cache_block as u64 | ((key_volume(key) as u64) << 32) | ((epoch as u64) << 48),
            ),
            JournalEntry::Delete { key } => {
                (OP_DELETE | (key_block(key) << 16), (key_volume(key) as u64) << 32)
            }
            JournalEntry::Commit { generation } => (OP_COMMIT, generation),
        }
    }

    fn decode(w0: u64, w1: u64) -> Option<Option<Self>> {
        let block = w0 >> 16;
        let volume = ((w1 >> 32) & 0xFFFF) as u32;
        Some(match w0 & 0xFFF {
            0 => None,
            OP_INSERT => Some(JournalEntry::Insert {
                key: block_key(volume, block),
                cache_block: w1 as u32,
                epoch: (w1 >> 48) as u16,
            }),
            OP_DELETE => Some(JournalEntry::Delete { key: block_key(volume, block) }),
            OP_COMMIT => Some(JournalEntry::Commit { generation: w1 }),
            _ => return None,
        })
    }
}

/// Entries one block holds.
pub fn entries_per_block(block_size: u32) -> usize {
    (block_size as usize - HEADER) / ENTRY_SIZE as usize
}

/// Journal blocks in the region (the volume records at its tail excluded).
pub fn blocks(geometry: &Geometry) -> u64 {
    geometry.journal_bytes() / geometry.block_size as u64
}

/// Blocks a barrier of `entries` entries (plus its commit) takes.
pub fn blocks_for(entries: usize, block_size: u32) -> u64 {
    (entries + 1).div_ceil(entries_per_block(block_size)) as u64
}

/// Encode a barrier: `entries`, then a commit of `generation`, in whole blocks stamped with
/// `base` (the checkpoint generation).
pub fn encode(entries: &[JournalEntry], generation: u64, base: u64, block_size: u32) -> Vec<u8> {
    let bs = block_size as usize;
    let per = entries_per_block(block_size);
    let mut all: Vec<JournalEntry> = entries.to_vec();
    all.push(JournalEntry::Commit { generation });
    let mut out = vec![0u8; all.len().div_ceil(per) * bs];
    for (bi, chunk) in all.chunks(per).enumerate() {
        let b = &mut out[bi * bs..(bi + 1) * bs];
        put_u32(b, 0, MAGIC);
        put_u64(b, 8, base);
        for (i, e) in chunk.iter().enumerate() {
            let (w0, w1) = e.encode();
            let at = HEADER + i * ENTRY_SIZE as usize;
            put_u64(b, at, w0);
            put_u64(b, at + 8, w1);
        }
        let crc = crc32c::crc32c(b);
        put_u32(b, 4, crc);
    }
    out
}

/// What the journal holds past a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replay {
    /// Committed barriers, in order: (generation, entries).
    pub commits: Vec<(u64, Vec<JournalEntry>)>,
    /// Blocks up to and including the last committed barrier.
    pub blocks_used: u64,
}

fn check_block(b: &[u8], base: u64) -> bool {
    let le = Le(b);
    if le.u32(0) != MAGIC || le.u64(8) != base {
        return false;
    }
    let mut copy = b.to_vec();
    put_u32(&mut copy, 4, 0);
    crc32c::crc32c(&copy) == le.u32(4)
}

/// Read the committed barriers that extend the checkpoint of generation `base`.
pub fn replay(dev: &dyn Device, geometry: &Geometry, base: u64) -> Result<Replay, LayoutError> {
    let bs = geometry.block_size as usize;
    let n = blocks(geometry);
    let mut out = Replay::default();
    let mut pending = Vec::new();
    let mut next_gen = base + 1;
    let mut buf = vec![0u8; bs];
    'blocks: for i in 0..n {
        let off = geometry.journal_offset + i * bs as u64;
        dev.read_at(off, &mut buf)
            .map_err(|e| io_context(dev, "journal read", off, bs as u64, e))?;
        if !check_block(&buf, base) {
            break;
        }
        let le = Le(&buf);
        for at in (HEADER..bs).step_by(ENTRY_SIZE as usize) {
            let Some(entry) = JournalEntry::decode(le.u64(at), le.u64(at + 8)) else {
                break 'blocks;
            };
            match entry {
                None => {}
                Some(JournalEntry::Commit { generation }) => {
                    if generation != next_gen {
                        break 'blocks;
                    }
                    out.commits.push((generation, std::mem::take(&mut pending)));
                    out.blocks_used = i + 1;
                    next_gen += 1;
                }
                Some(e) => pending.push(e),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    fn geometry() -> Geometry {
        Geometry::compute(8 << 20, 4096, 1 << 20, 0).unwrap()
    }

    #[test]
    fn entries_are_16_bytes_as_in_table_5_1() {
        // Qin, table 5.1: a 16-byte logical entry, the operation in the low 12 bits.
        let e = JournalEntry::Insert { key: block_key(3, 0xABCDEF), cache_block: 77, epoch: 9 };
        let (w0, w1) = e.encode();
        assert_eq!(w0 & 0xFFF, OP_INSERT);
        assert_eq!(w0 >> 16, 0xABCDEF);
        assert_eq!(JournalEntry::decode(w0, w1), Some(Some(e)));
        assert_eq!(entries_per_block(4096), 255);
    }

    #[test]
    fn replay_applies_committed_barriers_only_and_stops_at_a_torn_block() {
        let g = geometry();
        let dev = MemDevice::new(8 << 20);
        let a: Vec<JournalEntry> = (0..300u64)
            .map(|k| JournalEntry::Insert { key: k, cache_block: k as u32, epoch: 1 })
            .collect();
        let b1 = encode(&a, 8, 7, 4096);
        assert_eq!(b1.len(), 2 * 4096, "301 entries take two blocks");
        dev.write_at(g.journal_offset, &b1).unwrap();
        let b2 = encode(&[JournalEntry::Delete { key: 5 }], 9, 7, 4096);
        dev.write_at(g.journal_offset + 2 * 4096, &b2).unwrap();
        let r = replay(&dev, &g, 7).unwrap();
        assert_eq!(r.commits.len(), 2);
        assert_eq!(r.commits[0].0, 8);
        assert_eq!(r.commits[0].1.len(), 300);
        assert_eq!(r.commits[1].1, vec![JournalEntry::Delete { key: 5 }]);
        assert_eq!(r.blocks_used, 3);
        // Another base generation (an older cycle) is not replayed.
        assert_eq!(replay(&dev, &g, 6).unwrap().commits.len(), 0);
        // A torn second block of the first barrier: nothing is applied.
        dev.write_at(g.journal_offset + 4096 + 700, &[0xEE; 3]).unwrap();
        let r = replay(&dev, &g, 7).unwrap();
        assert_eq!(r.commits.len(), 0);
        assert_eq!(r.blocks_used, 0);
    }

    #[test]
    fn a_commit_out_of_sequence_ends_the_journal() {
        let g = geometry();
        let dev = MemDevice::new(8 << 20);
        dev.write_at(g.journal_offset, &encode(&[], 8, 7, 4096)).unwrap();
        // Generation 10 after 8: a block left from a barrier that is not the next one.
        dev.write_at(g.journal_offset + 4096, &encode(&[], 10, 7, 4096)).unwrap();
        let r = replay(&dev, &g, 7).unwrap();
        assert_eq!(r.commits.iter().map(|c| c.0).collect::<Vec<_>>(), vec![8]);
    }
}
