//! systemd's readiness protocol (sd_notify(3)) without systemd: datagrams of `KEY=VALUE`
//! lines to the Unix socket `$NOTIFY_SOCKET` names (a path, or `@name` in the abstract
//! namespace). `READY=1` once the server serves, `RELOADING=1` with `MONOTONIC_USEC` when a
//! reload starts (then `READY=1` again), `STOPPING=1` when it stops, and `STATUS=` lines.
//! Without `$NOTIFY_SOCKET` every call does nothing.

use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Where notifications go, if anywhere.
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

impl Notifier {
    /// The socket `$NOTIFY_SOCKET` names; none without it (or if it cannot be used, which
    /// is logged once).
    pub fn from_env() -> Notifier {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(path) => Notifier::to(&path.to_string_lossy()),
            None => Notifier { target: None },
        }
    }

    /// No notifications.
    pub fn none() -> Notifier {
        Notifier { target: None }
    }

    /// Notifications to the socket `path` (`@name`: the abstract namespace).
    pub fn to(path: &str) -> Notifier {
        let target = (|| -> std::io::Result<_> {
            let addr = match path.strip_prefix('@') {
                Some(name) => {
                    use std::os::linux::net::SocketAddrExt;
                    SocketAddr::from_abstract_name(name.as_bytes())?
                }
                None => SocketAddr::from_pathname(path)?,
            };
            Ok((UnixDatagram::unbound()?, addr))
        })();
        match target {
            Ok(t) => Notifier { target: Some(t) },
            Err(e) => {
                tracing::warn!(socket = path, error = %e, "NOTIFY_SOCKET unusable; systemd is not notified");
                Notifier { target: None }
            }
        }
    }

    /// Whether notifications go anywhere.
    pub fn enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Send `lines` (`KEY=VALUE` separated by newlines) as one datagram.
    pub fn send(&self, lines: &str) {
        if let Some((socket, addr)) = &self.target {
            if let Err(e) = socket.send_to_addr(lines.as_bytes(), addr) {
                tracing::debug!(error = %e, "notifying systemd");
            }
        }
    }

    /// The server serves.
    pub fn ready(&self) {
        self.send("READY=1");
    }

    /// A reload starts (systemd's Type=notify-reload wants the monotonic time with it).
    pub fn reloading(&self) {
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()));
    }

    /// The server stops.
    pub fn stopping(&self) {
        self.send("STOPPING=1");
    }

    /// A status line for `systemctl status`.
    pub fn status(&self, line: &str) {
        self.send(&format!("STATUS={}", line.replace('\n', " ")));
    }
}

/// CLOCK_MONOTONIC in microseconds.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec that we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_reach_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::to(path.to_str().unwrap());
        assert!(n.enabled());
        n.ready();
        n.reloading();
        n.status("hit ratio 50.0%");
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        for _ in 0..3 {
            let len = sock.recv(&mut buf).unwrap();
            got.push(String::from_utf8_lossy(&buf[..len]).into_owned());
        }
        assert_eq!(got[0], "READY=1");
        assert!(got[1].starts_with("RELOADING=1\nMONOTONIC_USEC="), "{}", got[1]);
        assert_eq!(got[2], "STATUS=hit ratio 50.0%");
        assert!(!Notifier { target: None }.enabled());
    }
}
