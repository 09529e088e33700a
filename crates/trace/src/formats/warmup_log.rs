//! Bonfire's warmup log (Zhang et al., FAST 2013, section 5: the metadata log on the logging
//! volume), as `ember serve --warmup-log PATH` writes it and every trace command reads it.
//!
//! Layout, version 1, little-endian. A 4096-byte header, then `slots` records of 32 bytes,
//! written circularly: the record with sequence number `s` (from 1) lives in slot
//! `(s - 1) % slots`.
//!
//! Header: magic `EMBRWLOG`, version (u32), record size (u32, 32), slots (u64), log id (u64,
//! random per log: it seeds every record's checksum, so a record of another log never
//! passes), block size (u32), volume count (u32), creation time (u64 ns), then per volume its
//! name (u8 length + 64 bytes), size (u64) and backing identity (u64, the medium digest of
//! the engine's device identity; 0 unknown); CRC-32C of the first 4092 bytes in the last 4.
//!
//! Record: sequence (u64; 0 = never written), time (u64 ns since the Unix epoch), first block
//! (u64), block count (u16, at least 1), volume index (u8), operation (u8: 0 read, 1 write),
//! CRC-32C of the log id and the first 28 bytes.
//!
//! [`read_log`] accepts one torn batch (bad records right after the newest one: a crash in the
//! middle of the last sequential write) and refuses anything else that is damaged.

use crate::Op;

/// The first 8 bytes of a warmup log.
pub const MAGIC: [u8; 8] = *b"EMBRWLOG";
/// The version this module writes and reads.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_SIZE: usize = 4096;
/// Bytes of one record.
pub const RECORD_SIZE: usize = 32;
/// Most volumes a log names (the engine's limit).
pub const MAX_VOLUMES: usize = 32;
/// Most record slots a log has (64 GiB of records): more is a damaged header.
pub const MAX_SLOTS: u64 = 1 << 31;
/// Most blocks one record covers (a longer request takes several records).
pub const MAX_RECORD_BLOCKS: u64 = u16::MAX as u64;

const NAME_MAX: usize = 64;
const VOLUME_ENTRY: usize = 1 + NAME_MAX + 8 + 8;
const VOLUMES_AT: usize = 48;

/// One volume the log's records address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogVolume {
    /// Export name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// The backing's medium digest when the log was created (0: unknown).
    pub backing_medium: u64,
}

/// The header of a warmup log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogHeader {
    /// Record slots after the header.
    pub slots: u64,
    /// Random per log; seeds the record checksums.
    pub log_id: u64,
    /// Block size of the block numbers in records.
    pub block_size: u32,
    /// Creation time, ns since the Unix epoch.
    pub created_ns: u64,
    /// The volumes, by record volume index.
    pub volumes: Vec<LogVolume>,
}

/// One logged request (or a piece of one longer than [`MAX_RECORD_BLOCKS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// Sequence number (from 1, in the order the engine served the requests).
    pub seq: u64,
    /// Time of the request, ns since the Unix epoch.
    pub time_ns: u64,
    /// First block.
    pub block: u64,
    /// Blocks (at least 1).
    pub blocks: u16,
    /// Volume index into [`LogHeader::volumes`].
    pub volume: u8,
    /// Read or write.
    pub op: Op,
}

impl LogHeader {
    /// The 4096 bytes of this header. Panics on more than [`MAX_VOLUMES`] volumes or a name
    /// over 64 bytes (the engine never has either).
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.volumes.len() <= MAX_VOLUMES, "at most {MAX_VOLUMES} volumes");
        let mut b = vec![0u8; HEADER_SIZE];
        b[..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(RECORD_SIZE as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.slots.to_le_bytes());
        b[24..32].copy_from_slice(&self.log_id.to_le_bytes());
        b[32..36].copy_from_slice(&self.block_size.to_le_bytes());
        b[36..40].copy_from_slice(&(self.volumes.len() as u32).to_le_bytes());
        b[40..48].copy_from_slice(&self.created_ns.to_le_bytes());
        for (i, v) in self.volumes.iter().enumerate() {
            let at = VOLUMES_AT + i * VOLUME_ENTRY;
            let name = v.name.as_bytes();
            assert!(name.len() <= NAME_MAX, "volume name over {NAME_MAX} bytes");
            b[at] = name.len() as u8;
            b[at + 1..at + 1 + name.len()].copy_from_slice(name);
            b[at + 1 + NAME_MAX..at + 9 + NAME_MAX].copy_from_slice(&v.size.to_le_bytes());
            b[at + 9 + NAME_MAX..at + 17 + NAME_MAX]
                .copy_from_slice(&v.backing_medium.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b[..HEADER_SIZE - 4]);
        b[HEADER_SIZE - 4..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode a header; the error says what is wrong (not a warmup log, another version,
    /// a bad checksum, impossible fields).
    pub fn decode(b: &[u8]) -> Result<LogHeader, String> {
        if b.len() < 8 || b[..8] != MAGIC {
            return Err("not an ember warmup log (no EMBRWLOG magic)".into());
        }
        if b.len() < HEADER_SIZE {
            return Err(format!(
                "truncated: {} bytes, the header alone has {HEADER_SIZE}",
                b.len()
            ));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or_default());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let crc = crc32c::crc32c(&b[..HEADER_SIZE - 4]);
        if crc != u32_at(HEADER_SIZE - 4) {
            return Err("the header checksum does not match (damaged header)".into());
        }
        let version = u32_at(8);
        if version != VERSION {
            return Err(format!("version {version}; this ember reads version {VERSION}"));
        }
        if u32_at(12) as usize != RECORD_SIZE {
            return Err(format!("record size {}; version 1 has {RECORD_SIZE}", u32_at(12)));
        }
        let slots = u64_at(16);
        if slots == 0 || slots > MAX_SLOTS {
            return Err(format!("{slots} record slots (1 to {MAX_SLOTS})"));
        }
        let n = u32_at(36) as usize;
        if n > MAX_VOLUMES {
            return Err(format!("{n} volumes (at most {MAX_VOLUMES})"));
        }
        let block_size = u32_at(32);
        if block_size < 512 || !block_size.is_power_of_two() {
            return Err(format!("block size {block_size} is not a power of two ≥ 512"));
        }
        let mut volumes = Vec::with_capacity(n);
        for i in 0..n {
            let at = VOLUMES_AT + i * VOLUME_ENTRY;
            let len = b[at] as usize;
            if len == 0 || len > NAME_MAX {
                return Err(format!("volume #{i}: name length {len}"));
            }
            let name = std::str::from_utf8(&b[at + 1..at + 1 + len])
                .map_err(|_| format!("volume #{i}: name is not UTF-8"))?
                .to_string();
            volumes.push(LogVolume {
                name,
                size: u64_at(at + 1 + NAME_MAX),
                backing_medium: u64_at(at + 9 + NAME_MAX),
            });
        }
        Ok(LogHeader { slots, log_id: u64_at(24), block_size, created_ns: u64_at(40), volumes })
    }

    /// Bytes of a log file with this header: header plus every slot.
    pub fn file_size(&self) -> u64 {
        HEADER_SIZE as u64 + self.slots * RECORD_SIZE as u64
    }

    /// Byte offset of slot `i`.
    pub fn slot_offset(&self, i: u64) -> u64 {
        HEADER_SIZE as u64 + i * RECORD_SIZE as u64
    }
}

fn record_crc(log_id: u64, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&log_id.to_le_bytes()), body)
}

impl LogRecord {
    /// Encode into `out` (32 bytes) under log `log_id`.
    pub fn encode(&self, log_id: u64, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.seq.to_le_bytes());
        out[8..16].copy_from_slice(&self.time_ns.to_le_bytes());
        out[16..24].copy_from_slice(&self.block.to_le_bytes());
        out[24..26].copy_from_slice(&self.blocks.to_le_bytes());
        out[26] = self.volume;
        out[27] = matches!(self.op, Op::Write) as u8;
        let crc = record_crc(log_id, &out[..28]);
        out[28..32].copy_from_slice(&crc.to_le_bytes());
    }
}

/// What one slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Never written (all zero).
    Empty,
    /// A record that passed its checksum.
    Valid(LogRecord),
    /// Anything else: torn, damaged, or from another log.
    Bad,
}

/// Decode the slot bytes `b` (32) of log `log_id`.
pub fn decode_slot(log_id: u64, b: &[u8]) -> Slot {
    if b.len() != RECORD_SIZE {
        return Slot::Bad;
    }
    if b.iter().all(|&x| x == 0) {
        return Slot::Empty;
    }
    let crc = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
    if crc != record_crc(log_id, &b[..28]) {
        return Slot::Bad;
    }
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
    let blocks = u16::from_le_bytes([b[24], b[25]]);
    let op = match b[27] {
        0 => Op::Read,
        1 => Op::Write,
        _ => return Slot::Bad,
    };
    if u64_at(0) == 0 || blocks == 0 {
        return Slot::Bad;
    }
    Slot::Valid(LogRecord {
        seq: u64_at(0),
        time_ns: u64_at(8),
        block: u64_at(16),
        blocks,
        volume: b[26],
        op,
    })
}

/// A whole log, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogContents {
    /// The header.
    pub header: LogHeader,
    /// The valid records, oldest first.
    pub records: Vec<LogRecord>,
    /// Bad slots right after the newest record (one torn batch), dropped.
    pub torn: u64,
}

impl LogContents {
    /// The next sequence number and the slot it goes to.
    pub fn next(&self) -> (u64, u64) {
        let seq = self.records.last().map_or(1, |r| r.seq + 1);
        (seq, (seq - 1) % self.header.slots)
    }
}

/// Read a whole warmup log from its bytes: the header, then every slot. Refuses a file
/// shorter than its header says, a record in the wrong slot, a record addressing a volume or
/// block the header does not have, and bad records anywhere but right after the newest one.
pub fn read_log(b: &[u8]) -> Result<LogContents, String> {
    let header = LogHeader::decode(b)?;
    if (b.len() as u64) < header.file_size() {
        return Err(format!(
            "truncated: {} bytes, its header promises {} ({} record slots)",
            b.len(),
            header.file_size(),
            header.slots
        ));
    }
    let mut records = Vec::new();
    let mut bad = Vec::new();
    for i in 0..header.slots {
        let at = header.slot_offset(i) as usize;
        match decode_slot(header.log_id, &b[at..at + RECORD_SIZE]) {
            Slot::Empty => {}
            Slot::Bad => bad.push(i),
            Slot::Valid(r) => {
                if (r.seq - 1) % header.slots != i {
                    return Err(format!("slot {i} holds record {} of another slot", r.seq));
                }
                let Some(v) = header.volumes.get(r.volume as usize) else {
                    return Err(format!(
                        "record {}: volume {} is not in the header",
                        r.seq, r.volume
                    ));
                };
                let end = r
                    .block
                    .saturating_add(r.blocks as u64)
                    .saturating_mul(header.block_size as u64);
                if end > v.size.next_multiple_of(header.block_size as u64) {
                    return Err(format!("record {}: blocks beyond volume {:?}", r.seq, v.name));
                }
                records.push(r);
            }
        }
    }
    records.sort_unstable_by_key(|r| r.seq);
    if records.windows(2).any(|w| w[0].seq == w[1].seq) {
        return Err("two records with one sequence number".into());
    }
    // Bad slots are allowed only as one run right after the newest record (a torn batch).
    let newest = records.last().map_or(u64::MAX, |r| (r.seq - 1) % header.slots);
    let mut torn = 0;
    for &slot in &bad {
        let after = if newest == u64::MAX {
            slot
        } else {
            (slot + header.slots - newest - 1) % header.slots
        };
        if after >= bad.len() as u64 {
            return Err(format!(
                "slot {slot} is damaged (bad checksum) and is not part of the last write"
            ));
        }
        torn += 1;
    }
    Ok(LogContents { header, records, torn })
}

/// Read a log's bytes from `r`, positioned at its header: the header, then only as many bytes
/// as the header says the log has, so a log on a device (or in a region of one) larger than
/// the log is not read to the device's end. Bytes that are not a log's header are returned
/// as read (at most [`HEADER_SIZE`]) for [`read_log`] to refuse; a short read leaves a
/// truncated log, which [`read_log`] refuses too.
pub fn read_log_bytes(r: &mut impl std::io::Read) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut b = Vec::with_capacity(HEADER_SIZE);
    r.by_ref().take(HEADER_SIZE as u64).read_to_end(&mut b)?;
    if let Ok(h) = LogHeader::decode(&b) {
        b.reserve((h.file_size() as usize).saturating_sub(HEADER_SIZE));
        r.take(h.file_size() - HEADER_SIZE as u64).read_to_end(&mut b)?;
    }
    Ok(b)
}

/// The first 8 bytes of an ember cache device (its first superblock). Its layout may reserve
/// a region for the warmup log (`ember serve --warmup-log cache:`), which the trace commands
/// then read from the device directly.
pub const CACHE_DEVICE_MAGIC: [u8; 8] = *b"EMBERCSB";
/// Where the cache device's superblock keeps the warmup-log region's offset and length (u64,
/// little-endian, each). The engine's superblock encoder writes them at these offsets.
pub const CACHE_REGION_AT: (usize, usize) = (120, 128);

/// The warmup-log region (offset, length) of the cache device whose superblock starts `head`;
/// `None` if `head` is not one or reserves no region.
pub fn cache_region(head: &[u8]) -> Option<(u64, u64)> {
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    if head.get(..8)? != CACHE_DEVICE_MAGIC {
        return None;
    }
    let (offset, len) = (u64_at(CACHE_REGION_AT.0)?, u64_at(CACHE_REGION_AT.1)?);
    (len > 0).then_some((offset, len))
}

/// A log as a trace: its volumes (in header order) and one request per record, oldest first
/// (offsets and lengths in bytes of the log's block size).
pub fn requests(b: &[u8]) -> Result<(crate::VolumeTable, Vec<crate::Request>), String> {
    let log = read_log(b)?;
    let mut volumes = crate::VolumeTable::new();
    for v in &log.header.volumes {
        volumes.intern(&v.name);
    }
    let bs = log.header.block_size as u64;
    let requests = log
        .records
        .iter()
        .map(|r| crate::Request {
            time_ns: r.time_ns,
            volume: r.volume as u32,
            op: r.op,
            offset: r.block * bs,
            length: (r.blocks as u64 * bs).min(u32::MAX as u64) as u32,
        })
        .collect();
    Ok((volumes, requests))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_read_to_its_end_not_to_its_devices() {
        let h = header(4);
        let mut dev = h.encode();
        dev.resize(h.file_size() as usize, 0);
        dev.extend(std::iter::repeat_n(0xffu8, 1 << 20));
        let got = read_log_bytes(&mut &dev[..]).unwrap();
        assert_eq!(got.len() as u64, h.file_size());
        assert_eq!(read_log(&got).map(|c| c.records.len()), Ok(0));
        // Not a log: at most the header's bytes come back, and read_log says why.
        let junk = vec![7u8; 3 * HEADER_SIZE];
        let got = read_log_bytes(&mut &junk[..]).unwrap();
        assert_eq!(got.len(), HEADER_SIZE);
        assert!(read_log(&got).is_err());
    }

    fn header(slots: u64) -> LogHeader {
        LogHeader {
            slots,
            log_id: 0xfeed,
            block_size: 4096,
            created_ns: 5,
            volumes: vec![LogVolume { name: "disk".into(), size: 1 << 20, backing_medium: 9 }],
        }
    }

    fn log_with(h: &LogHeader, recs: &[LogRecord]) -> Vec<u8> {
        let mut b = h.encode();
        b.resize(h.file_size() as usize, 0);
        for r in recs {
            let at = h.slot_offset((r.seq - 1) % h.slots) as usize;
            r.encode(h.log_id, &mut b[at..at + RECORD_SIZE]);
        }
        b
    }

    fn rec(seq: u64) -> LogRecord {
        LogRecord { seq, time_ns: seq * 10, block: seq % 200, blocks: 2, volume: 0, op: Op::Read }
    }

    #[test]
    fn header_and_records_round_trip_in_sequence_order_after_wrapping() {
        let h = header(8);
        assert_eq!(LogHeader::decode(&h.encode()), Ok(h.clone()));
        let recs: Vec<LogRecord> = (1..=13).map(rec).collect();
        let c = read_log(&log_with(&h, &recs)).unwrap();
        // 8 slots keep the last 8 records, oldest first.
        assert_eq!(c.records, recs[5..].to_vec());
        assert_eq!(c.next(), (14, 5));
        assert_eq!(c.torn, 0);
    }

    #[test]
    fn impossible_slot_counts_and_block_numbers_are_errors_not_panics() {
        // A header with a valid checksum promising 2^63 slots.
        let mut h = header(8);
        h.slots = 1 << 63;
        let e = read_log(&h.encode()).unwrap_err();
        assert!(e.contains("slots"), "{e}");
        // A record whose block + count overflows 64 bits.
        let h = header(8);
        let mut b = log_with(&h, &[]);
        let r = LogRecord {
            seq: 1,
            time_ns: 0,
            block: u64::MAX - 1,
            blocks: 9,
            volume: 0,
            op: Op::Read,
        };
        r.encode(h.log_id, &mut b[HEADER_SIZE..HEADER_SIZE + RECORD_SIZE]);
        assert!(read_log(&b).unwrap_err().contains("beyond volume"));
    }

    #[test]
    fn damage_is_refused_except_one_torn_batch() {
        let h = header(8);
        let recs: Vec<LogRecord> = (1..=5).map(rec).collect();
        let good = log_with(&h, &recs);
        // A torn write of records 6 and 7: bad bytes right after the newest, allowed.
        let mut torn = good.clone();
        let at = h.slot_offset(5) as usize;
        torn[at..at + 40].fill(0xAB);
        let c = read_log(&torn).unwrap();
        assert_eq!((c.records.len(), c.torn), (5, 2));
        // A damaged record in the middle is not a torn tail.
        let mut mid = good.clone();
        mid[h.slot_offset(2) as usize + 9] ^= 1;
        assert!(read_log(&mid).unwrap_err().contains("slot 2 is damaged"));
        // Header damage, truncation, another log's record, a foreign file.
        let mut hd = good.clone();
        hd[20] ^= 1;
        assert!(read_log(&hd).unwrap_err().contains("checksum"));
        assert!(read_log(&good[..good.len() - 1]).unwrap_err().contains("truncated"));
        let mut other = good.clone();
        let at = h.slot_offset(1) as usize;
        rec(2).encode(0xbeef, &mut other[at..at + RECORD_SIZE]);
        assert!(read_log(&other).unwrap_err().contains("damaged"));
        assert!(read_log(b"Timestamp,Hostname\n").unwrap_err().contains("magic"));
        // A record in the wrong slot.
        let mut moved = good;
        let (a, b) = (h.slot_offset(0) as usize, h.slot_offset(6) as usize);
        let r = moved[a..a + 32].to_vec();
        moved[b..b + 32].copy_from_slice(&r);
        assert!(read_log(&moved).unwrap_err().contains("another slot"));
    }
}
