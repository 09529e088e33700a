//! Which way a READ takes on an export whose hits wait on a device (`Export::starts_reads`,
//! `ember serve --direct`): a READ that arrives alone, with nothing in flight, from a client
//! sending one request at a time (iodepth 1) is read at once on the connection's reader
//! (`Export::read_if_fast`); the first READ of a deeper client's next burst, which also
//! arrives alone after all its READs completed, is started (`Export::start_read`), so the
//! reader goes on parsing the rest of the burst while the device reads it. Before this rule
//! that READ was read at once: the reader waited on the device while the client's next
//! requests sat in the socket (docs/design/nbd-internals.md).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::nbd::*;
use ember_testkit::{forward_geometry, forward_writes, reap_pending};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ember_nbd::server::ServerConfig;
use ember_nbd::{Export, ExportError, ExportMap, MemExport, ReadBuf, ReadStart};

const SIZE: u64 = 1 << 20;
const BS: usize = 4096;

/// A RAM export that starts READs (completing them at once, reported by the next reap) and
/// counts which way each READ came.
struct Starting {
    inner: MemExport,
    /// Tags started and not yet reaped, and how many READs were started.
    pending: PendingReads,
    /// READs served by `read_if_fast` (read at once on the reader).
    at_once: AtomicU64,
}

impl Export for Starting {
    forward_geometry!();
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        self.inner.read(offset, buf)
    }
    fn read_if_fast(
        &self,
        offset: u64,
        buf: &mut [u8],
        _idle: bool,
    ) -> Option<Result<(), ExportError>> {
        self.at_once.fetch_add(1, Ordering::SeqCst);
        Some(self.inner.read(offset, buf))
    }
    fn batches_reads(&self) -> bool {
        true
    }
    fn starts_reads(&self) -> bool {
        true
    }
    fn start_read(&self, offset: u64, buf: ReadBuf, tag: u64) -> ReadStart {
        self.pending.start(&self.inner, offset, buf, tag)
    }
    reap_pending!();
    forward_writes!();
}

/// A 4 KiB READ request's header.
fn header(cookie: u64, offset: u64) -> [u8; 28] {
    request_header(0, 0, cookie, offset, BS as u32)
}

/// Read one simple reply to a 4 KiB READ; check its bytes against `content`.
fn reply(raw: &mut Raw, content: &[u8], offset_of: impl Fn(u64) -> u64) -> u64 {
    let mut h = [0u8; 16];
    raw.s.read_exact(&mut h).expect("reply header");
    assert_eq!(&h[0..4], &0x6744_6698u32.to_be_bytes(), "simple reply magic");
    assert_eq!(u32::from_be_bytes(h[4..8].try_into().unwrap()), 0, "no error");
    let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap());
    let mut data = [0u8; BS];
    raw.s.read_exact(&mut data).expect("data");
    let off = offset_of(cookie) as usize;
    assert!(data[..] == content[off..off + BS], "READ {cookie} carried its block's bytes");
    cookie
}

#[test]
fn the_first_read_of_a_burst_is_started_and_a_lone_client_is_read_at_once() {
    let export = Arc::new(Starting {
        inner: MemExport::new(SIZE),
        pending: PendingReads::default(),
        at_once: AtomicU64::new(0),
    });
    let content = pattern(11, SIZE as usize);
    export.inner.write(0, &content, false).unwrap();
    let server = serve_with(
        ExportMap::new().with("disk", "starts its reads", export.clone()),
        ServerConfig::default(),
    );
    let (mut raw, size, _) = Raw::go(server.tcp, "disk", false);
    assert_eq!(size, SIZE);
    let offset_of = |cookie: u64| (cookie * 7919 % (SIZE / BS as u64)) * BS as u64;
    let counts = || (export.at_once.load(Ordering::SeqCst), export.pending.started());

    // iodepth 1: every READ arrives alone, and is read at once.
    for cookie in 0..20 {
        raw.s.write_all(&header(cookie, offset_of(cookie))).unwrap();
        assert_eq!(reply(&mut raw, &content, offset_of), cookie);
    }
    assert_eq!(counts(), (20, 0), "(read at once, started) at iodepth 1");

    // A burst of 8 in one write: the reader finds the next requests buffered and starts them.
    let burst: Vec<u8> = (100..108).flat_map(|c| header(c, offset_of(c))).collect();
    raw.s.write_all(&burst).unwrap();
    for _ in 0..8 {
        reply(&mut raw, &content, offset_of);
    }
    let (at_once, started) = counts();
    assert!(started >= 2, "the burst was started, {started} of 8 (read at once: {at_once})");

    // The next READ arrives alone with nothing in flight: the first of the next burst of a
    // client that keeps several in flight. Started, not read at once.
    raw.s.write_all(&header(200, offset_of(200))).unwrap();
    assert_eq!(reply(&mut raw, &content, offset_of), 200);
    let after = counts();
    assert_eq!(after, (at_once, started + 1), "(read at once, started) after the burst");

    // Only that one was in flight when it completed: the client is at iodepth 1 again, and
    // its next lone READs are read at once.
    for cookie in 300..305 {
        raw.s.write_all(&header(cookie, offset_of(cookie))).unwrap();
        assert_eq!(reply(&mut raw, &content, offset_of), cookie);
    }
    assert_eq!(counts(), (after.0 + 5, after.1), "(read at once, started) back at iodepth 1");
    drop(raw);
    server.stop();
}
