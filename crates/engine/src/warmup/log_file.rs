//! The warmup log on its own file or block device (Bonfire's logging volume): created with a
//! header naming the served volumes and their backing identities, then written circularly
//! with large sequential writes of whole batches (at most two writes a batch: one before and
//! one after the wrap). The format is `ember_trace::formats::warmup_log`, so every trace
//! command reads the file or device directly.
//!
//! In the cache device's own layout (`--warmup-log cache:`) the log takes the region
//! `ember cache format --warmup-log SIZE` reserved ([`Region`]): ember's own, so never
//! refused, and zeroed like a device's when a new log is made there.
//!
//! On a block device the log takes the device's first `file_size` bytes. ember writes a
//! device only if it is blank (its first 8 bytes zero) or already holds a warmup log, so a
//! mistyped device path is refused instead of overwritten; a new log on a device zeroes its
//! record area first (records of an earlier log would otherwise read as damaged ones).

use super::monitor::Entry;
use ember_trace::formats::warmup_log::{
    read_log, read_log_bytes, LogContents, LogHeader, LogRecord, HEADER_SIZE, MAGIC,
    MAX_RECORD_BLOCKS, RECORD_SIZE,
};
use ember_trace::Op;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};

/// True if `path` is a block device.
fn is_block_device(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// A window of a file or device that holds the log: the region of the cache device's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Byte offset of the log's header.
    pub base: u64,
    /// Bytes the log may take.
    pub len: u64,
}

/// Read the log at `path` (in `region` of it, if given): `Ok(None)` if there is no file (or a
/// blank device or region), `Err(why)` if it is not a usable warmup log (foreign, damaged,
/// truncated).
pub fn read_existing(path: &Path, region: Option<Region>) -> Result<Option<LogContents>, String> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let b = match region {
        None => read_log_bytes(&mut f),
        Some(r) => f
            .seek(SeekFrom::Start(r.base))
            .and_then(|_| read_log_bytes(&mut io::Read::take(&mut f, r.len))),
    }
    .map_err(|e| format!("cannot read it: {e}"))?;
    let blank = b.len() >= 8 && b[..8] == [0; 8];
    if blank && (region.is_some() || is_block_device(path)) {
        return Ok(None);
    }
    read_log(&b).map(Some)
}

/// An open warmup log being appended to.
pub struct LogFile {
    file: File,
    path: PathBuf,
    /// Where the header is in `file` (0 but for a log in the cache device's region).
    base: u64,
    header: LogHeader,
    next_seq: u64,
    buf: Vec<u8>,
}

impl LogFile {
    /// Open `path` (its `region`, if given) for appending. If `existing` (what it held) has
    /// the same volumes, block size and slots as `wanted`, records continue after its newest
    /// one (the history survives restarts); otherwise the log is made anew with `wanted` (a
    /// fresh log id). Returns the log and whether it continued the existing one.
    pub fn open(
        path: &Path,
        region: Option<Region>,
        wanted: LogHeader,
        existing: Option<&LogContents>,
    ) -> io::Result<(LogFile, bool)> {
        let ctx =
            |e: io::Error| io::Error::new(e.kind(), format!("warmup log {}: {e}", path.display()));
        let base = region.map_or(0, |r| r.base);
        let resume = existing.filter(|c| {
            c.header.volumes == wanted.volumes
                && c.header.block_size == wanted.block_size
                && c.header.slots == wanted.slots
        });
        if let Some(c) = resume {
            let file = OpenOptions::new().write(true).open(path).map_err(ctx)?;
            let (next_seq, _) = c.next();
            let header = c.header.clone();
            let log = LogFile { file, path: path.into(), base, header, next_seq, buf: Vec::new() };
            return Ok((log, true));
        }
        let file = if let Some(r) = region {
            let file = OpenOptions::new().read(true).write(true).open(path).map_err(ctx)?;
            zero_records(&file, r, &wanted).map_err(ctx)?;
            file
        } else if is_block_device(path) {
            new_on_device(path, &wanted).map_err(ctx)?
        } else {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .map_err(ctx)?;
            file.set_len(wanted.file_size()).map_err(ctx)?;
            file
        };
        file.write_all_at(&wanted.encode(), base).map_err(ctx)?;
        file.sync_all().map_err(ctx)?;
        let log =
            LogFile { file, path: path.into(), base, header: wanted, next_seq: 1, buf: Vec::new() };
        Ok((log, false))
    }

    /// Append `entries` (oldest first), mapping each entry's engine volume to its log volume
    /// index with `volume` (entries of unmapped volumes are skipped). Returns the bytes
    /// written.
    pub fn append(
        &mut self,
        entries: &[Entry],
        volume: impl Fn(u32) -> Option<u8>,
    ) -> io::Result<u64> {
        self.buf.clear();
        let first_seq = self.next_seq;
        for e in entries {
            let Some(v) = volume(e.volume) else { continue };
            let mut block = e.block;
            let mut left = e.blocks;
            while left > 0 {
                let n = left.min(MAX_RECORD_BLOCKS);
                let r = LogRecord {
                    seq: self.next_seq,
                    time_ns: e.time_ns,
                    block,
                    blocks: n as u16,
                    volume: v,
                    op: if e.write { Op::Write } else { Op::Read },
                };
                let at = self.buf.len();
                self.buf.resize(at + RECORD_SIZE, 0);
                r.encode(self.header.log_id, &mut self.buf[at..]);
                self.next_seq += 1;
                block += n;
                left -= n;
            }
        }
        // Sequential runs of slots: from the first record's slot to the end of the log, then
        // from slot 0 (a batch larger than the log keeps only its newest records).
        let slots = self.header.slots;
        let total = (self.next_seq - first_seq).min(slots);
        let skip = (self.next_seq - first_seq) - total;
        let mut seq = first_seq + skip;
        let mut at = (skip as usize) * RECORD_SIZE;
        let mut left = total;
        while left > 0 {
            let slot = (seq - 1) % slots;
            let n = left.min(slots - slot);
            let bytes = &self.buf[at..at + n as usize * RECORD_SIZE];
            self.file.write_all_at(bytes, self.base + self.header.slot_offset(slot)).map_err(
                |e| io::Error::new(e.kind(), format!("warmup log {}: {e}", self.path.display())),
            )?;
            seq += n;
            at += n as usize * RECORD_SIZE;
            left -= n;
        }
        Ok(total * RECORD_SIZE as u64)
    }

    /// Make what was appended durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The header in force.
    pub fn header(&self) -> &LogHeader {
        &self.header
    }
}

/// Open the block device at `path` for a new log `wanted`: refuse a device that holds
/// something other than a warmup log, then zero the record area ([`zero_records`]).
fn new_on_device(path: &Path, wanted: &LogHeader) -> io::Result<File> {
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.seek(SeekFrom::End(0))?;
    let mut head = [0u8; 8];
    file.read_exact_at(&mut head, 0)?;
    if head != [0; 8] && head != MAGIC {
        return Err(io::Error::other(
            "the device holds something other than a warmup log, and ember does not overwrite \
             it (zero its first 4 KiB to give it to ember)",
        ));
    }
    zero_records(&file, Region { base: 0, len }, wanted)?;
    Ok(file)
}

/// Zero the record area of a new log `wanted` in `region` of `file` (records of an earlier
/// log there would read as damaged), after checking it fits. The header is written by the
/// caller, after, so a crash in between leaves the old log readable.
fn zero_records(file: &File, region: Region, wanted: &LogHeader) -> io::Result<()> {
    if region.len < wanted.file_size() {
        return Err(io::Error::other(format!(
            "the device has {} bytes, too few for a log of {} (lower --warmup-log-size)",
            region.len,
            wanted.file_size()
        )));
    }
    let zeros = vec![0u8; 1 << 20];
    let mut at = HEADER_SIZE as u64;
    while at < wanted.file_size() {
        let n = (wanted.file_size() - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], region.base + at)?;
        at += n as u64;
    }
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::formats::warmup_log::LogVolume;

    fn header(slots: u64) -> LogHeader {
        LogHeader {
            slots,
            log_id: 42,
            block_size: 4096,
            created_ns: 1,
            volumes: vec![LogVolume { name: "d".into(), size: 1 << 30, backing_medium: 7 }],
        }
    }

    fn e(block: u64, blocks: u64) -> Entry {
        Entry { time_ns: block, block, blocks, volume: 5, write: false }
    }

    #[test]
    fn appends_wrap_and_resume_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.log");
        let (mut log, resumed) = LogFile::open(&p, None, header(4), None).unwrap();
        assert!(!resumed);
        let map = |v: u32| (v == 5).then_some(0u8);
        assert_eq!(log.append(&[e(1, 1), e(2, 1), e(3, 1)], map).unwrap(), 96);
        // Volume 6 is not logged; a request of 70000 blocks takes two records.
        log.append(&[e(4, 1), Entry { volume: 6, ..e(9, 1) }, e(10, 70000)], map).unwrap();
        let c = read_existing(&p, None).unwrap().unwrap();
        let got: Vec<(u64, u64, u16)> =
            c.records.iter().map(|r| (r.seq, r.block, r.blocks)).collect();
        assert_eq!(got, vec![(3, 3, 1), (4, 4, 1), (5, 10, 65535), (6, 65545, 4465)]);
        drop(log);
        let (mut log, resumed) = LogFile::open(&p, None, header(4), Some(&c)).unwrap();
        assert!(resumed, "same volumes: the history continues");
        log.append(&[e(100, 1)], map).unwrap();
        let c2 = read_existing(&p, None).unwrap().unwrap();
        assert_eq!(c2.records.last().map(|r| (r.seq, r.block)), Some((7, 100)));
        // Other volumes: a new log.
        let mut other = header(4);
        other.volumes[0].backing_medium = 8;
        let (_, resumed) = LogFile::open(&p, None, other, Some(&c2)).unwrap();
        assert!(!resumed);
        assert!(read_existing(&p, None).unwrap().unwrap().records.is_empty());
        assert_eq!(read_existing(&dir.path().join("none"), None), Ok(None));
    }
}
