//! An upstream NBD server as a device, so ember can front a remote or emulated disk (for
//! example nbdkit's memory plugin behind its delay filter, playing a 5 ms hard disk).

use crate::demote_queue::{DemoteQueue, DemoteReplies};
use ember_engine::device::identity::{digest, digest_bytes};
use ember_engine::device::{check_range, write_zeroes_by_writes, Identity};
use ember_engine::Device;
use ember_nbd::{Client, ClientBuilder, ClientError, NbdUri, DEFAULT_HANDSHAKE_TIMEOUT};
use parking_lot::RwLock;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest TRIM / WRITE_ZEROES length sent in one request (NBD lengths are 32-bit).
const MAX_DISCARD: u64 = 1 << 30;

/// The longest one reconnection attempt's connect, or one read or write of its handshake,
/// may wait: a healthy server answers a handshake in milliseconds, and a peer that does not
/// must leave time in the window for the next attempt.
const RECONNECT_ATTEMPT: Duration = Duration::from_secs(5);

/// How long an NBD backing's server host may stay silent before its connection fails, by
/// default ([`NbdDevice::dead_peer_after`], `ember serve --nbd-dead-after`).
pub const DEFAULT_DEAD_PEER: Duration = Duration::from_secs(30);

/// An export of an NBD server, reached with ember's pipelining client. The client is shared
/// by every thread: requests from many threads are in flight at once on one connection.
pub struct NbdDevice {
    client: RwLock<Arc<Client>>,
    uri: String,
    trusted: bool,
    /// With `--demote`, when the export granted `x-ember:demote`.
    demotes: Option<DemoteQueue>,
    /// The `--demote` queue length asked for (asked again at every reconnection).
    demote_queue: Option<usize>,
    /// How long to keep trying to reconnect after the connection broke (None: never).
    reconnect: Option<Duration>,
    /// Reconnections made.
    reconnections: AtomicU64,
    /// How long the server's host may stay silent before a connection fails (None: never).
    dead_peer: Option<Duration>,
}

/// Whether `e` means the connection is gone (or the server is going), so the request may
/// be sent again on a new connection: NBD READ, WRITE, TRIM and WRITE_ZEROES are idempotent.
fn broken(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Io(_)
            | ClientError::Disconnected(_)
            | ClientError::Server { errno: ember_nbd::Errno::Shutdown, .. }
    )
}

fn to_io(uri: &str, op: &str, e: ClientError) -> io::Error {
    let kind = match &e {
        ClientError::Io(io) => io.kind(),
        ClientError::Invalid(_) => io::ErrorKind::InvalidInput,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{uri}: {op}: {e}"))
}

impl NbdDevice {
    /// Connect to `uri` (`nbd://host:port/export` or `nbd+unix:///export?socket=PATH`).
    pub fn connect(uri: &str) -> io::Result<Self> {
        Self::connect_demoting(uri, None)
    }

    /// Connect to `uri`; with `demote_queue` = Some(N), ask for ember's DEMOTE extension and,
    /// if the export grants it, send DEMOTEs with at most N awaiting replies
    /// ([`NbdDevice::demotes`] tells whether it was granted).
    pub fn connect_demoting(uri: &str, demote_queue: Option<usize>) -> io::Result<Self> {
        let dead_peer = Some(DEFAULT_DEAD_PEER);
        let client = Self::open(uri, demote_queue, DEFAULT_HANDSHAKE_TIMEOUT, dead_peer)?;
        let demotes = match demote_queue {
            Some(n) if client.info().demote => Some(DemoteQueue::new(n)?),
            _ => None,
        };
        Ok(Self {
            client: RwLock::new(Arc::new(client)),
            uri: uri.to_string(),
            trusted: false,
            demotes,
            demote_queue,
            reconnect: None,
            reconnections: AtomicU64::new(0),
            dead_peer,
        })
    }

    /// A connection to `uri`; connecting and the handshake may take at most `timeout`.
    fn open(
        uri: &str,
        demote_queue: Option<usize>,
        timeout: Duration,
        dead_peer: Option<Duration>,
    ) -> io::Result<Client> {
        let parsed =
            NbdUri::parse(uri).map_err(|e| to_io(uri, "connect", ClientError::Invalid(e)))?;
        let client = ClientBuilder::new()
            .export(&parsed.export)
            .demote(demote_queue.is_some())
            .handshake_timeout(Some(timeout))
            .dead_peer_timeout(dead_peer)
            .connect(&parsed.endpoint)
            .map_err(|e| to_io(uri, "connect", e))?;
        if client.info().read_only() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{uri}: the export is read-only; ember needs to write its backing"),
            ));
        }
        Ok(client)
    }

    /// When the connection breaks (the server restarts), reconnect and send the request
    /// again, trying for at most `window` before the request fails (`ember serve
    /// --nbd-reconnect`). A server that comes back with another size is not taken.
    pub fn reconnect_within(mut self, window: Duration) -> Self {
        self.reconnect = Some(window);
        self
    }

    /// Fail a TCP connection whose server host has been silent for about `after` (None:
    /// never; default [`DEFAULT_DEAD_PEER`]): TCP keepalive probes, which a live host
    /// answers however busy its server is, and `TCP_USER_TIMEOUT` (which also fails it if
    /// the server takes nothing from the socket that long while there is more to send). A
    /// host that vanishes without closing the connection (power loss, a partition) then
    /// fails the requests in flight with an I/O error, and `reconnect_within` starts,
    /// instead of their waiting for good.
    pub fn dead_peer_after(mut self, after: Option<Duration>) -> io::Result<Self> {
        self.client.read().set_dead_peer_timeout(after)?;
        self.dead_peer = after;
        Ok(self)
    }

    /// Reconnections made so far.
    pub fn reconnections(&self) -> u64 {
        self.reconnections.load(Ordering::Relaxed)
    }

    /// Run `f` on the connection; if it broke, reconnect (within the window) and run it
    /// again on the new one.
    fn call<T>(&self, op: &str, f: impl Fn(&Client) -> Result<T, ClientError>) -> io::Result<T> {
        let mut client = self.client.read().clone();
        let deadline = self.reconnect.map(|w| Instant::now() + w);
        loop {
            match f(&client) {
                Ok(v) => return Ok(v),
                Err(e) if broken(&e) && deadline.is_some_and(|d| Instant::now() < d) => {
                    client = self.reconnected(&client, deadline.unwrap_or_else(Instant::now));
                }
                Err(e) => return Err(to_io(&self.uri, op, e)),
            }
        }
    }

    /// A working connection other than `old`: the one another thread made, or a new one
    /// (tried every 50 ms until `deadline`; then `old` comes back and the caller's next
    /// attempt fails). An attempt's connect, and each read or write of its handshake, waits
    /// at most [`RECONNECT_ATTEMPT`] or the time left in the window, whichever is less:
    /// every other request waits on the lock held here, so a peer that accepts and never
    /// answers must not hold it for good.
    fn reconnected(&self, old: &Arc<Client>, deadline: Instant) -> Arc<Client> {
        let mut slot = self.client.write();
        if !Arc::ptr_eq(&slot, old) {
            return slot.clone();
        }
        let size = old.size();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let attempt = left.min(RECONNECT_ATTEMPT);
            match Self::open(&self.uri, self.demote_queue, attempt, self.dead_peer) {
                Ok(c) if c.size() == size => {
                    *slot = Arc::new(c);
                    self.reconnections.fetch_add(1, Ordering::Relaxed);
                    return slot.clone();
                }
                Ok(_) => break,
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        old.clone()
    }

    /// The replies to this device's DEMOTEs, if the export granted them.
    pub fn demotes(&self) -> Option<Arc<DemoteReplies>> {
        self.demotes.as_ref().map(|q| q.replies())
    }

    /// Trust that nobody but ember writes this export, so a warm start may keep its cached
    /// blocks (`ember serve --trust-nbd-backing`). Its identity is then its URI and size;
    /// without this it cannot be identified and never starts warm.
    pub fn trust_unchanged(mut self) -> Self {
        self.trusted = true;
        self
    }

    /// The export's capabilities as the handshake reported them.
    pub fn info(&self) -> ember_nbd::ExportInfo {
        self.client.read().info().clone()
    }
}

impl Device for NbdDevice {
    fn size(&self) -> u64 {
        self.client.read().size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size(), offset, buf.len() as u64, "read")?;
        let cell = parking_lot::Mutex::new(buf);
        self.call("read", |c| c.read(offset, &mut cell.lock()[..]))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(self.size(), offset, data.len() as u64, "write")?;
        self.call("write", |c| c.write(offset, data, false))
    }

    fn sync(&self) -> io::Result<()> {
        // A server without NBD_FLAG_SEND_FLUSH has no volatile cache to flush.
        if !self.client.read().info().can_flush() {
            return Ok(());
        }
        // Not sent again on a new connection: the writes it covered went to a server that
        // is gone, so a FLUSH on its successor would promise nothing about them.
        let client = self.client.read().clone();
        client.flush().map_err(|e| to_io(&self.uri, "flush", e))
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size(), offset, len, "trim")?;
        if !self.client.read().info().can_trim() {
            return Ok(()); // TRIM is advisory
        }
        let mut pos = offset;
        while pos < offset + len {
            let n = MAX_DISCARD.min(offset + len - pos);
            self.call("trim", |c| c.trim(pos, n as u32, false))?;
            pos += n;
        }
        Ok(())
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size(), offset, len, "write-zeroes")?;
        if !self.client.read().info().can_write_zeroes() {
            return write_zeroes_by_writes(self, offset, len);
        }
        let mut pos = offset;
        while pos < offset + len {
            let n = MAX_DISCARD.min(offset + len - pos);
            self.call("write-zeroes", |c| c.write_zeroes(pos, n as u32, false, false))?;
            pos += n;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        self.uri.clone()
    }

    fn takes_demotes(&self) -> bool {
        self.demotes.is_some()
    }

    fn demote(&self, offset: u64, data: &[u8]) -> bool {
        let client = self.client.read().clone();
        self.demotes.as_ref().is_some_and(|q| q.send(&client, offset, data))
    }

    fn identity(&self) -> io::Result<Identity> {
        if !self.trusted {
            return Ok(Identity::Unknown(
                "an NBD export: ember cannot tell whether another client wrote it while ember \
                 was stopped (--trust-nbd-backing trusts that only ember writes it)",
            ));
        }
        let medium = digest(&[4, digest_bytes(self.uri.as_bytes()), self.size()]);
        Ok(Identity::Known { medium, state: medium })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_nbd::{ExportMap, MemExport, RunningServer, Server};
    use std::path::Path;
    use std::sync::Arc;

    /// An NBD server of `mem` as export "disk" on the Unix socket `sock`.
    fn serve(sock: &Path, mem: Arc<MemExport>) -> RunningServer {
        Server::builder(Arc::new(ExportMap::new().with("disk", "test", mem)))
            .listen_unix(sock)
            .unwrap()
            .build()
            .unwrap()
            .spawn()
            .unwrap()
    }

    #[test]
    fn round_trip_through_an_nbd_server() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("up.sock");
        let mem = Arc::new(MemExport::new(1 << 20));
        let server = serve(&sock, mem.clone());
        let uri = format!("nbd+unix:///disk?socket={}", sock.display());
        let d = NbdDevice::connect(&uri).unwrap();
        assert_eq!(d.size(), 1 << 20);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        d.write_at(12_345, &data).unwrap();
        let mut got = vec![0u8; data.len()];
        d.read_at(12_345, &mut got).unwrap();
        assert_eq!(got, data);
        d.sync().unwrap();
        d.trim(12_345, 100).unwrap();
        d.write_zeroes(20_000, 50).unwrap();
        d.read_at(12_345, &mut got).unwrap();
        assert!(got[7_655..7_705].iter().all(|&b| b == 0), "write-zeroes reads zeros");
        assert!(d.read_at((1 << 20) - 1, &mut [0u8; 2]).is_err());
        let bad = NbdDevice::connect(&format!("nbd+unix:///nope?socket={}", sock.display()));
        assert!(bad.is_err());
        drop(d);
        server.shutdown().unwrap();
    }

    #[test]
    fn a_reconnection_to_a_peer_that_never_answers_ends_with_its_window() {
        // Seen in CI: the array tier restarted, and the client tier's reconnection reached a
        // socket that never sent the NBD greeting; it waited for it with the connection's
        // lock held, so every request through the device hung for good.
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("up.sock");
        let mem = Arc::new(MemExport::new(1 << 20));
        let server = serve(&sock, mem);
        let uri = format!("nbd+unix:///disk?socket={}", sock.display());
        let d = NbdDevice::connect(&uri).unwrap().reconnect_within(Duration::from_secs(1));
        d.write_at(0, &[9u8; 4096]).unwrap();
        server.shutdown().unwrap();
        // Something else now listens there, takes connections and never speaks.
        let _ = std::fs::remove_file(&sock);
        let mute = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let d = Arc::new(d);
        let reader = d.clone();
        let t0 = Instant::now();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let _ = tx.send(reader.read_at(0, &mut buf).map(|_| buf[0]));
        });
        let got = rx.recv_timeout(Duration::from_secs(20));
        let took = t0.elapsed();
        let Ok(result) = got else { panic!("the read still waits after {took:?}") };
        assert!(result.is_err(), "no server, so no data: {result:?}");
        assert!(took < Duration::from_secs(5), "the 1 s window took {took:?}");
        assert_eq!(d.reconnections(), 0);
        drop(mute);
    }

    #[test]
    fn a_reconnection_gives_up_on_a_mute_peer_and_reaches_the_server_behind_it() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("up.sock");
        let mem = Arc::new(MemExport::new(1 << 20));
        let server = serve(&sock, mem.clone());
        let uri = format!("nbd+unix:///disk?socket={}", sock.display());
        let d = NbdDevice::connect(&uri).unwrap().reconnect_within(Duration::from_secs(20));
        d.write_at(0, &[9u8; 4096]).unwrap();
        server.shutdown().unwrap();
        let _ = std::fs::remove_file(&sock);
        let mute = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let d = Arc::new(d);
        let reader = d.clone();
        let t0 = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let _ = tx.send(reader.read_at(0, &mut buf).map(|_| buf));
        });
        // The first attempt reaches the mute peer and waits for its greeting; meanwhile the
        // server comes back under the same name (the mute socket lives on, renamed).
        mute.set_nonblocking(true).unwrap();
        let _waiting = loop {
            match mute.accept() {
                Ok((conn, _)) => break conn,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(t0.elapsed() < Duration::from_secs(10), "no attempt reached it");
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        std::fs::rename(&sock, dir.path().join("mute.sock")).unwrap();
        let server = serve(&sock, mem);
        let got = rx.recv_timeout(Duration::from_secs(15));
        let took = t0.elapsed();
        let Ok(got) = got else { panic!("the read still waits after {took:?}") };
        assert_eq!(got.unwrap(), [9u8; 4096]);
        assert!(took >= RECONNECT_ATTEMPT - Duration::from_millis(600), "{took:?}");
        assert!(took < RECONNECT_ATTEMPT + Duration::from_secs(5), "{took:?}");
        assert_eq!(d.reconnections(), 1);
        drop(mute);
        server.shutdown().unwrap();
    }
}
