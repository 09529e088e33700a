//! `Volume::start_hit` / `Volume::reap_hits` (`ember serve --direct` at depth):
//! READ hits whose io_uring reads complete later. Served byte-exact; a write to a block
//! whose READ is in flight waits until that READ is reaped (its stripe and pin are held
//! across the reader's loop); a second READ of a block in flight is refused as busy, never
//! deadlocks the thread; a failed ring read is read again plainly, a clean block from
//! backing if the cache cannot (the cached copy dropped), a dirty block's failure becomes
//! the READ's I/O error, and the engine serves on. READs into a buffer registered with
//! `Volume::register_hit_buffer` are fixed reads of the ring, byte-exact as the others. Each
//! READ's buffer is handed in by value and comes back, the same buffer, with its outcome.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::{
    fixed_reads_through_io_uring, reads_through_io_uring, FileDevice, FileOptions, Identity,
    ReadBuf,
};
use ember_engine::{Device, EngineError, HitStart, Volume, WriteMode};
use ember_testkit::devices::{Wrap, Wrapper};
use ember_testkit::engine::*;
use ember_testkit::io_uring_available;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// An O_DIRECT cache file whose ring reads can be made to fail: with `ring_fails` each read
/// started on the ring completes (the kernel did read it) but is reported with EIO, as a
/// failed completion of a dying medium would be; with `reads_fail` plain reads fail too.
struct FlakyRing {
    inner: FileDevice,
    ring_fails: AtomicBool,
    reads_fail: AtomicBool,
}

impl Wrapper for FlakyRing {
    fn inner(&self) -> &dyn Device {
        &self.inner
    }
    fn describe(&self) -> String {
        "flaky ring".into()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.reads_fail.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.read_at(offset, buf)
    }
    fn starts_reads(&self) -> bool {
        true
    }
    fn reaped(&self, outcomes: &[io::Result<usize>]) -> Option<Vec<io::Result<usize>>> {
        let eio = || Err(io::Error::from_raw_os_error(libc::EIO));
        self.ring_fails.load(Ordering::SeqCst).then(|| outcomes.iter().map(|_| eio()).collect())
    }
    fn identity(&self) -> io::Result<Identity> {
        self.inner.identity()
    }
}

fn flaky(dir: &std::path::Path) -> Arc<Wrap<FlakyRing>> {
    let inner = FileDevice::open(
        &dir.join("cache.img"),
        FileOptions { direct: true, create_size: Some(2 << 20), exclusive: false },
    )
    .expect("O_DIRECT cache file");
    Arc::new(Wrap(FlakyRing {
        inner,
        ring_fails: AtomicBool::new(false),
        reads_fail: AtomicBool::new(false),
    }))
}

/// Reap until every tag of `want` is reported; the buffers and outcomes by tag.
fn reap_all(v: &Volume, want: usize) -> HashMap<u64, (ReadBuf, Result<(), EngineError>)> {
    let mut got = HashMap::new();
    while got.len() < want {
        let before = got.len();
        v.reap_hits(1, None, &mut |tag, buf, r| {
            assert!(got.insert(tag, (buf, r)).is_none(), "tag {tag} reported twice");
        });
        if got.len() == before {
            assert!(v.hits_in_flight() > 0, "READs lost: {} of {want} reported", got.len());
        }
    }
    assert_eq!(v.hits_in_flight(), 0);
    got
}

/// Start a READ of `buf.len()` bytes at `offset` that must be in flight afterwards.
fn started(v: &Volume, offset: u64, buf: ReadBuf, tag: u64) {
    let s = v.start_hit(offset, buf, tag);
    assert!(matches!(s, HitStart::Started), "READ {tag} at {offset}: {s:?}");
}

/// The one READ `tag` in flight, reaped: its buffer and outcome.
fn reap_one(v: &Volume, tag: u64) -> (ReadBuf, Result<(), EngineError>) {
    reap_all(v, 1).remove(&tag).expect("the READ's tag")
}

#[test]
fn started_hits_are_byte_exact_and_a_write_waits_for_the_read_in_flight_on_its_block() {
    if !io_uring_available() {
        // Without a ring nothing is ever in flight (start_hit reads at once): nothing to test.
        eprintln!("no io_uring here");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dev = flaky(dir.path());
    let rig = Rig::new(dev.clone(), 1, 128, 31);
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let old = rig.model().remove(0);
    let bs = BS as usize;
    let mut scratch = vec![0u8; 48 * bs];
    v.read(0, &mut scratch).unwrap(); // blocks 0..48 cached
    let before = engine.stats().total;
    let uring_before = reads_through_io_uring();
    // 20 READs of 1 or 2 blocks, each into its own registered buffer; block 5 in READ 2.
    // Disjoint: blocks 1, 3-4, 5, 7-8, ...
    let plan: Vec<(u64, usize)> = (0..20u64).map(|i| (2 * i + 1, 1 + (i % 2) as usize)).collect();
    let fixed_before = fixed_reads_through_io_uring();
    let mut at = Vec::new();
    for (tag, &(b, n)) in plan.iter().enumerate() {
        let mut buf = ReadBuf::new(n * bs);
        assert!(v.register_hit_buffer(&mut buf), "registered");
        at.push(buf.as_ptr());
        started(&v, b * BS, buf, tag as u64);
    }
    assert_eq!(v.hits_in_flight(), plan.len());
    // A second READ of block 5 while the first is in flight: busy (its stripe is held by
    // this thread), not a deadlock, nothing done, the buffer handed back.
    let other = ReadBuf::new(bs);
    let other_at = other.as_ptr();
    let other = match v.start_hit(5 * BS, other, 99) {
        HitStart::Busy(buf) => buf,
        again => panic!("{again:?}"),
    };
    assert_eq!(other.as_ptr(), other_at);
    let new = vec![0x5Au8; bs];
    let wrote = AtomicBool::new(false);
    let mut buffers = Vec::new();
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            v.write(5 * BS, &new, false).unwrap();
            wrote.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(300));
        let early = wrote.load(Ordering::SeqCst);
        // Reap before any assertion, so a failure cannot leave the writer hung.
        let mut outcomes = reap_all(&v, plan.len());
        writer.join().unwrap();
        assert!(!early, "the write to block 5 was acknowledged while its READ was in flight");
        for (tag, &(b, n)) in plan.iter().enumerate() {
            let (buf, r) = outcomes.remove(&(tag as u64)).unwrap();
            assert!(matches!(r, Ok(())), "READ {tag}");
            assert_eq!(buf.as_ptr(), at[tag], "READ {tag}'s own buffer came back");
            let want = b as usize * bs;
            assert!(buf.as_slice() == &old[want..want + n * bs], "READ {tag} of block {b}: bytes");
            buffers.push(buf);
        }
    });
    let after = engine.stats().total;
    let blocks: u64 = plan.iter().map(|&(_, n)| n as u64).sum();
    assert_eq!(after.read_hits - before.read_hits, blocks);
    assert_eq!(after.read_requests - before.read_requests, plan.len() as u64);
    assert_eq!(after.cache_read_bytes - before.cache_read_bytes, blocks * BS);
    assert!(reads_through_io_uring() - uring_before >= plan.len() as u64);
    // Only this test registers buffers in this process: every READ into them was fixed.
    assert!(fixed_reads_through_io_uring() - fixed_before >= plan.len() as u64);
    let fixed_after = fixed_reads_through_io_uring();
    // After the write, a started READ of block 5 sees it.
    started(&v, 5 * BS, other, 0);
    let (other, r) = reap_one(&v, 0);
    assert!(matches!(r, Ok(())));
    assert_eq!(other.as_slice(), &new[..]);
    assert_eq!(fixed_reads_through_io_uring(), fixed_after, "`other` is not registered");
    for mut buf in buffers {
        assert!(v.unregister_hit_buffer(&mut buf), "unregistered before it is freed");
        assert!(!v.unregister_hit_buffer(&mut buf), "only once");
    }
}

#[test]
fn a_failed_ring_read_is_read_again_and_a_dirty_block_it_cannot_read_is_an_io_error() {
    if !io_uring_available() {
        eprintln!("no io_uring here");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dev = flaky(dir.path());
    let rig = Rig::new(dev.clone(), 1, 128, 32);
    let engine = rig.open(WriteMode::WriteBackFlush).unwrap();
    let v = exports(&engine, &rig).remove(0);
    let old = rig.model().remove(0);
    let bs = BS as usize;
    let mut scratch = vec![0u8; 8 * bs];
    v.read(0, &mut scratch).unwrap(); // blocks 0..8 cached, clean
    let dirty = vec![0xC3u8; bs];
    v.write(9 * BS, &dirty, false).unwrap(); // block 9 cached, dirty (write-back)
    let buf = ReadBuf::new(bs);
    // Clean block 2: the ring read fails, the plain read again succeeds: served from the
    // cache, nothing dropped.
    dev.ring_fails.store(true, Ordering::SeqCst);
    let before = engine.stats().total;
    started(&v, 2 * BS, buf, 0);
    let (buf, r) = reap_one(&v, 0);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(buf.as_slice(), &old[2 * bs..3 * bs]);
    assert_eq!(engine.stats().total.invalidations, before.invalidations);
    assert!(v.resident(2 * BS, BS));
    // Clean block 3, the medium failing too: read from backing and served right, the
    // unreadable cached copy dropped.
    dev.reads_fail.store(true, Ordering::SeqCst);
    started(&v, 3 * BS, buf, 1);
    let (buf, r) = reap_one(&v, 1);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(buf.as_slice(), &old[3 * bs..4 * bs]);
    let after = engine.stats().total;
    assert_eq!(after.invalidations - before.invalidations, 1, "the copy of block 3 dropped");
    assert!(!v.resident(3 * BS, BS));
    // Dirty block 9, the medium failing: the only copy is unreadable, so the READ fails with
    // the I/O error (the server turns it into NBD_EIO) instead of serving backing's stale
    // bytes.
    started(&v, 9 * BS, buf, 2);
    let (buf, r) = reap_one(&v, 2);
    match r {
        Err(EngineError::Io(e)) => assert!(e.to_string().contains("os error 5"), "{e}"),
        other => panic!("dirty block 9 with a failing medium: {other:?}"),
    }
    // The medium back: the engine serves on, block 9's dirty data intact.
    dev.ring_fails.store(false, Ordering::SeqCst);
    dev.reads_fail.store(false, Ordering::SeqCst);
    started(&v, 9 * BS, buf, 3);
    let (buf, r) = reap_one(&v, 3);
    assert!(matches!(r, Ok(())));
    assert_eq!(buf.as_slice(), &dirty[..]);
}
