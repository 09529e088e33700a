//! [`MemExport`]: an in-memory [`Export`] for tests and demos.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::export::{Export, ExportError, ExportFlags};

/// Bytes per independently locked, lazily allocated chunk.
const CHUNK: u64 = 64 * 1024;

/// A RAM disk of a fixed size. Storage is split into 64 KiB chunks, each behind its own lock
/// and allocated on first write, so an untouched export costs almost nothing and many
/// threads can work on different chunks at once. TRIM and hole-permitting WRITE_ZEROES
/// free whole chunks. Nothing is volatile, so FLUSH and FUA are trivially honoured and
/// [`ExportFlags::can_multi_conn`] holds. Counts FLUSH calls and FUA requests, so tests can
/// check the server passes them through.
#[derive(Debug)]
pub struct MemExport {
    size: u64,
    flags: ExportFlags,
    chunks: Vec<Mutex<Option<Box<[u8]>>>>,
    flushes: AtomicU64,
    fua_requests: AtomicU64,
}

impl MemExport {
    /// A zero-filled export of `size` bytes with every capability (flush, FUA, trim,
    /// write-zeroes, multi-conn) and writable.
    pub fn new(size: u64) -> MemExport {
        MemExport::with_flags(
            size,
            ExportFlags {
                read_only: false,
                can_flush: true,
                can_fua: true,
                can_trim: true,
                can_write_zeroes: true,
                can_multi_conn: true,
            },
        )
    }

    /// A zero-filled export of `size` bytes advertising exactly `flags`.
    pub fn with_flags(size: u64, flags: ExportFlags) -> MemExport {
        let chunks = size.div_ceil(CHUNK) as usize;
        MemExport {
            size,
            flags,
            chunks: (0..chunks).map(|_| Mutex::new(None)).collect(),
            flushes: AtomicU64::new(0),
            fua_requests: AtomicU64::new(0),
        }
    }

    /// Number of FLUSH calls so far.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// Number of writes, trims and write-zeroes that carried FUA.
    pub fn fua_requests(&self) -> u64 {
        self.fua_requests.load(Ordering::Relaxed)
    }

    /// Number of chunks currently holding memory.
    pub fn allocated_chunks(&self) -> usize {
        self.chunks.iter().filter(|c| c.lock().map(|c| c.is_some()).unwrap_or(false)).count()
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), ExportError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(ExportError::Invalid(format!(
                "range {offset}+{len} beyond export size {}",
                self.size
            ))),
        }
    }

    /// Apply `f(chunk index, range within chunk, range within the request)` to each piece.
    fn for_each_piece(
        &self,
        offset: u64,
        len: u64,
        mut f: impl FnMut(
            usize,
            std::ops::Range<usize>,
            std::ops::Range<usize>,
        ) -> Result<(), ExportError>,
    ) -> Result<(), ExportError> {
        let mut done = 0u64;
        while done < len {
            let pos = offset + done;
            let index = (pos / CHUNK) as usize;
            let within = (pos % CHUNK) as usize;
            let take = (CHUNK - pos % CHUNK).min(len - done) as usize;
            f(index, within..within + take, done as usize..done as usize + take)?;
            done += take as u64;
        }
        Ok(())
    }

    fn chunk_len(&self, index: usize) -> usize {
        let start = index as u64 * CHUNK;
        (self.size - start).min(CHUNK) as usize
    }

    fn poisoned() -> ExportError {
        ExportError::Io(std::io::Error::other("MemExport chunk lock poisoned"))
    }

    fn zero_range(&self, offset: u64, len: u64, may_free: bool) -> Result<(), ExportError> {
        self.for_each_piece(offset, len, |index, within, _| {
            let mut chunk = self.chunks[index].lock().map_err(|_| Self::poisoned())?;
            if may_free && within.len() == self.chunk_len(index) {
                *chunk = None;
            } else if let Some(data) = chunk.as_mut() {
                data[within].fill(0);
            } else if !may_free {
                // NO_HOLE: provision the chunk.
                *chunk = Some(vec![0u8; self.chunk_len(index)].into_boxed_slice());
            }
            Ok(())
        })
    }
}

impl Export for MemExport {
    fn size(&self) -> u64 {
        self.size
    }

    fn flags(&self) -> ExportFlags {
        self.flags
    }

    fn read_is_fast(&self, _offset: u64, _len: u64) -> bool {
        true
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        self.check(offset, buf.len() as u64)?;
        self.for_each_piece(offset, buf.len() as u64, |index, within, out| {
            let chunk = self.chunks[index].lock().map_err(|_| Self::poisoned())?;
            match chunk.as_ref() {
                Some(data) => buf[out].copy_from_slice(&data[within]),
                None => buf[out].fill(0),
            }
            Ok(())
        })
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ExportError> {
        if self.flags.read_only {
            return Err(ExportError::ReadOnly);
        }
        self.check(offset, data.len() as u64)?;
        if fua {
            self.fua_requests.fetch_add(1, Ordering::Relaxed);
        }
        self.for_each_piece(offset, data.len() as u64, |index, within, input| {
            let mut chunk = self.chunks[index].lock().map_err(|_| Self::poisoned())?;
            let len = self.chunk_len(index);
            let stored = chunk.get_or_insert_with(|| vec![0u8; len].into_boxed_slice());
            stored[within].copy_from_slice(&data[input]);
            Ok(())
        })
    }

    fn flush(&self) -> Result<(), ExportError> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), ExportError> {
        if self.flags.read_only {
            return Err(ExportError::ReadOnly);
        }
        self.check(offset, len)?;
        if fua {
            self.fua_requests.fetch_add(1, Ordering::Relaxed);
        }
        self.zero_range(offset, len, true)
    }

    fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        may_trim: bool,
    ) -> Result<(), ExportError> {
        if self.flags.read_only {
            return Err(ExportError::ReadOnly);
        }
        self.check(offset, len)?;
        if fua {
            self.fua_requests.fetch_add(1, Ordering::Relaxed);
        }
        self.zero_range(offset, len, may_trim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_read_back_across_chunks() {
        let export = MemExport::new(3 * CHUNK + 100);
        let data: Vec<u8> = (0..2 * CHUNK + 7).map(|i| (i % 251) as u8).collect();
        export.write(CHUNK - 3, &data, false).unwrap();
        let mut back = vec![0u8; data.len()];
        export.read(CHUNK - 3, &mut back).unwrap();
        assert_eq!(back, data);
        let mut head = [0xffu8; 8];
        export.read(CHUNK - 11, &mut head).unwrap();
        assert_eq!(&head[..8], &[0, 0, 0, 0, 0, 0, 0, 0]);
        // Bytes CHUNK-3 .. 3*CHUNK+4 touch chunks 0, 1, 2 and 3.
        assert_eq!(export.allocated_chunks(), 4);
    }

    #[test]
    fn trim_frees_whole_chunks_and_zeroes_partial_ones() {
        let export = MemExport::new(4 * CHUNK);
        export.write(0, &vec![9u8; (4 * CHUNK) as usize], true).unwrap();
        assert_eq!(export.fua_requests(), 1);
        export.trim(CHUNK / 2, 2 * CHUNK, false).unwrap();
        assert_eq!(export.allocated_chunks(), 3);
        let mut all = vec![0u8; (4 * CHUNK) as usize];
        export.read(0, &mut all).unwrap();
        let half = (CHUNK / 2) as usize;
        assert!(all[..half].iter().all(|&b| b == 9));
        assert!(all[half..half + 2 * CHUNK as usize].iter().all(|&b| b == 0));
        assert!(all[half + 2 * CHUNK as usize..].iter().all(|&b| b == 9));
    }

    #[test]
    fn no_hole_zeroes_provision_memory() {
        let export = MemExport::new(2 * CHUNK);
        export.write_zeroes(0, 2 * CHUNK, false, false).unwrap();
        assert_eq!(export.allocated_chunks(), 2);
        export.write_zeroes(0, 2 * CHUNK, false, true).unwrap();
        assert_eq!(export.allocated_chunks(), 0);
    }

    #[test]
    fn out_of_range_and_read_only_are_errors() {
        let export = MemExport::new(1000);
        let mut buf = [0u8; 10];
        assert!(matches!(export.read(995, &mut buf), Err(ExportError::Invalid(_))));
        assert!(matches!(export.write(u64::MAX, &buf, false), Err(ExportError::Invalid(_))));
        let ro =
            MemExport::with_flags(1000, ExportFlags { read_only: true, ..ExportFlags::default() });
        assert!(matches!(ro.write(0, &buf, false), Err(ExportError::ReadOnly)));
        assert!(ro.flags().read_only);
    }
}
