//! The streaming [`TraceReader`]: a trace opened by path (format detected, `.gz` / `.zst`
//! decompressed transparently) and read request by request, text line by line or binary
//! records in place (from the crate's one byte source, `bytes.rs`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::bytes::Bytes;
use crate::compression::open_decompressed;
use crate::detect::detect_format;
use crate::error::io_err;
use crate::formats::blkparse::{BlkAction, BlkparseParser};
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
        let mut bytes = Bytes::open(path)?;
        let decoder = match format {
            Format::Vscsi => {
                let n = bytes.fill(2 * vscsi::V2_RECORD).map_err(|e| io_err(path, e))?;
                let v = vscsi::detect_version(&bytes.window()[..n]).ok_or_else(|| {
                    TraceError::Format {
                        path: path.to_owned(),
                        message: "not a vscsi trace: the first two records carry neither \
                                  version 1 nor 2"
                            .into(),
                    }
                })?;
                BinDecoder::Vscsi(VscsiDecoder::new(v))
            }
            Format::OracleGeneral => BinDecoder::Oracle(OracleGeneralDecoder::new(opts.block_size)),
            _ => {
                let h = ember_fmt::read_header(&mut bytes).map_err(|e| e.into_trace_error(path))?;
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
        if let Inner::Binary { bytes, decoder, .. } = &self.inner {
            requests.reserve(bytes.mapped_remaining().unwrap_or(0) / decoder.record_size());
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
