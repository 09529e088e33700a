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
//! the crate's one byte source, `bytes.rs` (the file mapped into memory, its pages released
//! behind the reader, or the buffer of a pipe, a FIFO or the decompressing thread), straight
//! into the chunk, without a per-record call through the generic reader:
//! - libCacheSim's oracleGeneral: each record is one block access whose key is its `obj_id`
//!   (the [`crate::block_key`]), a read, at `clock_time` seconds;
//! - ember's binary format: each record is a request, split into blocks in place.
//!
//! Every other format goes through [`crate::TraceReader`] request by request (still
//! streaming, still no per-request allocation). Errors, `skip_bad` and the counts of skipped
//! and ignored records are those of [`crate::TraceReader`] on the same file.

use std::path::{Path, PathBuf};

use crate::block_chunk::{BlockChunk, FLAG_FIRST, FLAG_WRITE};
use crate::bytes::Bytes;
use crate::detect::{detect_format, is_regular_file};
use crate::error::io_err;
use crate::formats::ember as ember_fmt;
use crate::formats::oracle_general as og;
use crate::formats::{Format, Line};
use crate::open::{check_end, open, ReadOptions, ReadStats, TraceReader};
use crate::splitter::Splitter;
use crate::{block_key, TraceError};

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
        let split = Splitter::new(bs, per_request, keep_times);
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
    use crate::{write_trace, Op, Request, Trace, VolumeTable};

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
