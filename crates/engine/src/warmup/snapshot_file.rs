//! The performance snapshot's file (Bonfire section 5.1: the data of recently accessed
//! blocks, so a preload reads it sequentially instead of from a slow backing). Format in
//! `docs/reference/trace-formats.md` ("Performance snapshot"):
//!
//! - a 4 KiB header: magic `EMBRSNAP`, version, block size, the id of the warmup log it goes
//!   with, its slots and blocks a slot, whether the last run stopped cleanly, the copies'
//!   validity floor (`invalid_before`), each log volume's backing state at a clean stop, and a
//!   CRC-32C;
//! - `slots` segment slots, written circularly: each an index (magic `EMBRSSEG`, segment
//!   number, count, CRC-32C of the index, then per copy its log volume, the CRC-32C of its
//!   data, its block and its *tag*: the warmup log's sequence number that the copy is at
//!   least as new as), then the copies' data, in one sequential write.
//!
//! A segment is written only when the staging buffer (one slot) is full, and at a clean
//! stop. A torn or half-durable segment is caught by the index CRC or by a copy's data CRC.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of the header.
pub const HEADER_SIZE: u64 = 4096;
const MAGIC: &[u8; 8] = b"EMBRSNAP";
const SEG_MAGIC: &[u8; 8] = b"EMBRSSEG";
const VERSION: u32 = 1;
/// Bytes of an index entry.
const ENTRY: usize = 32;
/// Bytes before the entries in a segment's index.
const SEG_HEAD: usize = 32;
/// At most this many volumes (a log volume index is a byte).
const MAX_VOLUMES: usize = 255;

/// The path of the snapshot that goes with the warmup log at `log`.
pub fn path_for(log: &Path) -> PathBuf {
    let mut s = log.as_os_str().to_owned();
    s.push(".snapshot");
    PathBuf::from(s)
}

/// Bytes of a slot's index area for `slot_blocks` copies (a multiple of 4 KiB).
fn index_bytes(slot_blocks: u64) -> u64 {
    (SEG_HEAD as u64 + slot_blocks * ENTRY as u64).div_ceil(4096) * 4096
}

/// The fixed part of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// Block size of the copies.
    pub block_size: u32,
    /// The warmup log's id (its tags count that log's records).
    pub log_id: u64,
    /// Segment slots.
    pub slots: u64,
    /// Copies a slot holds.
    pub slot_blocks: u64,
    /// The run that wrote it stopped cleanly.
    pub clean: bool,
    /// Copies with a tag below this are not to be used (a write record was dropped).
    pub invalid_before: u64,
    /// Per log volume: its backing's state digest at the clean stop (0: unknown).
    pub states: Vec<u64>,
}

impl SnapshotHeader {
    /// Bytes of one slot.
    pub fn slot_bytes(&self) -> u64 {
        index_bytes(self.slot_blocks) + self.slot_blocks * self.block_size as u64
    }

    /// The file's size.
    pub fn file_size(&self) -> u64 {
        HEADER_SIZE + self.slots * self.slot_bytes()
    }

    /// Byte offset of copy `i` of slot `slot`.
    pub fn data_offset(&self, slot: u64, i: u64) -> u64 {
        HEADER_SIZE
            + slot * self.slot_bytes()
            + index_bytes(self.slot_blocks)
            + i * self.block_size as u64
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_SIZE as usize];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.block_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.log_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.slots.to_le_bytes());
        b[32..40].copy_from_slice(&self.slot_blocks.to_le_bytes());
        b[40..48].copy_from_slice(&u64::from(self.clean).to_le_bytes());
        b[48..56].copy_from_slice(&self.invalid_before.to_le_bytes());
        b[56..60].copy_from_slice(&(self.states.len() as u32).to_le_bytes());
        for (i, s) in self.states.iter().enumerate() {
            b[64 + 8 * i..72 + 8 * i].copy_from_slice(&s.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b[..4092]);
        b[4092..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<Self, String> {
        if b.len() < HEADER_SIZE as usize {
            return Err(format!("truncated: {} bytes, shorter than its header", b.len()));
        }
        if &b[0..8] != MAGIC {
            return Err("not a performance snapshot (bad magic)".into());
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        if crc32c::crc32c(&b[..4092]) != u32_at(4092) {
            return Err("its header is damaged (checksum)".into());
        }
        if u32_at(8) != VERSION {
            return Err(format!("version {} (this ember reads {VERSION})", u32_at(8)));
        }
        let n = u32_at(56) as usize;
        let h = SnapshotHeader {
            block_size: u32_at(12),
            log_id: u64_at(16),
            slots: u64_at(24),
            slot_blocks: u64_at(32),
            clean: u64_at(40) == 1,
            invalid_before: u64_at(48),
            states: (0..n.min(MAX_VOLUMES)).map(|i| u64_at(64 + 8 * i)).collect(),
        };
        if h.block_size < 512 || h.slots == 0 || h.slot_blocks == 0 || n > MAX_VOLUMES {
            return Err("its header is inconsistent".into());
        }
        Ok(h)
    }
}

/// One copy in a segment's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapEntry {
    /// Log volume index.
    pub volume: u8,
    /// CRC-32C of the copy's data.
    pub crc: u32,
    /// The block.
    pub block: u64,
    /// The log sequence number the copy is at least as new as.
    pub tag: u64,
}

/// A segment read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Segment number (1, 2, …; slot `(seq - 1) % slots`).
    pub seq: u64,
    /// The copies, in their order in the slot.
    pub entries: Vec<SnapEntry>,
}

/// A snapshot read back (indexes only; the data stays in the file).
#[derive(Debug)]
pub struct SnapshotContents {
    /// The header.
    pub header: SnapshotHeader,
    /// The valid segments, oldest first.
    pub segments: Vec<Segment>,
    /// Slots whose index is damaged, torn or missing from the file (empty slots not counted).
    pub unreadable: u64,
}

/// Read the snapshot at `path`: `Ok(None)` if there is none, `Err(why)` if its header is not
/// usable.
pub fn read_snapshot(path: &Path) -> Result<Option<SnapshotContents>, String> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open it: {e}")),
    };
    let len = f.metadata().map_err(|e| format!("cannot stat it: {e}"))?.len();
    let mut hb = vec![0u8; HEADER_SIZE.min(len) as usize];
    f.read_exact_at(&mut hb, 0).map_err(|e| format!("cannot read it: {e}"))?;
    let header = SnapshotHeader::decode(&hb)?;
    let ib = index_bytes(header.slot_blocks);
    let mut segments = Vec::new();
    let mut unreadable = 0;
    let mut buf = vec![0u8; ib as usize];
    for slot in 0..header.slots {
        let at = HEADER_SIZE + slot * header.slot_bytes();
        if at + ib > len {
            unreadable += 1;
            continue;
        }
        if f.read_exact_at(&mut buf, at).is_err() {
            unreadable += 1;
            continue;
        }
        if buf[..8].iter().all(|&x| x == 0) {
            continue; // never written
        }
        match decode_index(&buf, &header, slot) {
            Some(s) if at + header.slot_bytes() <= len || data_fits(&s, &header, slot, len) => {
                segments.push(s)
            }
            _ => unreadable += 1,
        }
    }
    segments.sort_by_key(|s| s.seq);
    Ok(Some(SnapshotContents { header, segments, unreadable }))
}

fn data_fits(s: &Segment, h: &SnapshotHeader, slot: u64, len: u64) -> bool {
    h.data_offset(slot, s.entries.len() as u64) <= len
}

fn decode_index(b: &[u8], h: &SnapshotHeader, slot: u64) -> Option<Segment> {
    if &b[0..8] != SEG_MAGIC {
        return None;
    }
    let seq = u64::from_le_bytes(b[8..16].try_into().ok()?);
    let count = u64::from_le_bytes(b[16..24].try_into().ok()?);
    let crc = u32::from_le_bytes(b[24..28].try_into().ok()?);
    if seq == 0 || count > h.slot_blocks || (seq - 1) % h.slots != slot {
        return None;
    }
    let end = SEG_HEAD + count as usize * ENTRY;
    let body = crc32c::crc32c_append(crc32c::crc32c(&b[..24]), &b[SEG_HEAD..end]);
    if body != crc {
        return None;
    }
    let entries = b[SEG_HEAD..end]
        .chunks_exact(ENTRY)
        .map(|e| SnapEntry {
            volume: e[0],
            crc: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            block: u64::from_le_bytes(e[8..16].try_into().unwrap_or([0; 8])),
            tag: u64::from_le_bytes(e[16..24].try_into().unwrap_or([0; 8])),
        })
        .collect();
    Some(Segment { seq, entries })
}

/// The writing side: the header (shared with the FLUSH path, which may raise
/// `invalid_before`) and the file.
pub struct SnapshotFile {
    file: Arc<File>,
    path: PathBuf,
    header: SnapshotHeader,
}

impl SnapshotFile {
    /// Create the snapshot at `path` anew (any old file is replaced), empty, not clean.
    pub fn create(path: &Path, header: SnapshotHeader) -> io::Result<SnapshotFile> {
        let ctx = |e: io::Error| {
            io::Error::new(e.kind(), format!("performance snapshot {}: {e}", path.display()))
        };
        if header.states.len() > MAX_VOLUMES {
            return Err(io::Error::other(format!("more than {MAX_VOLUMES} volumes")));
        }
        let file =
            OpenOptions::new().write(true).create(true).truncate(true).open(path).map_err(ctx)?;
        file.set_len(header.file_size()).map_err(ctx)?;
        file.write_all_at(&header.encode(), 0).map_err(ctx)?;
        file.sync_all().map_err(ctx)?;
        Ok(SnapshotFile { file: Arc::new(file), path: path.into(), header })
    }

    /// The header in force.
    pub fn header(&self) -> &SnapshotHeader {
        &self.header
    }

    /// Copies with a tag below `seq` are no longer to be used; durable on return.
    pub fn invalidate_before(&mut self, seq: u64) -> io::Result<()> {
        self.header.invalid_before = self.header.invalid_before.max(seq);
        self.write_header()
    }

    /// Mark a clean stop with the backings' state digests now; durable on return.
    pub fn mark_clean(&mut self, states: Vec<u64>) -> io::Result<()> {
        self.header.clean = true;
        self.header.states = states;
        self.write_header()
    }

    /// Make the segments written so far durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn write_header(&self) -> io::Result<()> {
        self.file.write_all_at(&self.header.encode(), 0)?;
        self.file.sync_data()
    }

    /// A staging buffer for this file.
    pub fn staging(&self) -> Staging {
        let h = &self.header;
        let ib = index_bytes(h.slot_blocks) as usize;
        Staging {
            file: self.file.clone(),
            path: self.path.clone(),
            header: h.clone(),
            buf: Vec::new(),
            index_bytes: ib,
            count: 0,
            at: HashMap::new(),
            next_seq: 1,
        }
    }
}

/// The snapshot's staging buffer (one slot, in memory) and the segment writer.
pub struct Staging {
    file: Arc<File>,
    path: PathBuf,
    header: SnapshotHeader,
    buf: Vec<u8>,
    index_bytes: usize,
    count: usize,
    at: HashMap<(u8, u64), usize>,
    next_seq: u64,
}

impl Staging {
    /// Stage a copy of `block` of log volume `volume`, at least as new as log record `tag`
    /// (a copy already staged for the block is replaced). Returns true when the buffer is
    /// full (write it with [`Staging::write_segment`]).
    pub fn stage(&mut self, volume: u8, block: u64, tag: u64, data: &[u8]) -> bool {
        let bs = self.header.block_size as usize;
        if self.buf.is_empty() {
            self.buf = vec![0u8; self.index_bytes + self.header.slot_blocks as usize * bs];
        }
        let i = match self.at.get(&(volume, block)) {
            Some(&i) => i,
            None => {
                let i = self.count;
                self.count += 1;
                self.at.insert((volume, block), i);
                i
            }
        };
        let d = self.index_bytes + i * bs;
        self.buf[d..d + bs].copy_from_slice(&data[..bs]);
        let e = SEG_HEAD + i * ENTRY;
        let entry = &mut self.buf[e..e + ENTRY];
        entry.fill(0);
        entry[0] = volume;
        entry[4..8].copy_from_slice(&crc32c::crc32c(&data[..bs]).to_le_bytes());
        entry[8..16].copy_from_slice(&block.to_le_bytes());
        entry[16..24].copy_from_slice(&tag.to_le_bytes());
        self.is_full()
    }

    /// The buffer holds a slot's worth of copies.
    pub fn is_full(&self) -> bool {
        self.count as u64 >= self.header.slot_blocks
    }

    /// Copies staged.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Nothing staged.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Drop what is staged.
    pub fn discard(&mut self) {
        self.count = 0;
        self.at.clear();
    }

    /// Write what is staged as the next segment (one sequential write) and empty the buffer.
    /// Returns the bytes written.
    pub fn write_segment(&mut self) -> io::Result<u64> {
        if self.count == 0 {
            return Ok(0);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = (seq - 1) % self.header.slots;
        let end = SEG_HEAD + self.count * ENTRY;
        self.buf[0..8].copy_from_slice(SEG_MAGIC);
        self.buf[8..16].copy_from_slice(&seq.to_le_bytes());
        self.buf[16..24].copy_from_slice(&(self.count as u64).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&self.buf[..24]), &self.buf[SEG_HEAD..end]);
        self.buf[24..28].copy_from_slice(&crc.to_le_bytes());
        self.buf[end..self.index_bytes].fill(0);
        let len = self.index_bytes + self.count * self.header.block_size as usize;
        let off = HEADER_SIZE + slot * self.header.slot_bytes();
        let r = self.file.write_all_at(&self.buf[..len], off).map_err(|e| {
            io::Error::new(e.kind(), format!("performance snapshot {}: {e}", self.path.display()))
        });
        self.count = 0;
        self.at.clear();
        r.map(|()| len as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(slots: u64) -> SnapshotHeader {
        SnapshotHeader {
            block_size: 4096,
            log_id: 9,
            slots,
            slot_blocks: 3,
            clean: false,
            invalid_before: 0,
            states: vec![0, 0],
        }
    }

    #[test]
    fn segments_wrap_dedupe_and_read_back_with_their_data() {
        let dir = tempfile::tempdir().unwrap();
        let p = path_for(&dir.path().join("w.log"));
        assert!(p.to_string_lossy().ends_with("w.log.snapshot"));
        let mut f = SnapshotFile::create(&p, header(2)).unwrap();
        let mut s = f.staging();
        assert!(!s.stage(0, 5, 10, &[5u8; 4096]));
        assert!(!s.stage(0, 5, 11, &[6u8; 4096]), "same block: replaced, not added");
        assert!(!s.stage(1, 5, 11, &[7u8; 4096]));
        assert!(s.stage(0, 8, 12, &[8u8; 4096]));
        assert_eq!(s.write_segment().unwrap(), 4096 + 3 * 4096);
        for seg in 0..2u8 {
            s.stage(0, 100 + seg as u64, 20, &[seg; 4096]);
            s.write_segment().unwrap(); // segments 2 and 3: 3 overwrites slot 0
        }
        f.invalidate_before(15).unwrap();
        let c = read_snapshot(&p).unwrap().unwrap();
        assert_eq!(c.header.invalid_before, 15);
        let seqs: Vec<u64> = c.segments.iter().map(|s| s.seq).collect();
        assert_eq!(seqs, vec![2, 3]);
        assert_eq!(c.segments[1].entries[0].block, 101);
        // Segment 2 (slot 1): block 100 with its data.
        let mut b = vec![0u8; 4096];
        let file = File::open(&p).unwrap();
        file.read_exact_at(&mut b, c.header.data_offset(1, 0)).unwrap();
        assert_eq!(crc32c::crc32c(&b), c.segments[0].entries[0].crc);
        assert_eq!(b[0], 0);
        // A damaged index: that slot is unreadable, the other survives.
        let mut raw = std::fs::read(&p).unwrap();
        raw[HEADER_SIZE as usize + 40] ^= 1;
        std::fs::write(&p, &raw).unwrap();
        let c = read_snapshot(&p).unwrap().unwrap();
        assert_eq!((c.segments.len(), c.unreadable), (1, 1));
        // A damaged header, a missing file.
        raw[20] ^= 1;
        std::fs::write(&p, &raw).unwrap();
        assert!(read_snapshot(&p).unwrap_err().contains("damaged"));
        assert!(read_snapshot(&dir.path().join("none")).unwrap().is_none());
    }

    #[test]
    fn first_segment_round_trip_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        let f = SnapshotFile::create(&p, header(4)).unwrap();
        let mut s = f.staging();
        s.stage(1, 7, 3, &[1u8; 4096]);
        s.write_segment().unwrap();
        let c = read_snapshot(&p).unwrap().unwrap();
        assert_eq!(
            c.segments,
            vec![Segment {
                seq: 1,
                entries: vec![SnapEntry {
                    volume: 1,
                    crc: crc32c::crc32c(&[1u8; 4096]),
                    block: 7,
                    tag: 3
                }]
            }]
        );
        // Cut inside slot 0's index: no segment, counted unreadable.
        let file = OpenOptions::new().write(true).open(&p).unwrap();
        file.set_len(HEADER_SIZE + 100).unwrap();
        let c = read_snapshot(&p).unwrap().unwrap();
        assert!(c.segments.is_empty());
        assert_eq!(c.unreadable, 4);
    }
}
