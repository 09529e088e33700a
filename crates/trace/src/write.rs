//! Writing traces: [`write_trace`] for a whole trace, [`TraceWriter`] to stream requests.
//! A path ending `.gz` or `.zst` is compressed.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::formats::{csv, ember, msr, oracle_general, spc, Format, WriteFail};
use crate::{Request, Trace, TraceError, VolumeTable};

/// An output file, compressed by its extension.
enum Sink {
    Plain(BufWriter<File>),
    Gz(flate2::write::GzEncoder<BufWriter<File>>),
    Zst(zstd::stream::write::Encoder<'static, BufWriter<File>>),
}

impl Sink {
    fn create(path: &Path) -> std::io::Result<Sink> {
        let f = BufWriter::with_capacity(1 << 18, File::create(path)?);
        let name =
            path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        Ok(if name.ends_with(".gz") {
            Sink::Gz(flate2::write::GzEncoder::new(f, flate2::Compression::default()))
        } else if name.ends_with(".zst") || name.ends_with(".zstd") {
            Sink::Zst(zstd::stream::write::Encoder::new(f, 3)?)
        } else {
            Sink::Plain(f)
        })
    }

    fn is_plain(&self) -> bool {
        matches!(self, Sink::Plain(_))
    }

    /// Finish the compressed stream and flush; returns the plain file (for patching).
    fn finish(self) -> std::io::Result<Option<File>> {
        match self {
            Sink::Plain(w) => Ok(Some(w.into_inner().map_err(|e| e.into_error())?)),
            Sink::Gz(w) => {
                let mut f = w.finish()?;
                f.flush()?;
                Ok(None)
            }
            Sink::Zst(w) => {
                let mut f = w.finish()?;
                f.flush()?;
                Ok(None)
            }
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Gz(w) => w.write(buf),
            Sink::Zst(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.write_all(buf),
            Sink::Gz(w) => w.write_all(buf),
            Sink::Zst(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gz(w) => w.flush(),
            Sink::Zst(w) => w.flush(),
        }
    }
}

/// Writes requests one at a time in a streamable format (MSR-Cambridge, SPC, CSV, ember).
///
/// The volume names must be known when the writer is created (they go in ember's header).
/// oracleGeneral needs the whole trace (next-access times look ahead): use [`write_trace`].
pub struct TraceWriter {
    path: PathBuf,
    format: Format,
    volumes: VolumeTable,
    sink: Option<Sink>,
    written: u64,
}

impl TraceWriter {
    /// Create `path` for `format`, with the trace's volume names.
    pub fn create(path: &Path, format: Format, volumes: &VolumeTable) -> Result<Self, TraceError> {
        Self::create_counted(path, format, volumes, None)
    }

    /// Like [`TraceWriter::create`], with the number of requests that will be written when it
    /// is known (ember's header records it, so even a compressed file can be checked).
    fn create_counted(
        path: &Path,
        format: Format,
        volumes: &VolumeTable,
        count: Option<u64>,
    ) -> Result<Self, TraceError> {
        let io = |e| TraceError::Io { path: path.to_owned(), source: e };
        match format {
            Format::MsrCsv | Format::SpcCsv | Format::Csv | Format::Ember => {}
            other => {
                return Err(TraceError::Format {
                    path: path.to_owned(),
                    message: format!(
                        "{other} cannot be written request by request (writable: msr, spc, csv, ember; \
                         oracle-general through write_trace)"
                    ),
                })
            }
        }
        if format == Format::Ember && volumes.len() > (1 << 31) {
            return Err(TraceError::Invalid("ember traces hold at most 2^31 volumes".into()));
        }
        let mut sink = Sink::create(path).map_err(io)?;
        match format {
            Format::Csv => writeln!(sink, "{}", csv::HEADER).map_err(io)?,
            Format::Ember => ember::write_header(&mut sink, volumes, count).map_err(io)?,
            _ => {}
        }
        Ok(Self {
            path: path.to_owned(),
            format,
            volumes: volumes.clone(),
            sink: Some(sink),
            written: 0,
        })
    }

    /// Append one request.
    pub fn write(&mut self, r: &Request) -> Result<(), TraceError> {
        let Some(sink) = self.sink.as_mut() else {
            return Err(TraceError::Invalid("write after finish".into()));
        };
        let index = self.written as usize;
        let res: Result<(), WriteFail> = match self.format {
            Format::MsrCsv => msr::write_request(sink, r, &self.volumes).map_err(WriteFail::Io),
            Format::SpcCsv => spc::write_request(sink, index, r, &self.volumes),
            Format::Csv => csv::write_request(sink, index, r, &self.volumes),
            _ => {
                if r.volume as usize >= self.volumes.len() {
                    Err(WriteFail::Invalid(TraceError::Invalid(format!(
                        "request {}: volume id {} is not in the volume table of {}",
                        index + 1,
                        r.volume,
                        self.volumes.len()
                    ))))
                } else {
                    sink.write_all(&ember::encode(r)).map_err(WriteFail::Io)
                }
            }
        };
        match res {
            Ok(()) => {
                self.written += 1;
                Ok(())
            }
            Err(WriteFail::Io(e)) => Err(TraceError::Io { path: self.path.clone(), source: e }),
            Err(WriteFail::Invalid(e)) => Err(e),
        }
    }

    /// Requests written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flush and close; for an uncompressed ember file (not a pipe), record the request count
    /// in its header.
    pub fn finish(mut self) -> Result<(), TraceError> {
        let io = |e| TraceError::Io { path: self.path.clone(), source: e };
        let Some(sink) = self.sink.take() else {
            return Ok(());
        };
        let plain = sink.is_plain();
        let file = sink.finish().map_err(io)?;
        // A pipe cannot be patched: its header keeps "count unknown" (u64::MAX), which
        // readers accept.
        let seekable = file.as_ref().and_then(|f| f.metadata().ok()).is_some_and(|m| m.is_file());
        if let (Format::Ember, true, true, Some(mut f)) = (self.format, plain, seekable, file) {
            f.seek(SeekFrom::Start(ember::COUNT_OFFSET)).map_err(io)?;
            f.write_all(&self.written.to_le_bytes()).map_err(io)?;
            f.flush().map_err(io)?;
        }
        Ok(())
    }
}

/// Write a whole trace to `path` in `format` (msr, spc, csv, oracle-general or ember),
/// compressed if the path ends `.gz` or `.zst`. `block_size` splits requests into the block
/// accesses oracleGeneral records (other formats keep whole requests).
pub fn write_trace(
    path: &Path,
    format: Format,
    trace: &Trace,
    block_size: u64,
) -> Result<(), TraceError> {
    let io = |e| TraceError::Io { path: path.to_owned(), source: e };
    if format == Format::OracleGeneral {
        if block_size == 0 || block_size > u32::MAX as u64 {
            return Err(TraceError::Invalid(format!(
                "block size {block_size} does not fit obj_size (u32)"
            )));
        }
        let mut sink = Sink::create(path).map_err(io)?;
        oracle_general::write_trace(&mut sink, trace, block_size).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidInput {
                TraceError::Invalid(format!("{}: {e}", path.display()))
            } else {
                io(e)
            }
        })?;
        sink.finish().map_err(io)?;
        return Ok(());
    }
    let count = Some(trace.requests.len() as u64);
    let mut w = TraceWriter::create_counted(path, format, &trace.volumes, count)?;
    for r in &trace.requests {
        w.write(r)?;
    }
    w.finish()
}
