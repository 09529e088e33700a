//! The buffers a connection starts READs into are registered with the export
//! (`Export::register_read_buffer`: ember's O_DIRECT cache registers them with its io_uring)
//! when they are allocated, on the reader's thread, and unregistered there before
//! they are freed. A buffer the export does not let go of is never freed: its registration
//! could still let a device write into it, and a freed buffer's pages go to someone else.
//!
//! This binary's allocator watches the buffers the export kept, and counts any free of the
//! memory that holds one.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::nbd::*;
use ember_testkit::watching_alloc::{self, watch, Watching};
use ember_testkit::{forward_geometry, forward_writes, reap_pending};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use ember_nbd::server::ServerConfig;
use ember_nbd::{Export, ExportError, ExportMap, MemExport, ReadBuf, ReadStart};

#[global_allocator]
static ALLOCATOR: Watching = Watching;

const SIZE: u64 = 1 << 20;
const BS: usize = 4096;

/// A RAM export that starts READs (completing them at once, reported by the next reap) and
/// keeps a table of registered buffers, as a thread's io_uring would.
struct Registering {
    inner: MemExport,
    pending: PendingReads,
    /// Registered buffers: (start, length, the registering thread).
    table: Mutex<Vec<(usize, usize, ThreadId)>>,
    /// Whether an unregistration succeeds (else the buffer stays registered).
    let_go: AtomicBool,
    registrations: AtomicU64,
    unregistrations: AtomicU64,
    /// READs started into a buffer not registered on the starting thread.
    unregistered_starts: AtomicU64,
    /// Unregistrations asked on a thread other than the registering one.
    wrong_thread: AtomicU64,
}

impl Registering {
    fn new(let_go: bool) -> Registering {
        Registering {
            inner: MemExport::new(SIZE),
            pending: PendingReads::default(),
            table: Mutex::new(Vec::new()),
            let_go: AtomicBool::new(let_go),
            registrations: AtomicU64::new(0),
            unregistrations: AtomicU64::new(0),
            unregistered_starts: AtomicU64::new(0),
            wrong_thread: AtomicU64::new(0),
        }
    }
}

impl Export for Registering {
    forward_geometry!();
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        self.inner.read(offset, buf)
    }
    fn batches_reads(&self) -> bool {
        true
    }
    fn starts_reads(&self) -> bool {
        true
    }
    fn register_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        let mut table = self.table.lock().unwrap();
        let (start, len) = (buf.as_ptr() as usize, buf.capacity());
        let end = start + len;
        assert!(
            table.iter().all(|&(s, l, _)| end <= s || s + l <= start),
            "a buffer registered over another one still registered"
        );
        table.push((start, len, std::thread::current().id()));
        if !self.let_go.load(Ordering::SeqCst) {
            watch(start);
        }
        buf.set_registered();
        self.registrations.fetch_add(1, Ordering::SeqCst);
        true
    }
    fn unregister_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        let mut table = self.table.lock().unwrap();
        let Some(at) = table.iter().position(|&(s, _, _)| s == buf.as_ptr() as usize) else {
            return false;
        };
        if table[at].2 != std::thread::current().id() {
            self.wrong_thread.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        if !self.let_go.load(Ordering::SeqCst) {
            return false;
        }
        table.remove(at);
        // SAFETY: this export's table, the only registration, no longer holds it.
        unsafe { buf.clear_registered() };
        self.unregistrations.fetch_add(1, Ordering::SeqCst);
        true
    }
    fn start_read(&self, offset: u64, buf: ReadBuf, tag: u64) -> ReadStart {
        let here = std::thread::current().id();
        let (start, len) = (buf.as_ptr() as usize, buf.len());
        let inside = self
            .table
            .lock()
            .unwrap()
            .iter()
            .any(|&(s, l, t)| t == here && s <= start && start + len <= s + l);
        if !inside {
            self.unregistered_starts.fetch_add(1, Ordering::SeqCst);
        }
        self.pending.start(&self.inner, offset, buf, tag)
    }
    reap_pending!();
    forward_writes!();
}

/// Serve `export`, send bursts of READs of 4 KiB and 64 KiB (a slot's buffer grows: a new
/// one is registered, the old one unregistered and freed), check every reply's bytes, and
/// stop the server (every connection's slots are gone then).
fn bursts(export: &Arc<Registering>) {
    let content = pattern(5, SIZE as usize);
    export.inner.write(0, &content, false).unwrap();
    let server = serve_with(
        ExportMap::new().with("disk", "registers its read buffers", export.clone()),
        ServerConfig::default(),
    );
    for round in 0..3u64 {
        let (mut raw, _, _) = Raw::go(server.tcp, "disk", false);
        for len in [BS, 16 * BS, BS, 4 * BS] {
            let offset_of = |c: u64| (c * 7919 % (SIZE / 65536)) * 65536;
            let burst: Vec<u8> = (0..16)
                .flat_map(|c| request_header(0, 0, c + round * 100, offset_of(c), len as u32))
                .collect();
            raw.s.write_all(&burst).unwrap();
            for _ in 0..16 {
                let mut h = [0u8; 16];
                raw.s.read_exact(&mut h).expect("reply header");
                assert_eq!(u32::from_be_bytes(h[4..8].try_into().unwrap()), 0, "no error");
                let cookie = u64::from_be_bytes(h[8..16].try_into().unwrap()) - round * 100;
                let mut data = vec![0u8; len];
                raw.s.read_exact(&mut data).expect("data");
                let off = offset_of(cookie) as usize;
                assert!(data[..] == content[off..off + len], "READ {cookie} of {len} bytes");
            }
        }
        drop(raw);
    }
    server.stop();
}

#[test]
fn read_buffers_are_registered_on_allocation_and_unregistered_before_they_are_freed() {
    let export = Arc::new(Registering::new(true));
    bursts(&export);
    let started = export.pending.started();
    let registrations = export.registrations.load(Ordering::SeqCst);
    assert!(started >= 16, "READs were started ({started})");
    assert!(registrations >= 2, "buffers were registered ({registrations})");
    assert_eq!(
        export.unregistered_starts.load(Ordering::SeqCst),
        0,
        "READs into unregistered buffers"
    );
    assert_eq!(export.wrong_thread.load(Ordering::SeqCst), 0, "unregistrations on another thread");
    assert_eq!(
        export.unregistrations.load(Ordering::SeqCst),
        registrations,
        "every registered buffer was unregistered once the connections ended"
    );
    assert!(export.table.lock().unwrap().is_empty());
}

#[test]
fn a_buffer_the_export_keeps_registered_is_never_freed() {
    let export = Arc::new(Registering::new(false));
    bursts(&export);
    let kept = export.table.lock().unwrap().len();
    assert!(kept >= 2, "buffers stayed registered ({kept})");
    assert_eq!(export.unregistrations.load(Ordering::SeqCst), 0);
    assert_eq!(
        watching_alloc::freed(),
        0,
        "a buffer still registered was freed (a device could write into its reused pages)"
    );
}
