//! A byte stream with a refillable buffer, for binary records from a pipe, a FIFO or a
//! decompressor: what [`crate::bytes::Bytes`] reads when the file cannot be mapped.

use std::io::Read;
use std::path::Path;

use crate::compression::{open_source, Decompressed};
use crate::TraceError;

/// A byte stream with a refillable buffer, for binary records from a decompressor.
///
/// From a decompressing thread the buffer is the thread's own, taken whole: only the unread
/// tail of the previous buffer (a record cut by the boundary) is copied, into the headroom
/// in front of the new data ([`crate::decompress_thread::HEADROOM`]). From any other reader
/// the bytes are read into a buffer of its own.
pub(crate) struct StreamBytes {
    r: Decompressed,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
}

impl StreamBytes {
    /// Bytes from `r`, read into a buffer of the stream's own.
    fn new(r: Box<dyn Read + Send>) -> Self {
        Self { r: Decompressed::Plain(r), buf: vec![0; 1 << 18], pos: 0, len: 0, eof: false }
    }

    /// Open `path` (decompressed transparently, [`crate::compression::open_decompressed`]).
    pub(crate) fn open(path: &Path) -> Result<Self, TraceError> {
        Ok(match open_source(path)? {
            Decompressed::Plain(r) => Self::new(r),
            r @ Decompressed::Threaded(_) => {
                Self { r, buf: Vec::new(), pos: 0, len: 0, eof: false }
            }
        })
    }

    /// The available bytes (after [`StreamBytes::fill`]).
    #[inline]
    pub(crate) fn window(&self) -> &[u8] {
        &self.buf[self.pos..self.len]
    }

    /// Consume `n` available bytes.
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        self.pos += n;
    }

    /// Consume `n` available bytes and return them (valid until the next fill).
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> &[u8] {
        let start = self.pos;
        self.pos += n;
        &self.buf[start..start + n]
    }

    /// Make at least `need` bytes available unless the stream ends; return how many are.
    pub(crate) fn fill(&mut self, need: usize) -> std::io::Result<usize> {
        while self.len - self.pos < need && !self.eof {
            match &mut self.r {
                Decompressed::Threaded(t) => match t.next_buffer()? {
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
                Decompressed::Plain(r) => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decompress_thread::tests::Pattern;
    use crate::decompress_thread::{ThreadedRead, BUF_BYTES, HEADROOM};

    fn threaded(total: usize, fail: bool) -> StreamBytes {
        let t = ThreadedRead::spawn(Box::new(Pattern { at: 0, total, fail })).expect("spawn");
        StreamBytes { r: Decompressed::Threaded(t), buf: Vec::new(), pos: 0, len: 0, eof: false }
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

    /// A plain reader (a pipe) grows the buffer for a take larger than it, and reads to the
    /// end through `Read`.
    #[test]
    fn a_plain_reader_fills_any_take() {
        let data: Vec<u8> = (0..700_000usize).map(|i| (i % 251) as u8).collect();
        let mut s = StreamBytes::new(Box::new(std::io::Cursor::new(data.clone())));
        assert!(s.fill(600_000).expect("fill") >= 600_000);
        assert_eq!(&s.window()[..10], &data[..10]);
        s.consume(10);
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).expect("read");
        assert_eq!(rest, &data[10..]);
    }
}
