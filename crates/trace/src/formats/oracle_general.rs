//! libCacheSim's oracleGeneral binary format (`*.oracleGeneral.bin`).
//!
//! Packed little-endian 24-byte records `{u32 clock_time, u64 obj_id, u32 obj_size,
//! i64 next_access_vtime}` (libCacheSim `oracleGeneralBin.h`). `clock_time` is seconds.
//! `next_access_vtime` is the 1-based position in the file of the next record with the same
//! `obj_id` — record *i* (0-based) whose object is next accessed at record *j* stores *j + 1* —
//! and -1 when the object is never accessed again (libCacheSim `traceConvOracleGeneral.cpp`,
//! which numbers requests from the end and then flips: `n_req - (n_req - 1 - j)`).
//!
//! ember reads each record as one block access: volume `obj_id >> 48`, block
//! `obj_id & MAX_BLOCK_INDEX` (so `obj_id` is exactly the [`crate::block_key`]), offset
//! `block * block_size`, length `block_size`, a read (the format has no op), time
//! `clock_time` seconds. ember writes each block access of a trace as one record with
//! `obj_id = block_key(volume, block)` and `obj_size = block_size`.

use std::collections::HashMap;
use std::io::Write;

use crate::{key_block, key_volume, Op, Request, Trace, VolumeTable};

/// Size of one record in bytes.
pub const RECORD_SIZE: usize = 24;

/// `next_access_vtime` of an object never accessed again.
pub const NO_NEXT_ACCESS: i64 = -1;

/// One oracleGeneral record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OracleGeneralRecord {
    /// Seconds.
    pub clock_time: u32,
    /// Object id (for ember, a block key).
    pub obj_id: u64,
    /// Object size in bytes.
    pub obj_size: u32,
    /// 1-based record number of the next access to `obj_id`, or [`NO_NEXT_ACCESS`].
    pub next_access_vtime: i64,
}

impl OracleGeneralRecord {
    /// Decode exactly [`RECORD_SIZE`] bytes.
    #[inline]
    pub fn decode(b: &[u8; RECORD_SIZE]) -> Self {
        let [t0, t1, t2, t3, i0, i1, i2, i3, i4, i5, i6, i7, s0, s1, s2, s3, n0, n1, n2, n3, n4, n5, n6, n7] =
            *b;
        Self {
            clock_time: u32::from_le_bytes([t0, t1, t2, t3]),
            obj_id: u64::from_le_bytes([i0, i1, i2, i3, i4, i5, i6, i7]),
            obj_size: u32::from_le_bytes([s0, s1, s2, s3]),
            next_access_vtime: i64::from_le_bytes([n0, n1, n2, n3, n4, n5, n6, n7]),
        }
    }

    /// Encode to [`RECORD_SIZE`] bytes.
    #[inline]
    pub fn encode(&self) -> [u8; RECORD_SIZE] {
        let mut b = [0u8; RECORD_SIZE];
        b[0..4].copy_from_slice(&self.clock_time.to_le_bytes());
        b[4..12].copy_from_slice(&self.obj_id.to_le_bytes());
        b[12..16].copy_from_slice(&self.obj_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.next_access_vtime.to_le_bytes());
        b
    }
}

/// The `obj_id` of record `j` of `records` (whole records back to back), which ember reads
/// as the block key; `None` past the end.
#[inline(always)]
pub fn record_key(records: &[u8], j: usize) -> Option<u64> {
    let at = j.checked_mul(RECORD_SIZE)?.checked_add(4)?;
    let b: [u8; 8] = records.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// Decodes oracleGeneral records into block-sized read requests.
#[derive(Clone, Copy, Debug)]
pub struct OracleGeneralDecoder {
    block_size: u64,
}

impl OracleGeneralDecoder {
    /// A decoder producing requests of `block_size` bytes.
    pub fn new(block_size: u64) -> Self {
        Self { block_size }
    }

    /// Decode one record. Volume ids are numbered: the table gets names `"0"`, `"1"`, … up to
    /// the largest volume seen.
    #[inline]
    pub fn decode(
        &self,
        rec: &[u8; RECORD_SIZE],
        volumes: &mut VolumeTable,
    ) -> Result<Request, String> {
        let r = OracleGeneralRecord::decode(rec);
        let volume = key_volume(r.obj_id);
        if volume as usize >= volumes.len() {
            for v in volumes.len()..=volume as usize {
                volumes.intern(&v.to_string());
            }
        }
        let block = key_block(r.obj_id);
        let offset = block.checked_mul(self.block_size).ok_or_else(|| {
            format!("obj_id {} block {block} overflows a 64-bit byte offset", r.obj_id)
        })?;
        Ok(Request {
            time_ns: r.clock_time as u64 * 1_000_000_000,
            volume,
            op: Op::Read,
            offset,
            length: self.block_size as u32,
        })
    }
}

/// The `next_access_vtime` of each access in `keys`, as libCacheSim's converter writes it:
/// the 1-based index of the next access to the same key, or -1.
pub fn next_access_vtimes(keys: &[u64]) -> Vec<i64> {
    let mut next = vec![NO_NEXT_ACCESS; keys.len()];
    let mut seen: HashMap<u64, i64> = HashMap::with_capacity(keys.len() / 4 + 16);
    for (i, &k) in keys.iter().enumerate().rev() {
        if let Some(&j) = seen.get(&k) {
            next[i] = j + 1;
        }
        seen.insert(k, i as i64);
    }
    next
}

/// Write `trace` as oracleGeneral records, one per block access. Fails (as an I/O error of
/// kind InvalidInput) if a time exceeds the format's 32-bit seconds.
pub fn write_trace(out: &mut dyn Write, trace: &Trace, block_size: u64) -> std::io::Result<()> {
    let mut keys = Vec::new();
    let mut secs = Vec::new();
    for r in &trace.requests {
        let s = r.time_ns / 1_000_000_000;
        let s = u32::try_from(s).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("time {s} s does not fit oracleGeneral's 32-bit clock_time"),
            )
        })?;
        for k in r.block_keys(block_size) {
            keys.push(k);
            secs.push(s);
        }
    }
    let next = next_access_vtimes(&keys);
    for i in 0..keys.len() {
        let rec = OracleGeneralRecord {
            clock_time: secs[i],
            obj_id: keys[i],
            obj_size: block_size as u32,
            next_access_vtime: next[i],
        };
        out.write_all(&rec.encode())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_key;

    #[test]
    fn next_access_is_one_based_forward_index() {
        // keys a b a c b: a@0 -> next at index 2 -> 3; b@1 -> 4 -> 5; others never.
        let keys = [10, 20, 10, 30, 20];
        assert_eq!(next_access_vtimes(&keys), vec![3, 5, -1, -1, -1]);
    }

    #[test]
    fn records_round_trip_and_decode_to_blocks() {
        let rec = OracleGeneralRecord {
            clock_time: 5_633_898,
            obj_id: block_key(3, 42),
            obj_size: 4096,
            next_access_vtime: 7,
        };
        let b = rec.encode();
        assert_eq!(OracleGeneralRecord::decode(&b), rec);
        // Layout check against the packed struct: obj_id starts at byte 4.
        assert_eq!(&b[4..12], &block_key(3, 42).to_le_bytes());
        let mut v = VolumeTable::new();
        let r = OracleGeneralDecoder::new(4096).decode(&b, &mut v);
        assert_eq!(
            r,
            Ok(Request {
                time_ns: 5_633_898_000_000_000,
                volume: 3,
                op: Op::Read,
                offset: 42 * 4096,
                length: 4096
            })
        );
        assert_eq!(v.len(), 4);
        assert_eq!(v.name(3), "3");
    }

    #[test]
    fn writes_one_record_per_block_access() {
        let mut vt = VolumeTable::new();
        vt.intern("a");
        let reqs = vec![
            Request { time_ns: 1_500_000_000, volume: 0, op: Op::Write, offset: 0, length: 8192 },
            Request { time_ns: 2_000_000_000, volume: 0, op: Op::Read, offset: 4096, length: 4096 },
        ];
        let mut out = Vec::new();
        let res = write_trace(&mut out, &Trace::new(reqs, vt), 4096);
        assert!(res.is_ok());
        assert_eq!(out.len(), 3 * RECORD_SIZE);
        let rec = |i: usize| {
            let mut a = [0u8; RECORD_SIZE];
            a.copy_from_slice(&out[i * RECORD_SIZE..(i + 1) * RECORD_SIZE]);
            OracleGeneralRecord::decode(&a)
        };
        assert_eq!(
            rec(0),
            OracleGeneralRecord { clock_time: 1, obj_id: 0, obj_size: 4096, next_access_vtime: -1 }
        );
        assert_eq!(
            rec(1),
            OracleGeneralRecord { clock_time: 1, obj_id: 1, obj_size: 4096, next_access_vtime: 3 }
        );
        assert_eq!(
            rec(2),
            OracleGeneralRecord { clock_time: 2, obj_id: 1, obj_size: 4096, next_access_vtime: -1 }
        );
    }
}
