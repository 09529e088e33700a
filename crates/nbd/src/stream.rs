//! A connected socket, TCP or Unix, as one type for the server and the client.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;

/// A TCP or Unix stream socket.
#[derive(Debug)]
pub enum Stream {
    /// A TCP connection (TCP_NODELAY is set on it, as the spec recommends).
    Tcp(TcpStream),
    /// A Unix domain socket connection.
    Unix(UnixStream),
}

impl Stream {
    /// Wrap a TCP stream, turning Nagle's algorithm off.
    pub fn tcp(stream: TcpStream) -> io::Result<Stream> {
        stream.set_nodelay(true)?;
        Ok(Stream::Tcp(stream))
    }

    /// Another handle to the same socket.
    pub fn try_clone(&self) -> io::Result<Stream> {
        match self {
            Stream::Tcp(s) => s.try_clone().map(Stream::Tcp),
            Stream::Unix(s) => s.try_clone().map(Stream::Unix),
        }
    }

    /// Shut down one or both halves; errors (already closed) are ignored.
    pub fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        };
    }

    /// Set a timeout on blocking reads (`None`: wait forever).
    pub fn set_read_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            Stream::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    /// Set one timeout on blocking reads and on blocking writes (`None`: wait forever).
    pub fn set_timeouts(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        self.set_read_timeout(timeout)?;
        self.set_write_timeout(timeout)
    }

    /// Set a timeout on blocking writes (`None`: wait forever).
    pub fn set_write_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(timeout),
            Stream::Unix(s) => s.set_write_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

impl std::os::fd::AsRawFd for Stream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// Send as much of `buf` as the socket takes without blocking (`send` with `MSG_DONTWAIT`);
/// `WouldBlock` when it takes nothing. Never raises SIGPIPE.
pub fn send_nonblocking(stream: &Stream, buf: &[u8]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let fd = match stream {
        Stream::Tcp(s) => s.as_raw_fd(),
        Stream::Unix(s) => s.as_raw_fd(),
    };
    // SAFETY: `fd` is an open socket owned by `stream`, which outlives this call, and `buf`
    // is valid for reads of `buf.len()` bytes.
    let sent = unsafe {
        libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

/// Receive what the socket holds now, up to `buf.len()` bytes (`recv` with `MSG_DONTWAIT`);
/// `WouldBlock` when it holds nothing, `Ok(0)` at end of stream.
pub fn recv_nonblocking(stream: &Stream, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let fd = match stream {
        Stream::Tcp(s) => s.as_raw_fd(),
        Stream::Unix(s) => s.as_raw_fd(),
    };
    // SAFETY: `fd` is an open socket owned by `stream`, which outlives this call, and `buf`
    // is valid for writes of `buf.len()` bytes.
    let got = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if got < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(got as usize)
    }
}

/// Read exactly `buf.len()` bytes; `Ok(false)` when the peer closed before the first byte.
pub fn read_exact_or_eof(stream: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        match stream.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Read and throw away `len` bytes through a small buffer.
pub fn discard(stream: &mut impl Read, mut len: u64) -> io::Result<()> {
    let mut scratch = [0u8; 64 * 1024];
    while len > 0 {
        let chunk = len.min(scratch.len() as u64) as usize;
        stream.read_exact(&mut scratch[..chunk])?;
        len -= chunk as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eof_before_first_byte_is_clean() {
        let mut empty: &[u8] = &[];
        let mut buf = [0u8; 4];
        assert!(!read_exact_or_eof(&mut empty, &mut buf).unwrap());
        let mut short: &[u8] = &[1, 2];
        let err = read_exact_or_eof(&mut short, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let mut full: &[u8] = &[1, 2, 3, 4, 5];
        assert!(read_exact_or_eof(&mut full, &mut buf).unwrap());
        assert_eq!(buf, [1, 2, 3, 4]);
        assert_eq!(full, &[5]);
    }

    #[test]
    fn nonblocking_send_stops_when_the_peer_does_not_read() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let a = Stream::Unix(a);
        assert_eq!(send_nonblocking(&a, b"hello").unwrap(), 5);
        let mut got = [0u8; 5];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        let chunk = vec![1u8; 1 << 20];
        let mut total = 0;
        let err = loop {
            match send_nonblocking(&a, &chunk) {
                Ok(n) => total += n,
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(total > 0);
    }

    #[test]
    fn discard_consumes_exactly() {
        let data = vec![7u8; 200_000];
        let mut reader: &[u8] = &data;
        discard(&mut reader, 150_001).unwrap();
        assert_eq!(reader.len(), 49_999);
    }
}
