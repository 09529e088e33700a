//! A blocking NBD client with many requests in flight.
//!
//! A [`Client`] is `Send + Sync`: any number of threads may call it at once, and each call
//! (`read`, `write`, …) waits only for its own reply; replies are matched to requests by
//! cookie on a reader thread. For pipelining from one thread, the `start_*` methods send a
//! request and return an [`InFlight`] ticket to [`InFlight::wait`] on later.
//!
//! ```no_run
//! use ember_nbd::Client;
//!
//! let client = Client::connect_uri("nbd://127.0.0.1:10809/disk")?;
//! client.write(0, &[0xab; 4096], false)?;
//! let tickets: Vec<_> = (0..8).map(|i| client.start_read(i * 512, 512)).collect::<Result<_, _>>()?;
//! for t in tickets {
//!     assert_eq!(t.wait()?.len(), 512);
//! }
//! client.flush()?;
//! client.disconnect()?;
//! # Ok::<(), ember_nbd::ClientError>(())
//! ```

mod connect;
mod coverage;
mod handshake;
mod uri;

pub use uri::{Endpoint, NbdUri, DEFAULT_PORT};

use std::collections::HashMap;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::{Receiver, Sender};

use self::connect::{connect_tcp_within, detect_dead_peer, refuse_self_connection};
use self::coverage::Coverage;
use crate::errno::Errno;
use crate::proto;
use crate::reply::{ChunkHeader, SimpleHeader};
use crate::request::{Command, Request};
use crate::stream::Stream;

/// What went wrong on the client side.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A socket error.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The server broke the handshake protocol.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The server refused an option (`reply` is the NBD_REP_ERR_* value).
    #[error("server refused option {option} with reply {reply:#x}: {message}")]
    OptionRefused {
        /// The option sent.
        option: u32,
        /// The error reply type.
        reply: u32,
        /// The server's message, if any.
        message: String,
    },
    /// The server answered the request with an error.
    #[error("server error {errno}{}{}", offset.map(|o| format!(" at offset {o}")).unwrap_or_default(), if message.is_empty() { String::new() } else { format!(": {message}") })]
    Server {
        /// The NBD error value.
        errno: Errno,
        /// The message of a structured error chunk (empty for simple replies).
        message: String,
        /// The offset of an NBD_REPLY_TYPE_ERROR_OFFSET chunk.
        offset: Option<u64>,
    },
    /// The server sent a reply that breaks the protocol; the connection is closed.
    #[error("protocol violation by the server: {0}")]
    Protocol(String),
    /// The connection is closed (the request's reply will never come).
    #[error("connection closed: {0}")]
    Disconnected(String),
    /// The request was not sent: it is invalid for this export.
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// What the handshake learned about the export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    /// Canonical name (NBD_INFO_NAME) or the name asked for.
    pub name: String,
    /// NBD_INFO_DESCRIPTION, if sent.
    pub description: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// Transmission flags (`proto::TX_*`).
    pub flags: u16,
    /// Minimum block size (1 unless the server advertised one).
    pub min_block: u32,
    /// Preferred block size.
    pub preferred_block: u32,
    /// Maximum payload of one READ or WRITE.
    pub max_payload: u32,
    /// Whether structured replies were negotiated.
    pub structured: bool,
    /// Whether ember's DEMOTE extension was negotiated (asked for with
    /// [`ClientBuilder::demote`] and acknowledged by the server for this export).
    pub demote: bool,
}

impl ExportInfo {
    fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
    /// NBD_FLAG_READ_ONLY.
    pub fn read_only(&self) -> bool {
        self.has(proto::TX_READ_ONLY)
    }
    /// NBD_FLAG_SEND_FLUSH.
    pub fn can_flush(&self) -> bool {
        self.has(proto::TX_SEND_FLUSH)
    }
    /// NBD_FLAG_SEND_FUA.
    pub fn can_fua(&self) -> bool {
        self.has(proto::TX_SEND_FUA)
    }
    /// NBD_FLAG_SEND_TRIM.
    pub fn can_trim(&self) -> bool {
        self.has(proto::TX_SEND_TRIM)
    }
    /// NBD_FLAG_SEND_WRITE_ZEROES.
    pub fn can_write_zeroes(&self) -> bool {
        self.has(proto::TX_SEND_WRITE_ZEROES)
    }
    /// NBD_FLAG_CAN_MULTI_CONN.
    pub fn can_multi_conn(&self) -> bool {
        self.has(proto::TX_CAN_MULTI_CONN)
    }
}

type Completion = Result<Vec<u8>, ClientError>;

/// A request whose reply has not been consumed yet.
#[derive(Debug)]
pub struct InFlight {
    cookie: u64,
    done: Receiver<Completion>,
}

impl InFlight {
    /// The request's cookie.
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// Wait for the reply: the data of a READ, an empty vector otherwise.
    pub fn wait(self) -> Result<Vec<u8>, ClientError> {
        self.done.recv().unwrap_or_else(|_| Err(ClientError::Disconnected("reply lost".into())))
    }
}

/// A request waiting for its reply, owned by the reader thread's table.
struct Slot {
    command: Command,
    offset: u64,
    length: u32,
    data: Vec<u8>,
    /// The bytes of a READ described so far by structured reply chunks.
    coverage: Coverage,
    error: Option<ClientError>,
    done: Sender<Completion>,
}

#[derive(Default)]
struct Pending {
    slots: HashMap<u64, Slot>,
    outstanding: usize,
    dead: Option<String>,
}

struct Shared {
    pending: Mutex<Pending>,
    idle: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn complete(&self, slot: Slot, result: Completion) {
        let _ = slot.done.send(result);
        let mut pending = self.lock();
        pending.outstanding = pending.outstanding.saturating_sub(1);
        drop(pending);
        self.idle.notify_all();
    }

    /// Refuse new requests from now on (the first reason is kept).
    fn mark_dead(&self, reason: &str) {
        let mut pending = self.lock();
        if pending.dead.is_none() {
            pending.dead = Some(reason.to_string());
        }
    }

    /// Fail every pending request and refuse new ones.
    fn kill(&self, reason: String) {
        let mut pending = self.lock();
        if pending.dead.is_none() {
            pending.dead = Some(reason.clone());
        }
        let slots: Vec<Slot> = pending.slots.drain().map(|(_, s)| s).collect();
        pending.outstanding = pending.outstanding.saturating_sub(slots.len());
        drop(pending);
        for slot in slots {
            let _ = slot.done.send(Err(ClientError::Disconnected(reason.clone())));
        }
        self.idle.notify_all();
    }
}

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
    /// acknowledges it for the export ([`ExportInfo::demote`]). A server without it simply
    /// refuses the option, and the connection goes on without DEMOTE.
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

/// A connection in the transmission phase.
pub struct Client {
    info: ExportInfo,
    writer: Mutex<Stream>,
    shared: Arc<Shared>,
    next_cookie: AtomicU64,
    reader: Option<JoinHandle<()>>,
    disconnected: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("info", &self.info).finish()
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

    fn handshake(mut stream: Stream, options: &ClientBuilder) -> Result<Client, ClientError> {
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

    /// What the handshake learned about the export.
    pub fn info(&self) -> &ExportInfo {
        &self.info
    }

    /// Export size in bytes.
    pub fn size(&self) -> u64 {
        self.info.size
    }

    /// Send any request as is, without checking it against the export (for tests of server
    /// behaviour and for replaying traces faithfully). `payload` is sent after the header
    /// (it must be `length` bytes for a WRITE).
    pub fn submit(
        &self,
        command: Command,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> Result<InFlight, ClientError> {
        let cookie = self.next_cookie.fetch_add(1, Ordering::Relaxed);
        let (done, receiver) = crossbeam::channel::bounded(1);
        let data = if command == Command::Read { vec![0u8; length as usize] } else { Vec::new() };
        {
            let mut pending = self.shared.lock();
            if let Some(reason) = &pending.dead {
                return Err(ClientError::Disconnected(reason.clone()));
            }
            pending.slots.insert(
                cookie,
                Slot {
                    command,
                    offset,
                    length,
                    data,
                    coverage: Coverage::new(u64::from(length)),
                    error: None,
                    done,
                },
            );
            pending.outstanding += 1;
        }
        let header = Request { flags, command, cookie, offset, length }.encode();
        let sent = {
            let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            if payload.len() <= 64 * 1024 {
                let mut buf = Vec::with_capacity(header.len() + payload.len());
                buf.extend_from_slice(&header);
                buf.extend_from_slice(payload);
                writer.write_all(&buf)
            } else {
                writer.write_all(&header).and_then(|_| writer.write_all(payload))
            }
        };
        if let Err(e) = sent {
            let mut pending = self.shared.lock();
            if pending.slots.remove(&cookie).is_some() {
                pending.outstanding = pending.outstanding.saturating_sub(1);
            }
            drop(pending);
            self.shared.idle.notify_all();
            return Err(ClientError::Io(e));
        }
        Ok(InFlight { cookie, done: receiver })
    }

    fn check_range(&self, offset: u64, length: u64) -> Result<(), ClientError> {
        let min = u64::from(self.info.min_block);
        if !offset.is_multiple_of(min) || !length.is_multiple_of(min) {
            return Err(ClientError::Invalid(format!(
                "{offset}+{length} is not aligned to the minimum block size {min}"
            )));
        }
        Ok(())
    }

    fn fua_flag(&self, fua: bool) -> Result<u16, ClientError> {
        match (fua, self.info.can_fua()) {
            (false, _) => Ok(0),
            (true, true) => Ok(proto::CMD_FLAG_FUA),
            (true, false) => Err(ClientError::Invalid("the server does not support FUA".into())),
        }
    }

    /// Send a READ of `length` bytes (at most the maximum payload).
    pub fn start_read(&self, offset: u64, length: u32) -> Result<InFlight, ClientError> {
        self.check_range(offset, u64::from(length))?;
        if length > self.info.max_payload {
            return Err(ClientError::Invalid(format!(
                "read of {length} bytes exceeds the maximum payload {}",
                self.info.max_payload
            )));
        }
        self.submit(Command::Read, 0, offset, length, &[])
    }

    /// Send a WRITE of `data` (at most the maximum payload).
    pub fn start_write(
        &self,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<InFlight, ClientError> {
        if self.info.read_only() {
            return Err(ClientError::Invalid("the export is read-only".into()));
        }
        let length = u32::try_from(data.len())
            .ok()
            .filter(|&l| l <= self.info.max_payload)
            .ok_or_else(|| {
                ClientError::Invalid(format!(
                    "write of {} bytes exceeds the maximum payload {}",
                    data.len(),
                    self.info.max_payload
                ))
            })?;
        self.check_range(offset, u64::from(length))?;
        let flags = self.fua_flag(fua)?;
        self.submit(Command::Write, flags, offset, length, data)
    }

    /// Send a FLUSH.
    pub fn start_flush(&self) -> Result<InFlight, ClientError> {
        if !self.info.can_flush() {
            return Err(ClientError::Invalid("the server does not support FLUSH".into()));
        }
        self.submit(Command::Flush, 0, 0, 0, &[])
    }

    /// Send a TRIM.
    pub fn start_trim(&self, offset: u64, length: u32, fua: bool) -> Result<InFlight, ClientError> {
        if !self.info.can_trim() {
            return Err(ClientError::Invalid("the server does not support TRIM".into()));
        }
        self.check_range(offset, u64::from(length))?;
        let flags = self.fua_flag(fua)?;
        self.submit(Command::Trim, flags, offset, length, &[])
    }

    /// Send a DEMOTE of `data`, this client's clean copy of the bytes at `offset` (ember's
    /// extension, docs/reference/nbd.md; only on a connection that negotiated it).
    pub fn start_demote(&self, offset: u64, data: &[u8]) -> Result<InFlight, ClientError> {
        if !self.info.demote {
            return Err(ClientError::Invalid("DEMOTE was not negotiated".into()));
        }
        let length = u32::try_from(data.len())
            .ok()
            .filter(|&l| l > 0 && l <= self.info.max_payload)
            .ok_or_else(|| {
                ClientError::Invalid(format!(
                    "a DEMOTE of {} bytes (1 to {} allowed)",
                    data.len(),
                    self.info.max_payload
                ))
            })?;
        self.check_range(offset, u64::from(length))?;
        self.submit(Command::Demote, 0, offset, length, data)
    }

    /// DEMOTE and wait for the server's answer.
    pub fn demote(&self, offset: u64, data: &[u8]) -> Result<(), ClientError> {
        self.start_demote(offset, data)?.wait().map(drop)
    }

    /// Send a WRITE_ZEROES (`no_hole`: NBD_CMD_FLAG_NO_HOLE).
    pub fn start_write_zeroes(
        &self,
        offset: u64,
        length: u32,
        fua: bool,
        no_hole: bool,
    ) -> Result<InFlight, ClientError> {
        if !self.info.can_write_zeroes() {
            return Err(ClientError::Invalid("the server does not support WRITE_ZEROES".into()));
        }
        self.check_range(offset, u64::from(length))?;
        let mut flags = self.fua_flag(fua)?;
        if no_hole {
            flags |= proto::CMD_FLAG_NO_HOLE;
        }
        self.submit(Command::WriteZeroes, flags, offset, length, &[])
    }

    /// Read `buf.len()` bytes at `offset`, in pipelined pieces of at most the maximum
    /// payload.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ClientError> {
        let piece = self.info.max_payload as usize;
        let mut tickets = Vec::new();
        for (i, chunk) in buf.chunks(piece.max(1)).enumerate() {
            tickets.push(self.start_read(offset + (i * piece) as u64, chunk.len() as u32)?);
        }
        for (ticket, chunk) in tickets.into_iter().zip(buf.chunks_mut(piece.max(1))) {
            let data = ticket.wait()?;
            chunk.copy_from_slice(&data);
        }
        Ok(())
    }

    /// Write `data` at `offset`, in pipelined pieces of at most the maximum payload; with
    /// `fua`, durable on return.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ClientError> {
        let piece = (self.info.max_payload as usize).max(1);
        let mut tickets = Vec::new();
        for (i, chunk) in data.chunks(piece).enumerate() {
            tickets.push(self.start_write(offset + (i * piece) as u64, chunk, fua)?);
        }
        for ticket in tickets {
            ticket.wait()?;
        }
        Ok(())
    }

    /// Make every acknowledged write durable.
    pub fn flush(&self) -> Result<(), ClientError> {
        self.start_flush()?.wait().map(|_| ())
    }

    /// Discard `length` bytes at `offset`.
    pub fn trim(&self, offset: u64, length: u32, fua: bool) -> Result<(), ClientError> {
        self.start_trim(offset, length, fua)?.wait().map(|_| ())
    }

    /// Write `length` zero bytes at `offset`.
    pub fn write_zeroes(
        &self,
        offset: u64,
        length: u32,
        fua: bool,
        no_hole: bool,
    ) -> Result<(), ClientError> {
        self.start_write_zeroes(offset, length, fua, no_hole)?.wait().map(|_| ())
    }

    /// Change how long the server's host may stay silent before this connection fails (see
    /// [`ClientBuilder::dead_peer_timeout`]; `None`: never). No effect on a Unix socket.
    pub fn set_dead_peer_timeout(&self, after: Option<Duration>) -> io::Result<()> {
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        match &*writer {
            Stream::Tcp(s) => detect_dead_peer(s.as_raw_fd(), after),
            Stream::Unix(_) => Ok(()),
        }
    }

    /// Requests sent whose replies have not arrived.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().outstanding
    }

    /// Soft disconnect: wait for every reply, send NBD_CMD_DISC, close.
    pub fn disconnect(mut self) -> Result<(), ClientError> {
        self.close(true)
    }

    fn close(&mut self, wait_idle: bool) -> Result<(), ClientError> {
        if self.disconnected.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if wait_idle {
            let mut pending = self.shared.lock();
            while pending.outstanding > 0 && pending.dead.is_none() {
                pending = self.shared.idle.wait(pending).unwrap_or_else(|p| p.into_inner());
            }
        }
        let alive = self.shared.lock().dead.is_none();
        let mut result = Ok(());
        {
            let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            if alive {
                let disc = Request {
                    flags: 0,
                    command: Command::Disc,
                    cookie: self.next_cookie.fetch_add(1, Ordering::Relaxed),
                    offset: 0,
                    length: 0,
                };
                if let Err(e) = writer.write_all(&disc.encode()) {
                    result = Err(ClientError::Io(e));
                }
            }
            writer.shutdown(Shutdown::Both);
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        result
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.close(false);
    }
}

fn read_array<const N: usize>(r: &mut impl Read) -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)?;
    Ok(b)
}

/// Largest structured chunk payload accepted beyond the request's own data.
const MAX_CHUNK_OVERHEAD: u64 = 64 * 1024;

/// The reader thread: read replies until the connection ends or the server breaks the
/// protocol.
fn read_replies(mut r: BufReader<Stream>, shared: &Shared) -> Result<(), ClientError> {
    loop {
        let mut magic = [0u8; 4];
        if !crate::stream::read_exact_or_eof(&mut r, &mut magic)? {
            return Ok(());
        }
        match u32::from_be_bytes(magic) {
            proto::SIMPLE_REPLY_MAGIC => {
                let SimpleHeader { error, cookie } = SimpleHeader::parse(&read_array(&mut r)?);
                let slot = shared.lock().slots.remove(&cookie);
                let Some(mut slot) = slot else {
                    return Err(ClientError::Protocol(format!(
                        "simple reply for unknown cookie {cookie}"
                    )));
                };
                let result = if error != 0 {
                    Err(ClientError::Server {
                        errno: Errno::from_code(error),
                        message: String::new(),
                        offset: None,
                    })
                } else {
                    if slot.command == Command::Read {
                        r.read_exact(&mut slot.data)?;
                    }
                    Ok(std::mem::take(&mut slot.data))
                };
                shared.complete(slot, result);
            }
            proto::STRUCTURED_REPLY_MAGIC => {
                let ChunkHeader { flags, kind, cookie, length } =
                    ChunkHeader::parse(&read_array(&mut r)?);
                let slot = shared.lock().slots.remove(&cookie);
                let Some(mut slot) = slot else {
                    return Err(ClientError::Protocol(format!(
                        "structured reply for unknown cookie {cookie}"
                    )));
                };
                let applied =
                    if kind == proto::REPLY_TYPE_NONE && flags & proto::REPLY_FLAG_DONE == 0 {
                        Err(ClientError::Protocol(
                            "NBD_REPLY_TYPE_NONE without NBD_REPLY_FLAG_DONE".into(),
                        ))
                    } else {
                        chunk(&mut r, &mut slot, kind, length)
                    };
                if let Err(e) = applied {
                    let reason = e.to_string();
                    // Refuse new requests before the waiter wakes, so a caller that sees
                    // this error never finds the connection still open.
                    shared.mark_dead(&reason);
                    shared.complete(slot, Err(e));
                    return Err(ClientError::Protocol(reason));
                }
                if flags & proto::REPLY_FLAG_DONE != 0 {
                    let result = match slot.error.take() {
                        Some(e) => Err(e),
                        None if slot.command == Command::Read && !slot.coverage.complete() => {
                            Err(ClientError::Protocol(format!(
                                "read reply covered {} of {} bytes",
                                slot.coverage.covered(),
                                slot.length
                            )))
                        }
                        None => Ok(std::mem::take(&mut slot.data)),
                    };
                    shared.complete(slot, result);
                } else {
                    shared.lock().slots.insert(cookie, slot);
                }
            }
            other => return Err(ClientError::Protocol(format!("bad reply magic {other:#010x}"))),
        }
    }
}

fn request_len_limit(slot: &Slot) -> u64 {
    u64::from(slot.length) + MAX_CHUNK_OVERHEAD
}

/// Record that a content chunk described `n` bytes at `at` in the request's buffer; a chunk
/// overlapping an earlier one fails the request (the stream stays in step, so the
/// connection goes on).
fn claim(slot: &mut Slot, at: usize, n: u64, offset: u64) {
    if slot.coverage.claim(at as u64, n).is_err() && slot.error.is_none() {
        slot.error = Some(ClientError::Protocol(format!(
            "content chunk {offset}+{n} overlaps an earlier chunk of the same reply"
        )));
    }
}

/// Apply one structured chunk to its request.
fn chunk(r: &mut impl Read, slot: &mut Slot, kind: u16, length: u32) -> Result<(), ClientError> {
    let length = u64::from(length);
    if length > request_len_limit(slot) {
        return Err(ClientError::Protocol(format!("chunk of {length} bytes is too long")));
    }
    let start = slot.offset;
    let request_len = u64::from(slot.length);
    // Where `n` bytes at `offset` fall in the request's buffer, if wholly inside it.
    let place = |offset: u64, n: u64| -> Option<usize> {
        let at = offset.checked_sub(start)?;
        (at.checked_add(n)? <= request_len).then_some(at as usize)
    };
    match kind {
        proto::REPLY_TYPE_NONE => {
            if length != 0 {
                return Err(ClientError::Protocol("NBD_REPLY_TYPE_NONE with a payload".into()));
            }
        }
        proto::REPLY_TYPE_OFFSET_DATA if slot.command == Command::Read && length > 8 => {
            let offset = u64::from_be_bytes(read_array(r)?);
            let n = length - 8;
            let Some(at) = place(offset, n) else {
                return Err(ClientError::Protocol(format!(
                    "data chunk {offset}+{n} outside the request"
                )));
            };
            r.read_exact(&mut slot.data[at..at + n as usize])?;
            claim(slot, at, n, offset);
        }
        proto::REPLY_TYPE_OFFSET_HOLE if slot.command == Command::Read && length == 12 => {
            let offset = u64::from_be_bytes(read_array(r)?);
            let n = u64::from(u32::from_be_bytes(read_array(r)?));
            let at = match place(offset, n) {
                Some(at) if n > 0 => at,
                _ => {
                    return Err(ClientError::Protocol(format!(
                        "hole chunk {offset}+{n} outside the request"
                    )))
                }
            };
            claim(slot, at, n, offset);
            if slot.error.is_none() {
                slot.data[at..at + n as usize].fill(0);
            }
        }
        kind if kind & proto::REPLY_TYPE_FLAG_ERROR != 0 => {
            if length < 6 {
                return Err(ClientError::Protocol("error chunk shorter than 6 bytes".into()));
            }
            let mut payload = vec![0u8; length as usize];
            r.read_exact(&mut payload)?;
            let errno = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            let message_len = u16::from_be_bytes([payload[4], payload[5]]) as usize;
            if message_len > payload.len() - 6 {
                return Err(ClientError::Protocol("error message overruns its chunk".into()));
            }
            let message = String::from_utf8_lossy(&payload[6..6 + message_len]).into_owned();
            let rest = &payload[6 + message_len..];
            let offset = (kind == proto::REPLY_TYPE_ERROR_OFFSET && rest.len() >= 8).then(|| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&rest[..8]);
                u64::from_be_bytes(b)
            });
            if slot.error.is_none() {
                slot.error = Some(ClientError::Server {
                    errno: Errno::from_code(if errno == 0 { 22 } else { errno }),
                    message,
                    offset,
                });
            }
        }
        other => {
            return Err(ClientError::Protocol(format!(
                "unexpected chunk type {other} ({length} bytes) for {}",
                slot.command.label()
            )))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply;
    use crate::server::{handshake, ServerConfig};
    use crate::{ExportMap, MemExport};

    /// A client connected to a scripted server: the real handshake, then `script` drives the
    /// transmission phase by hand.
    fn scripted(script: impl FnOnce(&mut UnixStream) + Send + 'static) -> (Client, JoinHandle<()>) {
        let (client_end, mut server_end) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let exports = ExportMap::new().with("x", "", Arc::new(MemExport::new(1 << 20)));
            let negotiated =
                handshake::negotiate(&mut server_end, &exports, &ServerConfig::default(), &|| {
                    false
                })
                .unwrap();
            assert!(negotiated.is_some());
            script(&mut server_end);
        });
        let client =
            Client::handshake(Stream::Unix(client_end), &ClientBuilder::new().export("x")).unwrap();
        (client, server)
    }

    fn read_request(s: &mut UnixStream) -> Request {
        let mut header = [0u8; proto::REQUEST_HEADER_LEN];
        s.read_exact(&mut header).unwrap();
        Request::parse(&header).unwrap()
    }

    fn data_chunk(cookie: u64, offset: u64, data: &[u8], done: bool) -> Vec<u8> {
        let flags = if done { proto::REPLY_FLAG_DONE } else { 0 };
        let mut out = reply::structured_header(
            flags,
            proto::REPLY_TYPE_OFFSET_DATA,
            cookie,
            8 + data.len() as u32,
        )
        .to_vec();
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn reassembles_fragmented_reads_answered_out_of_order() {
        let (client, server) = scripted(|s| {
            let a = read_request(s);
            let b = read_request(s);
            assert_eq!((a.offset, a.length, b.offset, b.length), (0, 8, 100, 4));
            // b first; a in three chunks, back to front, with a hole in the middle.
            s.write_all(&data_chunk(b.cookie, 100, &[9, 9, 9, 9], true)).unwrap();
            s.write_all(&data_chunk(a.cookie, 6, &[7, 8], false)).unwrap();
            let mut hole =
                reply::structured_header(0, proto::REPLY_TYPE_OFFSET_HOLE, a.cookie, 12).to_vec();
            hole.extend_from_slice(&2u64.to_be_bytes());
            hole.extend_from_slice(&4u32.to_be_bytes());
            s.write_all(&hole).unwrap();
            s.write_all(&data_chunk(a.cookie, 0, &[1, 2], false)).unwrap();
            let none = reply::structured_header(
                proto::REPLY_FLAG_DONE,
                proto::REPLY_TYPE_NONE,
                a.cookie,
                0,
            );
            s.write_all(&none).unwrap();
            assert_eq!(read_request(s).command, Command::Disc);
        });
        let a = client.start_read(0, 8).unwrap();
        let b = client.start_read(100, 4).unwrap();
        assert_eq!(b.wait().unwrap(), vec![9, 9, 9, 9]);
        assert_eq!(a.wait().unwrap(), vec![1, 2, 0, 0, 0, 0, 7, 8]);
        client.disconnect().unwrap();
        server.join().unwrap();
    }

    #[test]
    fn short_structured_read_fails_only_that_request() {
        let (client, server) = scripted(|s| {
            let a = read_request(s);
            s.write_all(&data_chunk(a.cookie, 0, &[1, 2], true)).unwrap();
            let b = read_request(s);
            s.write_all(&reply::simple_header(0, b.cookie)).unwrap();
            assert_eq!(read_request(s).command, Command::Disc);
        });
        let err = client.start_read(0, 4).unwrap().wait().unwrap_err();
        assert!(
            matches!(err, ClientError::Protocol(ref m) if m.contains("covered 2 of 4")),
            "{err}"
        );
        client.flush().unwrap();
        client.disconnect().unwrap();
        server.join().unwrap();
    }

    fn hole_chunk(cookie: u64, offset: u64, len: u32) -> Vec<u8> {
        let mut out =
            reply::structured_header(0, proto::REPLY_TYPE_OFFSET_HOLE, cookie, 12).to_vec();
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out
    }

    fn none_done(cookie: u64) -> [u8; proto::STRUCTURED_REPLY_HEADER_LEN] {
        reply::structured_header(proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_NONE, cookie, 0)
    }

    /// A hostile server describes bytes 0..4 twice and 4..8 never; the byte count alone adds
    /// up to the request length. The read must fail (an I/O error to the engine), never hand
    /// back zeroes for the gap; the connection stays usable.
    #[test]
    fn overlapping_chunks_fail_the_read() {
        let (client, server) = scripted(|s| {
            let a = read_request(s);
            s.write_all(&data_chunk(a.cookie, 0, &[1, 2, 3, 4], false)).unwrap();
            s.write_all(&data_chunk(a.cookie, 0, &[5, 6, 7, 8], false)).unwrap();
            s.write_all(&none_done(a.cookie)).unwrap();
            // A hole over data already sent, then the rest: still an overlap.
            let b = read_request(s);
            s.write_all(&data_chunk(b.cookie, 0, &[1, 2, 3, 4, 5, 6], false)).unwrap();
            s.write_all(&hole_chunk(b.cookie, 4, 4)).unwrap();
            s.write_all(&none_done(b.cookie)).unwrap();
            // Data, then a hole that ends inside it: overlap at the front of the hole.
            let c = read_request(s);
            s.write_all(&data_chunk(c.cookie, 4, &[1, 2, 3, 4], false)).unwrap();
            s.write_all(&hole_chunk(c.cookie, 0, 5)).unwrap();
            s.write_all(&none_done(c.cookie)).unwrap();
            // A well-formed reply afterwards is still served.
            let d = read_request(s);
            s.write_all(&data_chunk(d.cookie, 4, &[3, 4, 5, 6], false)).unwrap();
            s.write_all(&data_chunk(d.cookie, 0, &[9, 9, 9, 9], true)).unwrap();
            assert_eq!(read_request(s).command, Command::Disc);
        });
        for _ in 0..3 {
            let err = client.start_read(0, 8).unwrap().wait().unwrap_err();
            assert!(matches!(err, ClientError::Protocol(ref m) if m.contains("overlaps")), "{err}");
        }
        assert_eq!(client.start_read(0, 8).unwrap().wait().unwrap(), vec![9, 9, 9, 9, 3, 4, 5, 6]);
        client.disconnect().unwrap();
        server.join().unwrap();
    }

    /// `doc/proto.md`: NBD_REPLY_TYPE_NONE "MUST always be used with the
    /// NBD_REPLY_FLAG_DONE bit set"; a server that breaks this is disconnected.
    #[test]
    fn a_none_chunk_without_done_kills_the_connection() {
        let (client, server) = scripted(|s| {
            let a = read_request(s);
            s.write_all(&data_chunk(a.cookie, 0, &[1, 2, 3, 4], false)).unwrap();
            let none = reply::structured_header(0, proto::REPLY_TYPE_NONE, a.cookie, 0);
            s.write_all(&none).unwrap();
            s.write_all(&none_done(a.cookie)).unwrap();
        });
        let err = client.start_read(0, 4).unwrap().wait().unwrap_err();
        assert!(
            matches!(err, ClientError::Protocol(ref m) if m.contains("without NBD_REPLY_FLAG_DONE")),
            "{err}"
        );
        assert!(matches!(client.start_read(0, 4), Err(ClientError::Disconnected(_))));
        server.join().unwrap();
    }

    #[test]
    fn a_chunk_outside_the_request_kills_the_connection() {
        let (client, server) = scripted(|s| {
            let a = read_request(s);
            let _b = read_request(s);
            s.write_all(&data_chunk(a.cookie, 4096, &[1, 2], true)).unwrap();
        });
        let a = client.start_read(0, 4).unwrap();
        let b = client.start_read(8, 4).unwrap();
        let err = a.wait().unwrap_err();
        assert!(
            matches!(err, ClientError::Protocol(ref m) if m.contains("outside the request")),
            "{err}"
        );
        assert!(matches!(b.wait(), Err(ClientError::Disconnected(_))), "pending requests fail");
        assert!(matches!(client.start_read(0, 4), Err(ClientError::Disconnected(_))));
        server.join().unwrap();
    }

    #[test]
    fn server_error_chunks_and_simple_errors_surface() {
        let (client, server) = scripted(|s| {
            let a = read_request(s);
            s.write_all(&reply::error_chunk(a.cookie, 5, "disk on fire", Some(512), true)).unwrap();
            let b = read_request(s);
            let mut payload = vec![0u8; b.length as usize];
            s.read_exact(&mut payload).unwrap();
            assert_eq!(payload, vec![1u8; 16]);
            s.write_all(&reply::simple_header(28, b.cookie)).unwrap();
            let c = read_request(s);
            // An unexpected errno is treated by its value; 0 in an error chunk is EINVAL.
            s.write_all(&reply::error_chunk(c.cookie, 0, "", None, true)).unwrap();
            assert_eq!(read_request(s).command, Command::Disc);
        });
        match client.start_read(0, 1024).unwrap().wait() {
            Err(ClientError::Server { errno, message, offset }) => {
                assert_eq!(
                    (errno, message.as_str(), offset),
                    (Errno::Io, "disk on fire", Some(512))
                );
            }
            other => panic!("{other:?}"),
        }
        let err = client.start_write(0, &[1; 16], false).unwrap().wait().unwrap_err();
        assert!(matches!(err, ClientError::Server { errno: Errno::NoSpc, offset: None, .. }));
        let err = client.start_flush().unwrap().wait().unwrap_err();
        assert!(matches!(err, ClientError::Server { errno: Errno::Inval, .. }));
        client.disconnect().unwrap();
        server.join().unwrap();
    }
}
