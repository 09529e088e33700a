//! The NBD server: fixed-newstyle handshake, many connections at once over TCP and Unix
//! sockets, many requests in flight per connection, graceful shutdown.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ember_nbd::{ExportMap, MemExport, Server};
//!
//! let exports = ExportMap::new().with("disk", "a RAM disk", Arc::new(MemExport::new(1 << 30)));
//! let server = Server::builder(Arc::new(exports)).listen_tcp("127.0.0.1:10809")?.build()?;
//! let running = server.spawn()?;
//! // ... serve until told to stop ...
//! running.shutdown()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Threads: one acceptor per listening socket; per connection, a reader (handshake, then
//! parsing requests and reading WRITE payloads) and a writer (the only thread writing replies
//! to that socket); a pool of workers shared by all connections carries out the export calls.

mod budget;
mod connection;
mod deadline;
mod demote;
pub(crate) mod handshake;
mod hit_batch;
mod job;
mod queue;
mod read_run;
mod replies;
mod reply_buf;
mod spin;
mod started_reads;
mod tls;
mod worker;

pub use tls::{TlsError, TlsMode, TlsSettings, CA_CERT, SERVER_CERT, SERVER_KEY};

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::export::ExportSet;
use crate::proto;
use crate::stats::ServerObserver;
use crate::stream::Stream;

/// Why the server could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding a listening socket failed.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address or socket path.
        address: String,
        /// The OS error.
        source: io::Error,
    },
    /// The configuration is unusable.
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// A thread could not be started.
    #[error("cannot start a server thread: {0}")]
    Thread(io::Error),
}

/// Tunables of a server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Worker threads carrying out export calls, shared by all connections.
    pub workers: usize,
    /// Largest READ or WRITE payload accepted (advertised as the maximum payload in
    /// NBD_INFO_BLOCK_SIZE). Default 32 MiB (2^25).
    pub max_payload: u32,
    /// Largest oversized WRITE whose payload is read and thrown away so that an error can be
    /// replied; a longer one ends the connection (the spec's hard disconnect for a payload
    /// deemed a denial of service). Default 2 × `max_payload`, at least 64 MiB.
    pub discard_limit: u64,
    /// Requests one connection may have in flight before its reader stops reading more.
    pub max_in_flight: usize,
    /// Bytes of READ/WRITE buffers one connection may hold before its reader stops reading
    /// more (one request is always admitted, within the shared budget).
    pub max_in_flight_bytes: u64,
    /// Bytes of READ/WRITE buffers all connections together may hold (replies not yet
    /// written and payloads not yet executed). At the limit, readers wait; a connection with
    /// nothing in flight may still take one request of at most [`GUARANTEED_BYTES`], so the
    /// server holds at most this plus that much per connection.
    pub shared_budget: u64,
    /// Connections open at once; one more is accepted and closed at once.
    pub max_connections: usize,
    /// Options one handshake may send before the server hangs up (nbdkit allows 32).
    pub max_handshake_options: usize,
    /// How long a whole handshake (greeting to NBD_OPT_GO, TLS included) may take before
    /// the connection is dropped (`None`: forever).
    pub handshake_deadline: Option<Duration>,
    /// How long a reply write may block on a client that does not read before the
    /// connection is dropped (`None`: forever).
    pub write_timeout: Option<Duration>,
    /// TLS mode and credentials (`None`: no TLS).
    pub tls: Option<TlsSettings>,
    /// Longest busy-poll of a connection's socket before its reader blocks, right after a
    /// reply when the connection has nothing in flight (the next request of an iodepth-1
    /// client usually arrives within microseconds; the budget adapts below this, down to
    /// zero for a client that pauses, docs/design/nbd-internals.md). Zero (the default): never
    /// poll; on the shared 2-core bench machine no gain was measured (bench/serve,
    /// docs/benchmarks.md).
    pub spin: Duration,
}

/// The largest maximum payload a server advertises and accepts: 32 MiB, the size the spec
/// asks every server to support and the most qemu's client sends.
pub const MAX_PAYLOAD_CEILING: u32 = proto::DEFAULT_MAX_PAYLOAD;

/// Buffer bytes a connection with nothing in flight may always take, even when the shared
/// budget is spent (so small requests of well-behaved clients never starve).
pub const GUARANTEED_BYTES: u64 = 1 << 20;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            workers: 8,
            max_payload: proto::DEFAULT_MAX_PAYLOAD,
            discard_limit: 2 * u64::from(proto::DEFAULT_MAX_PAYLOAD),
            max_in_flight: 128,
            max_in_flight_bytes: 128 << 20,
            shared_budget: 256 << 20,
            max_connections: 128,
            max_handshake_options: 32,
            handshake_deadline: Some(Duration::from_secs(10)),
            write_timeout: Some(Duration::from_secs(120)),
            tls: None,
            spin: Duration::ZERO,
        }
    }
}

/// Where a server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP address (with the port actually bound, when 0 was asked for).
    Tcp(SocketAddr),
    /// A Unix socket path.
    Unix(PathBuf),
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// Configures and binds a [`Server`].
pub struct ServerBuilder {
    exports: Arc<dyn ExportSet>,
    config: ServerConfig,
    observer: Option<Arc<dyn ServerObserver>>,
    listeners: Vec<(Listener, ListenAddr)>,
}

impl ServerBuilder {
    /// A builder serving `exports` with the default [`ServerConfig`].
    pub fn new(exports: Arc<dyn ExportSet>) -> ServerBuilder {
        ServerBuilder {
            exports,
            config: ServerConfig::default(),
            observer: None,
            listeners: Vec::new(),
        }
    }

    /// Replace the whole configuration.
    pub fn config(mut self, config: ServerConfig) -> ServerBuilder {
        self.config = config;
        self
    }

    /// Number of worker threads (at least 1).
    pub fn workers(mut self, workers: usize) -> ServerBuilder {
        self.config.workers = workers;
        self
    }

    /// Largest READ/WRITE payload accepted; also moves the discard limit to
    /// max(2 × `bytes`, 64 MiB).
    pub fn max_payload(mut self, bytes: u32) -> ServerBuilder {
        self.config.max_payload = bytes;
        self.config.discard_limit =
            (2 * u64::from(bytes)).max(2 * u64::from(proto::DEFAULT_MAX_PAYLOAD));
        self
    }

    /// Requests per connection in flight at most.
    pub fn max_in_flight(mut self, requests: usize) -> ServerBuilder {
        self.config.max_in_flight = requests;
        self
    }

    /// Offer or require TLS with these credentials.
    pub fn tls(mut self, settings: TlsSettings) -> ServerBuilder {
        self.config.tls = Some(settings);
        self
    }

    /// Report every request and connection to `observer`.
    pub fn observer(mut self, observer: Arc<dyn ServerObserver>) -> ServerBuilder {
        self.observer = Some(observer);
        self
    }

    /// Listen on a TCP address (port 0 picks a free port; see [`Server::addrs`]).
    pub fn listen_tcp(
        mut self,
        address: impl ToSocketAddrs + std::fmt::Debug,
    ) -> Result<ServerBuilder, ServerError> {
        let describe = format!("{address:?}");
        let listener = TcpListener::bind(&address)
            .map_err(|source| ServerError::Bind { address: describe.clone(), source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { address: describe, source })?;
        self.listeners.push((Listener::Tcp(listener), ListenAddr::Tcp(local)));
        Ok(self)
    }

    /// Listen on a Unix socket at `path`, created owner-only (mode 0600). A stale socket
    /// file nobody listens on is replaced; the file is removed when the server stops.
    pub fn listen_unix(self, path: impl AsRef<Path>) -> Result<ServerBuilder, ServerError> {
        self.listen_unix_mode(path, 0o600)
    }

    /// Listen on a Unix socket at `path` with permission bits `mode` (e.g. 0o660 to let a
    /// group connect). The socket is bound inside a fresh owner-only directory next to
    /// `path`, given `mode`, then linked into place, so it is never reachable with wider
    /// permissions than asked.
    pub fn listen_unix_mode(
        mut self,
        path: impl AsRef<Path>,
        mode: u32,
    ) -> Result<ServerBuilder, ServerError> {
        let path = path.as_ref().to_path_buf();
        let bind_error = |source| ServerError::Bind { address: path.display().to_string(), source };
        if path.exists() && UnixStream::connect(&path).is_err() {
            use std::os::unix::fs::FileTypeExt;
            let is_socket = std::fs::symlink_metadata(&path)
                .map(|m| m.file_type().is_socket())
                .unwrap_or(false);
            if is_socket {
                std::fs::remove_file(&path).map_err(bind_error)?;
            }
        }
        let listener = bind_unix(&path, mode).map_err(bind_error)?;
        self.listeners.push((Listener::Unix(listener), ListenAddr::Unix(path)));
        Ok(self)
    }

    /// Check the configuration and make the server (nothing is accepted until
    /// [`Server::run`] or [`Server::spawn`]).
    pub fn build(self) -> Result<Server, ServerError> {
        let config = &self.config;
        if config.workers == 0 {
            return Err(ServerError::Config("workers must be at least 1".into()));
        }
        if config.max_payload < 4096 {
            return Err(ServerError::Config(format!(
                "max_payload {} is below the 4096-byte preferred block size",
                config.max_payload
            )));
        }
        if config.max_payload > MAX_PAYLOAD_CEILING {
            return Err(ServerError::Config(format!(
                "max_payload {} is above the {MAX_PAYLOAD_CEILING}-byte ceiling",
                config.max_payload
            )));
        }
        if config.max_connections == 0 {
            return Err(ServerError::Config("max_connections must be at least 1".into()));
        }
        if config.shared_budget < u64::from(config.max_payload) {
            return Err(ServerError::Config(format!(
                "the shared budget ({} bytes) must hold at least one maximum payload ({})",
                config.shared_budget, config.max_payload
            )));
        }
        if config.max_in_flight == 0 {
            return Err(ServerError::Config("max_in_flight must be at least 1".into()));
        }
        if self.listeners.is_empty() {
            return Err(ServerError::Config(
                "no listening socket (listen_tcp / listen_unix)".into(),
            ));
        }
        let (listeners, addrs) = self.listeners.into_iter().unzip();
        let max_connections = self.config.max_connections;
        Ok(Server {
            shared: Arc::new(Shared {
                exports: self.exports,
                budget: budget::Budget::new(self.config.shared_budget, GUARANTEED_BYTES),
                config: self.config,
                observer: self.observer,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
                stopping: std::sync::atomic::AtomicBool::new(false),
                max_connections: std::sync::atomic::AtomicUsize::new(max_connections),
            }),
            listeners,
            addrs,
        })
    }
}

#[derive(Default)]
struct State {
    shutting_down: bool,
    next_id: u64,
    /// Open connections, by id, with a handle used to stop their reading at shutdown.
    connections: HashMap<u64, Stream>,
}

/// What every server thread shares.
pub(crate) struct Shared {
    pub(crate) exports: Arc<dyn ExportSet>,
    pub(crate) config: ServerConfig,
    /// The byte budget every connection's requests draw from.
    pub(crate) budget: budget::Budget,
    pub(crate) observer: Option<Arc<dyn ServerObserver>>,
    state: Mutex<State>,
    changed: Condvar,
    stopping: std::sync::atomic::AtomicBool,
    /// Connections open at once (`config.max_connections`, changed by
    /// [`ShutdownHandle::set_limits`]).
    max_connections: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked while holding it; the map is
        // still consistent (every mutation is a single insert/remove).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether shutdown has begun (a lock-free read; the flag is set under the state lock).
    pub(crate) fn shutting_down(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Register a new connection; `None` when shutting down (the caller drops it).
    fn register(&self, stream: &Stream) -> Option<u64> {
        let handle = stream.try_clone().ok()?;
        let mut state = self.state();
        let max = self.max_connections.load(std::sync::atomic::Ordering::Relaxed);
        if state.shutting_down || state.connections.len() >= max {
            return None;
        }
        let id = state.next_id;
        state.next_id += 1;
        state.connections.insert(id, handle);
        Some(id)
    }

    fn deregister(&self, id: u64) {
        let mut state = self.state();
        state.connections.remove(&id);
        drop(state);
        self.changed.notify_all();
    }
}

/// Triggers a graceful shutdown from any thread: stop accepting, stop reading requests,
/// answer every request already read, close every connection.
#[derive(Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

impl ShutdownHandle {
    /// Begin shutting down; returns at once ([`Server::run`] returns when it is complete).
    pub fn shutdown(&self) {
        let mut state = self.shared.state();
        if !state.shutting_down {
            state.shutting_down = true;
            self.shared.stopping.store(true, std::sync::atomic::Ordering::Release);
            for stream in state.connections.values() {
                stream.shutdown(Shutdown::Read);
            }
            // Readers waiting for buffer budget stop waiting.
            self.shared.budget.close();
        }
        drop(state);
        self.shared.changed.notify_all();
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.shutting_down()
    }

    /// Connections currently open.
    pub fn connections(&self) -> usize {
        self.shared.state().connections.len()
    }

    /// Bytes of the shared budget held now by requests in flight.
    pub fn budget_used(&self) -> u64 {
        self.shared.budget.used()
    }

    /// Change the connection limit and the shared buffer budget while serving. Open
    /// connections above a lowered limit stay open (new ones wait until they close);
    /// bytes held above a lowered budget are given back as their requests end. A limit of
    /// 0, or a budget below one maximum payload, is refused.
    pub fn set_limits(
        &self,
        max_connections: usize,
        shared_budget: u64,
    ) -> Result<(), ServerError> {
        if max_connections == 0 {
            return Err(ServerError::Config("max_connections must be at least 1".into()));
        }
        if shared_budget < u64::from(self.shared.config.max_payload) {
            return Err(ServerError::Config(format!(
                "the shared budget ({shared_budget} bytes) must hold at least one maximum \
                 payload ({})",
                self.shared.config.max_payload
            )));
        }
        self.shared.max_connections.store(max_connections, std::sync::atomic::Ordering::Relaxed);
        self.shared.budget.set_limit(shared_budget);
        Ok(())
    }
}

/// A bound server, ready to run.
pub struct Server {
    shared: Arc<Shared>,
    listeners: Vec<Listener>,
    addrs: Vec<ListenAddr>,
}

impl Server {
    /// Start configuring a server for `exports`.
    pub fn builder(exports: Arc<dyn ExportSet>) -> ServerBuilder {
        ServerBuilder::new(exports)
    }

    /// The addresses listened on, in the order they were added.
    pub fn addrs(&self) -> &[ListenAddr] {
        &self.addrs
    }

    /// The first TCP address listened on.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.addrs.iter().find_map(|a| match a {
            ListenAddr::Tcp(addr) => Some(*addr),
            ListenAddr::Unix(_) => None,
        })
    }

    /// A handle that stops this server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle { shared: Arc::clone(&self.shared) }
    }

    /// Serve until [`ShutdownHandle::shutdown`] is called, then drain: stop accepting, let
    /// every request already read be answered, close connections, stop the workers, remove
    /// Unix socket files. Returns when all of that is done.
    pub fn run(self) -> Result<(), ServerError> {
        let shared = self.shared;
        let (jobs, job_queue) = queue::queue::<job::Job>();
        let mut workers = Vec::with_capacity(shared.config.workers);
        let mut acceptors: Vec<JoinHandle<()>> = Vec::new();
        let mut startup_error = None;
        for i in 0..shared.config.workers {
            let queue = job_queue.clone();
            match std::thread::Builder::new()
                .name(format!("nbd-worker-{i}"))
                .spawn(move || worker::run(queue))
            {
                Ok(handle) => workers.push(handle),
                Err(e) => {
                    startup_error = Some(ServerError::Thread(e));
                    break;
                }
            }
        }
        drop(job_queue);
        if startup_error.is_none() {
            for listener in self.listeners {
                let shared = Arc::clone(&shared);
                let jobs = jobs.clone();
                match std::thread::Builder::new()
                    .name("nbd-accept".into())
                    .spawn(move || accept_loop(listener, shared, jobs))
                {
                    Ok(handle) => acceptors.push(handle),
                    Err(e) => {
                        startup_error = Some(ServerError::Thread(e));
                        break;
                    }
                }
            }
        }
        drop(jobs);
        if startup_error.is_some() {
            ShutdownHandle { shared: Arc::clone(&shared) }.shutdown();
        }

        // Wait for the shutdown signal.
        {
            let mut state = shared.state();
            while !state.shutting_down {
                state = shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        }
        // Wake every acceptor blocked in accept() by connecting to it; it sees the flag.
        for addr in &self.addrs {
            wake(addr);
        }
        for acceptor in acceptors {
            let _ = acceptor.join();
        }
        // Connections drain on their own once their read side is shut.
        {
            let mut state = shared.state();
            while !state.connections.is_empty() {
                state = shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        }
        // Every job sender is gone now (acceptors and connections hold the only clones), so
        // the workers finish the queue and exit.
        for worker in workers {
            let _ = worker.join();
        }
        for addr in &self.addrs {
            if let ListenAddr::Unix(path) = addr {
                let _ = std::fs::remove_file(path);
            }
        }
        match startup_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Run on a background thread.
    pub fn spawn(self) -> Result<RunningServer, ServerError> {
        let handle = self.shutdown_handle();
        let addrs = self.addrs.clone();
        let thread = std::thread::Builder::new()
            .name("nbd-server".into())
            .spawn(move || self.run())
            .map_err(ServerError::Thread)?;
        Ok(RunningServer { handle, addrs, thread })
    }
}

/// A server running on a background thread ([`Server::spawn`]).
pub struct RunningServer {
    handle: ShutdownHandle,
    addrs: Vec<ListenAddr>,
    thread: JoinHandle<Result<(), ServerError>>,
}

impl RunningServer {
    /// The addresses listened on.
    pub fn addrs(&self) -> &[ListenAddr] {
        &self.addrs
    }

    /// The first TCP address listened on.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.addrs.iter().find_map(|a| match a {
            ListenAddr::Tcp(addr) => Some(*addr),
            ListenAddr::Unix(_) => None,
        })
    }

    /// A handle that stops the server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.handle.clone()
    }

    /// Shut down gracefully and wait until the server has stopped.
    pub fn shutdown(self) -> Result<(), ServerError> {
        self.handle.shutdown();
        self.join()
    }

    /// Wait until the server stops (after someone calls [`ShutdownHandle::shutdown`]).
    pub fn join(self) -> Result<(), ServerError> {
        match self.thread.join() {
            Ok(result) => result,
            Err(_) => Err(ServerError::Thread(io::Error::other("server thread panicked"))),
        }
    }
}

/// Bind `path` with permission bits `mode`: bound in a private (0700) directory beside it,
/// chmod-ed, then linked into place (failing if `path` exists).
fn bind_unix(path: &Path, mode: u32) -> io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "a Unix socket path needs a file name")
    })?;
    let private = parent.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let staged = private.join("s");
    let result = (|| {
        let listener = UnixListener::bind(&staged)?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode & 0o777))?;
        // A hard link fails if `path` exists (another server listening there): never
        // replace a live socket.
        std::fs::hard_link(&staged, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&private);
    result
}

fn wake(addr: &ListenAddr) {
    match addr {
        ListenAddr::Tcp(addr) => {
            let mut target = *addr;
            if target.ip().is_unspecified() {
                target.set_ip(match target {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            let _ = TcpStream::connect(target);
        }
        ListenAddr::Unix(path) => {
            let _ = UnixStream::connect(path);
        }
    }
}

fn accept_loop(listener: Listener, shared: Arc<Shared>, jobs: queue::Sender<job::Job>) {
    loop {
        let accepted = match &listener {
            Listener::Tcp(l) => l.accept().and_then(|(s, _)| Stream::tcp(s)),
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
        };
        if shared.shutting_down() {
            return;
        }
        let stream = match accepted {
            Ok(stream) => stream,
            Err(_) => {
                // Out of descriptors or a connection reset before accept: back off briefly
                // rather than spin.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let Some(id) = shared.register(&stream) else {
            // Shutting down, or at max_connections: close it at once.
            stream.shutdown(Shutdown::Both);
            continue;
        };
        let conn_shared = Arc::clone(&shared);
        let conn_jobs = jobs.clone();
        let spawned = std::thread::Builder::new().name("nbd-conn".into()).spawn(move || {
            connection::serve(&conn_shared, stream, conn_jobs);
            conn_shared.deregister(id);
        });
        if spawned.is_err() {
            shared.deregister(id);
        }
    }
}
