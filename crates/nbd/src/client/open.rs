//! Opening a connection: the options ([`ClientBuilder`]), the TCP or Unix socket, the
//! handshake (`handshake.rs`) within its timeout, and the reader thread that matches replies
//! to requests (`replies.rs`); listing a server's exports.

use std::io::{self, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::connect::{connect_tcp_within, detect_dead_peer, refuse_self_connection};
use super::connection::Client;
use super::error::ClientError;
use super::handshake;
use super::pending::{Pending, Shared};
use super::replies::read_replies;
use super::uri::{Endpoint, NbdUri};
use crate::stream::Stream;

/// How long connecting and the handshake may take by default before the connection is
/// given up ([`ClientBuilder::handshake_timeout`]).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of a connection.
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    export: String,
    structured: bool,
    demote: bool,
    handshake_timeout: Option<Duration>,
    dead_peer: Option<Duration>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            export: String::new(),
            structured: true,
            demote: false,
            handshake_timeout: Some(DEFAULT_HANDSHAKE_TIMEOUT),
            dead_peer: None,
        }
    }
}

impl ClientBuilder {
    /// Default export, structured replies wanted.
    pub fn new() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The export to open (empty: the server's default).
    pub fn export(mut self, name: &str) -> ClientBuilder {
        self.export = name.to_string();
        self
    }

    /// Whether to ask for ember's DEMOTE extension (docs/reference/nbd.md); used if the server
    /// acknowledges it for the export ([`ExportInfo::demote`](super::ExportInfo::demote)). A
    /// server without it simply refuses the option, and the connection goes on without DEMOTE.
    pub fn demote(mut self, wanted: bool) -> ClientBuilder {
        self.demote = wanted;
        self
    }

    /// Whether to ask for structured replies (used if the server agrees).
    pub fn structured_replies(mut self, wanted: bool) -> ClientBuilder {
        self.structured = wanted;
        self
    }

    /// How long the TCP connect and each read or write of the handshake may wait (`None`:
    /// forever; default [`DEFAULT_HANDSHAKE_TIMEOUT`]). A peer that accepts the connection
    /// but never speaks NBD then fails the connect instead of blocking its caller for good.
    /// Requests after the handshake have no timeout.
    pub fn handshake_timeout(mut self, timeout: Option<Duration>) -> ClientBuilder {
        self.handshake_timeout = timeout.map(|t| t.max(Duration::from_millis(1)));
        self
    }

    /// Over TCP, fail the connection when the server's host has been silent for about
    /// `after` (at least 3 s): TCP keepalive and `TCP_USER_TIMEOUT`. A host that vanishes
    /// without closing the connection otherwise leaves requests it acknowledged waiting for
    /// good. `None` (the default): no detection. No effect on Unix sockets.
    pub fn dead_peer_timeout(mut self, after: Option<Duration>) -> ClientBuilder {
        self.dead_peer = after;
        self
    }

    /// Connect over TCP.
    pub fn connect_tcp(&self, address: impl ToSocketAddrs) -> Result<Client, ClientError> {
        Client::handshake(self.open_tcp(address)?, self)
    }

    /// The TCP connection, before the handshake.
    fn open_tcp(&self, address: impl ToSocketAddrs) -> Result<Stream, ClientError> {
        let stream = match self.handshake_timeout {
            None => TcpStream::connect(address)?,
            Some(t) => connect_tcp_within(address, t)?,
        };
        refuse_self_connection(&stream)?;
        if self.dead_peer.is_some() {
            detect_dead_peer(stream.as_raw_fd(), self.dead_peer)?;
        }
        Ok(Stream::tcp(stream)?)
    }

    /// Connect over a Unix socket.
    pub fn connect_unix(&self, path: impl AsRef<Path>) -> Result<Client, ClientError> {
        Client::handshake(Stream::Unix(UnixStream::connect(path)?), self)
    }

    /// Connect to an endpoint.
    pub fn connect(&self, endpoint: &Endpoint) -> Result<Client, ClientError> {
        match endpoint {
            Endpoint::Tcp(address) => self.connect_tcp(address.as_str()),
            Endpoint::Unix(path) => self.connect_unix(path),
        }
    }
}

/// A connection to `endpoint` for a handshake of its own, with the default timeouts.
fn open(endpoint: &Endpoint) -> Result<Stream, ClientError> {
    let stream = match endpoint {
        Endpoint::Tcp(address) => ClientBuilder::new().open_tcp(address.as_str())?,
        Endpoint::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
    };
    stream.set_timeouts(Some(DEFAULT_HANDSHAKE_TIMEOUT))?;
    Ok(stream)
}

impl Client {
    /// Connect to `uri` (`nbd://host:port/export` or `nbd+unix:///export?socket=PATH`) with
    /// structured replies.
    pub fn connect_uri(uri: &str) -> Result<Client, ClientError> {
        let uri = NbdUri::parse(uri).map_err(ClientError::Invalid)?;
        ClientBuilder::new().export(&uri.export).connect(&uri.endpoint)
    }

    /// List the exports of the server at `endpoint` (NBD_OPT_LIST, then NBD_OPT_ABORT).
    pub fn list_exports(endpoint: &Endpoint) -> Result<Vec<(String, String)>, ClientError> {
        let mut stream = open(endpoint)?;
        handshake::greet(&mut stream)?;
        let exports = handshake::list(&mut stream)?;
        handshake::abort(&mut stream)?;
        Ok(exports)
    }

    pub(super) fn handshake(
        mut stream: Stream,
        options: &ClientBuilder,
    ) -> Result<Client, ClientError> {
        stream.set_timeouts(options.handshake_timeout)?;
        let negotiated = (|| {
            let no_zeroes = handshake::greet(&mut stream)?;
            let structured = options.structured && handshake::structured_replies(&mut stream)?;
            let demote = options.demote && handshake::demote(&mut stream, &options.export)?;
            let mut info = handshake::go(&mut stream, &options.export, no_zeroes, structured)?;
            info.demote = demote;
            Ok(info)
        })();
        let info = negotiated.map_err(|e| match e {
            ClientError::Io(io)
                if matches!(io.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
            {
                ClientError::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the server did not answer the handshake within {:?}",
                        options.handshake_timeout.unwrap_or_default()
                    ),
                ))
            }
            e => e,
        })?;
        // The transmission phase waits as long as the server takes.
        stream.set_timeouts(None)?;
        let reader_stream = stream.try_clone()?;
        let shared =
            Arc::new(Shared { pending: Mutex::new(Pending::default()), idle: Condvar::new() });
        let reader = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new().name("nbd-client-reader".into()).spawn(move || {
                let reader = BufReader::with_capacity(256 * 1024, reader_stream);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    read_replies(reader, &shared)
                }));
                let reason = match outcome {
                    Ok(Ok(())) => "server closed the connection".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "client reader failed".to_string(),
                };
                shared.kill(reason);
            })?
        };
        Ok(Client {
            info,
            writer: Mutex::new(stream),
            shared,
            next_cookie: AtomicU64::new(1),
            reader: Some(reader),
            disconnected: AtomicBool::new(false),
        })
    }
}
