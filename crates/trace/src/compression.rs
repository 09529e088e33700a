//! Transparent decompression: a trace file's compression told from its first bytes (gzip,
//! zstd, or none, whatever the name), and its bytes decompressed on a thread of their own
//! ([`crate::decompress_thread`]), from a large file with `O_DIRECT` ([`crate::direct_read`]).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::decompress_thread::ThreadedRead;
use crate::error::io_err;
use crate::TraceError;

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

/// The compression named by the first bytes of a stream.
pub(crate) fn compression_of(b: &[u8]) -> Compression {
    if b.len() >= 2 && b[..2] == [0x1f, 0x8b] {
        Compression::Gzip
    } else if b.len() >= 4 && b[..4] == [0x28, 0xb5, 0x2f, 0xfd] {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Read up to `b.len()` bytes from the start of `r` (fewer only at its end).
pub(crate) fn read_magic(mut r: impl Read, b: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < b.len() {
        match r.read(&mut b[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Open `path` for reading, decompressing gzip and zstd transparently (by content, whatever
/// the extension). The file is opened once and its first bytes peeked, so this works on pipes
/// and FIFOs too. Decompression runs on its own thread
/// ([`crate::decompress_thread::ThreadedRead`]).
pub fn open_decompressed(path: &Path) -> Result<Box<dyn Read + Send>, TraceError> {
    Ok(match open_source(path)? {
        Decompressed::Plain(r) => r,
        Decompressed::Threaded(t) => Box::new(t),
    })
}

/// An opened trace's bytes: as they are, or from a decompressing thread.
pub(crate) enum Decompressed {
    /// Not compressed: the file (or pipe) itself.
    Plain(Box<dyn Read + Send>),
    /// Compressed: decompressed ahead on its own thread.
    Threaded(ThreadedRead),
}

/// [`open_decompressed`], keeping the decompressing thread's reader as it is, so that
/// [`crate::stream_bytes::StreamBytes`] can take its buffers whole.
pub(crate) fn open_source(path: &Path) -> Result<Decompressed, TraceError> {
    open_source_direct_from(path, crate::direct_read::direct_threshold())
}

/// [`open_source`], reading a compressed regular file of at least `direct_min` bytes with
/// `O_DIRECT` ([`crate::direct_read`]).
fn open_source_direct_from(path: &Path, direct_min: u64) -> Result<Decompressed, TraceError> {
    let mut f = File::open(path).map_err(|e| io_err(path, e))?;
    let mut b = [0u8; 4];
    let n = read_magic(&mut f, &mut b).map_err(|e| io_err(path, e))?;
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
        (Compression::None, _) => return Ok(Decompressed::Plain(whole)),
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
    Ok(Decompressed::Threaded(ThreadedRead::spawn(inner).map_err(|e| io_err(path, e))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_from_the_first_bytes() {
        assert_eq!(compression_of(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(compression_of(&[0x1f, 0x8b]), Compression::Gzip);
        assert_eq!(compression_of(&[0x28, 0xb5, 0x2f, 0xfd]), Compression::Zstd);
        assert_eq!(compression_of(&[0x28, 0xb5, 0x2f]), Compression::None);
        assert_eq!(compression_of(b"EMBERTRC"), Compression::None);
        assert_eq!(compression_of(&[]), Compression::None);
    }

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
                    Decompressed::Threaded(mut t) => t.read_to_end(&mut got).expect("read"),
                    Decompressed::Plain(_) => panic!("{} read as not compressed", path.display()),
                };
                assert!(got == data, "{} (direct from {direct_min}): bytes differ", path.display());
            }
        }
    }
}
