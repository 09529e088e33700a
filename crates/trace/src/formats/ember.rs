//! ember's own compact binary trace format (`.ember`), the fastest to read.
//!
//! Layout (all integers little-endian; described in docs/reference/trace-formats.md):
//!
//! ```text
//! header:  magic "EMBERTRC" (8 bytes) | u32 version = 1 | u32 record_size = 24
//!          | u64 record_count (u64::MAX = unknown: stream ended without patching)
//!          | u32 volume_count | volume_count × (u32 name_len | name bytes, UTF-8)
//! records: record_count × { u64 time_ns | u64 offset | u32 length | u32 volume_op }
//! ```
//!
//! `volume_op` holds the volume id in bits 0..31 and the op in bit 31 (1 = write). Records run
//! to the end of the file; when `record_count` is known, a file with another number of records
//! is malformed.

use std::io::{Read, Write};
use std::path::Path;

use crate::{Op, Request, TraceError, VolumeTable};

/// The first eight bytes of every ember trace.
pub const MAGIC: [u8; 8] = *b"EMBERTRC";
/// The format version this code reads and writes.
pub const VERSION: u32 = 1;
/// Bytes per record.
pub const RECORD_SIZE: usize = 24;
/// `record_count` of a file whose writer did not know the count.
pub const UNKNOWN_COUNT: u64 = u64::MAX;
/// Bit of `volume_op` set for writes.
pub(crate) const WRITE_BIT: u32 = 1 << 31;
/// Longest volume name accepted, a guard against reading garbage as a length.
const MAX_NAME: u32 = 4096;

/// The parsed header of an ember trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Number of records, if the writer knew it.
    pub record_count: Option<u64>,
    /// The volume names.
    pub volumes: VolumeTable,
    /// Length of the header in bytes (records start here).
    pub len: usize,
}

/// Why a header could not be read.
#[derive(Debug)]
pub enum HeaderError {
    /// The input failed or ended early.
    Io(std::io::Error),
    /// The bytes are not a valid header.
    Bad(String),
}

impl HeaderError {
    /// This error as a [`TraceError`] of the file `path`: a header cut short is a format
    /// error ("ember header is truncated"), another I/O error stays an I/O error, a bad
    /// header is a format error saying why.
    pub fn into_trace_error(self, path: &Path) -> TraceError {
        match self {
            HeaderError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                TraceError::Format {
                    path: path.to_owned(),
                    message: "ember header is truncated".into(),
                }
            }
            HeaderError::Io(source) => TraceError::Io { path: path.to_owned(), source },
            HeaderError::Bad(message) => TraceError::Format { path: path.to_owned(), message },
        }
    }
}

/// What is wrong with a file that ends after `got` records when its header promises
/// `promised` (`None`: the writer did not know the count, and any number is right).
pub fn missing_records(got: u64, promised: Option<u64>) -> Option<String> {
    match promised {
        Some(want) if want != got => {
            Some(format!("file ends after {got} records but its header promises {want}"))
        }
        _ => None,
    }
}

fn read_u32(r: &mut dyn Read) -> Result<u32, HeaderError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).map_err(HeaderError::Io)?;
    Ok(u32::from_le_bytes(b))
}

/// Read a header from the start of `r`.
pub fn read_header(r: &mut dyn Read) -> Result<Header, HeaderError> {
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic).map_err(HeaderError::Io)?;
    if magic != MAGIC {
        return Err(HeaderError::Bad("not an ember trace (bad magic)".into()));
    }
    let version = read_u32(r)?;
    if version != VERSION {
        return Err(HeaderError::Bad(format!(
            "ember trace version {version} is not supported (this reader knows {VERSION})"
        )));
    }
    let rs = read_u32(r)?;
    if rs as usize != RECORD_SIZE {
        return Err(HeaderError::Bad(format!("record size {rs} is not {RECORD_SIZE}")));
    }
    let mut cb = [0u8; 8];
    r.read_exact(&mut cb).map_err(HeaderError::Io)?;
    let count = u64::from_le_bytes(cb);
    let n = read_u32(r)?;
    let mut volumes = VolumeTable::new();
    let mut len = 8 + 4 + 4 + 8 + 4;
    for i in 0..n {
        let l = read_u32(r)?;
        if l > MAX_NAME {
            return Err(HeaderError::Bad(format!("volume {i} name length {l} exceeds {MAX_NAME}")));
        }
        let mut name = vec![0u8; l as usize];
        r.read_exact(&mut name).map_err(HeaderError::Io)?;
        let name = String::from_utf8(name)
            .map_err(|_| HeaderError::Bad(format!("volume {i} name is not UTF-8")))?;
        if volumes.intern(&name) != i {
            return Err(HeaderError::Bad(format!("volume name {name:?} appears twice")));
        }
        len += 4 + l as usize;
    }
    Ok(Header { record_count: (count != UNKNOWN_COUNT).then_some(count), volumes, len })
}

/// Write a header.
pub fn write_header(
    out: &mut dyn Write,
    volumes: &VolumeTable,
    record_count: Option<u64>,
) -> std::io::Result<()> {
    out.write_all(&MAGIC)?;
    out.write_all(&VERSION.to_le_bytes())?;
    out.write_all(&(RECORD_SIZE as u32).to_le_bytes())?;
    out.write_all(&record_count.unwrap_or(UNKNOWN_COUNT).to_le_bytes())?;
    out.write_all(&(volumes.len() as u32).to_le_bytes())?;
    for name in volumes.names() {
        out.write_all(&(name.len() as u32).to_le_bytes())?;
        out.write_all(name.as_bytes())?;
    }
    Ok(())
}

/// Byte offset of `record_count` in the header (for patching after streaming).
pub const COUNT_OFFSET: u64 = 16;

/// Encode one request.
#[inline]
pub fn encode(r: &Request) -> [u8; RECORD_SIZE] {
    let mut b = [0u8; RECORD_SIZE];
    b[0..8].copy_from_slice(&r.time_ns.to_le_bytes());
    b[8..16].copy_from_slice(&r.offset.to_le_bytes());
    b[16..20].copy_from_slice(&r.length.to_le_bytes());
    let vo = r.volume | if r.op.is_write() { WRITE_BIT } else { 0 };
    b[20..24].copy_from_slice(&vo.to_le_bytes());
    b
}

/// Decode one record; the volume must be in the header's table of `n_volumes`.
#[inline]
pub fn decode(b: &[u8; RECORD_SIZE], n_volumes: u32) -> Result<Request, String> {
    let [t0, t1, t2, t3, t4, t5, t6, t7, o0, o1, o2, o3, o4, o5, o6, o7, l0, l1, l2, l3, v0, v1, v2, v3] =
        *b;
    let vo = u32::from_le_bytes([v0, v1, v2, v3]);
    let volume = vo & !WRITE_BIT;
    if volume >= n_volumes {
        return Err(format!("volume id {volume} is not in the header's table of {n_volumes}"));
    }
    Ok(Request {
        time_ns: u64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
        offset: u64::from_le_bytes([o0, o1, o2, o3, o4, o5, o6, o7]),
        length: u32::from_le_bytes([l0, l1, l2, l3]),
        volume,
        op: if vo & WRITE_BIT != 0 { Op::Write } else { Op::Read },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_records_round_trip() {
        let mut v = VolumeTable::new();
        v.intern("web_0");
        v.intern("prxy_1");
        let mut out = Vec::new();
        assert!(write_header(&mut out, &v, Some(2)).is_ok());
        let h = read_header(&mut out.as_slice());
        let h = match h {
            Ok(h) => h,
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(h.len, out.len());
        assert_eq!(h.len, 28 + 4 + 5 + 4 + 6);
        assert_eq!(h.record_count, Some(2));
        assert_eq!(h.volumes, v);
        let r = Request { time_ns: 7, volume: 1, op: Op::Write, offset: 1 << 40, length: 65536 };
        assert_eq!(decode(&encode(&r), 2), Ok(r));
        assert!(decode(&encode(&r), 1).is_err());
    }

    #[test]
    fn rejects_bad_headers() {
        assert!(matches!(read_header(&mut &b"EMBERTRX\x01\0\0\0"[..]), Err(HeaderError::Bad(_))));
        assert!(matches!(read_header(&mut &b"EMBERTRC\x02\0\0\0"[..]), Err(HeaderError::Bad(_))));
        assert!(matches!(read_header(&mut &b"EMBERTRC\x01\0"[..]), Err(HeaderError::Io(_))));
    }
}
