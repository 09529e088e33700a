//! Opening a TCP connection for the client: a bounded connect, no connection to itself, and
//! the kernel told to fail it when the server's host goes silent.

use super::error::ClientError;
use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::RawFd;
use std::time::Duration;

/// `TcpStream::connect`, each address tried for at most `timeout`.
pub(crate) fn connect_tcp_within(
    address: impl ToSocketAddrs,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let mut last = None;
    for a in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "the address resolved to nothing")
    }))
}

/// Refuse a TCP connection to itself. Connecting to a local port nobody listens on can,
/// rarely, pick that very port as the source port and complete a "simultaneous open" with
/// itself (seen on Linux 6.18, where `connect` takes even source ports: about one attempt in
/// 5,000 at an even port); the handshake would then wait for a greeting that never comes.
pub(crate) fn refuse_self_connection(stream: &TcpStream) -> Result<(), ClientError> {
    if stream.local_addr()? == stream.peer_addr()? {
        return Err(ClientError::Io(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("nothing listens on {} (the connection reached itself)", stream.peer_addr()?),
        )));
    }
    Ok(())
}

/// Have the kernel close a TCP connection whose peer has gone silent for about `after`
/// (`None`: never, the kernel's defaults): keepalive probes once it has been idle for a
/// third of it (the peer's kernel answers them as long as the host is up, however busy its
/// server), and `TCP_USER_TIMEOUT`, which ends the connection when sent data, or those
/// probes, stay unacknowledged that long, or when the peer's receive window stays closed
/// that long (its server takes nothing from the socket while there is more to send). A
/// server host that vanishes (power loss, a partition) then fails its requests in about
/// `after`, those it had acknowledged included, instead of never.
pub(crate) fn detect_dead_peer(fd: RawFd, after: Option<Duration>) -> io::Result<()> {
    let set = |level: libc::c_int, name: libc::c_int, value: libc::c_int| -> io::Result<()> {
        // SAFETY: `fd` is an open socket and `value` a c_int that outlives the call.
        let r = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    let Some(after) = after else {
        set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 0)?;
        return set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, 0);
    };
    let secs = after.as_secs().clamp(3, i32::MAX as u64 / 1000) as libc::c_int;
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, (secs / 3).max(1))?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, (secs / 6).max(1))?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3)?;
    set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, secs * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientBuilder;
    use std::net::TcpListener;
    use std::time::Instant;

    /// A port on 127.0.0.1 that nobody listens on, of the parity Linux's `connect` takes its
    /// source ports from (even), so a self-connection can happen.
    fn even_free_port() -> u16 {
        loop {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            if port.is_multiple_of(2) {
                return port;
            }
            if let Some(even) = port.checked_sub(1) {
                if TcpListener::bind(("127.0.0.1", even)).is_ok() {
                    return even;
                }
            }
        }
    }

    #[test]
    fn connecting_where_nobody_listens_never_reaches_itself() {
        // Before the check, one attempt in a few thousand connected to itself and then waited
        // out the whole handshake timeout for a greeting.
        let port = even_free_port();
        let builder = ClientBuilder::new().handshake_timeout(Some(Duration::from_secs(20)));
        let t0 = Instant::now();
        let mut reached_itself = 0;
        for _ in 0..20_000 {
            let t = Instant::now();
            let e = builder.connect_tcp(("127.0.0.1", port)).expect_err("nobody listens");
            assert!(t.elapsed() < Duration::from_secs(5), "an attempt took {:?}: {e}", t.elapsed());
            reached_itself += usize::from(e.to_string().contains("reached itself"));
            if t0.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        eprintln!("{reached_itself} attempts reached themselves and were refused at once");
    }

    fn get(fd: RawFd, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut value: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `fd` is an open socket; `value` and `len` outlive the call.
        let r = unsafe {
            libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len)
        };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        value
    }

    #[test]
    fn dead_peer_detection_sets_keepalive_and_the_user_timeout_and_unsets_them() {
        use std::os::fd::AsRawFd;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let fd = stream.as_raw_fd();
        let tcp = |name| get(fd, libc::IPPROTO_TCP, name);
        detect_dead_peer(fd, Some(Duration::from_secs(30))).unwrap();
        assert_eq!(get(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(tcp(libc::TCP_KEEPIDLE), 10);
        assert_eq!(tcp(libc::TCP_KEEPINTVL), 5);
        assert_eq!(tcp(libc::TCP_KEEPCNT), 3);
        assert_eq!(tcp(libc::TCP_USER_TIMEOUT), 30_000);
        detect_dead_peer(fd, Some(Duration::from_millis(10))).unwrap();
        assert_eq!(tcp(libc::TCP_USER_TIMEOUT), 3_000, "at least 3 s");
        assert_eq!(tcp(libc::TCP_KEEPIDLE), 1);
        detect_dead_peer(fd, None).unwrap();
        assert_eq!(get(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 0);
        assert_eq!(tcp(libc::TCP_USER_TIMEOUT), 0);
    }

    #[test]
    fn a_peer_that_never_greets_fails_the_connect_at_the_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mute = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
        let t0 = Instant::now();
        let got = ClientBuilder::new()
            .handshake_timeout(Some(Duration::from_millis(300)))
            .connect_tcp(addr);
        let e = got.expect_err("a mute peer is no NBD server");
        assert!(e.to_string().contains("did not answer the handshake within 300ms"), "{e}");
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(5), "{took:?}");
        drop(mute.join());
    }
}
