//! The whole-handshake deadline: a socket wrapper that, before every read and write, sets the
//! socket's timeout to the time left, so a client cannot stretch the handshake by trickling
//! bytes (each read would otherwise get a fresh timeout).

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use crate::stream::Stream;

/// A socket during the handshake, with the instant the handshake must be over by.
pub(crate) struct Deadline {
    /// The socket (replaced by the plaintext side of the TLS session after STARTTLS).
    pub stream: Stream,
    /// When the handshake must be over (`None`: never).
    pub until: Option<Instant>,
}

impl Deadline {
    /// `stream` with `limit` from now (`None`: no deadline).
    pub(crate) fn new(stream: Stream, limit: Option<Duration>) -> Deadline {
        Deadline { stream, until: limit.map(|l| Instant::now() + l) }
    }

    /// The time left, or a `TimedOut` error once the deadline has passed.
    pub(crate) fn left(&self) -> io::Result<Option<Duration>> {
        match self.until {
            None => Ok(None),
            Some(until) => {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    Err(io::Error::new(io::ErrorKind::TimedOut, "handshake deadline passed"))
                } else {
                    Ok(Some(left))
                }
            }
        }
    }

    /// The socket, for the transmission phase: timeouts cleared (reads wait forever; writes
    /// get `write_timeout`).
    pub(crate) fn into_stream(self, write_timeout: Option<Duration>) -> io::Result<Stream> {
        self.stream.set_read_timeout(None)?;
        self.stream.set_write_timeout(write_timeout)?;
        Ok(self.stream)
    }
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_read_timeout(left)?;
        self.stream.read(buf)
    }
}

impl Write for Deadline {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_write_timeout(left)?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_trickling_peer_hits_the_deadline() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut d = Deadline::new(Stream::Unix(a), Some(Duration::from_millis(300)));
        let writer = std::thread::spawn(move || {
            // One byte every 50 ms: each read alone is quick, the whole is too slow.
            for _ in 0..40 {
                if b.write_all(&[1]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        // Without the deadline the 40 bytes would all arrive (after 2 s) and the read succeed.
        let mut buf = [0u8; 40];
        let err = d.read_exact(&mut buf).unwrap_err();
        assert!(matches!(err.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock), "{err}");
        drop(d);
        writer.join().unwrap();
    }
}
