//! Reading a large compressed trace around the page cache (`O_DIRECT`).
//!
//! A compressed trace is read once, front to back, by the decompressing thread. Through the
//! page cache every byte is copied twice (device to cache, cache to the reader), and on this
//! project's VM the second copy cost about as much CPU as decompressing: over the
//! billion-request `.zst` (7.7 GB), 12.5 % of `ember sim`'s samples were the kernel's
//! `_copy_to_iter`, against 18 % in zstd itself. A file that large does not stay cached for a
//! second run anyway. [`DirectFile`] reads it with `O_DIRECT` into one aligned buffer that is
//! reused, so the device writes straight into it.
//!
//! Used only for a regular file of at least [`direct_threshold`] bytes; a file system that
//! refuses `O_DIRECT` (tmpfs) gets the buffered read.

use std::fs::File;
use std::io::{BufRead, Read};
use std::path::Path;

/// Bytes read per `read` call.
const CHUNK: usize = 4 << 20;

/// Alignment of the buffer, of each read's length and of its file offset (the logical block
/// size of any device this runs on divides it).
const ALIGN: usize = 4096;

/// The size from which a compressed trace is read with `O_DIRECT`: a quarter of the
/// machine's memory (a file that large is not expected to stay cached), or 1 GiB if the
/// memory size is unknown.
pub fn direct_threshold() -> u64 {
    // SAFETY: sysconf reads a system constant; it has no preconditions.
    let (pages, page) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages > 0 && page > 0 {
        (pages as u64).saturating_mul(page as u64) / 4
    } else {
        1 << 30
    }
}

/// A file read front to back with `O_DIRECT`, as a [`BufRead`] over its own aligned buffer.
pub struct DirectFile {
    file: File,
    /// `CHUNK + ALIGN` bytes; the data lives at `start..start + CHUNK`, aligned.
    buf: Vec<u8>,
    start: usize,
    /// The unread bytes are `start + pos .. start + len`.
    pos: usize,
    len: usize,
    eof: bool,
}

impl std::fmt::Debug for DirectFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectFile").field("eof", &self.eof).finish_non_exhaustive()
    }
}

impl DirectFile {
    /// Open `path` for direct reading; `Ok(None)` if its file system refuses `O_DIRECT`.
    pub fn open(path: &Path) -> std::io::Result<Option<Self>> {
        use std::os::unix::fs::OpenOptionsExt;
        let file =
            match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path) {
                Ok(f) => f,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
                Err(e) => return Err(e),
            };
        let buf = vec![0u8; CHUNK + ALIGN];
        let start = buf.as_ptr().align_offset(ALIGN);
        if start > ALIGN {
            return Ok(None);
        }
        let mut d = Self { file, buf, start, pos: 0, len: 0, eof: false };
        // A file system may accept the flag at open and refuse the read: find out now, while
        // the buffered read can still take over.
        match d.refill() {
            Ok(()) => Ok(Some(d)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read the next chunk into the buffer (the previous one fully consumed).
    fn refill(&mut self) -> std::io::Result<()> {
        self.pos = 0;
        self.len = 0;
        loop {
            match self.file.read(&mut self.buf[self.start..self.start + CHUNK]) {
                Ok(n) => {
                    self.len = n;
                    // Only the end of the file gives a short read of a regular file; the
                    // next offset would not be aligned anyway.
                    if n < CHUNK {
                        self.eof = true;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Read for DirectFile {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for DirectFile {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.pos == self.len && !self.eof {
            self.refill()?;
        }
        Ok(&self.buf[self.start + self.pos..self.start + self.len])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Bytes read back equal the file's, for sizes around the chunk and alignment edges
    /// (a file not a multiple of the block size ends in a short read).
    #[test]
    fn reads_back_every_byte() {
        // Not /tmp: it may be a tmpfs, which refuses O_DIRECT.
        let dir = tempfile::Builder::new()
            .prefix("direct-read")
            .tempdir_in(env!("CARGO_MANIFEST_DIR"))
            .unwrap();
        for size in [0usize, 1, ALIGN - 1, ALIGN, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 12345] {
            let data: Vec<u8> = (0..size).map(|i| (i * 7 + i / 4096) as u8).collect();
            let path = dir.path().join(format!("f{size}"));
            std::fs::File::create(&path).unwrap().write_all(&data).unwrap();
            let Some(mut d) = DirectFile::open(&path).unwrap() else {
                panic!("O_DIRECT refused under {}", dir.path().display());
            };
            let mut got = Vec::new();
            // Small reads through Read, to cross chunk boundaries mid-call.
            let mut piece = [0u8; 10_007];
            loop {
                let n = d.read(&mut piece).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&piece[..n]);
            }
            assert_eq!(got.len(), data.len(), "size {size}");
            assert!(got == data, "size {size}: bytes differ");
        }
    }
}
