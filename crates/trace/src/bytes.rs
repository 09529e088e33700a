//! The bytes of a binary trace file, read once from start to end: the one byte source of
//! every binary reader ([`crate::TraceReader`], [`crate::BlockReader`] and the oracleGeneral
//! passes of [`crate::oracle_general_file`]).
//!
//! An uncompressed regular file is mapped and read in place (zero-copy). The pages behind the
//! reader are released every [`RELEASE_BYTES`], so resident memory stays bounded whatever the
//! file's length; a file larger than half the machine's memory also has them dropped from the
//! page cache ([`outgrows_page_cache`]), so a 100 GB trace streams past without filling it.
//! Anything else (a pipe, a FIFO, a compressed file) streams through a refillable buffer
//! ([`StreamBytes`]).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use memmap2::Mmap;

use crate::compression::{compression_of, read_magic, Compression};
use crate::detect::is_regular_file;
use crate::error::io_err;
use crate::stream_bytes::StreamBytes;
use crate::TraceError;

/// Bytes of a mapped file released behind the reader at a time (a multiple of the 64 KiB
/// release granule).
pub(crate) const RELEASE_BYTES: usize = 8 << 20;

/// The granule of a release: a range released starts and ends on it.
const GRANULE: usize = 1 << 16;

/// True if a file of `len` bytes is larger than half of the machine's memory: the page cache
/// cannot keep it for a second run, and filling the cache with it only makes the kernel
/// reclaim (on another core, in the caches the simulation needs) while the file streams
/// past. The reader then drops the file's pages behind it from the page cache too.
pub(crate) fn outgrows_page_cache(len: u64) -> bool {
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

/// An uncompressed regular file mapped into memory, read in place from start to end.
pub(crate) struct MappedFile {
    map: Mmap,
    /// The next byte to read.
    pos: usize,
    /// A record ending at or before this byte is served by [`MappedFile::next_record`]'s
    /// fast path: no release is due before it, and it is within the file.
    soft_end: usize,
    /// What lies behind the reader and is released.
    behind: Behind,
}

impl MappedFile {
    /// [`Bytes::next_record`] on a mapped file. A whole record before the next release point
    /// costs one comparison; reaching that point, the end of the file or a truncated tail
    /// takes [`MappedFile::next_record_slow`] (once every [`RELEASE_BYTES`]).
    #[inline(always)]
    fn next_record(&mut self, size: usize) -> NextRecord<'_> {
        let start = self.pos;
        if start + size <= self.soft_end {
            self.pos = start + size;
            return Ok(Some(Ok(&self.map[start..start + size])));
        }
        self.next_record_slow(size)
    }

    #[inline(never)]
    fn next_record_slow(&mut self, size: usize) -> NextRecord<'_> {
        let (start, len) = (self.pos, self.map.len());
        let rest = len - start;
        if rest == 0 {
            return Ok(None);
        }
        // Everything before this record is done with.
        self.behind.release_before(&self.map, start);
        self.soft_end = (self.behind.released + RELEASE_BYTES).min(len);
        if rest < size {
            self.pos = len;
            return Ok(Some(Err(rest)));
        }
        self.pos = start + size;
        Ok(Some(Ok(&self.map[start..start + size])))
    }
}

/// The part of a mapped file behind the reader that is released: its pages dropped from the
/// mapping (and from the page cache, for a file that [`outgrows_page_cache`]).
/// A release reads the map and writes only this.
struct Behind {
    /// Bytes before this one are released.
    released: usize,
    /// The file, when its pages are dropped from the page cache behind the reader too.
    drop_behind: Option<File>,
}

impl Behind {
    /// Release what lies behind `done` in `map` (no byte before it is read again) once it
    /// reaches [`RELEASE_BYTES`]: whole granules from the last release on.
    #[inline(always)]
    fn release_before(&mut self, map: &Mmap, done: usize) {
        if done - self.released >= RELEASE_BYTES {
            self.release_to(map, done);
        }
    }

    #[cold]
    #[inline(never)]
    fn release_to(&mut self, map: &Mmap, done: usize) {
        let behind = (done - self.released) & !(GRANULE - 1);
        // SAFETY: the released range lies wholly behind the reader, which never reads it
        // again (`done` is at most the start of anything lent out); on a private read-only
        // file mapping DONTNEED only drops the pages (a later access would read them from
        // the file again).
        #[cfg(unix)]
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, self.released, behind)
        };
        #[cfg(target_os = "linux")]
        if let Some(f) = &self.drop_behind {
            use std::os::fd::AsRawFd;
            // A hint: a failure only leaves the pages cached.
            // SAFETY: plain syscall on an open descriptor.
            let _ = unsafe {
                libc::posix_fadvise(
                    f.as_raw_fd(),
                    self.released as libc::off_t,
                    behind as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = &self.drop_behind;
        self.released += behind;
    }
}

/// The bytes of a binary trace: a mapped regular file ([`MappedFile`]: in place, released
/// behind the reader) or a stream (pipe, FIFO, decompressor) through a refillable buffer.
pub(crate) enum Bytes {
    /// An uncompressed, non-empty regular file, mapped.
    Map(MappedFile),
    /// Anything else.
    Stream(StreamBytes),
}

/// The next record of `size` bytes: `Ok(Some(Ok(bytes)))`, `Ok(Some(Err(n)))` for a truncated
/// last record of `n` bytes, `Ok(None)` at the end.
pub(crate) type NextRecord<'a> = std::io::Result<Option<Result<&'a [u8], usize>>>;

impl Bytes {
    /// Open `path`: mapped if it is an uncompressed, non-empty regular file (dropping its
    /// pages from the page cache behind the reader when it [`outgrows_page_cache`]), else
    /// streamed and decompressed transparently.
    pub(crate) fn open(path: &Path) -> Result<Self, TraceError> {
        Self::open_with(path, outgrows_page_cache)
    }

    /// [`Bytes::open`], deciding from the file's length whether to drop its pages behind.
    fn open_with(path: &Path, drop_behind: fn(u64) -> bool) -> Result<Self, TraceError> {
        if is_regular_file(path) {
            let file = File::open(path).map_err(|e| io_err(path, e))?;
            let mut magic = [0u8; 4];
            let n = read_magic(&file, &mut magic).map_err(|e| io_err(path, e))?;
            if n > 0 && compression_of(&magic[..n]) == Compression::None {
                // SAFETY: a read-only private map of a regular file; like every mmap of a file
                // it assumes no other process truncates the file while it is read. (Prefaulting
                // with MAP_POPULATE measured no faster than MADV_SEQUENTIAL read-ahead on 240 MB
                // files, so the map is lazy.)
                let map = unsafe { Mmap::map(&file) }.map_err(|e| io_err(path, e))?;
                #[cfg(unix)]
                let _ = map.advise(memmap2::Advice::Sequential);
                let drop_behind = drop_behind(map.len() as u64).then_some(file);
                let behind = Behind { released: 0, drop_behind };
                let soft_end = RELEASE_BYTES.min(map.len());
                return Ok(Bytes::Map(MappedFile { map, pos: 0, soft_end, behind }));
            }
        }
        Ok(Bytes::Stream(StreamBytes::open(path)?))
    }

    /// Bytes left in a mapped file (`None` for a stream, whose length is unknown).
    pub(crate) fn mapped_remaining(&self) -> Option<usize> {
        match self {
            Bytes::Map(m) => Some(m.map.len() - m.pos),
            Bytes::Stream(_) => None,
        }
    }

    /// Make at least `need` bytes available unless the input ends; return how many are.
    #[inline]
    pub(crate) fn fill(&mut self, need: usize) -> std::io::Result<usize> {
        match self {
            Bytes::Map(m) => Ok(m.map.len() - m.pos),
            Bytes::Stream(s) => s.fill(need),
        }
    }

    /// The available bytes (after [`Bytes::fill`]).
    #[inline]
    pub(crate) fn window(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => &m.map[m.pos..],
            Bytes::Stream(s) => s.window(),
        }
    }

    /// Consume `n` available bytes: the caller is done with them.
    #[inline]
    pub(crate) fn advance(&mut self, n: usize) {
        match self {
            Bytes::Map(m) => {
                m.pos += n;
                m.behind.release_before(&m.map, m.pos);
            }
            Bytes::Stream(s) => s.consume(n),
        }
    }

    /// Take the next record of `size` bytes ([`NextRecord`]); it stays readable until the
    /// next call.
    #[inline]
    pub(crate) fn next_record(&mut self, size: usize) -> NextRecord<'_> {
        match self {
            Bytes::Map(m) => m.next_record(size),
            Bytes::Stream(s) => {
                let avail = s.fill(size)?;
                if avail == 0 {
                    return Ok(None);
                }
                if avail < size {
                    s.consume(avail);
                    return Ok(Some(Err(avail)));
                }
                Ok(Some(Ok(s.take(size))))
            }
        }
    }
}

impl Read for Bytes {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.fill(1)?;
        let w = self.window();
        let n = out.len().min(w.len());
        out[..n].copy_from_slice(&w[..n]);
        self.advance(n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of `b` through `next_record`, and the truncated tail's length.
    fn records(b: &mut Bytes, size: usize) -> (Vec<Vec<u8>>, Option<usize>) {
        let (mut out, mut cut) = (Vec::new(), None);
        while let Some(r) = b.next_record(size).expect("next") {
            match r {
                Ok(rec) => out.push(rec.to_vec()),
                Err(n) => cut = Some(n),
            }
        }
        (out, cut)
    }

    /// A mapped file, its gzip and zstd copies and an empty file give the same records, the
    /// same truncated tail, and the same bytes through `Read`.
    #[test]
    fn mapped_and_streamed_files_give_the_same_records() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tempdir");
        let data: Vec<u8> = (0..24 * 50_000 + 5).map(|i| (i * 13 % 251) as u8).collect();
        let plain = dir.path().join("t.bin");
        std::fs::write(&plain, &data).expect("write");
        let zst = dir.path().join("t.bin.zst");
        std::fs::write(&zst, zstd::encode_all(&data[..], 1).expect("zstd")).expect("write");
        let gz = dir.path().join("t.bin.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&data).expect("gzip");
        std::fs::write(&gz, e.finish().expect("gzip")).expect("write");
        let want: Vec<Vec<u8>> = data.chunks_exact(24).map(<[u8]>::to_vec).collect();
        for (path, mapped) in [(&plain, true), (&zst, false), (&gz, false)] {
            let mut b = Bytes::open(path).expect("open");
            assert_eq!(matches!(b, Bytes::Map(_)), mapped, "{}", path.display());
            assert_eq!(b.mapped_remaining(), mapped.then_some(data.len()));
            assert_eq!(records(&mut b, 24), (want.clone(), Some(5)), "{}", path.display());
            let mut all = Vec::new();
            Bytes::open(path).expect("open").read_to_end(&mut all).expect("read");
            assert!(all == data, "{}: bytes differ", path.display());
        }
        let empty = dir.path().join("empty.bin");
        std::fs::write(&empty, b"").expect("write");
        let mut b = Bytes::open(&empty).expect("open");
        assert!(matches!(b, Bytes::Stream(_)));
        assert_eq!(b.fill(24).expect("fill"), 0);
        assert_eq!(records(&mut b, 24), (vec![], None));
        let missing = dir.path().join("missing.bin");
        assert!(matches!(Bytes::open(&missing), Err(TraceError::Io { .. })));
    }

    /// Records that straddle the release points, after a header read through `Read`, come
    /// whole and in order from the mapped file, then the truncated tail.
    #[test]
    fn records_straddling_release_points_come_whole() {
        const HEADER: usize = 13;
        const SIZE: usize = 40;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("t.bin");
        let len = 3 * RELEASE_BYTES + 7 * GRANULE + HEADER + 29;
        let data: Vec<u8> = (0..len).map(|i| (i * 31 % 253) as u8).collect();
        std::fs::write(&p, &data).expect("write");
        let mut b = Bytes::open_with(&p, |_| true).expect("open");
        assert!(matches!(b, Bytes::Map(_)));
        let mut header = [0u8; HEADER];
        b.read_exact(&mut header).expect("header");
        assert_eq!(header[..], data[..HEADER]);
        let (recs, cut) = records(&mut b, SIZE);
        assert_eq!(recs.len(), (len - HEADER) / SIZE);
        for (i, r) in recs.iter().enumerate() {
            let at = HEADER + i * SIZE;
            assert!(r[..] == data[at..at + SIZE], "record {i}");
        }
        assert_eq!(cut, Some((len - HEADER) % SIZE));
        let Bytes::Map(m) = &b else { panic!("mapped") };
        assert!(m.behind.released >= 3 * RELEASE_BYTES, "released {}", m.behind.released);
        assert!(b.next_record(SIZE).expect("after end").is_none());
    }

    /// The file's pages resident in the page cache, per 4 KiB page (mincore on a fresh map).
    #[cfg(target_os = "linux")]
    fn resident_pages(path: &Path) -> Vec<bool> {
        let f = File::open(path).expect("open");
        // SAFETY: a read-only map of a file this test wrote; only its residency is read.
        let map = unsafe { Mmap::map(&f) }.expect("map");
        let pages = map.len().div_ceil(4096);
        let mut v = vec![0u8; pages];
        // SAFETY: `v` has one byte per page of the mapping.
        let rc =
            unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, map.len(), v.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        v.iter().map(|b| b & 1 == 1).collect()
    }

    /// A file larger than half the memory has its pages dropped from the page cache behind
    /// the reader (forced here on a 48 MB file), whether it is consumed by windows (the block
    /// reader) or record by record (the request reader): what was read is no longer cached,
    /// the bytes read are the file's, and a file under the threshold keeps its cache.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_that_outgrows_the_page_cache_is_dropped_behind_the_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("big.bin");
        let len = 48usize << 20;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).expect("write");
        File::open(&p).expect("open").sync_all().expect("sync");
        for by_record in [false, true] {
            for (drop, want_cached) in [(false, true), (true, false)] {
                // Bring the whole file into the page cache first.
                let _ = std::fs::read(&p).expect("read");
                let mut b =
                    Bytes::open_with(&p, if drop { |_| true } else { |_| false }).expect("open");
                let mut seen = 0usize;
                if by_record {
                    const SIZE: usize = 24;
                    while let Some(r) = b.next_record(SIZE).expect("next") {
                        let rec = r.expect("whole records: 48 MiB is a multiple of 24 bytes");
                        assert!(rec == &data[seen..seen + SIZE], "record at {seen}");
                        seen += SIZE;
                    }
                } else {
                    while b.fill(1).expect("fill") > 0 {
                        let w = b.window().len().min(1 << 20);
                        assert!(b.window()[..w] == data[seen..seen + w], "window at {seen}");
                        b.advance(w);
                        seen += w;
                    }
                }
                assert_eq!(seen, len);
                // Everything but the last release step's worth lies behind the reader.
                let behind = (len - RELEASE_BYTES - GRANULE) / 4096;
                let cached = resident_pages(&p)[..behind].iter().filter(|&&r| r).count();
                let how = if by_record { "by record" } else { "by window" };
                if want_cached {
                    assert!(cached > behind * 9 / 10, "{how} kept: {cached} of {behind} cached");
                } else {
                    assert!(cached < behind / 10, "{how} dropped: {cached} of {behind} cached");
                }
            }
        }
        assert!(!outgrows_page_cache(1 << 20));
        assert!(outgrows_page_cache(u64::MAX));
    }
}
