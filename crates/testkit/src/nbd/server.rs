//! ember's NBD server run in the test's own process on loopback TCP and a Unix socket, and
//! the byte patterns its tests write and check.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ember_nbd::server::ServerConfig;
use ember_nbd::{Client, ClientBuilder, ExportMap, MemExport, RunningServer, Server, ServerStats};

/// A running server; shut down (and checked to stop cleanly) on drop.
pub struct TestServer {
    /// The server, until stopped.
    pub running: Option<RunningServer>,
    /// Its TCP address.
    pub tcp: SocketAddr,
    /// Its Unix socket.
    pub unix: PathBuf,
    /// What it counted.
    pub stats: Arc<ServerStats>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// `nbd://ADDR/EXPORT`.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd://{}/{}", self.tcp, export)
    }

    /// `nbd+unix:///EXPORT?socket=…`.
    pub fn unix_uri(&self, export: &str) -> String {
        format!("nbd+unix:///{}?socket={}", export, self.unix.display())
    }

    /// A client of `export` over TCP.
    pub fn client(&self, export: &str) -> Client {
        ClientBuilder::new().export(export).connect_tcp(self.tcp).expect("connect")
    }

    /// Graceful shutdown; panics if the server reports an error.
    pub fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().expect("server shut down cleanly");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.shutdown();
        }
    }
}

/// Serve `exports` on 127.0.0.1:0 and a Unix socket in a fresh temporary directory.
pub fn serve_with(exports: ExportMap, config: ServerConfig) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let unix = dir.path().join("nbd.sock");
    let stats = Arc::new(ServerStats::new());
    let server = Server::builder(Arc::new(exports))
        .config(config)
        .observer(stats.clone())
        .listen_tcp("127.0.0.1:0")
        .expect("bind tcp")
        .listen_unix(&unix)
        .expect("bind unix")
        .build()
        .expect("build");
    let tcp = server.tcp_addr().expect("tcp address");
    let running = server.spawn().expect("spawn");
    TestServer { running: Some(running), tcp, unix, stats, _dir: dir }
}

/// Serve one MemExport of `size` bytes called `name`.
pub fn serve_mem(name: &str, size: u64) -> (TestServer, Arc<MemExport>) {
    let export = Arc::new(MemExport::new(size));
    let server = serve_with(
        ExportMap::new().with(name, "a test RAM disk", export.clone()),
        ServerConfig::default(),
    );
    (server, export)
}

/// Deterministic non-zero bytes (a xorshift stream), so copies of holes cannot pass.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&(x | 0x0101_0101_0101_0101).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Check that `client` still works: write a pattern, read it back.
pub fn assert_works(client: &Client, seed: u64) {
    let data = pattern(seed, 64 * 1024);
    client.write(seed % 16 * 65536, &data, false).expect("write by the well-behaved client");
    let mut back = vec![0u8; data.len()];
    client.read(seed % 16 * 65536, &mut back).expect("read by the well-behaved client");
    assert_eq!(back, data, "well-behaved client reads back what it wrote");
}
