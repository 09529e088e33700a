//! Entry point for the coverage-guided fuzz target `layout` in `fuzz/` and for the corpus
//! replay test (`tests/fuzz_corpus.rs`); not part of ember's API. See docs/design/testing.md.
//!
//! An input describes a cache device image compactly:
//!
//! ```text
//! bytes 0..4096      superblock slot 0      (zero-padded when short)
//! bytes 4096..8192   superblock slot 1
//! 4 bytes, LE        length L of the checkpoint region
//! L bytes            placed at the current superblock's checkpoint slot (header block, entries)
//! the rest           placed at the journal offset
//! ```
//!
//! Everything else reads as zeros. The device is as large as the current superblock says
//! (at most [`MAX_DEVICE`]). So that a fuzzer gets past the checksums, a CRC field that is
//! zero in the input is filled in with the right value (superblock CRC and its checkpoint
//! CRC, checkpoint header CRC and fields, journal block CRCs); a non-zero one is kept.

use std::collections::BTreeMap;
use std::io;

use crate::device::Device;
use crate::layout::journal;
use crate::layout::superblock::NO_CHECKPOINT;
use crate::layout::{Checkpoint, Superblock, SUPERBLOCK_SIZE};
use crate::Engine;

/// Largest device an input may describe (bigger claims get a device of this size).
pub const MAX_DEVICE: u64 = 1 << 30;

const SB: usize = SUPERBLOCK_SIZE as usize;
const SB_CRC_AT: usize = SB - 4;
/// Where a superblock keeps the CRC of its checkpoint's entries.
const SB_CHECKPOINT_CRC_AT: usize = 176;

/// A sparse device: zeros, with byte regions laid over them.
struct SparseDevice {
    size: u64,
    regions: BTreeMap<u64, Vec<u8>>,
}

impl Device for SparseDevice {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= self.size);
        let Some(end) = end else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "read beyond the device"));
        };
        buf.fill(0);
        for (&at, bytes) in &self.regions {
            let r_end = at + bytes.len() as u64;
            if r_end <= offset || at >= end {
                continue;
            }
            let from = at.max(offset);
            let to = r_end.min(end);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&bytes[(from - at) as usize..(to - at) as usize]);
        }
        Ok(())
    }

    fn write_at(&self, _offset: u64, _data: &[u8]) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::PermissionDenied, "the fuzzed device is read-only"))
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn trim(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::PermissionDenied, "the fuzzed device is read-only"))
    }

    fn describe(&self) -> String {
        "fuzz image".into()
    }
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Fill in a zero CRC field at `at` with the CRC-32C of `b[..at]`.
fn fix_crc_prefix(b: &mut [u8], at: usize) {
    if le32(b, at) == 0 {
        let crc = crc32c::crc32c(&b[..at]);
        put32(b, at, crc);
    }
}

fn slot(input: &[u8], n: usize) -> Vec<u8> {
    let mut b = vec![0u8; SB];
    let from = (n * SB).min(input.len());
    let to = ((n + 1) * SB).min(input.len());
    b[..to - from].copy_from_slice(&input[from..to]);
    b
}

/// Build the device image an input describes (see the module documentation).
fn image(input: &[u8]) -> SparseDevice {
    let mut slots = [slot(input, 0), slot(input, 1)];
    let rest = input.get(2 * SB..).unwrap_or(&[]);
    let (checkpoint, journal_bytes) = match rest {
        [a, b, c, d, tail @ ..] => {
            let len = (u32::from_le_bytes([*a, *b, *c, *d]) as usize).min(tail.len());
            tail.split_at(len)
        }
        _ => (&[][..], rest),
    };
    let mut checkpoint = checkpoint.to_vec();

    // The superblock the engine will pick: the valid slot with the highest sequence.
    let decode = |b: &[u8]| {
        let mut b = b.to_vec();
        fix_crc_prefix(&mut b, SB_CRC_AT);
        Superblock::decode(&b).ok()
    };
    let current =
        [decode(&slots[0]), decode(&slots[1])].into_iter().flatten().max_by_key(|s| s.sequence);

    let mut regions = BTreeMap::new();
    let mut size = (2 * SB) as u64;
    if let Some(sb) = &current {
        size = sb.device_size.clamp(size, MAX_DEVICE);
        let bs = sb.geometry.block_size as usize;
        // (More entries than data blocks, or a device larger than the image, are refused
        // before any checkpoint CRC is computed.)
        let entries_fit =
            sb.checkpoint_entries <= sb.geometry.data_blocks && sb.device_size <= MAX_DEVICE;
        if sb.checkpoint_slot != NO_CHECKPOINT && entries_fit && checkpoint.len() >= 32 {
            // Entries CRC, then the header fields and CRC, then the superblocks' copy.
            let body_len = sb.checkpoint_entries as usize * 16;
            let mut body = checkpoint.get(bs..).unwrap_or(&[]).to_vec();
            body.resize(body_len, 0);
            let body_crc = crc32c::crc32c(&body);
            if checkpoint[8..28].iter().all(|&x| x == 0) {
                checkpoint[8..16].copy_from_slice(&sb.checkpoint_generation.to_le_bytes());
                checkpoint[16..24].copy_from_slice(&sb.checkpoint_entries.to_le_bytes());
                put32(&mut checkpoint, 24, body_crc);
            }
            fix_crc_prefix(&mut checkpoint, 28);
            for s in &mut slots {
                if le32(s, SB_CHECKPOINT_CRC_AT) == 0 && le32(s, SB_CRC_AT) == 0 {
                    put32(s, SB_CHECKPOINT_CRC_AT, body_crc);
                }
            }
            regions.insert(sb.geometry.checkpoint_offset(sb.checkpoint_slot), checkpoint);
        }
        if bs >= 8 {
            let mut journal_bytes = journal_bytes.to_vec();
            for block in journal_bytes.chunks_mut(bs) {
                if block.len() == bs && le32(block, 4) == 0 {
                    let crc = crc32c::crc32c(block);
                    put32(block, 4, crc);
                }
            }
            regions.insert(sb.geometry.journal_offset, journal_bytes);
        }
    }
    for s in &mut slots {
        fix_crc_prefix(s, SB_CRC_AT);
    }
    let [s0, s1] = slots;
    regions.insert(0, s0);
    regions.insert(SB as u64, s1);
    SparseDevice { size, regions }
}

/// What the layout decoders made of one input.
#[derive(Debug, Default)]
pub struct LayoutOutcome {
    /// `ember cache inspect` succeeded.
    pub inspected: bool,
    /// The current superblock names a checkpoint that decoded.
    pub checkpoint_entries: Option<usize>,
    /// Barriers committed in the journal past that checkpoint.
    pub journal_commits: Option<usize>,
    /// The message of the first error, if any.
    pub error: Option<String>,
}

/// Decode the device image `input` describes through every layout decoder, as `ember cache
/// inspect` and a start do: [`Superblock::read`], [`Engine::inspect`] (which recovers a
/// persisted dirty map), [`Checkpoint::read`] and [`journal::replay`].
///
/// Checks (a panic means a bug): a superblock that decodes is re-encoded to bytes that
/// decode to the same superblock.
pub fn decode_layout(input: &[u8]) -> LayoutOutcome {
    let dev = image(input);
    let mut outcome = LayoutOutcome::default();
    match Engine::inspect(&dev) {
        Ok(_) => outcome.inspected = true,
        Err(e) => outcome.error = Some(e.to_string()),
    }
    let sb = match Superblock::read(&dev) {
        Ok(sb) => sb,
        Err(e) => {
            outcome.error.get_or_insert(e.to_string());
            return outcome;
        }
    };
    check_geometry(&sb);
    if let Ok(bytes) = sb.encode() {
        let again = Superblock::decode(&bytes)
            .unwrap_or_else(|e| panic!("a re-encoded superblock does not decode: {e}"));
        assert_eq!(again, sb, "a superblock changed in an encode/decode round trip");
    }
    if sb.checkpoint_slot != NO_CHECKPOINT {
        match Checkpoint::read(
            &dev,
            &sb.geometry,
            sb.checkpoint_slot,
            sb.checkpoint_generation,
            sb.checkpoint_entries,
            sb.checkpoint_crc,
        ) {
            Ok(cp) => outcome.checkpoint_entries = Some(cp.entries.len()),
            Err(e) => {
                outcome.error.get_or_insert(e.to_string());
            }
        }
    }
    match journal::replay(&dev, &sb.geometry, sb.checkpoint_generation) {
        Ok(r) => outcome.journal_commits = Some(r.commits.len()),
        Err(e) => {
            outcome.error.get_or_insert(e.to_string());
        }
    }
    outcome
}

/// A geometry the decoder accepted must be sound: regions in order, without overlap, and
/// inside the device (computed without overflow).
fn check_geometry(sb: &Superblock) {
    let g = &sb.geometry;
    let bs = u64::from(g.block_size);
    let sound = (|| {
        let a_end = g.checkpoint_a.checked_add(g.checkpoint_len)?;
        let b_end = g.checkpoint_b.checked_add(g.checkpoint_len)?;
        let j_end = g.journal_offset.checked_add(g.journal_len)?;
        let w_end = g.warmup_offset.checked_add(g.warmup_len)?;
        let d_end = g.data_offset.checked_add(g.data_blocks.checked_mul(bs)?)?;
        let entries = g.data_blocks.checked_mul(crate::layout::ENTRY_SIZE)?.checked_add(bs)?;
        Some(
            g.checkpoint_a >= 2 * SUPERBLOCK_SIZE
                && g.checkpoint_len >= entries
                && g.checkpoint_b >= a_end
                && g.journal_offset >= b_end
                && g.warmup_offset >= j_end
                && g.data_offset >= w_end
                && d_end <= sb.device_size,
        )
    })();
    assert_eq!(sound, Some(true), "the decoder accepted an unsound geometry: {g:?}");
}

/// The input that describes `device` (a formatted cache image): its two superblock slots,
/// the current checkpoint's header and entries, and `journal_blocks` blocks of journal. For
/// seeding the corpus.
pub fn input_from_device(device: &dyn Device, journal_blocks: u64) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; 2 * SB];
    device.read_at(0, &mut out)?;
    let sb = Superblock::read(device).map_err(|e| io::Error::other(e.to_string()))?;
    let bs = u64::from(sb.geometry.block_size);
    let mut checkpoint = Vec::new();
    if sb.checkpoint_slot != NO_CHECKPOINT {
        checkpoint = vec![0u8; (bs + sb.checkpoint_entries * 16) as usize];
        device.read_at(sb.geometry.checkpoint_offset(sb.checkpoint_slot), &mut checkpoint)?;
    }
    out.extend_from_slice(&(checkpoint.len() as u32).to_le_bytes());
    out.extend_from_slice(&checkpoint);
    let blocks = journal_blocks.min(journal::blocks(&sb.geometry));
    let mut journal_bytes = vec![0u8; (blocks * bs) as usize];
    device.read_at(sb.geometry.journal_offset, &mut journal_bytes)?;
    out.extend_from_slice(&journal_bytes);
    Ok(out)
}
