//! TLS for the NBD server (`doc/proto.md`, "TLS support"): X.509 credentials read from a
//! directory with the file names qemu-nbd and nbdkit use, and the in-session upgrade after
//! NBD_OPT_STARTTLS.
//!
//! After the TLS handshake, the connection's plaintext runs over one end of a Unix socket
//! pair and two pump threads move bytes between the other end and the TCP socket through
//! rustls (one decrypting, one encrypting). The rest of the server keeps speaking to a plain
//! socket, so its reader, writer, non-blocking sends, timeouts and shutdown work unchanged.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConnection};

use super::deadline::Deadline;
use super::handshake::{StartTls, TlsPolicy};
use crate::stream::Stream;

/// Whether the server offers or requires TLS (`ember serve --tls off|on|require`, as
/// qemu-nbd and nbdkit name them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS (the spec's NOTLS mode).
    Off,
    /// TLS offered; plaintext clients are served too.
    On,
    /// TLS required: every option but STARTTLS and ABORT is refused with
    /// NBD_REP_ERR_TLS_REQD until the client upgrades (FORCEDTLS).
    Require,
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsMode::Off => "off",
            TlsMode::On => "on",
            TlsMode::Require => "require",
        })
    }
}

impl std::str::FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<TlsMode, String> {
        match s {
            "off" => Ok(TlsMode::Off),
            "on" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            other => Err(format!("{other:?} is not a TLS mode (off, on, require)")),
        }
    }
}

/// Why TLS credentials could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file is missing or unreadable, or holds nothing usable.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// rustls refused the certificates or key.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The CA certificate file name (trusted issuers of client certificates).
pub const CA_CERT: &str = "ca-cert.pem";
/// The server certificate chain file name.
pub const SERVER_CERT: &str = "server-cert.pem";
/// The server private key file name.
pub const SERVER_KEY: &str = "server-key.pem";

/// A server's TLS mode and credentials.
#[derive(Clone)]
pub struct TlsSettings {
    mode: TlsMode,
    config: Arc<rustls::ServerConfig>,
    verify_peer: bool,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("mode", &self.mode)
            .field("verify_peer", &self.verify_peer)
            .finish()
    }
}

fn file_error(path: &Path, message: impl fmt::Display) -> TlsError {
    TlsError::File { path: path.to_path_buf(), message: message.to_string() }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no PEM certificate in the file"));
    }
    Ok(certs)
}

impl TlsSettings {
    /// Read `server-cert.pem` and `server-key.pem` from `dir` (and `ca-cert.pem` when
    /// `verify_peer`: then only clients presenting a certificate issued by that CA get past
    /// the TLS handshake). `mode` must be `On` or `Require`.
    pub fn from_dir(dir: &Path, mode: TlsMode, verify_peer: bool) -> Result<TlsSettings, TlsError> {
        if mode == TlsMode::Off {
            return Err(TlsError::Config("credentials given with TLS off".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certificates(&dir.join(SERVER_CERT))?;
        let key_path = dir.join(SERVER_KEY);
        let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| file_error(&key_path, e))?;
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = if verify_peer {
            let ca_path = dir.join(CA_CERT);
            let mut roots = RootCertStore::empty();
            for cert in certificates(&ca_path)? {
                roots.add(cert).map_err(|e| file_error(&ca_path, e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config =
            builder.with_single_cert(chain, key).map_err(|e| TlsError::Config(e.to_string()))?;
        Ok(TlsSettings { mode, config: Arc::new(config), verify_peer })
    }

    /// The mode.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// Whether client certificates are verified.
    pub fn verify_peer(&self) -> bool {
        self.verify_peer
    }
}

/// The STARTTLS hook of one connection.
pub(crate) struct ConnTls<'a> {
    pub settings: &'a TlsSettings,
    pub write_timeout: Option<Duration>,
}

impl StartTls<Deadline> for ConnTls<'_> {
    fn policy(&self) -> TlsPolicy {
        match self.settings.mode {
            TlsMode::Off => TlsPolicy::Off,
            TlsMode::On => TlsPolicy::On,
            TlsMode::Require => TlsPolicy::Require,
        }
    }

    fn start(&mut self, stream: &mut Deadline) -> io::Result<()> {
        let (inner, outer) = UnixStream::pair()?;
        let tcp = std::mem::replace(&mut stream.stream, Stream::Unix(inner));
        let mut tcp = Deadline { stream: tcp, until: stream.until };
        let mut conn =
            ServerConnection::new(Arc::clone(&self.settings.config)).map_err(io::Error::other)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp)?;
        }
        // The TCP socket gets the write timeout (a client that stops reading is dropped, as
        // without TLS); the plaintext pair none: its reader is the server, which may wait
        // for buffer budget as long as it must.
        let tcp = tcp.into_stream(self.write_timeout)?;
        spawn_pumps(tcp, outer, conn)
    }
}

struct Session {
    conn: Mutex<ServerConnection>,
    /// Serializes writes to the TCP socket, taken before the session lock is released so
    /// TLS records leave in the order rustls produced them.
    tcp_out: Mutex<Stream>,
}

impl Session {
    fn conn(&self) -> MutexGuard<'_, ServerConnection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Encrypted bytes rustls wants to send, with the TCP writer lock (taken while `conn` is
/// still held, so records keep their order); `None` when there is nothing to send.
fn drain<'a>(
    session: &'a Session,
    conn: &mut ServerConnection,
) -> io::Result<Option<(Vec<u8>, MutexGuard<'a, Stream>)>> {
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out)?;
    }
    if out.is_empty() {
        return Ok(None);
    }
    Ok(Some((out, lock(&session.tcp_out))))
}

fn spawn_pumps(
    mut tcp: Stream,
    mut outer: UnixStream,
    mut conn: ServerConnection,
) -> io::Result<()> {
    // The client's first plaintext may have come with its last handshake message, and
    // rustls may have records to send (TLS 1.3 session tickets): pass both on now, or the
    // pumps would wait for bytes that already arrived.
    let mut plain = vec![0u8; 64 * 1024];
    loop {
        match conn.reader().read(&mut plain) {
            Ok(0) => break,
            Ok(k) => outer.write_all(&plain[..k])?,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out)?;
    }
    tcp.write_all(&out)?;
    let session =
        Arc::new(Session { conn: Mutex::new(conn), tcp_out: Mutex::new(tcp.try_clone()?) });
    let (tcp_in, outer_in) = (tcp, outer.try_clone()?);
    let decrypt = {
        let session = Arc::clone(&session);
        std::thread::Builder::new()
            .name("nbd-tls-in".into())
            .spawn(move || pump_in(&session, tcp_in, outer_in))?
    };
    drop(decrypt);
    std::thread::Builder::new()
        .name("nbd-tls-out".into())
        .spawn(move || pump_out(&session, outer))?;
    Ok(())
}

/// TCP → rustls → plaintext socket, until the client closes or breaks TLS.
fn pump_in(session: &Session, mut tcp: Stream, mut outer: UnixStream) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut plain = vec![0u8; 64 * 1024];
    'outer: loop {
        let n = match tcp.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut received = Vec::new();
        let mut closed = false;
        let mut rd = &buf[..n];
        let mut conn = session.conn();
        while !rd.is_empty() {
            if conn.read_tls(&mut rd).is_err() {
                break 'outer;
            }
            let state = conn.process_new_packets();
            loop {
                match conn.reader().read(&mut plain) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(k) => received.extend_from_slice(&plain[..k]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            if state.is_err() {
                // Send the alert rustls queued, then stop.
                if let Ok(Some((out, mut tcp_out))) = drain(session, &mut conn) {
                    drop(conn);
                    let _ = tcp_out.write_all(&out);
                }
                break 'outer;
            }
        }
        match drain(session, &mut conn) {
            Ok(Some((out, mut tcp_out))) => {
                drop(conn);
                if tcp_out.write_all(&out).is_err() {
                    break;
                }
            }
            Ok(None) => drop(conn),
            Err(_) => break,
        }
        if !received.is_empty() && outer.write_all(&received).is_err() {
            break;
        }
        if closed {
            break;
        }
    }
    // The client is gone or said close_notify: the server's reader sees end of stream.
    let _ = outer.shutdown(Shutdown::Write);
}

/// Plaintext socket → rustls → TCP, until the server closes its side; then close_notify.
fn pump_out(session: &Session, mut outer: UnixStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match outer.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut conn = session.conn();
        let mut data = &buf[..n];
        let mut out = Vec::new();
        let mut failed = false;
        while !data.is_empty() {
            match conn.writer().write(data) {
                Ok(k) => data = &data[k..],
                Err(_) => {
                    failed = true;
                    break;
                }
            }
            while conn.wants_write() {
                if conn.write_tls(&mut out).is_err() {
                    failed = true;
                    break;
                }
            }
            if failed {
                break;
            }
        }
        let mut tcp_out = lock(&session.tcp_out);
        drop(conn);
        if failed || tcp_out.write_all(&out).is_err() {
            break;
        }
    }
    let mut conn = session.conn();
    conn.send_close_notify();
    let pending = drain(session, &mut conn);
    drop(conn);
    if let Ok(Some((out, mut tcp_out))) = pending {
        let _ = tcp_out.write_all(&out);
    }
    lock(&session.tcp_out).shutdown(Shutdown::Both);
    let _ = outer.shutdown(Shutdown::Both);
}
