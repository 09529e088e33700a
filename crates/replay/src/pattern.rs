//! The verifiable write pattern. Every 512-byte sector the replayer writes starts with a
//! 32-byte stamp — magic, sector address, write generation, export index, run seed — and the
//! remaining 480 bytes are a pseudo-random stream derived from the stamp. Knowing which
//! generation a sector must hold, the replayer can compute exactly what a read must return;
//! a sector that differs is decoded to say what was found instead (zeros, a stale generation,
//! another sector's data, foreign bytes).

use std::fmt;

/// The verification unit.
pub const SECTOR: usize = 512;
/// First bytes of every stamped sector.
pub const MAGIC: [u8; 8] = *b"EMBERRPL";
const HEADER: usize = 32;

/// Which write a sector holds: generation 0 is the prefill, generation `n > 0` is the write
/// of planned request `n - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Sector address (byte offset / 512) within the export.
    pub sector: u64,
    /// Write generation.
    pub generation: u32,
    /// Export index in the replay.
    pub export: u32,
    /// The run's seed.
    pub seed: u64,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn body_seed(s: &Stamp) -> u64 {
    let mut x = s.seed ^ s.sector.wrapping_mul(0x2545_f491_4f6c_dd1d);
    x ^= u64::from(s.generation).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
    x ^= u64::from(s.export).rotate_left(41);
    splitmix(&mut x)
}

/// Fill one sector (`buf.len() == SECTOR`) with the stamp and its body.
pub fn fill_sector(buf: &mut [u8], stamp: &Stamp) {
    buf[0..8].copy_from_slice(&MAGIC);
    buf[8..16].copy_from_slice(&stamp.sector.to_le_bytes());
    buf[16..20].copy_from_slice(&stamp.generation.to_le_bytes());
    buf[20..24].copy_from_slice(&stamp.export.to_le_bytes());
    buf[24..32].copy_from_slice(&stamp.seed.to_le_bytes());
    let mut state = body_seed(stamp);
    for word in buf[HEADER..SECTOR].chunks_exact_mut(8) {
        word.copy_from_slice(&splitmix(&mut state).to_le_bytes());
    }
}

/// Fill `buf` (a multiple of [`SECTOR`]) with consecutive sectors from `first_sector`, all of
/// one generation.
pub fn fill(buf: &mut [u8], export: u32, first_sector: u64, generation: u32, seed: u64) {
    for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
        fill_sector(sector, &Stamp { sector: first_sector + i as u64, generation, export, seed });
    }
}

/// What a mismatching sector held instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// All zero bytes (never written, or trimmed).
    Zeros,
    /// A valid stamp and body, but of another write (stale data, or misdirected I/O).
    Stamp(Stamp),
    /// The right stamp header but a corrupted body.
    CorruptBody(Stamp),
    /// Bytes that are not a stamp.
    Foreign,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Zeros => f.write_str("zeros"),
            Found::Stamp(s) => write!(
                f,
                "sector {} generation {} of export {} (seed {:#x})",
                s.sector, s.generation, s.export, s.seed
            ),
            Found::CorruptBody(s) => write!(
                f,
                "a corrupted body under the stamp of sector {} generation {}",
                s.sector, s.generation
            ),
            Found::Foreign => f.write_str("bytes that are not a replay stamp"),
        }
    }
}

/// The stamp at the start of `sector`, if it carries one.
pub fn decode(sector: &[u8]) -> Option<Stamp> {
    if sector.len() < HEADER || sector[0..8] != MAGIC {
        return None;
    }
    let u64_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&sector[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let u32_at = |i: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&sector[i..i + 4]);
        u32::from_le_bytes(b)
    };
    Some(Stamp { sector: u64_at(8), generation: u32_at(16), export: u32_at(20), seed: u64_at(24) })
}

/// Check that `sector` holds exactly what [`fill_sector`] writes for `expected`.
pub fn check_sector(sector: &[u8], expected: &Stamp) -> Result<(), Found> {
    let mut want = [0u8; SECTOR];
    fill_sector(&mut want, expected);
    if sector == want.as_slice() {
        return Ok(());
    }
    if sector.iter().all(|&b| b == 0) {
        return Err(Found::Zeros);
    }
    match decode(sector) {
        None => Err(Found::Foreign),
        Some(stamp) => {
            let mut theirs = [0u8; SECTOR];
            fill_sector(&mut theirs, &stamp);
            if sector == theirs.as_slice() {
                Err(Found::Stamp(stamp))
            } else {
                Err(Found::CorruptBody(stamp))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(sector: u64, generation: u32) -> Stamp {
        Stamp { sector, generation, export: 1, seed: 42 }
    }

    #[test]
    fn a_filled_sector_checks_and_decodes() {
        let mut buf = vec![0u8; SECTOR];
        fill_sector(&mut buf, &stamp(7, 3));
        assert_eq!(check_sector(&buf, &stamp(7, 3)), Ok(()));
        assert_eq!(decode(&buf), Some(stamp(7, 3)));
    }

    #[test]
    fn every_field_changes_the_content() {
        let mut a = vec![0u8; SECTOR];
        fill_sector(&mut a, &stamp(7, 3));
        for other in [
            stamp(8, 3),
            stamp(7, 4),
            Stamp { export: 2, ..stamp(7, 3) },
            Stamp { seed: 43, ..stamp(7, 3) },
        ] {
            let mut b = vec![0u8; SECTOR];
            fill_sector(&mut b, &other);
            assert_ne!(a[HEADER..], b[HEADER..], "body must depend on {other:?}");
        }
    }

    #[test]
    fn mismatches_say_what_was_found() {
        let mut buf = vec![0u8; SECTOR];
        assert_eq!(check_sector(&buf, &stamp(7, 3)), Err(Found::Zeros));
        fill_sector(&mut buf, &stamp(7, 2));
        assert_eq!(check_sector(&buf, &stamp(7, 3)), Err(Found::Stamp(stamp(7, 2))));
        buf[300] ^= 1;
        assert_eq!(check_sector(&buf, &stamp(7, 2)), Err(Found::CorruptBody(stamp(7, 2))));
        buf[0] = b'X';
        assert_eq!(check_sector(&buf, &stamp(7, 2)), Err(Found::Foreign));
    }

    #[test]
    fn fill_stamps_consecutive_sectors() {
        let mut buf = vec![0u8; 4 * SECTOR];
        fill(&mut buf, 1, 100, 9, 42);
        for (i, s) in buf.chunks_exact(SECTOR).enumerate() {
            assert_eq!(check_sector(s, &stamp(100 + i as u64, 9)), Ok(()));
        }
    }
}
