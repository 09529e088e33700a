//! Opening a trace: format detection, transparent `.gz` / `.zst` decompression, and the
//! streaming [`TraceReader`].

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::decompress_thread::ThreadedRead;
use crate::formats::blkparse::{looks_like_event, BlkAction, BlkparseParser};
use crate::formats::csv::{CsvColumns, CsvParser};
use crate::formats::ember as ember_fmt;
use crate::formats::msr::MsrParser;
use crate::formats::oracle_general::{self as og, OracleGeneralDecoder};
use crate::formats::spc::SpcParser;
use crate::formats::vscsi::{self, VscsiDecoder};
use crate::formats::{Format, Line};
use crate::{Request, Trace, TraceError, VolumeTable, DEFAULT_BLOCK_SIZE};

/// How to read a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// The format; `None` detects it ([`detect_format`]).
    pub format: Option<Format>,
    /// Skip and count malformed records instead of stopping at the first.
    pub skip_bad: bool,
    /// Which blkparse events are requests.
    pub blkparse_action: BlkAction,
    /// Column mapping for [`Format::Csv`].
    pub csv: CsvColumns,
    /// Block size in bytes: the length of an oracleGeneral record's request, and the unit of
    /// CSV block offsets and of CSV requests without a size column.
    pub block_size: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            format: None,
            skip_bad: false,
            blkparse_action: BlkAction::D,
            csv: CsvColumns::default(),
            block_size: DEFAULT_BLOCK_SIZE,
        }
    }
}

/// What reading a whole trace found besides its requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadStats {
    /// The format read.
    pub format: Format,
    /// Malformed records skipped (with [`ReadOptions::skip_bad`]).
    pub skipped: u64,
    /// Well-formed lines or records that are not requests (headers, empty lines, blkparse
    /// events of other actions, flushes, SCSI commands other than reads and writes).
    pub ignored: u64,
}

/// The compression of a file, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (`1f 8b`).
    Gzip,
    /// Zstandard (`28 b5 2f fd`).
    Zstd,
}

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> TraceError {
    TraceError::Io { path: path.to_owned(), source }
}

fn detect_compression(path: &Path) -> Result<Compression, TraceError> {
    let mut f = File::open(path).map_err(|e| io_err(path, e))?;
    let mut b = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        let k = f.read(&mut b[n..]).map_err(|e| io_err(path, e))?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(compression_of(&b[..n]))
}

/// The compression named by the first bytes of a stream.
fn compression_of(b: &[u8]) -> Compression {
    if b.len() >= 2 && b[..2] == [0x1f, 0x8b] {
        Compression::Gzip
    } else if b.len() >= 4 && b[..4] == [0x28, 0xb5, 0x2f, 0xfd] {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Open `path` for reading, decompressing gzip and zstd transparently (by content, whatever
/// the extension). The file is opened once and its first bytes peeked, so this works on pipes
/// and FIFOs too. Decompression runs on its own thread
/// ([`crate::decompress_thread::ThreadedRead`]).
pub fn open_decompressed(path: &Path) -> Result<Box<dyn Read + Send>, TraceError> {
    Ok(match open_source(path)? {
        Source::Plain(r) => r,
        Source::Threaded(t) => Box::new(t),
    })
}

/// An opened trace's bytes: as they are, or from a decompressing thread.
enum Source {
    /// Not compressed: the file (or pipe) itself.
    Plain(Box<dyn Read + Send>),
    /// Compressed: decompressed ahead on its own thread.
    Threaded(ThreadedRead),
}

/// [`open_decompressed`], keeping the decompressing thread's reader as it is, so that
/// [`StreamBytes`] can take its buffers whole.
fn open_source(path: &Path) -> Result<Source, TraceError> {
    open_source_direct_from(path, crate::direct_read::direct_threshold())
}

/// [`open_source`], reading a compressed regular file of at least `direct_min` bytes with
/// `O_DIRECT` ([`crate::direct_read`]).
fn open_source_direct_from(path: &Path, direct_min: u64) -> Result<Source, TraceError> {
    let mut f = File::open(path).map_err(|e| io_err(path, e))?;
    let mut b = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        match f.read(&mut b[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(path, e)),
        }
    }
    let compression = compression_of(&b[..n]);
    let large = f.metadata().is_ok_and(|m| m.is_file() && m.len() >= direct_min);
    let direct = match compression {
        Compression::Gzip | Compression::Zstd if large => {
            crate::direct_read::DirectFile::open(path).map_err(|e| io_err(path, e))?
        }
        _ => None,
    };
    let peeked = std::io::Cursor::new(b[..n].to_vec());
    let whole: Box<dyn Read + Send> = Box::new(peeked.chain(f));
    let inner: Box<dyn Read + Send> = match (compression, direct) {
        (Compression::None, _) => return Ok(Source::Plain(whole)),
        (Compression::Gzip, Some(d)) => Box::new(flate2::bufread::MultiGzDecoder::new(d)),
        (Compression::Gzip, None) => {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, whole)))
        }
        (Compression::Zstd, Some(d)) => {
            Box::new(zstd::stream::read::Decoder::with_buffer(d).map_err(|e| io_err(path, e))?)
        }
        (Compression::Zstd, None) => {
            Box::new(zstd::stream::read::Decoder::new(whole).map_err(|e| io_err(path, e))?)
        }
    };
    Ok(Source::Threaded(ThreadedRead::spawn(inner).map_err(|e| io_err(path, e))?))
}

/// True if `path` is a regular file (not a pipe, FIFO or character device), which can be
/// read twice and sniffed without consuming it.
pub fn is_regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// True if `path` can be read twice, so sniffing its first bytes does not consume them: a
/// regular file or a block device (a warmup log on Bonfire's logging volume).
fn rereadable(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() || m.file_type().is_block_device())
}

/// The file name without a trailing `.gz`, `.zst` or `.zstd`.
fn uncompressed_name(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for suffix in [".gz", ".zst", ".zstd"] {
        if let Some(stem) = name.strip_suffix(suffix) {
            return stem.to_owned();
        }
    }
    name
}

/// The format a file name names, if any: `.msr`, `.spc`, `.blkparse`, `.vscsi`, `.ember`,
/// `*.oracleGeneral*` (libCacheSim's `x.oracleGeneral.bin` naming), each possibly followed by
/// `.gz` / `.zst`. `.csv` and `.txt` name no format: content decides.
pub fn format_from_name(path: &Path) -> Option<Format> {
    let name = uncompressed_name(path);
    if name.to_ascii_lowercase().contains("oraclegeneral") {
        return Some(Format::OracleGeneral);
    }
    let ext = name.rsplit_once('.')?.1;
    Format::from_extension(ext)
}

/// Read up to `n` bytes from the start of the (decompressed) file.
fn head(path: &Path, n: usize) -> Result<Vec<u8>, TraceError> {
    let r = open_decompressed(path)?;
    let mut buf = Vec::with_capacity(n);
    r.take(n as u64).read_to_end(&mut buf).map_err(|e| io_err(path, e))?;
    Ok(buf)
}

/// Decide a format from content.
fn sniff(path: &Path, head: &[u8]) -> Result<Format, TraceError> {
    if head.starts_with(&ember_fmt::MAGIC) {
        return Ok(Format::Ember);
    }
    if head.starts_with(&crate::formats::warmup_log::MAGIC)
        || crate::formats::warmup_log::cache_region(head).is_some()
    {
        // A warmup log, or an ember cache device whose layout holds one.
        return Ok(Format::WarmupLog);
    }
    let texty = !head.is_empty()
        && head.iter().all(|&b| {
            b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80
        });
    if texty {
        // The last line may be cut by the sniff window; look at complete lines only.
        let text = String::from_utf8_lossy(head);
        let mut lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(8).collect();
        if lines.len() > 1 && !text.ends_with('\n') {
            lines.pop();
        }
        if let Some(first) = lines.first() {
            if lines.iter().take(4).any(|l| looks_like_event(l)) {
                return Ok(Format::Blkparse);
            }
            let data = lines
                .iter()
                .find(|l| !l.to_ascii_lowercase().starts_with("timestamp"))
                .unwrap_or(first);
            let f: Vec<&str> = data.split(',').map(str::trim).collect();
            if f.len() >= 6
                && f[0].parse::<u64>().is_ok_and(|t| t >= crate::formats::msr::FILETIME_UNIX_EPOCH)
                && (f[3].eq_ignore_ascii_case("read") || f[3].eq_ignore_ascii_case("write"))
            {
                return Ok(Format::MsrCsv);
            }
            if f.len() >= 5
                && f[0].parse::<u64>().is_ok()
                && f[1].parse::<u64>().is_ok()
                && matches!(f[3], "r" | "R" | "w" | "W")
                && f[4].parse::<f64>().is_ok()
            {
                return Ok(Format::SpcCsv);
            }
            if first.contains([',', '\t', '|']) {
                return Ok(Format::Csv);
            }
        }
        return Err(TraceError::Format {
            path: path.to_owned(),
            message: "cannot tell the trace format from its text; pass --format".into(),
        });
    }
    if vscsi::detect_version(head).is_some() {
        return Ok(Format::Vscsi);
    }
    Err(TraceError::Format {
        path: path.to_owned(),
        message: "cannot tell the format of this binary file; pass --format (oracleGeneral \
                  files are recognised by an .oracleGeneral.bin name)"
            .into(),
    })
}

/// The format of `path`: by name first ([`format_from_name`]), then by sniffing the first
/// bytes (after decompression): ember's magic, blkparse event lines, MSR-Cambridge and SPC
/// field shapes, any other delimited text as CSV, vscsi's version fields.
pub fn detect_format(path: &Path) -> Result<Format, TraceError> {
    if let Some(f) = format_from_name(path) {
        return Ok(f);
    }
    if !rereadable(path) && path.exists() {
        return Err(TraceError::Format {
            path: path.to_owned(),
            message: "cannot tell the format of a pipe without consuming it; pass --format".into(),
        });
    }
    let h = head(path, 8192)?;
    sniff(path, &h)
}

/// Map a whole file read-only. (Prefaulting with MAP_POPULATE measured no faster than
/// MADV_SEQUENTIAL read-ahead on 240 MB files, so the map is lazy.)
///
/// # Safety
/// Like every file mapping, it assumes no other process truncates the file while it is mapped.
unsafe fn map_file(file: &File) -> std::io::Result<Mmap> {
    memmap2::MmapOptions::new().map(file)
}

/// A byte stream with a refillable buffer, for binary records from a decompressor.
///
/// From a decompressing thread the buffer is the thread's own, taken whole: only the unread
/// tail of the previous buffer (a record cut by the boundary) is copied, into the headroom
/// in front of the new data ([`crate::decompress_thread::HEADROOM`]). From any other reader
/// the bytes are read into a buffer of its own.
pub(crate) struct StreamBytes {
    r: Source,
    pub(crate) buf: Vec<u8>,
    pub(crate) pos: usize,
    pub(crate) len: usize,
    eof: bool,
}

impl StreamBytes {
    /// Bytes from `r`, read into a buffer of the stream's own.
    pub(crate) fn new(r: Box<dyn Read + Send>) -> Self {
        Self { r: Source::Plain(r), buf: vec![0; 1 << 18], pos: 0, len: 0, eof: false }
    }

    /// Open `path` (decompressed transparently, [`open_decompressed`]).
    pub(crate) fn open(path: &Path) -> Result<Self, TraceError> {
        Ok(match open_source(path)? {
            Source::Plain(r) => Self::new(r),
            r @ Source::Threaded(_) => Self { r, buf: Vec::new(), pos: 0, len: 0, eof: false },
        })
    }

    /// Make at least `need` bytes available unless the stream ends; return how many are.
    pub(crate) fn fill(&mut self, need: usize) -> std::io::Result<usize> {
        while self.len - self.pos < need && !self.eof {
            match &mut self.r {
                Source::Threaded(t) => match t.next_buffer()? {
                    None => self.eof = true,
                    Some(mut next) => {
                        use crate::decompress_thread::HEADROOM;
                        let left = self.len - self.pos;
                        if left <= HEADROOM {
                            // The unread tail goes right before the new data.
                            let at = HEADROOM - left;
                            next[at..HEADROOM].copy_from_slice(&self.buf[self.pos..self.len]);
                            let old = std::mem::replace(&mut self.buf, next);
                            t.recycle(old);
                            self.pos = at;
                        } else {
                            // More wanted at once than the headroom holds: append.
                            self.buf.copy_within(self.pos..self.len, 0);
                            self.buf.truncate(left);
                            self.buf.extend_from_slice(&next[HEADROOM..]);
                            t.recycle(next);
                            self.pos = 0;
                        }
                        self.len = self.buf.len();
                    }
                },
                Source::Plain(r) => {
                    if self.pos > 0 {
                        self.buf.copy_within(self.pos..self.len, 0);
                        self.len -= self.pos;
                        self.pos = 0;
                    }
                    if self.len == self.buf.len() {
                        self.buf.resize(self.buf.len() * 2, 0);
                    }
                    match r.read(&mut self.buf[self.len..]) {
                        Ok(0) => self.eof = true,
                        Ok(k) => self.len += k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(self.len - self.pos)
    }
}

impl Read for StreamBytes {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.len {
            self.fill(1)?;
        }
        let n = out.len().min(self.len - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Where binary records come from.
enum Bytes {
    /// An uncompressed file mapped into memory.
    Mmap { map: Mmap, pos: usize },
    /// A decompressing (or unmappable) stream.
    Stream(StreamBytes),
}

/// The next record of `size` bytes: `Ok(Some(Ok(bytes)))`, `Ok(Some(Err(n)))` for a truncated
/// last record of `n` bytes, `Ok(None)` at the end.
type NextRecord<'a> = std::io::Result<Option<Result<&'a [u8], usize>>>;

impl Bytes {
    #[inline]
    fn next_record(&mut self, size: usize) -> NextRecord<'_> {
        match self {
            Bytes::Mmap { map, pos } => {
                let rest = map.len() - *pos;
                if rest == 0 {
                    return Ok(None);
                }
                let start = *pos;
                if rest < size {
                    *pos = map.len();
                    return Ok(Some(Err(rest)));
                }
                *pos += size;
                Ok(Some(Ok(&map[start..start + size])))
            }
            Bytes::Stream(s) => {
                let avail = s.fill(size)?;
                if avail == 0 {
                    return Ok(None);
                }
                if avail < size {
                    s.pos = s.len;
                    return Ok(Some(Err(avail)));
                }
                let start = s.pos;
                s.pos += size;
                Ok(Some(Ok(&s.buf[start..start + size])))
            }
        }
    }
}

enum TextParser {
    Msr(MsrParser),
    Spc(SpcParser),
    Blkparse(BlkparseParser),
    Csv(Box<CsvParser>),
}

enum BinDecoder {
    Vscsi(VscsiDecoder),
    Oracle(OracleGeneralDecoder),
    Ember { n_volumes: u32, expected: Option<u64> },
}

impl BinDecoder {
    fn record_size(&self) -> usize {
        match self {
            BinDecoder::Vscsi(d) => d.record_size(),
            BinDecoder::Oracle(_) => og::RECORD_SIZE,
            BinDecoder::Ember { .. } => ember_fmt::RECORD_SIZE,
        }
    }
}

enum Inner {
    /// A trace decoded whole at open (the warmup log: circular, so its order is known only
    /// once every slot is read).
    Loaded(std::vec::IntoIter<Request>),
    Text {
        reader: Box<dyn BufRead + Send>,
        buf: Vec<u8>,
        line: u64,
        parser: TextParser,
    },
    Binary {
        bytes: Bytes,
        record: u64,
        decoder: BinDecoder,
    },
}

/// A streaming trace reader: an iterator of requests in file order.
///
/// After a malformed record the iterator yields the error and ends, unless
/// [`ReadOptions::skip_bad`] is set, in which case the record is counted in
/// [`TraceReader::skipped`] and reading goes on. I/O errors always end it.
pub struct TraceReader {
    path: PathBuf,
    format: Format,
    volumes: VolumeTable,
    skip_bad: bool,
    skipped: u64,
    ignored: u64,
    done: bool,
    inner: Inner,
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

/// Open a trace for streaming. The format comes from `opts.format` or [`detect_format`].
pub fn open(path: &Path, opts: &ReadOptions) -> Result<TraceReader, TraceError> {
    if opts.block_size == 0 || opts.block_size > u32::MAX as u64 {
        return Err(TraceError::Invalid(format!(
            "block size {} must be between 1 and 2^32-1 bytes",
            opts.block_size
        )));
    }
    let format = match opts.format {
        Some(f) => f,
        None => detect_format(path)?,
    };
    let mut volumes = VolumeTable::new();
    let inner = if format == Format::WarmupLog {
        // Only the log's own extent: a log on a device is not read to the device's end; a
        // cache device's log is read from the region its superblock names.
        let mut r = open_decompressed(path)?;
        let mut head = Vec::new();
        (&mut r).take(4096).read_to_end(&mut head).map_err(|e| io_err(path, e))?;
        let bytes = match crate::formats::warmup_log::cache_region(&head) {
            Some((offset, len)) => {
                let mut f = File::open(path).map_err(|e| io_err(path, e))?;
                std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(offset))
                    .map_err(|e| io_err(path, e))?;
                crate::formats::warmup_log::read_log_bytes(&mut f.take(len))
            }
            None => crate::formats::warmup_log::read_log_bytes(&mut head.as_slice().chain(r)),
        }
        .map_err(|e| io_err(path, e))?;
        let (vols, requests) = crate::formats::warmup_log::requests(&bytes)
            .map_err(|message| TraceError::Format { path: path.to_owned(), message })?;
        volumes = vols;
        Inner::Loaded(requests.into_iter())
    } else if format.is_binary() {
        let mut bytes = if is_regular_file(path) && detect_compression(path)? == Compression::None {
            let file = File::open(path).map_err(|e| io_err(path, e))?;
            let len = file.metadata().map_err(|e| io_err(path, e))?.len();
            if len == 0 {
                Bytes::Stream(StreamBytes::new(Box::new(file)))
            } else {
                // SAFETY: the map is read-only and private to this reader; like every mmap of
                // a file it assumes no other process truncates the file while it is read.
                let map = unsafe { map_file(&file) }.map_err(|e| io_err(path, e))?;
                #[cfg(unix)]
                let _ = map.advise(memmap2::Advice::Sequential);
                Bytes::Mmap { map, pos: 0 }
            }
        } else {
            Bytes::Stream(StreamBytes::open(path)?)
        };
        let decoder = match format {
            Format::Vscsi => {
                let head: &[u8] = match &mut bytes {
                    Bytes::Mmap { map, .. } => map,
                    Bytes::Stream(s) => {
                        let n = s.fill(2 * vscsi::V2_RECORD).map_err(|e| io_err(path, e))?;
                        &s.buf[s.pos..s.pos + n]
                    }
                };
                let v = vscsi::detect_version(head).ok_or_else(|| TraceError::Format {
                    path: path.to_owned(),
                    message:
                        "not a vscsi trace: the first two records carry neither version 1 nor 2"
                            .into(),
                })?;
                BinDecoder::Vscsi(VscsiDecoder::new(v))
            }
            Format::OracleGeneral => BinDecoder::Oracle(OracleGeneralDecoder::new(opts.block_size)),
            _ => {
                let header = match &mut bytes {
                    Bytes::Mmap { map, pos } => {
                        let mut cur: &[u8] = map;
                        let h = ember_fmt::read_header(&mut cur);
                        if let Ok(h) = &h {
                            *pos = h.len;
                        }
                        h
                    }
                    Bytes::Stream(s) => ember_fmt::read_header(s),
                };
                let h = header.map_err(|e| e.into_trace_error(path))?;
                volumes = h.volumes;
                BinDecoder::Ember { n_volumes: volumes.len() as u32, expected: h.record_count }
            }
        };
        if matches!(decoder, BinDecoder::Vscsi(_)) {
            volumes.intern("0");
        }
        Inner::Binary { bytes, record: 0, decoder }
    } else {
        let parser = match format {
            Format::MsrCsv => TextParser::Msr(MsrParser::default()),
            Format::SpcCsv => TextParser::Spc(SpcParser::default()),
            Format::Blkparse => TextParser::Blkparse(BlkparseParser::new(opts.blkparse_action)),
            _ => TextParser::Csv(Box::new(CsvParser::new(opts.csv.clone(), opts.block_size)?)),
        };
        let reader = Box::new(BufReader::with_capacity(1 << 18, open_decompressed(path)?));
        Inner::Text { reader, buf: Vec::with_capacity(256), line: 0, parser }
    };
    Ok(TraceReader {
        path: path.to_owned(),
        format,
        volumes,
        skip_bad: opts.skip_bad,
        skipped: 0,
        ignored: 0,
        done: false,
        inner,
    })
}

impl TraceReader {
    /// The volume names seen so far (all of them once the iterator has ended; ember traces
    /// know them all from the start).
    pub fn volumes(&self) -> &VolumeTable {
        &self.volumes
    }

    /// Malformed records skipped so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Well-formed lines or records that were not requests, so far.
    pub fn ignored(&self) -> u64 {
        self.ignored
    }

    /// The format being read.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The statistics so far.
    pub fn stats(&self) -> ReadStats {
        ReadStats { format: self.format, skipped: self.skipped, ignored: self.ignored }
    }

    /// Read the rest of the trace into memory.
    pub fn read_all(mut self) -> Result<(Trace, ReadStats), TraceError> {
        let mut requests = Vec::new();
        if let Inner::Binary { bytes: Bytes::Mmap { map, pos }, decoder, .. } = &self.inner {
            requests.reserve((map.len() - pos) / decoder.record_size());
        }
        for r in self.by_ref() {
            requests.push(r?);
        }
        let stats = self.stats();
        Ok((Trace::new(requests, std::mem::take(&mut self.volumes)), stats))
    }

    fn malformed(&self, line: u64, message: String) -> TraceError {
        TraceError::Malformed { path: self.path.clone(), line, message }
    }

    /// A malformed record: skip it, or end with its error.
    fn bad(&mut self, line: u64, message: String) -> Option<TraceError> {
        if self.skip_bad {
            self.skipped += 1;
            None
        } else {
            self.done = true;
            Some(self.malformed(line, message))
        }
    }

    fn next_text(&mut self) -> Option<Result<Request, TraceError>> {
        loop {
            let Inner::Text { reader, buf, line, parser } = &mut self.inner else {
                return None;
            };
            buf.clear();
            match reader.read_until(b'\n', buf) {
                Ok(0) => {
                    self.done = true;
                    return None;
                }
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(io_err(&self.path, e)));
                }
            }
            *line += 1;
            let n = *line;
            let parsed = match std::str::from_utf8(buf) {
                Err(_) => Err("line is not UTF-8 text".to_string()),
                Ok(text) => match parser {
                    TextParser::Msr(p) => p.parse(text, n, &mut self.volumes),
                    TextParser::Spc(p) => p.parse(text, &mut self.volumes),
                    TextParser::Blkparse(p) => p.parse(text, &mut self.volumes),
                    TextParser::Csv(p) => p.parse(text, n, &mut self.volumes),
                },
            };
            match parsed.and_then(check_end) {
                Ok(Line::Request(r)) => return Some(Ok(r)),
                Ok(Line::NotRequest) => self.ignored += 1,
                Ok(Line::End) => {
                    self.done = true;
                    return None;
                }
                Err(m) => {
                    if let Some(e) = self.bad(n, m) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }

    #[inline]
    fn next_binary(&mut self) -> Option<Result<Request, TraceError>> {
        loop {
            let Inner::Binary { bytes, record, decoder } = &mut self.inner else {
                return None;
            };
            let size = decoder.record_size();
            let next = match bytes.next_record(size) {
                Ok(n) => n,
                Err(e) => {
                    self.done = true;
                    return Some(Err(io_err(&self.path, e)));
                }
            };
            *record += 1;
            let n = *record;
            let decoded = match next {
                None => {
                    if let BinDecoder::Ember { expected, .. } = decoder {
                        if let Some(m) = ember_fmt::missing_records(n - 1, *expected) {
                            if !self.skip_bad {
                                self.done = true;
                                return Some(Err(self.malformed(n, m)));
                            }
                        }
                    }
                    self.done = true;
                    return None;
                }
                Some(Err(partial)) => Err(format!("truncated record: {partial} of {size} bytes")),
                Some(Ok(rec)) => match decoder {
                    BinDecoder::Oracle(d) => {
                        let rec: &[u8; og::RECORD_SIZE] = match rec.try_into() {
                            Ok(r) => r,
                            Err(_) => return None,
                        };
                        d.decode(rec, &mut self.volumes).map(Some)
                    }
                    BinDecoder::Ember { n_volumes, .. } => {
                        let rec: &[u8; ember_fmt::RECORD_SIZE] = match rec.try_into() {
                            Ok(r) => r,
                            Err(_) => return None,
                        };
                        ember_fmt::decode(rec, *n_volumes).map(Some)
                    }
                    BinDecoder::Vscsi(d) => d.decode(rec),
                },
            };
            match decoded.and_then(|d| match d {
                Some(r) => check_end(Line::Request(r)).map(|_| Some(r)),
                None => Ok(None),
            }) {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => self.ignored += 1,
                Err(m) => {
                    if let Some(e) = self.bad(n, m) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}

/// Reject a request whose last byte lies beyond 2^64 (no block index could name it).
#[inline]
pub(crate) fn check_end(l: Line) -> Result<Line, String> {
    if let Line::Request(r) = &l {
        if r.offset.checked_add(r.length as u64).is_none() {
            return Err(format!("offset {} + length {} overflows 64 bits", r.offset, r.length));
        }
    }
    Ok(l)
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.inner {
            Inner::Text { .. } => self.next_text(),
            Inner::Binary { .. } => self.next_binary(),
            Inner::Loaded(ref mut it) => it.next().map(Ok),
        }
    }
}

/// Read a whole trace into memory.
pub fn read_trace(path: &Path, opts: &ReadOptions) -> Result<(Trace, ReadStats), TraceError> {
    open(path, opts)?.read_all()
}

/// Read the block keys of an uncompressed or compressed oracleGeneral file: each record's
/// `obj_id`, which for ember-written files is the [`crate::block_key`]. The fast path for
/// simulation: one pass over the mapped file, no per-record allocation.
pub fn read_oracle_general_keys(path: &Path) -> Result<Vec<u64>, TraceError> {
    let mut keys = Vec::with_capacity(record_hint(path));
    for_each_oracle_general(path, |r| keys.push(r.obj_id))?;
    Ok(keys)
}

/// Read every record of an oracleGeneral file (with clock time, size and next-access vtime).
pub fn read_oracle_general_records(
    path: &Path,
) -> Result<Vec<og::OracleGeneralRecord>, TraceError> {
    let mut recs = Vec::new();
    for_each_oracle_general(path, |r| recs.push(r))?;
    Ok(recs)
}

/// The number of records an uncompressed oracleGeneral file holds (0 when unknown).
fn record_hint(path: &Path) -> usize {
    if !is_regular_file(path) {
        return 0;
    }
    match detect_compression(path) {
        Ok(Compression::None) => {
            std::fs::metadata(path).map(|m| m.len() as usize / og::RECORD_SIZE).unwrap_or(0)
        }
        _ => 0,
    }
}

/// Call `f` on each record of an oracleGeneral file, in order. A file whose size is not a
/// multiple of 24 bytes is malformed (its last record is truncated).
pub fn for_each_oracle_general(
    path: &Path,
    mut f: impl FnMut(og::OracleGeneralRecord),
) -> Result<(), TraceError> {
    let truncated = |n: u64, partial: usize| TraceError::Malformed {
        path: path.to_owned(),
        line: n,
        message: format!("truncated record: {partial} of {} bytes", og::RECORD_SIZE),
    };
    if is_regular_file(path) && detect_compression(path)? == Compression::None {
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        if file.metadata().map_err(|e| io_err(path, e))?.len() == 0 {
            return Ok(());
        }
        // SAFETY: read-only private map; assumes the file is not truncated while read.
        let map = unsafe { map_file(&file) }.map_err(|e| io_err(path, e))?;
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Sequential);
        let chunks = map.chunks_exact(og::RECORD_SIZE);
        let rest = chunks.remainder().len();
        let n = chunks.len() as u64;
        for c in chunks {
            if let Ok(rec) = <&[u8; og::RECORD_SIZE]>::try_from(c) {
                f(og::OracleGeneralRecord::decode(rec));
            }
        }
        if rest != 0 {
            return Err(truncated(n + 1, rest));
        }
        return Ok(());
    }
    let mut s = StreamBytes::open(path)?;
    let mut n = 0u64;
    loop {
        let avail = s.fill(og::RECORD_SIZE).map_err(|e| io_err(path, e))?;
        if avail == 0 {
            return Ok(());
        }
        if avail < og::RECORD_SIZE {
            return Err(truncated(n + 1, avail));
        }
        let whole = avail / og::RECORD_SIZE * og::RECORD_SIZE;
        for c in s.buf[s.pos..s.pos + whole].chunks_exact(og::RECORD_SIZE) {
            if let Ok(rec) = <&[u8; og::RECORD_SIZE]>::try_from(c) {
                f(og::OracleGeneralRecord::decode(rec));
            }
        }
        n += (whole / og::RECORD_SIZE) as u64;
        s.pos += whole;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decompress_thread::tests::Pattern;
    use crate::decompress_thread::{BUF_BYTES, HEADROOM};

    /// A compressed file read with `O_DIRECT` (the threshold at 0) decompresses to the same
    /// bytes as read through the page cache, in zstd and in gzip, across many of the direct
    /// reader's chunks and a file length that is not a multiple of the block size.
    #[test]
    fn direct_and_buffered_reads_decompress_alike() {
        use std::io::Write;
        // Not /tmp: it may be a tmpfs, which refuses O_DIRECT.
        let dir = tempfile::Builder::new()
            .prefix("direct-open")
            .tempdir_in(env!("CARGO_MANIFEST_DIR"))
            .expect("tempdir");
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let data: Vec<u8> = (0..24_000_003)
            .map(|i| {
                if i % 3 == 0 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                (x >> (i % 3 * 8)) as u8
            })
            .collect();
        let zst = dir.path().join("t.zst");
        std::fs::write(&zst, zstd::encode_all(&data[..], 3).expect("zstd")).expect("write");
        let gz = dir.path().join("t.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&data).expect("gzip");
        std::fs::write(&gz, e.finish().expect("gzip")).expect("write");
        for path in [&zst, &gz] {
            assert!(
                crate::direct_read::DirectFile::open(path).expect("open").is_some(),
                "O_DIRECT refused under {}",
                dir.path().display()
            );
            for direct_min in [0, u64::MAX] {
                let mut got = Vec::new();
                match open_source_direct_from(path, direct_min).expect("open") {
                    Source::Threaded(mut t) => t.read_to_end(&mut got).expect("read"),
                    Source::Plain(_) => panic!("{} read as not compressed", path.display()),
                };
                assert!(got == data, "{} (direct from {direct_min}): bytes differ", path.display());
            }
        }
    }

    fn threaded(total: usize, fail: bool) -> StreamBytes {
        let t = ThreadedRead::spawn(Box::new(Pattern { at: 0, total, fail })).expect("spawn");
        StreamBytes { r: Source::Threaded(t), buf: Vec::new(), pos: 0, len: 0, eof: false }
    }

    /// Takes `need` bytes at a time (the last take may be shorter) and checks every byte's
    /// value and position; returns how many bytes came.
    fn consume(s: &mut StreamBytes, needs: &[usize]) -> std::io::Result<usize> {
        let mut at = 0;
        for k in 0.. {
            let need = needs[k % needs.len()];
            let avail = s.fill(need)?;
            if avail == 0 {
                break;
            }
            let take = need.min(avail);
            assert!(avail >= need || s.eof, "{avail} of {need} available before the end");
            for (i, &b) in s.buf[s.pos..s.pos + take].iter().enumerate() {
                assert_eq!(b, ((at + i) % 251) as u8, "byte {}", at + i);
            }
            s.pos += take;
            at += take;
        }
        Ok(at)
    }

    #[test]
    fn records_cut_by_the_thread_buffers_come_whole_and_in_order() {
        // 24-byte records (oracleGeneral) do not divide a buffer: every boundary cuts one.
        let total = 4 * BUF_BYTES + 24 * 1000 + 7;
        let mut s = threaded(total, false);
        assert_eq!(consume(&mut s, &[24]).expect("read"), total);
    }

    #[test]
    fn takes_larger_than_the_headroom_are_appended_whole() {
        let total = 3 * BUF_BYTES + 12_345;
        let mut s = threaded(total, false);
        let big = BUF_BYTES / 2 + 3 * HEADROOM + 5;
        assert_eq!(consume(&mut s, &[24, HEADROOM + 1, 40, big, 7]).expect("read"), total);
    }

    #[test]
    fn a_decompressor_error_arrives_after_every_byte_before_it() {
        let total = 2 * BUF_BYTES + 100;
        let mut s = threaded(total, true);
        let mut got = 0;
        let err = loop {
            match s.fill(24) {
                Ok(0) => panic!("ended without the error"),
                Ok(n) => {
                    let take = n.min(24);
                    s.pos += take;
                    got += take;
                }
                Err(e) => break e,
            }
        };
        // Whole records were taken while 24 bytes were available; the rest is still buffered.
        assert_eq!(got + (s.len - s.pos), total);
        assert!(err.to_string().contains("disk on fire"), "{err}");
    }
}
