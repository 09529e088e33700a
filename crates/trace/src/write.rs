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
/// oracleGeneral needs next-access times (they look ahead): use [`write_trace`] or, in bounded
/// memory, [`write_oracle_general`].
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
    pub fn create_counted(
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
        check_oracle_general_block_size(block_size)?;
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

/// Check that `block_size` fits oracleGeneral's 32-bit `obj_size` (and is not zero).
pub fn check_oracle_general_block_size(block_size: u64) -> Result<(), TraceError> {
    if block_size == 0 || block_size > u32::MAX as u64 {
        return Err(TraceError::Invalid(format!(
            "block size {block_size} does not fit obj_size (u32)"
        )));
    }
    Ok(())
}

/// Write the block accesses of a spooled trace ([`crate::Spool`], its times kept) to `path`
/// as oracleGeneral records, compressed if the path ends `.gz` or `.zst`: the same bytes as
/// [`write_trace`] on the whole trace, in bounded memory (one chunk at a time; the
/// next-access times come from the spool's backward pass). Returns the records written.
pub fn write_oracle_general(
    path: &Path,
    future: &crate::NextAccess,
    block_size: u64,
) -> Result<u64, TraceError> {
    let io = |e| TraceError::Io { path: path.to_owned(), source: e };
    check_oracle_general_block_size(block_size)?;
    let mut sink = Sink::create(path).map_err(io)?;
    let mut reader = future.reader();
    let mut chunk = crate::BlockChunk::default();
    let mut next = Vec::new();
    let mut written = 0u64;
    while reader.next_chunk(&mut chunk, &mut next, crate::next_access::PASS_ACCESSES).map_err(io)? {
        for (i, (&obj_id, &nx)) in chunk.keys.iter().zip(&next).enumerate() {
            let ns = chunk.times.get(i).copied().unwrap_or(0);
            let secs = u32::try_from(ns / 1_000_000_000).map_err(|_| {
                TraceError::Invalid(format!(
                    "{}: time {} s does not fit oracleGeneral's 32-bit clock_time",
                    path.display(),
                    ns / 1_000_000_000
                ))
            })?;
            let rec = oracle_general::OracleGeneralRecord {
                clock_time: secs,
                obj_id,
                obj_size: block_size as u32,
                next_access_vtime: match nx {
                    crate::NO_NEXT => oracle_general::NO_NEXT_ACCESS,
                    j => j as i64 + 1,
                },
            };
            sink.write_all(&rec.encode()).map_err(io)?;
        }
        written += chunk.len() as u64;
    }
    sink.finish().map_err(io)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockChunk, Op, Request, Spool, FLAG_FIRST};

    fn spooled(t: &Trace, block_size: u64, chunk: usize) -> crate::NextAccess {
        let mut s = Spool::new(true).expect("spool");
        let mut c = BlockChunk::default();
        for r in &t.requests {
            for (j, k) in r.block_keys(block_size).enumerate() {
                c.keys.push(k);
                c.flags.push(if j == 0 { FLAG_FIRST } else { 0 });
                c.times.push(r.time_ns);
            }
            if c.len() >= chunk {
                s.push(&c).expect("push");
                c.clear();
            }
        }
        s.push(&c).expect("push");
        s.finish().expect("finish")
    }

    /// The streamed oracleGeneral writer produces the whole-trace writer's bytes, with
    /// multi-block requests, several volumes and chunks smaller than a request.
    #[test]
    fn streamed_oracle_general_equals_the_whole_trace_writer() {
        let mut volumes = VolumeTable::new();
        volumes.intern("a");
        volumes.intern("b");
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let requests: Vec<Request> = (0..20_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                Request {
                    time_ns: i * 250_000_000,
                    volume: (x % 2) as u32,
                    op: if x.is_multiple_of(3) { Op::Write } else { Op::Read },
                    offset: (x >> 8) % 3_000 * 512,
                    length: [0u32, 512, 4096, 9000][((x >> 40) % 4) as usize],
                }
            })
            .collect();
        let t = Trace::new(requests, volumes);
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["a.oracleGeneral.bin", "b.oracleGeneral.bin.zst"] {
            let whole = dir.path().join(format!("whole-{name}"));
            let streamed = dir.path().join(format!("streamed-{name}"));
            write_trace(&whole, Format::OracleGeneral, &t, 4096).expect("whole");
            let n = write_oracle_general(&streamed, &spooled(&t, 4096, 3), 4096).expect("stream");
            let (a, b) = (std::fs::read(&whole).unwrap(), std::fs::read(&streamed).unwrap());
            assert_eq!(a, b, "{name}");
            assert!(n > 20_000, "{n} records");
        }
        let plain = std::fs::read(dir.path().join("whole-a.oracleGeneral.bin")).unwrap();
        assert_eq!(plain.len() as u64 % 24, 0);
    }

    #[test]
    fn streamed_oracle_general_refuses_bad_sizes_and_times() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("x.oracleGeneral.bin");
        let late = Request {
            time_ns: (u32::MAX as u64 + 1) * 1_000_000_000,
            volume: 0,
            op: Op::Read,
            offset: 0,
            length: 1,
        };
        let t = Trace::new(vec![late], VolumeTable::new());
        let e = write_oracle_general(&p, &spooled(&t, 4096, 8), 4096).expect_err("late");
        assert!(e.to_string().contains("32-bit clock_time"), "{e}");
        let e = write_oracle_general(&p, &spooled(&t, 4096, 8), 0).expect_err("zero");
        assert!(e.to_string().contains("does not fit obj_size"), "{e}");
    }
}
