//! Reading a trace as chunks of block accesses: the reader and the block splitting fused, in
//! bounded memory.
//!
//! A [`BlockReader`] fills a caller-owned [`BlockChunk`] (block keys, per-access flags and,
//! when asked, times) with up to a given number of block accesses, then the next chunk, and
//! so on: memory is one chunk plus the reader's buffer, whatever the length of the trace.
//! Each request is split into the blocks it touches ([`crate::Request::blocks`]) as it is
//! read, never materialized as a [`crate::Request`] vector.
//!
//! Two formats take a zero-copy path: their fixed-size records are decoded in place from
//! the file mapped into memory (an uncompressed regular file; the pages behind the reader are
//! dropped every 8 MiB, so resident memory stays bounded) or from the reader's buffer (a
//! pipe or FIFO, or the decompressing thread's output) straight into the chunk, without a
//! per-record call through the generic reader:
//! - libCacheSim's oracleGeneral: each record is one block access whose key is its `obj_id`
//!   (the [`crate::block_key`]), a read, at `clock_time` seconds;
//! - ember's binary format: each record is a request, split into blocks in place.
//!
//! Every other format goes through [`crate::TraceReader`] request by request (still
//! streaming, still no per-request allocation). Errors, `skip_bad` and the counts of skipped
//! and ignored records are those of [`crate::TraceReader`] on the same file.

use std::path::{Path, PathBuf};

use crate::formats::ember as ember_fmt;
use crate::formats::oracle_general as og;
use crate::formats::{Format, Line};
use crate::open::{
    check_end, detect_format, io_err, is_regular_file, open, ReadOptions, ReadStats, StreamBytes,
    TraceReader,
};
use crate::{block_key, Request, TraceError};

/// Flag bit of an access that is a write.
pub const FLAG_WRITE: u8 = 1;
/// Flag bit of the first block access of its request.
pub const FLAG_FIRST: u8 = 2;

/// A run of consecutive block accesses of a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockChunk {
    /// Block keys ([`crate::block_key`]), one per access.
    pub keys: Vec<u64>,
    /// Per access: [`FLAG_WRITE`] and [`FLAG_FIRST`].
    pub flags: Vec<u8>,
    /// Request time in nanoseconds, one per access; empty when the reader keeps no times.
    pub times: Vec<u64>,
}

impl BlockChunk {
    /// An empty chunk with room for `accesses` accesses (and their times if `times`).
    pub fn with_capacity(accesses: usize, times: bool) -> Self {
        Self {
            keys: Vec::with_capacity(accesses),
            flags: Vec::with_capacity(accesses),
            times: if times { Vec::with_capacity(accesses) } else { Vec::new() },
        }
    }

    /// Number of block accesses.
    #[inline]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if the chunk holds no access.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Number of requests that start in this chunk.
    pub fn requests(&self) -> u64 {
        self.flags.iter().map(|&f| u64::from(f & FLAG_FIRST != 0)).sum()
    }

    /// Forget every access, keeping the memory.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.flags.clear();
        self.times.clear();
    }
}

/// How a request becomes block accesses.
#[derive(Clone, Copy, Debug)]
struct Splitter {
    block_size: u64,
    shift: u32,
    pow2: bool,
    per_request: bool,
    keep_times: bool,
}

impl Splitter {
    #[inline(always)]
    fn block_of(&self, byte: u64) -> u64 {
        if self.pow2 {
            byte >> self.shift
        } else {
            byte / self.block_size
        }
    }

    /// Append the accesses of `r` (none for a zero-length request).
    #[inline(always)]
    fn push(&self, c: &mut BlockChunk, r: &Request) {
        if r.length == 0 {
            return;
        }
        let first = self.block_of(r.offset);
        let end = if self.per_request {
            first + 1
        } else {
            self.block_of(r.offset.saturating_add(r.length as u64 - 1)) + 1
        };
        let w = if r.op.is_write() { FLAG_WRITE } else { 0 };
        c.keys.push(block_key(r.volume, first));
        c.flags.push(w | FLAG_FIRST);
        for b in first + 1..end {
            c.keys.push(block_key(r.volume, b));
            c.flags.push(w);
        }
        if self.keep_times {
            c.times.extend(std::iter::repeat_n(r.time_ns, (end - first) as usize));
        }
    }
}

/// Bytes of a mapped file released behind the reader at a time.
const RELEASE_BYTES: usize = 8 << 20;

/// True if a file of `len` bytes is larger than half of the machine's memory: the page cache
/// cannot keep it for a second run, and filling the cache with it only makes the kernel
/// reclaim (on another core, in the caches the simulation needs) while the file streams
/// past. The reader then drops the file's pages behind it from the page cache too.
fn outgrows_page_cache(len: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysinfo fills the struct it is given and reads nothing else.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        if unsafe { libc::sysinfo(&mut info) } == 0 {
            let total = (info.totalram as u64).saturating_mul(u64::from(info.mem_unit));
            return len > total / 2;
        }
    }
    let _ = len;
    false
}

/// The bytes of a binary trace: a mapped regular file (read in place, zero-copy; pages
/// behind the reader are dropped every [`RELEASE_BYTES`] so resident memory stays bounded),
/// or a stream (pipe, FIFO, decompressor) through a refillable buffer.
enum Bytes {
    Map {
        map: memmap2::Mmap,
        pos: usize,
        released: usize,
        /// The file, when its pages are dropped from the page cache behind the reader too
        /// ([`outgrows_page_cache`]).
        drop_behind: Option<std::fs::File>,
    },
    Stream(StreamBytes),
}

impl Bytes {
    /// Open `path`: mapped if it is an uncompressed, non-empty regular file (dropping its
    /// pages from the page cache behind the reader when it [`outgrows_page_cache`]).
    fn open(path: &Path) -> Result<Self, TraceError> {
        Self::open_with(path, outgrows_page_cache)
    }

    /// [`Bytes::open`], deciding from the file's length whether to drop its pages behind.
    fn open_with(path: &Path, drop_behind: fn(u64) -> bool) -> Result<Self, TraceError> {
        if is_regular_file(path) {
            let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
            let mut magic = [0u8; 4];
            let n = std::io::Read::read(&mut &file, &mut magic).map_err(|e| io_err(path, e))?;
            let compressed = (n >= 2 && magic[..2] == [0x1f, 0x8b])
                || (n == 4 && magic == [0x28, 0xb5, 0x2f, 0xfd]);
            if n > 0 && !compressed {
                // SAFETY: a read-only private map of a regular file; like every mmap of a file
                // it assumes no other process truncates the file while it is read.
                let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_err(path, e))?;
                #[cfg(unix)]
                let _ = map.advise(memmap2::Advice::Sequential);
                let drop_behind = drop_behind(map.len() as u64).then_some(file);
                return Ok(Bytes::Map { map, pos: 0, released: 0, drop_behind });
            }
        }
        Ok(Bytes::Stream(StreamBytes::open(path)?))
    }

    /// Make at least `need` bytes available unless the input ends; return how many are.
    #[inline]
    fn fill(&mut self, need: usize) -> std::io::Result<usize> {
        match self {
            Bytes::Map { map, pos, .. } => Ok(map.len() - *pos),
            Bytes::Stream(s) => s.fill(need),
        }
    }

    /// The available bytes (after [`Bytes::fill`]).
    #[inline]
    fn window(&self) -> &[u8] {
        match self {
            Bytes::Map { map, pos, .. } => &map[*pos..],
            Bytes::Stream(s) => &s.buf[s.pos..s.len],
        }
    }

    /// Consume `n` available bytes.
    #[inline]
    fn advance(&mut self, n: usize) {
        match self {
            Bytes::Map { map, pos, released, drop_behind } => {
                *pos += n;
                let behind = (*pos - *released) & !((1 << 16) - 1);
                if behind >= RELEASE_BYTES {
                    // SAFETY: the released range lies wholly behind the reader, which never
                    // reads it again; on a private read-only file mapping DONTNEED only drops
                    // the pages (a later access would read them from the file again).
                    #[cfg(unix)]
                    let _ = unsafe {
                        map.unchecked_advise_range(
                            memmap2::UncheckedAdvice::DontNeed,
                            *released,
                            behind,
                        )
                    };
                    #[cfg(target_os = "linux")]
                    if let Some(f) = drop_behind {
                        use std::os::fd::AsRawFd;
                        // A hint: a failure only leaves the pages cached.
                        // SAFETY: plain syscall on an open descriptor.
                        let _ = unsafe {
                            libc::posix_fadvise(
                                f.as_raw_fd(),
                                *released as libc::off_t,
                                behind as libc::off_t,
                                libc::POSIX_FADV_DONTNEED,
                            )
                        };
                    }
                    #[cfg(not(target_os = "linux"))]
                    let _ = drop_behind;
                    *released += behind;
                }
            }
            Bytes::Stream(s) => s.pos += n,
        }
    }
}

impl std::io::Read for Bytes {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.fill(1)?;
        let w = self.window();
        let n = out.len().min(w.len());
        out[..n].copy_from_slice(&w[..n]);
        self.advance(n);
        Ok(n)
    }
}

/// Where the accesses come from.
enum Source {
    /// oracleGeneral records decoded in place.
    Oracle(Bytes),
    /// ember binary records decoded in place.
    Ember { bytes: Bytes, n_volumes: u32, expected: Option<u64> },
    /// Any format, request by request.
    Requests(Box<TraceReader>),
}

/// A streaming reader of block accesses (see the module documentation).
pub struct BlockReader {
    path: PathBuf,
    format: Format,
    source: Source,
    split: Splitter,
    skip_bad: bool,
    skipped: u64,
    ignored: u64,
    /// Records consumed so far (binary fast paths), for error positions.
    record: u64,
    /// Bytes lent out by [`BlockReader::next_records`], consumed at the next call (so the
    /// pages under the lent records are not released while they are read).
    lent: usize,
    done: bool,
}

impl std::fmt::Debug for BlockReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockReader")
            .field("path", &self.path)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl BlockReader {
    /// Open `path` (format from `opts.format` or detected; a pipe or FIFO needs the format
    /// named, or a name that says it) and split its requests into `opts.block_size`-byte
    /// blocks. With `per_request`, each request is one access keyed by its first block.
    /// With `keep_times`, chunks carry each access's request time.
    pub fn open(
        path: &Path,
        opts: &ReadOptions,
        per_request: bool,
        keep_times: bool,
    ) -> Result<Self, TraceError> {
        let bs = opts.block_size;
        if bs == 0 || bs > u32::MAX as u64 {
            return Err(TraceError::Invalid(format!(
                "block size {bs} must be between 1 and 2^32-1 bytes"
            )));
        }
        let format = match opts.format {
            Some(f) => f,
            None => detect_format(path)?,
        };
        let split = Splitter {
            block_size: bs,
            shift: bs.trailing_zeros(),
            pow2: bs.is_power_of_two(),
            per_request,
            keep_times,
        };
        // oracleGeneral's in-place path takes obj_id as the key, which is what the general
        // decoder yields only while `block * block_size + block_size` cannot overflow: below
        // 64 KiB blocks. Larger blocks take the general path and its overflow check.
        let source = match format {
            Format::OracleGeneral if bs < 1 << 16 => Source::Oracle(Bytes::open(path)?),
            Format::Ember => {
                let mut bytes = Bytes::open(path)?;
                let h = ember_fmt::read_header(&mut bytes).map_err(|e| e.into_trace_error(path))?;
                Source::Ember { bytes, n_volumes: h.volumes.len() as u32, expected: h.record_count }
            }
            _ => {
                let o = ReadOptions { format: Some(format), ..opts.clone() };
                Source::Requests(Box::new(open(path, &o)?))
            }
        };
        Ok(Self {
            path: path.to_owned(),
            format,
            source,
            split,
            skip_bad: opts.skip_bad,
            skipped: 0,
            ignored: 0,
            record: 0,
            lent: 0,
            done: false,
        })
    }

    /// True if `path` can be read a second time (a regular file, not a pipe).
    pub fn rereadable(path: &Path) -> bool {
        is_regular_file(path)
    }

    /// The format being read.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Malformed records skipped and well-formed non-requests ignored, so far.
    pub fn stats(&self) -> ReadStats {
        match &self.source {
            Source::Requests(r) => r.stats(),
            _ => ReadStats { format: self.format, skipped: self.skipped, ignored: self.ignored },
        }
    }

    fn malformed(&self, line: u64, message: String) -> TraceError {
        TraceError::Malformed { path: self.path.clone(), line, message }
    }

    /// A malformed record at `line`: count it (skip_bad) or fail.
    fn bad(&mut self, line: u64, message: String) -> Result<(), TraceError> {
        if self.skip_bad {
            self.skipped += 1;
            Ok(())
        } else {
            self.done = true;
            Err(self.malformed(line, message))
        }
    }

    /// Clear `chunk` and fill it with the next block accesses: at least `max` of them unless
    /// the trace ends first (the last request may take it past `max` by its own blocks).
    /// Returns false when the trace has ended and the chunk is empty.
    pub fn next_chunk(&mut self, chunk: &mut BlockChunk, max: usize) -> Result<bool, TraceError> {
        chunk.clear();
        let max = max.max(1);
        let lent = std::mem::take(&mut self.lent);
        if let Source::Oracle(bytes) = &mut self.source {
            bytes.advance(lent);
        }
        if self.done {
            return Ok(false);
        }
        match self.source {
            Source::Oracle(_) => self.fill_oracle(chunk, max)?,
            Source::Ember { .. } => self.fill_ember(chunk, max)?,
            Source::Requests(_) => self.fill_requests(chunk, max)?,
        }
        Ok(!chunk.is_empty())
    }

    /// True if the trace is read as oracleGeneral records in place: then
    /// [`BlockReader::next_records`] can be used instead of [`BlockReader::next_chunk`]
    /// (whole-block splitting only: a chunk's flags and, unless times are kept, nothing else
    /// would differ). Times kept make it false: the records path carries no times.
    pub fn reads_records_in_place(&self) -> bool {
        matches!(self.source, Source::Oracle(_)) && !self.split.keep_times
    }

    /// The next whole oracleGeneral records, in place (the mapped file or the reader's
    /// buffer: zero-copy), at most `max` of them; empty at the end of the trace. Each is one
    /// block access, a read, keyed by [`og::record_key`]. The slice is valid until the next
    /// call; errors, `skip_bad` and counts are those of [`BlockReader::next_chunk`].
    ///
    /// # Panics
    /// If the trace is not read in place ([`BlockReader::reads_records_in_place`]).
    pub fn next_records(&mut self, max: usize) -> Result<&[u8], TraceError> {
        const RS: usize = og::RECORD_SIZE;
        let max = max.max(1);
        assert!(self.reads_records_in_place(), "next_records on a trace not read in place");
        let lent = std::mem::take(&mut self.lent);
        if let Source::Oracle(bytes) = &mut self.source {
            bytes.advance(lent);
        }
        if self.done {
            return Ok(&[]);
        }
        let whole = self.oracle_ready(max)?;
        self.record += whole as u64;
        self.lent = whole * RS;
        let Source::Oracle(bytes) = &self.source else { return Ok(&[]) };
        Ok(&bytes.window()[..whole * RS])
    }

    /// How many whole oracleGeneral records (at most `max`) the source's window holds; 0 at
    /// the end (which sets `done`). A truncated last record is reported here, or skipped and
    /// counted under `--skip-bad`.
    fn oracle_ready(&mut self, max: usize) -> Result<usize, TraceError> {
        const RS: usize = og::RECORD_SIZE;
        loop {
            let Source::Oracle(bytes) = &mut self.source else { return Ok(0) };
            let avail = bytes.fill(RS).map_err(|e| io_err(&self.path, e))?;
            if avail == 0 {
                self.done = true;
                return Ok(0);
            }
            if avail < RS {
                bytes.advance(avail);
                self.record += 1;
                let (n, m) = (self.record, format!("truncated record: {avail} of {RS} bytes"));
                self.bad(n, m)?;
                continue;
            }
            return Ok((avail / RS).min(max));
        }
    }

    fn fill_oracle(&mut self, c: &mut BlockChunk, max: usize) -> Result<(), TraceError> {
        const RS: usize = og::RECORD_SIZE;
        while c.len() < max {
            let whole = self.oracle_ready(max - c.len())?;
            if whole == 0 {
                return Ok(());
            }
            let Source::Oracle(bytes) = &mut self.source else { return Ok(()) };
            let recs = &bytes.window()[..whole * RS];
            c.keys.extend(recs.chunks_exact(RS).map(|r| le_u64(r, 4)));
            c.flags.extend(std::iter::repeat_n(FLAG_FIRST, whole));
            if self.split.keep_times {
                c.times
                    .extend(recs.chunks_exact(RS).map(|r| u64::from(le_u32(r, 0)) * 1_000_000_000));
            }
            bytes.advance(whole * RS);
            self.record += whole as u64;
        }
        Ok(())
    }

    fn fill_ember(&mut self, c: &mut BlockChunk, max: usize) -> Result<(), TraceError> {
        const RS: usize = ember_fmt::RECORD_SIZE;
        let split = self.split;
        while c.len() < max {
            let Source::Ember { bytes, n_volumes, expected } = &mut self.source else {
                return Ok(());
            };
            let n_volumes = *n_volumes;
            let avail = bytes.fill(RS).map_err(|e| io_err(&self.path, e))?;
            if avail == 0 {
                let (expected, got) = (*expected, self.record);
                self.done = true;
                if let Some(m) = ember_fmt::missing_records(got, expected) {
                    if !self.skip_bad {
                        return Err(self.malformed(got + 1, m));
                    }
                }
                return Ok(());
            }
            if avail < RS {
                bytes.advance(avail);
                self.record += 1;
                let (n, m) = (self.record, format!("truncated record: {avail} of {RS} bytes"));
                self.bad(n, m)?;
                continue;
            }
            // Decode records in place until the chunk is full or the buffer is used up.
            let window = bytes.window();
            let end = avail / RS * RS;
            let mut pos = 0;
            let mut failure = None;
            // The common record of a block trace, one whole aligned block, takes a fused
            // path: its key straight from the bytes, with what `decode`, `check_end` and
            // `Splitter::push` would check (volume known, no overflow) and give.
            let one_block = split.pow2 && !split.keep_times;
            let bs = split.block_size;
            while pos < end && c.len() < max {
                if one_block {
                    let (off, len) = (le_u64(window, pos + 8), le_u32(window, pos + 16));
                    let vo = le_u32(window, pos + 20);
                    let volume = vo & !ember_fmt::WRITE_BIT;
                    if u64::from(len) == bs
                        && off & (bs - 1) == 0
                        && off <= u64::MAX - bs
                        && volume < n_volumes
                    {
                        c.keys.push(block_key(volume, off >> split.shift));
                        let w = if vo & ember_fmt::WRITE_BIT != 0 { FLAG_WRITE } else { 0 };
                        c.flags.push(w | FLAG_FIRST);
                        pos += RS;
                        self.record += 1;
                        continue;
                    }
                }
                let mut rec = [0u8; RS];
                rec.copy_from_slice(&window[pos..pos + RS]);
                pos += RS;
                self.record += 1;
                match ember_fmt::decode(&rec, n_volumes)
                    .and_then(|r| check_end(Line::Request(r)).map(|_| r))
                {
                    Ok(r) => split.push(c, &r),
                    Err(m) => {
                        failure = Some((self.record, m));
                        break;
                    }
                }
            }
            bytes.advance(pos);
            if let Some((n, m)) = failure {
                self.bad(n, m)?;
            }
        }
        Ok(())
    }

    fn fill_requests(&mut self, c: &mut BlockChunk, max: usize) -> Result<(), TraceError> {
        let split = self.split;
        let Source::Requests(reader) = &mut self.source else { return Ok(()) };
        while c.len() < max {
            match reader.next() {
                Some(Ok(r)) => split.push(c, &r),
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                None => {
                    self.done = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{write_trace, Op, Trace, VolumeTable};

    fn sample_trace() -> Trace {
        let mut v = VolumeTable::new();
        v.intern("a");
        v.intern("b");
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let reqs = (0..20_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                Request {
                    time_ns: i * 1_000_000_000,
                    volume: (x % 2) as u32,
                    op: if x.is_multiple_of(3) { Op::Write } else { Op::Read },
                    offset: (x >> 8) % 1_000_000 * 512,
                    length: [0u32, 512, 4096, 8192, 20_000][(x % 5) as usize],
                }
            })
            .collect();
        Trace::new(reqs, v)
    }

    /// The accesses of `t` split the obvious way (Request::block_keys), as one chunk.
    fn expected(t: &Trace, bs: u64, per_request: bool) -> BlockChunk {
        let mut c = BlockChunk::default();
        for r in t.requests.iter().filter(|r| r.length > 0) {
            let keys: Vec<u64> = r.block_keys(bs).collect();
            let keys = if per_request { &keys[..1] } else { &keys[..] };
            for (i, &k) in keys.iter().enumerate() {
                c.keys.push(k);
                let w = if r.op.is_write() { FLAG_WRITE } else { 0 };
                c.flags.push(if i == 0 { w | FLAG_FIRST } else { w });
                c.times.push(r.time_ns);
            }
        }
        c
    }

    fn read_all(path: &Path, opts: &ReadOptions, per_request: bool, max: usize) -> BlockChunk {
        read_all_times(path, opts, per_request, max, true)
    }

    fn read_all_times(
        path: &Path,
        opts: &ReadOptions,
        per_request: bool,
        max: usize,
        times: bool,
    ) -> BlockChunk {
        let mut r = BlockReader::open(path, opts, per_request, times).expect("open");
        let mut all = BlockChunk::default();
        let mut c = BlockChunk::default();
        while r.next_chunk(&mut c, max).expect("chunk") {
            assert!(c.len() >= max.min(c.len()));
            all.keys.extend_from_slice(&c.keys);
            all.flags.extend_from_slice(&c.flags);
            all.times.extend_from_slice(&c.times);
        }
        assert!(!r.next_chunk(&mut c, max).expect("after end"));
        all
    }

    #[test]
    fn every_format_and_chunk_size_gives_the_split_of_the_requests() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = sample_trace();
        let bs = 4096;
        for (name, fmt) in [
            ("t.ember", Format::Ember),
            ("t.ember.zst", Format::Ember),
            ("t.msr", Format::MsrCsv),
            ("t.oracleGeneral.bin", Format::OracleGeneral),
            ("t.oracleGeneral.bin.gz", Format::OracleGeneral),
        ] {
            let p = dir.path().join(name);
            write_trace(&p, fmt, &t, bs).expect("write");
            // oracleGeneral holds one record per block access: its requests are blocks.
            let want = if fmt == Format::OracleGeneral {
                let (og_trace, _) = crate::read_trace(&p, &ReadOptions::default()).expect("read");
                expected(&og_trace, bs, false)
            } else {
                expected(
                    &crate::read_trace(&p, &ReadOptions::default()).expect("read").0,
                    bs,
                    false,
                )
            };
            assert!(want.len() > 20_000, "{name}: {}", want.len());
            for max in [1, 7, 4096, 1 << 20] {
                let got = read_all(&p, &ReadOptions::default(), false, max);
                assert_eq!(got, want, "{name} chunks of {max}");
                // Without times (the fused one-block path of ember's format).
                let got = read_all_times(&p, &ReadOptions::default(), false, max, false);
                assert_eq!((&got.keys, &got.flags), (&want.keys, &want.flags), "{name} {max}");
                assert!(got.times.is_empty());
            }
            let got = read_all(&p, &ReadOptions::default(), true, 999);
            let want_pr = if fmt == Format::OracleGeneral {
                want.clone()
            } else {
                expected(&crate::read_trace(&p, &ReadOptions::default()).expect("read").0, bs, true)
            };
            assert_eq!(got, want_pr, "{name} per request");
        }
    }

    #[test]
    fn oracle_general_keys_are_the_obj_ids_and_times_are_seconds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("x.oracleGeneral.bin");
        let recs = [(5u32, 0x0003_0000_0000_002au64), (6, 77), (6, 0x0003_0000_0000_002a)];
        let mut bytes = Vec::new();
        for (t, id) in recs {
            let r = og::OracleGeneralRecord {
                clock_time: t,
                obj_id: id,
                obj_size: 4096,
                next_access_vtime: -1,
            };
            bytes.extend_from_slice(&r.encode());
        }
        std::fs::write(&p, &bytes).expect("write");
        let got = read_all(&p, &ReadOptions::default(), false, 2);
        assert_eq!(got.keys, vec![0x0003_0000_0000_002a, 77, 0x0003_0000_0000_002a]);
        assert_eq!(got.flags, vec![FLAG_FIRST; 3]);
        assert_eq!(got.times, vec![5_000_000_000, 6_000_000_000, 6_000_000_000]);
        // A truncated last record: an error naming record 4, or skipped and counted.
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&p, &bytes).expect("write");
        let mut r = BlockReader::open(&p, &ReadOptions::default(), false, false).expect("open");
        let mut c = BlockChunk::default();
        let e = r.next_chunk(&mut c, 100).expect_err("truncated");
        assert!(e.to_string().contains(":4:") && e.to_string().contains("3 of 24"), "{e}");
        let skip = ReadOptions { skip_bad: true, ..ReadOptions::default() };
        let mut r = BlockReader::open(&p, &skip, false, false).expect("open");
        assert!(r.next_chunk(&mut c, 100).expect("chunk"));
        assert_eq!(c.len(), 3);
        assert!(!r.next_chunk(&mut c, 100).expect("end"));
        assert_eq!(r.stats().skipped, 1);
    }

    /// Keys of every record `next_records` lends, in order.
    fn records_keys(r: &mut BlockReader, max: usize) -> Result<Vec<u64>, TraceError> {
        let mut keys = Vec::new();
        loop {
            let recs = r.next_records(max)?;
            if recs.is_empty() {
                return Ok(keys);
            }
            assert_eq!(recs.len() % og::RECORD_SIZE, 0);
            assert!(recs.len() <= max * og::RECORD_SIZE);
            let n = recs.len() / og::RECORD_SIZE;
            keys.extend((0..n).map(|j| og::record_key(recs, j).expect("in range")));
            assert_eq!(og::record_key(recs, n), None);
        }
    }

    #[test]
    fn records_in_place_are_the_chunk_keys_and_fail_alike() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = sample_trace();
        for name in ["r.oracleGeneral.bin", "r.oracleGeneral.bin.gz"] {
            let p = dir.path().join(name);
            write_trace(&p, Format::OracleGeneral, &t, 4096).expect("write");
            let want = read_all(&p, &ReadOptions::default(), false, 1 << 20).keys;
            for max in [1, 7, 4096, 1 << 20] {
                let mut r =
                    BlockReader::open(&p, &ReadOptions::default(), false, false).expect("o");
                assert!(r.reads_records_in_place());
                assert_eq!(records_keys(&mut r, max).expect("records"), want, "{name} {max}");
                assert!(r.next_records(max).expect("after end").is_empty());
            }
            // Keeping times, or another format, takes the chunk path.
            let r = BlockReader::open(&p, &ReadOptions::default(), false, true).expect("open");
            assert!(!r.reads_records_in_place());
        }
        let e = dir.path().join("r.ember");
        write_trace(&e, Format::Ember, &t, 4096).expect("write");
        let r = BlockReader::open(&e, &ReadOptions::default(), false, false).expect("open");
        assert!(!r.reads_records_in_place());
        // A truncated last record: the error of next_chunk, naming the record; or skipped.
        let p = dir.path().join("cut.oracleGeneral.bin");
        let mut bytes = std::fs::read(dir.path().join("r.oracleGeneral.bin")).expect("read");
        let whole = (bytes.len() / og::RECORD_SIZE) as u64;
        bytes.extend_from_slice(&[9; 5]);
        std::fs::write(&p, &bytes).expect("write");
        let mut r = BlockReader::open(&p, &ReadOptions::default(), false, false).expect("open");
        let err = records_keys(&mut r, 1000).expect_err("truncated").to_string();
        let mut r = BlockReader::open(&p, &ReadOptions::default(), false, false).expect("open");
        let mut c = BlockChunk::default();
        let chunk_err = loop {
            match r.next_chunk(&mut c, 1000) {
                Ok(true) => {}
                Ok(false) => panic!("no error"),
                Err(e) => break e.to_string(),
            }
        };
        assert_eq!(err, chunk_err);
        assert!(err.contains(&format!(":{}:", whole + 1)) && err.contains("5 of 24"), "{err}");
        let skip = ReadOptions { skip_bad: true, ..ReadOptions::default() };
        let mut r = BlockReader::open(&p, &skip, false, false).expect("open");
        assert_eq!(records_keys(&mut r, 1000).expect("skipped").len() as u64, whole);
        assert_eq!(r.stats().skipped, 1);
    }

    #[test]
    fn malformed_ember_records_fail_like_the_request_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("bad.ember");
        let mut v = VolumeTable::new();
        v.intern("only");
        let ok = Request { time_ns: 1, volume: 0, op: Op::Read, offset: 0, length: 4096 };
        let bad = Request { volume: 5, ..ok };
        let mut bytes = Vec::new();
        ember_fmt::write_header(&mut bytes, &v, Some(3)).expect("header");
        for r in [ok, bad, ok] {
            bytes.extend_from_slice(&ember_fmt::encode(&r));
        }
        std::fs::write(&p, &bytes).expect("write");
        let mut r = BlockReader::open(&p, &ReadOptions::default(), false, false).expect("open");
        let mut c = BlockChunk::default();
        let e = r.next_chunk(&mut c, 100).expect_err("bad volume");
        let general = crate::read_trace(&p, &ReadOptions::default()).expect_err("bad volume");
        assert_eq!(e.to_string(), general.to_string());
        assert!(e.to_string().contains(":2:"), "{e}");
        let skip = ReadOptions { skip_bad: true, ..ReadOptions::default() };
        let mut r = BlockReader::open(&p, &skip, false, false).expect("open");
        assert!(r.next_chunk(&mut c, 100).expect("chunk"));
        assert_eq!(c.keys, vec![0, 0]);
        assert_eq!(r.stats().skipped, 1);
    }

    /// A header cut short, a bad header and a file with fewer records than its header
    /// promises fail the block reader with the request reader's errors (one mapping,
    /// `formats::ember`).
    #[test]
    fn ember_header_errors_and_short_files_fail_like_the_request_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut v = VolumeTable::new();
        v.intern("only");
        let ok = Request { time_ns: 1, volume: 0, op: Op::Read, offset: 0, length: 4096 };
        let mut short = Vec::new();
        ember_fmt::write_header(&mut short, &v, Some(3)).expect("header");
        for _ in 0..2 {
            short.extend_from_slice(&ember_fmt::encode(&ok));
        }
        let cases: [(&str, &[u8], &str); 3] = [
            ("cut.ember", b"EMBERTRC\x01\0", "cut.ember: ember header is truncated"),
            ("v7.ember", b"EMBERTRC\x07\0\0\0", "version 7 is not supported"),
            (
                "short.ember",
                &short,
                "short.ember:3: file ends after 2 records but its header promises 3",
            ),
        ];
        for (name, bytes, want) in cases {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).expect("write");
            let general = crate::read_trace(&p, &ReadOptions::default()).expect_err(name);
            let blocks = BlockReader::open(&p, &ReadOptions::default(), false, false)
                .and_then(|mut r| r.next_chunk(&mut BlockChunk::default(), 100))
                .expect_err(name);
            assert_eq!(blocks.to_string(), general.to_string(), "{name}");
            assert!(blocks.to_string().contains(want), "{name}: {blocks}");
        }
    }

    /// The file's pages resident in the page cache, per 4 KiB page (mincore on a fresh map).
    #[cfg(target_os = "linux")]
    fn resident_pages(path: &Path) -> Vec<bool> {
        let f = std::fs::File::open(path).expect("open");
        // SAFETY: a read-only map of a file this test wrote; only its residency is read.
        let map = unsafe { memmap2::Mmap::map(&f) }.expect("map");
        let pages = map.len().div_ceil(4096);
        let mut v = vec![0u8; pages];
        // SAFETY: `v` has one byte per page of the mapping.
        let rc =
            unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, map.len(), v.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        v.iter().map(|b| b & 1 == 1).collect()
    }

    /// A file larger than half the memory has its pages dropped from the page cache behind
    /// the reader (forced here on a 48 MB file): what was read is no longer cached, the bytes
    /// read are the file's, and a file under the threshold keeps its cache.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_that_outgrows_the_page_cache_is_dropped_behind_the_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("big.bin");
        let len = 48usize << 20;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).expect("write");
        std::fs::File::open(&p).expect("open").sync_all().expect("sync");
        for (drop, want_cached) in [(false, true), (true, false)] {
            // Bring the whole file into the page cache first.
            let _ = std::fs::read(&p).expect("read");
            let mut b =
                Bytes::open_with(&p, if drop { |_| true } else { |_| false }).expect("open");
            let mut seen = 0usize;
            while b.fill(1).expect("fill") > 0 {
                let w = b.window().len().min(1 << 20);
                assert_eq!(&b.window()[..w], &data[seen..seen + w]);
                b.advance(w);
                seen += w;
            }
            assert_eq!(seen, len);
            // Everything but the last release step's worth lies behind the reader.
            let behind = (len - RELEASE_BYTES - (1 << 16)) / 4096;
            let cached = resident_pages(&p)[..behind].iter().filter(|&&r| r).count();
            if want_cached {
                assert!(cached > behind * 9 / 10, "kept: {cached} of {behind} pages cached");
            } else {
                assert!(cached < behind / 10, "dropped: {cached} of {behind} pages still cached");
            }
        }
        assert!(!outgrows_page_cache(1 << 20));
        assert!(outgrows_page_cache(u64::MAX));
    }

    #[test]
    fn a_fifo_streams_with_its_format_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = sample_trace();
        let file = dir.path().join("t.ember");
        write_trace(&file, Format::Ember, &t, 4096).expect("write");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            panic!("mkfifo failed");
        }
        // Without a format, a FIFO is refused before anything is consumed.
        let e = BlockReader::open(&fifo, &ReadOptions::default(), false, true).expect_err("fmt");
        assert!(e.to_string().contains("--format"), "{e}");
        let (f2, data) = (fifo.clone(), std::fs::read(&file).expect("read"));
        let writer = std::thread::spawn(move || std::fs::write(f2, data));
        let opts = ReadOptions { format: Some(Format::Ember), ..ReadOptions::default() };
        let got = read_all(&fifo, &opts, false, 1000);
        assert!(writer.join().is_ok_and(|r| r.is_ok()));
        assert_eq!(got, expected(&t, 4096, false));
    }
}
