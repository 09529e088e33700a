//! Shared helpers for the end-to-end tests: an in-process server on loopback / a Unix socket,
//! exports that block or fail on demand, and a raw-socket NBD speaker for hostile clients.

#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use ember_nbd::server::ServerConfig;
use ember_nbd::{
    Client, ClientBuilder, Export, ExportError, ExportMap, MemExport, ReadStart, RunningServer,
    Server, ServerStats,
};

/// A running server; shut down (and checked to stop cleanly) on drop.
pub struct TestServer {
    pub running: Option<RunningServer>,
    pub tcp: SocketAddr,
    pub unix: PathBuf,
    pub stats: Arc<ServerStats>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub fn uri(&self, export: &str) -> String {
        format!("nbd://{}/{}", self.tcp, export)
    }

    pub fn unix_uri(&self, export: &str) -> String {
        format!("nbd+unix:///{}?socket={}", export, self.unix.display())
    }

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

/// The geometry of an `Export` (size, flags), forwarded to `self.inner`.
macro_rules! forward_geometry {
    () => {
        fn size(&self) -> u64 {
            ember_nbd::Export::size(&self.inner)
        }
        fn flags(&self) -> ember_nbd::ExportFlags {
            ember_nbd::Export::flags(&self.inner)
        }
    };
}
#[allow(unused_imports)]
pub(crate) use forward_geometry;

/// The write-side methods of an `Export` (write, flush, trim, write_zeroes), forwarded to
/// `self.inner`: test exports differ only in how they read.
macro_rules! forward_writes {
    () => {
        fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ember_nbd::ExportError> {
            self.inner.write(offset, data, fua)
        }
        fn flush(&self) -> Result<(), ember_nbd::ExportError> {
            self.inner.flush()
        }
        fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), ember_nbd::ExportError> {
            self.inner.trim(offset, len, fua)
        }
        fn write_zeroes(
            &self,
            offset: u64,
            len: u64,
            fua: bool,
            may_trim: bool,
        ) -> Result<(), ember_nbd::ExportError> {
            self.inner.write_zeroes(offset, len, fua, may_trim)
        }
    };
}
#[allow(unused_imports)]
pub(crate) use forward_writes;

/// An export whose reads wait at a gate until it is opened, counting waiters.
pub struct GateExport {
    pub inner: MemExport,
    gate: Mutex<(bool, usize)>,
    changed: Condvar,
}

impl GateExport {
    pub fn new(size: u64) -> GateExport {
        GateExport {
            inner: MemExport::new(size),
            gate: Mutex::new((false, 0)),
            changed: Condvar::new(),
        }
    }

    /// Block until at least `n` reads wait at the gate.
    pub fn wait_for_waiters(&self, n: usize) {
        let mut g = self.gate.lock().unwrap();
        while g.1 < n {
            g = self.changed.wait(g).unwrap();
        }
    }

    pub fn open(&self) {
        self.gate.lock().unwrap().0 = true;
        self.changed.notify_all();
    }
}

impl Export for GateExport {
    forward_geometry!();
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        {
            let mut g = self.gate.lock().unwrap();
            g.1 += 1;
            self.changed.notify_all();
            while !g.0 {
                g = self.changed.wait(g).unwrap();
            }
        }
        self.inner.read(offset, buf)
    }
    forward_writes!();
}

/// An export whose reads touching `[bad, bad + 1)` fail with EIO.
pub struct FaultyExport {
    pub inner: MemExport,
    pub bad: u64,
}

impl Export for FaultyExport {
    forward_geometry!();
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        if offset <= self.bad && self.bad < offset + buf.len() as u64 {
            return Err(ExportError::Io(std::io::Error::from_raw_os_error(5)));
        }
        self.inner.read(offset, buf)
    }
    forward_writes!();
}

/// The 28 bytes of a request header (NBD_REQUEST_MAGIC, then the fields, big-endian).
pub fn request_header(flags: u16, command: u16, cookie: u64, offset: u64, length: u32) -> [u8; 28] {
    let mut h = [0u8; 28];
    h[0..4].copy_from_slice(&0x2560_9513u32.to_be_bytes());
    h[4..6].copy_from_slice(&flags.to_be_bytes());
    h[6..8].copy_from_slice(&command.to_be_bytes());
    h[8..16].copy_from_slice(&cookie.to_be_bytes());
    h[16..24].copy_from_slice(&offset.to_be_bytes());
    h[24..28].copy_from_slice(&length.to_be_bytes());
    h
}

/// A hand-driven NBD client over a raw TCP socket.
pub struct Raw {
    pub s: TcpStream,
}

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).expect("connect");
        // A safety net that turns a server bug into a failure instead of a hang.
        s.set_read_timeout(Some(std::time::Duration::from_secs(120))).expect("timeout");
        Raw { s }
    }

    pub fn u16(&mut self) -> u16 {
        let mut b = [0u8; 2];
        self.s.read_exact(&mut b).expect("read u16");
        u16::from_be_bytes(b)
    }
    pub fn u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.s.read_exact(&mut b).expect("read u32");
        u32::from_be_bytes(b)
    }
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.s.read_exact(&mut b).expect("read u64");
        u64::from_be_bytes(b)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        self.s.read_exact(&mut b).expect("read bytes");
        b
    }
    pub fn send(&mut self, data: &[u8]) {
        self.s.write_all(data).expect("send");
    }

    /// Read the 18-byte greeting; returns the handshake flags.
    pub fn greeting(&mut self) -> u16 {
        assert_eq!(self.u64(), NBDMAGIC);
        assert_eq!(self.u64(), IHAVEOPT);
        self.u16()
    }

    pub fn option(&mut self, option: u32, data: &[u8]) {
        let mut out = Vec::new();
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&option.to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(data);
        self.send(&out);
    }

    /// One option reply: (option, type, data).
    pub fn option_reply(&mut self) -> (u32, u32, Vec<u8>) {
        assert_eq!(self.u64(), REPLY_MAGIC);
        let option = self.u32();
        let kind = self.u32();
        let len = self.u32() as usize;
        (option, kind, self.bytes(len))
    }

    /// Handshake to transmission with NBD_OPT_GO; returns (size, transmission flags).
    pub fn go(addr: SocketAddr, name: &str, structured: bool) -> (Raw, u64, u16) {
        let mut raw = Raw::connect(addr);
        raw.greeting();
        raw.send(&3u32.to_be_bytes());
        if structured {
            raw.option(8, &[]);
            assert_eq!(raw.option_reply().1, 1, "structured replies acknowledged");
        }
        let mut data = Vec::new();
        data.extend_from_slice(&(name.len() as u32).to_be_bytes());
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        raw.option(7, &data);
        let (mut size, mut flags) = (0, 0);
        loop {
            let (_, kind, data) = raw.option_reply();
            match kind {
                3 if u16::from_be_bytes([data[0], data[1]]) == 0 => {
                    size = u64::from_be_bytes(data[2..10].try_into().unwrap());
                    flags = u16::from_be_bytes([data[10], data[11]]);
                }
                3 => {}
                1 => break,
                other => panic!("NBD_OPT_GO failed with reply {other:#x}"),
            }
        }
        (raw, size, flags)
    }

    pub fn request(
        &mut self,
        flags: u16,
        command: u16,
        cookie: u64,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) {
        let mut out = Vec::with_capacity(28 + payload.len());
        out.extend_from_slice(&request_header(flags, command, cookie, offset, length));
        out.extend_from_slice(payload);
        self.send(&out);
    }

    /// A simple reply: (error, cookie).
    pub fn simple_reply(&mut self) -> (u32, u64) {
        assert_eq!(self.u32(), 0x6744_6698, "simple reply magic");
        (self.u32(), self.u64())
    }

    /// A structured chunk: (flags, type, cookie, payload).
    pub fn chunk(&mut self) -> (u16, u16, u64, Vec<u8>) {
        assert_eq!(self.u32(), 0x668e_33ef, "structured reply magic");
        let flags = self.u16();
        let kind = self.u16();
        let cookie = self.u64();
        let len = self.u32() as usize;
        (flags, kind, cookie, self.bytes(len))
    }

    /// Whether the server has closed the connection (reads hit EOF or a reset).
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        loop {
            match self.s.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
    }
}

/// READs a test export "starts" (`Export::start_read`): read at once from a RAM export, their
/// tags reported by the next `Export::reap_reads`, and counted.
#[derive(Default)]
pub struct PendingReads {
    tags: Mutex<Vec<u64>>,
    started: std::sync::atomic::AtomicU64,
}

impl PendingReads {
    /// Read `len` bytes at `offset` of `inner` into `buf` and keep `tag` for the next reap.
    ///
    /// # Safety
    ///
    /// `buf` must be valid for writes of `len` bytes.
    pub unsafe fn start(
        &self,
        inner: &MemExport,
        offset: u64,
        buf: *mut u8,
        len: usize,
        tag: u64,
    ) -> ReadStart {
        // SAFETY: the caller's contract.
        let buf = unsafe { std::slice::from_raw_parts_mut(buf, len) };
        if inner.read(offset, buf).is_err() {
            return ReadStart::Declined;
        }
        self.tags.lock().unwrap().push(tag);
        self.started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ReadStart::Started
    }

    /// READs started so far.
    pub fn started(&self) -> u64 {
        self.started.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Report every READ started since the last reap; how many.
    pub fn reap(&self, done: &mut dyn FnMut(u64, Result<(), ExportError>)) -> usize {
        let tags: Vec<u64> = std::mem::take(&mut *self.tags.lock().unwrap());
        for &tag in &tags {
            done(tag, Ok(()));
        }
        tags.len()
    }
}
