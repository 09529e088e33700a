//! Decompression on its own thread: a [`Read`] whose bytes a background thread decompresses
//! ahead of the consumer, so that inflating a `.gz` or `.zst` trace overlaps with parsing
//! and simulating it.
//!
//! The thread fills buffers of [`BUF_BYTES`] and hands them over a bounded channel of
//! [`IN_FLIGHT`] buffers; emptied buffers go back to it for reuse. Memory is therefore bounded
//! by `(IN_FLIGHT + 2) * (HEADROOM + BUF_BYTES)` whatever the length of the trace.
//!
//! Two ways to consume it: as a [`Read`] (the bytes are copied out), or buffer by buffer
//! ([`ThreadedRead::next_buffer`] and [`ThreadedRead::recycle`]), which hands the thread's
//! buffer over whole. Each buffer keeps [`HEADROOM`] bytes free in front of its data, so a
//! record reader can put the unread tail of the previous buffer (a record cut by the
//! boundary) right before the new data and read on without copying the rest. An I/O error of the
//! decompressor reaches the consumer as the error of its next `read`; dropping the reader
//! stops the thread at its next hand-over.

use std::io::Read;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Bytes per buffer handed from the decompressing thread to the reader.
pub const BUF_BYTES: usize = 1 << 20;

/// Buffers in flight between the thread and the reader.
pub const IN_FLIGHT: usize = 4;

/// Bytes kept free in front of each buffer's data (see [`ThreadedRead::next_buffer`]).
pub const HEADROOM: usize = 4096;

/// A reader fed by a decompressing thread.
pub struct ThreadedRead {
    full: Receiver<std::io::Result<Vec<u8>>>,
    empty: SyncSender<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
    done: bool,
}

impl std::fmt::Debug for ThreadedRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedRead").field("done", &self.done).finish_non_exhaustive()
    }
}

impl ThreadedRead {
    /// Read `inner` on a new thread (named `ember-decompress`); an error if the thread cannot
    /// be spawned.
    pub fn spawn(mut inner: Box<dyn Read + Send>) -> std::io::Result<Self> {
        let (full_tx, full_rx) = sync_channel::<std::io::Result<Vec<u8>>>(IN_FLIGHT);
        let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(IN_FLIGHT + 2);
        std::thread::Builder::new().name("ember-decompress".into()).spawn(move || loop {
            let mut buf = empty_rx.try_recv().unwrap_or_else(|_| vec![0u8; HEADROOM + BUF_BYTES]);
            buf.resize(HEADROOM + BUF_BYTES, 0);
            let mut n = HEADROOM;
            let mut err = None;
            while n < buf.len() {
                match inner.read(&mut buf[n..]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            buf.truncate(n);
            let end = n == HEADROOM || err.is_some();
            if n > HEADROOM && full_tx.send(Ok(buf)).is_err() {
                return;
            }
            if let Some(e) = err {
                let _ = full_tx.send(Err(e));
                return;
            }
            if end {
                return; // dropping the sender tells the reader the stream ended
            }
        })?;
        Ok(Self { full: full_rx, empty: empty_tx, cur: Vec::new(), pos: 0, done: false })
    }

    /// The next buffer the thread filled, handed over whole: its data is `buf[HEADROOM..]`
    /// (never empty) and `buf[..HEADROOM]` is free for the caller. `Ok(None)` once the stream
    /// has ended; the decompressor's error, after all the data before it. Give the buffer
    /// back with [`ThreadedRead::recycle`] when done, so the thread reuses it. Meant for a
    /// consumer that does not also use [`Read`]: bytes already taken into `read`'s buffer are
    /// not returned here.
    pub fn next_buffer(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        debug_assert_eq!(self.pos, self.cur.len(), "next_buffer after a partial read");
        if self.done {
            return Ok(None);
        }
        match self.full.recv() {
            Ok(Ok(buf)) => Ok(Some(buf)),
            Ok(Err(e)) => {
                self.done = true;
                Err(e)
            }
            Err(_) => {
                self.done = true;
                Ok(None)
            }
        }
    }

    /// Give a buffer back to the thread for reuse (any `Vec`; it is resized before use). A
    /// buffer the thread has no room for is dropped.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if buf.capacity() > 0 {
            let _ = self.empty.try_send(buf);
        }
    }
}

impl Read for ThreadedRead {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        while self.pos == self.cur.len() {
            if self.done {
                return Ok(0);
            }
            match self.full.recv() {
                Ok(Ok(buf)) => {
                    let old = std::mem::replace(&mut self.cur, buf);
                    self.pos = HEADROOM;
                    self.recycle(old);
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Ok(0);
                }
            }
        }
        let n = out.len().min(self.cur.len() - self.pos);
        out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Yields `total` bytes of a known pattern (byte i is `i % 251`) in reads of odd sizes,
    /// then optionally fails (also used by `open.rs`'s tests).
    pub(crate) struct Pattern {
        pub(crate) at: usize,
        pub(crate) total: usize,
        pub(crate) fail: bool,
    }

    impl Read for Pattern {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.at == self.total {
                return if self.fail { Err(std::io::Error::other("disk on fire")) } else { Ok(0) };
            }
            let n = out.len().min(self.total - self.at).min(77_777);
            for (i, b) in out[..n].iter_mut().enumerate() {
                *b = ((self.at + i) % 251) as u8;
            }
            self.at += n;
            Ok(n)
        }
    }

    #[test]
    fn delivers_every_byte_in_order_across_many_buffers() {
        let total = 5 * BUF_BYTES + 12_345;
        let r = ThreadedRead::spawn(Box::new(Pattern { at: 0, total, fail: false }));
        let mut r = r.expect("spawn");
        let mut all = Vec::new();
        let mut small = [0u8; 4099];
        loop {
            let n = r.read(&mut small).expect("read");
            if n == 0 {
                break;
            }
            all.extend_from_slice(&small[..n]);
        }
        assert_eq!(all.len(), total);
        assert!(all.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert_eq!(r.read(&mut small).expect("read after end"), 0);
    }

    #[test]
    fn an_error_of_the_inner_reader_reaches_the_consumer_after_the_data() {
        let total = BUF_BYTES / 2;
        let mut r =
            ThreadedRead::spawn(Box::new(Pattern { at: 0, total, fail: true })).expect("spawn");
        let mut all = Vec::new();
        let err = loop {
            let mut b = vec![0u8; 65536];
            match r.read(&mut b) {
                Ok(0) => panic!("ended without the error"),
                Ok(n) => all.extend_from_slice(&b[..n]),
                Err(e) => break e,
            }
        };
        assert_eq!(all.len(), total);
        assert!(err.to_string().contains("disk on fire"), "{err}");
    }

    #[test]
    fn dropping_the_reader_early_is_fine() {
        let total = 20 * BUF_BYTES;
        let mut r =
            ThreadedRead::spawn(Box::new(Pattern { at: 0, total, fail: false })).expect("spawn");
        let mut b = [0u8; 10];
        assert_eq!(r.read(&mut b).expect("read"), 10);
        drop(r); // the thread ends at its next send; nothing hangs
    }
}
