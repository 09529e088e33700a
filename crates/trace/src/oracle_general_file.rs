//! Whole passes over a libCacheSim oracleGeneral file (uncompressed or compressed): every
//! record in order, decoded in place from the crate's byte source (the mapped file, its pages
//! released behind the pass, or the decompressor's buffer), with no per-record allocation.

use std::path::Path;

use crate::bytes::Bytes;
use crate::error::io_err;
use crate::formats::oracle_general as og;
use crate::TraceError;

/// Bytes of records decoded between two releases of the pages behind the pass.
const STEP_BYTES: usize = og::RECORD_SIZE << 16;

/// Read the block keys of an uncompressed or compressed oracleGeneral file: each record's
/// `obj_id`, which for ember-written files is the [`crate::block_key`]. The fast path for
/// simulation: one pass over the mapped file, no per-record allocation.
pub fn read_oracle_general_keys(path: &Path) -> Result<Vec<u64>, TraceError> {
    let mut bytes = Bytes::open(path)?;
    let mut keys = Vec::with_capacity(bytes.mapped_remaining().unwrap_or(0) / og::RECORD_SIZE);
    each_record(path, &mut bytes, |r| keys.push(r.obj_id))?;
    Ok(keys)
}

/// Read every record of an oracleGeneral file (with clock time, size and next-access vtime).
pub fn read_oracle_general_records(
    path: &Path,
) -> Result<Vec<og::OracleGeneralRecord>, TraceError> {
    let mut recs = Vec::new();
    for_each_oracle_general(path, |r| recs.push(r))?;
    Ok(recs)
}

/// Call `f` on each record of an oracleGeneral file, in order. A file whose size is not a
/// multiple of 24 bytes is malformed (its last record is truncated): `f` sees every whole
/// record before the error.
pub fn for_each_oracle_general(
    path: &Path,
    f: impl FnMut(og::OracleGeneralRecord),
) -> Result<(), TraceError> {
    each_record(path, &mut Bytes::open(path)?, f)
}

fn each_record(
    path: &Path,
    bytes: &mut Bytes,
    mut f: impl FnMut(og::OracleGeneralRecord),
) -> Result<(), TraceError> {
    const RS: usize = og::RECORD_SIZE;
    let mut n = 0u64;
    loop {
        let avail = bytes.fill(RS).map_err(|e| io_err(path, e))?;
        if avail == 0 {
            return Ok(());
        }
        if avail < RS {
            return Err(TraceError::Malformed {
                path: path.to_owned(),
                line: n + 1,
                message: format!("truncated record: {avail} of {RS} bytes"),
            });
        }
        let whole = (avail / RS * RS).min(STEP_BYTES);
        for c in bytes.window()[..whole].chunks_exact(RS) {
            if let Ok(rec) = <&[u8; RS]>::try_from(c) {
                f(og::OracleGeneralRecord::decode(rec));
            }
        }
        n += (whole / RS) as u64;
        bytes.advance(whole);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: u64) -> og::OracleGeneralRecord {
        og::OracleGeneralRecord {
            clock_time: i as u32,
            obj_id: i * 7,
            obj_size: 4096,
            next_access_vtime: -1,
        }
    }

    /// Records across several release steps, plain and compressed, come back in order; a
    /// truncated last record fails after every whole one, naming its record number.
    #[test]
    fn every_record_in_order_then_the_truncated_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let n = 3 * (STEP_BYTES / og::RECORD_SIZE) as u64 + 17;
        let mut bytes: Vec<u8> = (0..n).flat_map(|i| record(i).encode()).collect();
        let plain = dir.path().join("t.oracleGeneral.bin");
        std::fs::write(&plain, &bytes).expect("write");
        let zst = dir.path().join("t.oracleGeneral.bin.zst");
        std::fs::write(&zst, zstd::encode_all(&bytes[..], 1).expect("zstd")).expect("write");
        let want: Vec<u64> = (0..n).map(|i| i * 7).collect();
        for p in [&plain, &zst] {
            assert_eq!(read_oracle_general_keys(p).expect("keys"), want, "{}", p.display());
            let recs = read_oracle_general_records(p).expect("records");
            assert_eq!(recs.len() as u64, n);
            assert_eq!(recs[5], record(5));
        }
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&plain, &bytes).expect("write");
        let mut seen = 0u64;
        let e = for_each_oracle_general(&plain, |_| seen += 1).expect_err("truncated");
        assert_eq!(seen, n);
        let msg = e.to_string();
        assert!(msg.contains(&format!(":{}:", n + 1)) && msg.contains("3 of 24"), "{msg}");
        let empty = dir.path().join("e.oracleGeneral.bin");
        std::fs::write(&empty, b"").expect("write");
        assert_eq!(read_oracle_general_keys(&empty).expect("empty"), Vec::<u64>::new());
    }
}
