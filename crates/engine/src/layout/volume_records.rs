//! The volume records (layout version 2): for each slot of the superblock's volume table, the
//! backing as it was given (a path or an NBD URI) and the volume's own settings, as text its
//! writer chose (`ember serve` writes the keys of the volume's `[[volume]]` table as TOML;
//! the engine never reads it). They live in two copies at the tail of the journal region. A
//! change is written to the copy the current superblock does not name and synced; only then
//! does a new superblock name it, with its length, generation and CRC. The superblock stays
//! the one commit point: a crash leaves the records before the change or after it.
//!
//! `volume_records_io.rs` reads and writes them through the superblock.
//!
//! A copy: magic `EMBERVRS` (8), format (4, = 1), slots (4), generation (8), then per slot
//! the backing's length (4) and bytes and the settings' length (4) and bytes. Little-endian.

use super::{put_u32, put_u64, Le};
use serde::Serialize;

/// Magic at the start of a copy.
pub const MAGIC: &[u8; 8] = b"EMBERVRS";
/// The encoding of a copy this code writes and reads.
pub const FORMAT: u32 = 1;
/// Bytes one copy may take, before rounding up to whole blocks.
pub const COPY_BYTES: u64 = 64 << 10;
const HEADER: usize = 24;

/// Bytes of the records area at the tail of a journal region of `journal_len` bytes with
/// blocks of `block_size` bytes: two copies, taken only when the journal keeps at least as
/// much (a journal of at least four copies); else 0, and the cache records no backings.
pub fn records_len_for(block_size: u32, journal_len: u64) -> u64 {
    let bs = u64::from(block_size.max(1));
    let copy = COPY_BYTES.div_ceil(bs) * bs;
    if journal_len >= 4 * copy {
        2 * copy
    } else {
        0
    }
}

/// What the superblock says of the records' current copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecordsPointer {
    /// The copy in force (0 or 1).
    pub copy: u32,
    /// Its length in bytes (0: none written; every slot has an empty record).
    pub len: u32,
    /// Its generation (+ 1 at every write).
    pub generation: u64,
    /// CRC-32C of its `len` bytes.
    pub crc: u32,
}

/// One slot's record: the backing as given and the volume's own settings (empty: none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BackingRecord {
    /// The backing as it was given to `ember serve` or `ember ctl attach` (a path or a URI).
    pub backing: String,
    /// The volume's own settings, as text of its writer's choice (empty: none).
    pub settings: String,
}

impl BackingRecord {
    /// Nothing recorded.
    pub fn is_empty(&self) -> bool {
        self.backing.is_empty() && self.settings.is_empty()
    }
}

/// The bytes of a copy of `records` at `generation`.
pub(crate) fn encode(records: &[&BackingRecord], generation: u64) -> Vec<u8> {
    let mut b = vec![0u8; HEADER];
    b[0..8].copy_from_slice(MAGIC);
    put_u32(&mut b, 8, FORMAT);
    put_u32(&mut b, 12, records.len() as u32);
    put_u64(&mut b, 16, generation);
    for r in records {
        for text in [&r.backing, &r.settings] {
            b.extend_from_slice(&(text.len() as u32).to_le_bytes());
            b.extend_from_slice(text.as_bytes());
        }
    }
    b
}

/// The records of a copy read as `b`, written at `generation`; Err says what is wrong.
pub(crate) fn decode(b: &[u8], generation: u64) -> Result<Vec<BackingRecord>, String> {
    if b.len() < HEADER || &b[0..8] != MAGIC {
        return Err("no records magic".into());
    }
    let le = Le(b);
    if le.u32(8) != FORMAT {
        return Err(format!("records format {} is not supported (this ember reads 1)", le.u32(8)));
    }
    if le.u64(16) != generation {
        return Err(format!("generation {} where the superblock says {generation}", le.u64(16)));
    }
    let slots = le.u32(12) as usize;
    if slots > super::MAX_VOLUMES {
        return Err(format!("{slots} slots"));
    }
    let mut at = HEADER;
    let mut text = || -> Result<String, String> {
        let len = b.get(at..at + 4).ok_or("truncated")?;
        let len = Le(len).u32(0) as usize;
        let bytes = b.get(at + 4..at + 4 + len).ok_or("truncated")?;
        at += 4 + len;
        String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())
    };
    let mut out = Vec::with_capacity(slots);
    for _ in 0..slots {
        let backing = text()?;
        let settings = text()?;
        out.push(BackingRecord { backing, settings });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_round_trips_and_a_wrong_generation_or_format_is_refused() {
        let a =
            BackingRecord { backing: "/dev/sdb".into(), settings: "min-share = \"25%\"".into() };
        let none = BackingRecord::default();
        let b = encode(&[&a, &none], 7);
        assert_eq!(decode(&b, 7).unwrap(), vec![a, none]);
        assert!(decode(&b, 8).unwrap_err().contains("generation"));
        let mut bad = b.clone();
        put_u32(&mut bad, 8, 2);
        assert!(decode(&bad, 7).unwrap_err().contains("format 2"));
        assert!(decode(&b[..b.len() - 1], 7).unwrap_err().contains("truncated"));
    }

    #[test]
    fn the_area_is_taken_only_from_a_journal_that_keeps_as_much() {
        assert_eq!(records_len_for(4096, 4 << 20), 128 << 10);
        assert_eq!(records_len_for(4096, 256 << 10), 128 << 10);
        assert_eq!(records_len_for(4096, 252 << 10), 0);
        assert_eq!(records_len_for(4096, 0), 0);
        assert_eq!(records_len_for(1 << 20, 4 << 20), 2 << 20);
    }
}
