//! VMware vscsi binary traces (vscsiStats -l), versions 1 and 2, as libCacheSim reads them.
//!
//! Records are fixed-size little-endian C structs:
//! version 1 (32 bytes): `u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts`;
//! version 2 (40 bytes): `u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt`.
//! The version is `ver >> 8`; like libCacheSim, the first two records must agree (version 2 is
//! tested first). `lbn` counts 512-byte sectors, `len` is bytes, `ts` is microseconds. SCSI
//! command codes 8, 40, 45, 136, 168 (READ(6/10/12/16) and variants) are reads and 42, 63,
//! 138, 142, 154, 156, 170, 174 (WRITE and WRITE-AND-VERIFY variants) are writes: libCacheSim's
//! two lists exactly. Other commands (libCacheSim's OP_INVALID) are not requests.

use super::{to_length, SECTOR_SIZE};
use crate::{Op, Request};

/// Size of a version 1 record.
pub const V1_RECORD: usize = 32;
/// Size of a version 2 record.
pub const V2_RECORD: usize = 40;

/// The vscsi record layout version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VscsiVersion {
    /// 32-byte records.
    V1,
    /// 40-byte records with response time.
    V2,
}

impl VscsiVersion {
    /// Record size in bytes.
    pub fn record_size(self) -> usize {
        match self {
            VscsiVersion::V1 => V1_RECORD,
            VscsiVersion::V2 => V2_RECORD,
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Detect the version from the first bytes of a file (at least two version 2 records, 80
/// bytes, are needed, as libCacheSim requires).
pub fn detect_version(head: &[u8]) -> Option<VscsiVersion> {
    if head.len() < 2 * V2_RECORD {
        return None;
    }
    if (0..2).all(|i| u16_at(head, i * V2_RECORD + 2) >> 8 == 2) {
        return Some(VscsiVersion::V2);
    }
    if (0..2).all(|i| u16_at(head, i * V1_RECORD + 14) >> 8 == 1) {
        return Some(VscsiVersion::V1);
    }
    None
}

/// The request direction of a SCSI command, as libCacheSim classifies it.
pub fn scsi_op(cmd: u16) -> Option<Op> {
    match cmd {
        40 | 8 | 136 | 45 | 168 => Some(Op::Read),
        42 | 63 | 138 | 142 | 154 | 156 | 170 | 174 => Some(Op::Write),
        _ => None,
    }
}

/// Decodes vscsi records of one version.
#[derive(Clone, Copy, Debug)]
pub struct VscsiDecoder {
    version: VscsiVersion,
}

impl VscsiDecoder {
    /// A decoder for `version` records.
    pub fn new(version: VscsiVersion) -> Self {
        Self { version }
    }

    /// Record size in bytes.
    pub fn record_size(&self) -> usize {
        self.version.record_size()
    }

    /// Decode one record (exactly [`Self::record_size`] bytes); `None` for a command that is
    /// neither a read nor a write.
    pub fn decode(&self, rec: &[u8]) -> Result<Option<Request>, String> {
        let (cmd, len, lbn, ts) = match self.version {
            VscsiVersion::V1 => (u16_at(rec, 12), u32_at(rec, 4), u64_at(rec, 16), u64_at(rec, 24)),
            VscsiVersion::V2 => (u16_at(rec, 0), u32_at(rec, 8), u64_at(rec, 16), u64_at(rec, 24)),
        };
        let Some(op) = scsi_op(cmd) else {
            return Ok(None);
        };
        let offset = lbn
            .checked_mul(SECTOR_SIZE)
            .ok_or_else(|| format!("lbn {lbn} overflows a 64-bit byte offset"))?;
        let time_ns = ts
            .checked_mul(1000)
            .ok_or_else(|| format!("timestamp {ts} us overflows 64-bit nanoseconds"))?;
        Ok(Some(Request { time_ns, volume: 0, op, offset, length: to_length(len as u64, "len")? }))
    }
}

/// Encode a version 1 record (used by tests to build traces by hand).
pub fn encode_v1(sn: u32, len: u32, cmd: u16, lbn: u64, ts_us: u64) -> [u8; V1_RECORD] {
    let mut b = [0u8; V1_RECORD];
    b[0..4].copy_from_slice(&sn.to_le_bytes());
    b[4..8].copy_from_slice(&len.to_le_bytes());
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    b[12..14].copy_from_slice(&cmd.to_le_bytes());
    b[14..16].copy_from_slice(&0x0100u16.to_le_bytes());
    b[16..24].copy_from_slice(&lbn.to_le_bytes());
    b[24..32].copy_from_slice(&ts_us.to_le_bytes());
    b
}

/// Encode a version 2 record (used by tests to build traces by hand).
pub fn encode_v2(sn: u32, len: u32, cmd: u16, lbn: u64, ts_us: u64, rt_us: u64) -> [u8; V2_RECORD] {
    let mut b = [0u8; V2_RECORD];
    b[0..2].copy_from_slice(&cmd.to_le_bytes());
    b[2..4].copy_from_slice(&0x0200u16.to_le_bytes());
    b[4..8].copy_from_slice(&sn.to_le_bytes());
    b[8..12].copy_from_slice(&len.to_le_bytes());
    b[12..16].copy_from_slice(&1u32.to_le_bytes());
    b[16..24].copy_from_slice(&lbn.to_le_bytes());
    b[24..32].copy_from_slice(&ts_us.to_le_bytes());
    b[32..40].copy_from_slice(&rt_us.to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_and_decodes_both_versions() {
        let mut v1 = Vec::new();
        v1.extend_from_slice(&encode_v1(1, 512, 42, 42_932_745, 5_633_898_368_802));
        v1.extend_from_slice(&encode_v1(2, 4096, 40, 10, 5_633_898_611_441));
        v1.extend_from_slice(&encode_v1(3, 4096, 0, 10, 5_633_898_611_442));
        assert_eq!(detect_version(&v1), Some(VscsiVersion::V1));
        let d = VscsiDecoder::new(VscsiVersion::V1);
        let r = d.decode(&v1[..32]).ok().flatten();
        assert_eq!(
            r,
            Some(Request {
                time_ns: 5_633_898_368_802_000,
                volume: 0,
                op: Op::Write,
                offset: 42_932_745 * 512,
                length: 512
            })
        );
        assert_eq!(d.decode(&v1[32..64]).ok().flatten().map(|r| r.op), Some(Op::Read));
        assert_eq!(d.decode(&v1[64..96]), Ok(None));

        let mut v2 = Vec::new();
        v2.extend_from_slice(&encode_v2(1, 8192, 168, 7, 100, 5));
        v2.extend_from_slice(&encode_v2(2, 512, 170, 9, 200, 5));
        assert_eq!(detect_version(&v2), Some(VscsiVersion::V2));
        let d = VscsiDecoder::new(VscsiVersion::V2);
        let r = d.decode(&v2[..40]).ok().flatten();
        assert_eq!(
            r,
            Some(Request {
                time_ns: 100_000,
                volume: 0,
                op: Op::Read,
                offset: 7 * 512,
                length: 8192
            })
        );
        assert_eq!(d.decode(&v2[40..80]).ok().flatten().map(|r| r.op), Some(Op::Write));
    }

    #[test]
    fn rejects_unknown_layouts() {
        assert_eq!(detect_version(&[0u8; 80]), None);
        assert_eq!(detect_version(&[0u8; 40]), None);
        let d = VscsiDecoder::new(VscsiVersion::V1);
        assert!(d.decode(&encode_v1(1, 512, 40, u64::MAX, 1)).is_err());
    }
}
