//! Entry points for the coverage-guided fuzz targets in `fuzz/` and for the corpus replay
//! tests (`tests/fuzz_corpus.rs`); not part of ember's API. Each function feeds one input to
//! the real code, the way a peer would, and reports what happened; a panic or a hang is the
//! bug a fuzzer looks for. See docs/design/testing.md.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::client::{ClientBuilder, Endpoint};
use crate::export::ExportSet;
use crate::server::{handshake, RunningServer, Server, ServerConfig};
use crate::{ExportMap, MemExport};

/// Size of the export the server targets serve.
pub const EXPORT_SIZE: u64 = 1 << 20;
/// Name of that export (the empty name selects it too).
pub const EXPORT_NAME: &str = "fuzz";

/// How long a target waits for its peer before calling it a hang.
const PEER_TIMEOUT: Duration = Duration::from_secs(20);

fn exports() -> ExportMap {
    ExportMap::new().with(EXPORT_NAME, "fuzzing export", Arc::new(MemExport::new(EXPORT_SIZE)))
}

/// A stream whose reads come from `input` and whose writes are kept.
struct Duplex<'a> {
    input: &'a [u8],
    output: Vec<u8>,
}

impl Read for Duplex<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Duplex<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What the server-side handshake made of `input` (the client's bytes), run in memory on
/// the server's own handshake code.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeOutcome {
    /// An export was negotiated (the transmission phase would start).
    Negotiated {
        /// Structured replies were negotiated.
        structured: bool,
    },
    /// The server ended the session (abort, garbage, unknown export).
    Closed,
    /// Reading or writing failed (the input ended early).
    Io(io::ErrorKind),
}

/// Run the server side of the fixed-newstyle handshake on `input`; returns the outcome and
/// the bytes the server sent.
pub fn server_handshake(input: &[u8]) -> (HandshakeOutcome, Vec<u8>) {
    let exports = exports();
    let config = ServerConfig::default();
    let mut stream = Duplex { input, output: Vec::new() };
    let outcome =
        match handshake::negotiate(&mut stream, &exports as &dyn ExportSet, &config, &|| false) {
            Ok(Some(n)) => HandshakeOutcome::Negotiated { structured: n.structured },
            Ok(None) => HandshakeOutcome::Closed,
            Err(e) => HandshakeOutcome::Io(e.kind()),
        };
    (outcome, stream.output)
}

struct SocketDir {
    path: PathBuf,
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Remove the socket directories of fuzzing processes that have exited. The fixtures live in
/// `static`s, which are never dropped, so their directories outlive their process; a later
/// process cleans up after it (Linux: a process is alive while `/proc/PID` exists).
fn sweep_exited() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("ember-fuzz-")) else {
            continue;
        };
        // "TAG-PID-N"
        let Some(pid) = rest.rsplit('-').nth(1).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[expect(
    clippy::expect_used,
    reason = "harness setup (its own socket, server): a failure is a broken machine, not an input"
)]
fn socket_dir(tag: &str) -> SocketDir {
    sweep_exited();
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("ember-fuzz-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).expect("create a socket directory");
    SocketDir { path }
}

struct ServerFixture {
    _server: RunningServer,
    socket: PathBuf,
    _dir: SocketDir,
}

#[expect(
    clippy::expect_used,
    reason = "harness setup (its own socket, server): a failure is a broken machine, not an input"
)]
fn server_fixture() -> &'static ServerFixture {
    static FIXTURE: OnceLock<ServerFixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = socket_dir("server");
        let socket = dir.path.join("nbd.sock");
        let server = Server::builder(Arc::new(exports()))
            .workers(2)
            .listen_unix(&socket)
            .and_then(|b| b.build())
            .and_then(|s| s.spawn())
            .expect("start the fuzzing server");
        ServerFixture { _server: server, socket, _dir: dir }
    })
}

/// Send `input` as a client's whole byte stream to a real ember NBD server (a 1 MiB memory
/// export, on a Unix socket, started once per process), close the sending half, and return
/// every byte the server answered before it closed the connection.
///
/// Panics when the server does not close the connection within 20 seconds of the client's
/// end of stream (a hang), and when the harness cannot connect to its own server.
#[expect(
    clippy::expect_used,
    reason = "harness setup (its own socket, server): a failure is a broken machine, not an input"
)]
pub fn server_session(input: &[u8]) -> Vec<u8> {
    let fixture = server_fixture();
    let mut stream = UnixStream::connect(&fixture.socket).expect("connect to the fuzzing server");
    stream.set_read_timeout(Some(PEER_TIMEOUT)).expect("set a read timeout");
    let mut sender = stream.try_clone().expect("clone the socket");
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        // The server may close early (garbage); a failed write is part of the session.
        let _ = sender.write_all(&data);
        let _ = sender.shutdown(Shutdown::Write);
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                panic!("the server did not close the connection {PEER_TIMEOUT:?} after the client's end of stream")
            }
            Err(_) => break,
        }
    }
    let _ = writer.join();
    answer
}

/// What ember's client did against a hostile server.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ClientOutcome {
    /// The handshake succeeded.
    pub connected: bool,
    /// Requests that completed successfully.
    pub ok: usize,
    /// Requests that failed with an error.
    pub failed: usize,
    /// Exports listed by NBD_OPT_LIST on a second connection, if that succeeded.
    pub listed: Option<usize>,
}

/// The requests [`client_session`] sends once connected, in order: (command, offset, length).
/// Cookies are assigned in this order, so a recorded server answer to this script replays.
pub const CLIENT_SCRIPT: [(&str, u64, u32); 6] = [
    ("read", 0, 4096),
    ("write", 4096, 512),
    ("read", 4096, 1024),
    ("flush", 0, 0),
    ("trim", 8192, 4096),
    ("write_zeroes", 16384, 4096),
];

/// Run [`CLIENT_SCRIPT`] on a connected client; every successful read must return exactly
/// the length asked for (panics otherwise: that would be wrong data).
pub fn run_client_script(client: &crate::Client) -> (usize, usize) {
    let payload = vec![0xA5u8; 512];
    let mut pending = Vec::new();
    for (command, offset, length) in CLIENT_SCRIPT {
        let started = match command {
            "read" => client.start_read(offset, length),
            "write" => client.start_write(offset, &payload[..length as usize], false),
            "flush" => client.start_flush(),
            "trim" => client.start_trim(offset, length, false),
            _ => client.start_write_zeroes(offset, length, false, false),
        };
        pending.push((command, length, started));
    }
    let (mut ok, mut failed) = (0, 0);
    for (command, length, started) in pending {
        match started.and_then(|in_flight| in_flight.wait()) {
            Ok(data) => {
                let want = if command == "read" { length as usize } else { 0 };
                assert_eq!(
                    data.len(),
                    want,
                    "{command} of {length} bytes returned {} bytes",
                    data.len()
                );
                ok += 1;
            }
            Err(_) => failed += 1,
        }
    }
    (ok, failed)
}

struct ClientFixture {
    listener: Mutex<UnixListener>,
    socket: PathBuf,
    _dir: SocketDir,
}

#[expect(
    clippy::expect_used,
    reason = "harness setup (its own socket, server): a failure is a broken machine, not an input"
)]
fn client_fixture() -> &'static ClientFixture {
    static FIXTURE: OnceLock<ClientFixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = socket_dir("client");
        let socket = dir.path.join("hostile.sock");
        let listener = UnixListener::bind(&socket).expect("bind the hostile server socket");
        ClientFixture { listener: Mutex::new(listener), socket, _dir: dir }
    })
}

/// What the hostile server has seen of the client's stream.
#[derive(Default)]
struct Seen {
    bytes: Vec<u8>,
    closed: bool,
}

impl Seen {
    fn requests(&self) -> usize {
        let magic = crate::proto::REQUEST_MAGIC.to_be_bytes();
        self.bytes.windows(4).filter(|w| *w == magic).count()
    }
}

/// How long the hostile server waits for the client's next bytes before sending its
/// replies anyway, when fuzzing (where every input pays it).
const CLIENT_IDLE: Duration = Duration::from_millis(100);

/// Where the transmission-phase replies of `input` begin: the first simple or structured
/// reply magic (the end if there is none).
fn replies_start(input: &[u8]) -> usize {
    let simple = crate::proto::SIMPLE_REPLY_MAGIC.to_be_bytes();
    let structured = crate::proto::STRUCTURED_REPLY_MAGIC.to_be_bytes();
    input.windows(4).position(|w| w == simple || w == structured).unwrap_or(input.len())
}

/// Serve `input` as the whole byte stream of a hostile server to one connection, and drain
/// what the client sends until it closes. The bytes before the first reply magic go at once;
/// the rest waits until the client has sent every request of [`CLIENT_SCRIPT`] (or closed,
/// or sent nothing for `idle`), so that replies answer requests, as from a real server;
/// then the sending half is closed.
fn hostile_server(
    listener: &UnixListener,
    input: Vec<u8>,
    idle: Duration,
) -> std::thread::JoinHandle<()> {
    let accepted = listener.accept().map(|(s, _)| s);
    std::thread::spawn(move || {
        let Ok(mut stream) = accepted else { return };
        let _ = stream.set_read_timeout(Some(PEER_TIMEOUT));
        let Ok(mut drain) = stream.try_clone() else { return };
        let seen = Arc::new((Mutex::new(Seen::default()), std::sync::Condvar::new()));
        let reader = {
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                let mut buf = [0u8; 64 * 1024];
                loop {
                    let n = drain.read(&mut buf).unwrap_or(0);
                    let mut s = seen.0.lock().unwrap_or_else(|p| p.into_inner());
                    s.bytes.extend_from_slice(&buf[..n]);
                    s.closed |= n == 0;
                    seen.1.notify_all();
                    if n == 0 {
                        break;
                    }
                }
            })
        };
        let split = replies_start(&input);
        let _ = stream.write_all(&input[..split]);
        if split < input.len() {
            let mut s = seen.0.lock().unwrap_or_else(|p| p.into_inner());
            while !s.closed && s.requests() < CLIENT_SCRIPT.len() {
                let before = s.bytes.len();
                s = seen.1.wait_timeout(s, idle).map(|r| r.0).unwrap_or_else(|p| p.into_inner().0);
                if s.bytes.len() == before && !s.closed {
                    break;
                }
            }
        }
        let _ = stream.write_all(&input[split..]);
        let _ = stream.shutdown(Shutdown::Write);
        let _ = reader.join();
    })
}

/// Connect ember's NBD client (export [`EXPORT_NAME`], structured replies asked for) to a
/// hostile server whose whole byte stream is `input`, run [`CLIENT_SCRIPT`], then list the
/// exports on a second connection fed the same bytes.
pub fn client_session(input: &[u8]) -> ClientOutcome {
    client_session_waiting(input, CLIENT_IDLE)
}

/// [`client_session`] with the hostile server waiting `idle` for the client's next bytes
/// (the corpus replay's recorded sessions wait long, so that a loaded machine's pause between
/// two requests of the script does not send the replies before their requests).
pub fn client_session_waiting(input: &[u8], idle: Duration) -> ClientOutcome {
    let fixture = client_fixture();
    let listener = fixture.listener.lock().unwrap_or_else(|p| p.into_inner());
    let endpoint = Endpoint::Unix(fixture.socket.clone());
    let mut outcome = ClientOutcome::default();

    // The listener's backlog holds the connection until the server thread accepts it.
    let connecting = {
        let endpoint = endpoint.clone();
        std::thread::spawn(move || ClientBuilder::new().export(EXPORT_NAME).connect(&endpoint))
    };
    let server = hostile_server(&listener, input.to_vec(), idle);
    let connected = connecting.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    if let Ok(client) = connected {
        outcome.connected = true;
        let (ok, failed) = run_client_script(&client);
        outcome.ok = ok;
        outcome.failed = failed;
        drop(client);
    }
    let _ = server.join();

    let listing = std::thread::spawn(move || crate::Client::list_exports(&endpoint));
    let server = hostile_server(&listener, input.to_vec(), idle);
    if let Ok(list) = listing.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
        outcome.listed = Some(list.len());
    }
    let _ = server.join();
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture held in a `static` is never dropped, so its socket directory outlived every
    /// fuzzing and corpus-replay process, and they piled up in /tmp. The next process
    /// removes the directories of processes that have exited.
    #[test]
    fn a_socket_directory_of_an_exited_process_is_removed() {
        let mut child = std::process::Command::new("true").spawn().expect("run true");
        let dead = child.id();
        child.wait().expect("wait for true");
        let stale = std::env::temp_dir().join(format!("ember-fuzz-client-{dead}-0"));
        std::fs::create_dir_all(&stale).expect("make a stale directory");
        std::fs::write(stale.join("hostile.sock"), b"").expect("a file inside it");
        let mine = socket_dir("sweep-test");
        assert!(mine.path.is_dir());
        assert!(!stale.exists(), "{} is still there", stale.display());
    }
}
