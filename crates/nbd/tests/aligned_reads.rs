//! READ data buffers are 4 KiB aligned, on the hit path (the reader's reusable buffer) and on
//! the worker path alike, so an O_DIRECT cache device (`ember serve --direct`) reads a hit
//! straight into the reply without a bounce buffer. Before the reusable reply buffers the
//! worker path read into a `Vec` after the reply header: 16 (or 28) bytes past an
//! allocation, never aligned. Batched replies (the next request already received) are not
//! aligned, and need not be: the server batches only hits served from memory.

use ember_nbd::server::ServerConfig;
use ember_nbd::{Export, ExportError, ExportMap, MemExport};
use ember_testkit::nbd::*;
use ember_testkit::{forward_geometry, forward_writes};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A memory export that records, for each read, whether its buffer was 4 KiB aligned;
/// `fast` says whether it serves reads at once (the hit path) or sends them to the workers.
struct Recording {
    inner: MemExport,
    fast: bool,
    aligned: AtomicU64,
    unaligned: AtomicU64,
}

impl Recording {
    fn note(&self, buf: &[u8]) {
        let counter = if (buf.as_ptr() as usize).is_multiple_of(4096) {
            &self.aligned
        } else {
            &self.unaligned
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

impl Export for Recording {
    forward_geometry!();
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        self.note(buf);
        self.inner.read(offset, buf)
    }
    fn read_is_fast(&self, _offset: u64, _len: u64) -> bool {
        self.fast
    }
    forward_writes!();
}

#[test]
fn read_buffers_are_aligned_on_the_hit_path_and_on_workers() {
    for fast in [true, false] {
        let export = Arc::new(Recording {
            inner: MemExport::new(1 << 20),
            fast,
            aligned: AtomicU64::new(0),
            unaligned: AtomicU64::new(0),
        });
        let content = pattern(3, 1 << 20);
        export.inner.write(0, &content, false).unwrap();
        let server = serve_with(
            ExportMap::new().with("disk", "recording", export.clone()),
            ServerConfig::default(),
        );
        for structured in [false, true] {
            let (mut raw, _, _) = Raw::go(server.tcp, "disk", structured);
            for i in 0..50u64 {
                let off = (i * 37 % 256) * 4096;
                raw.request(0, 0, i, off, 4096, &[]);
                let data = if structured {
                    let (flags, kind, cookie, payload) = raw.chunk();
                    assert_eq!((flags, kind, cookie), (1, 1, i), "one OFFSET_DATA chunk, DONE");
                    assert_eq!(u64::from_be_bytes(payload[..8].try_into().unwrap()), off);
                    payload[8..].to_vec()
                } else {
                    assert_eq!(raw.simple_reply(), (0, i));
                    raw.bytes(4096)
                };
                assert_eq!(data, content[off as usize..off as usize + 4096], "read {i}");
            }
        }
        let (aligned, unaligned) =
            (export.aligned.load(Ordering::SeqCst), export.unaligned.load(Ordering::SeqCst));
        assert_eq!((aligned, unaligned), (100, 0), "fast {fast}: aligned and unaligned reads");
        server.stop();
    }
}
