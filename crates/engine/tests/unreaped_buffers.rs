//! A started read's buffer is never freed while the kernel may write into it: a thread that
//! ends with a read into it unreaped drops its ring, and with it the loan, which leaks the
//! buffer; a buffer still registered with a ring is leaked when dropped. A buffer handed back
//! by `Device::reap_reads` (and unregistered, if it was registered) is freed as usual.
//!
//! This binary's allocator counts frees of the memory that holds a watched address.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::sync::Arc;

use ember_engine::device::{FileDevice, FileOptions, ReadBuf, ReadPart};
use ember_engine::Device;
use ember_testkit::watching_alloc::{self, exclusive, Watching};

#[global_allocator]
static ALLOCATOR: Watching = Watching;

const BS: usize = 4096;

/// An O_DIRECT cache file of 16 blocks, each filled with its number plus one; `None` where
/// O_DIRECT is refused.
fn direct_device(dir: &tempfile::TempDir) -> Option<Arc<FileDevice>> {
    let path = dir.path().join("cache.img");
    let dev = FileDevice::open(
        &path,
        FileOptions { direct: true, create_size: Some(16 * BS as u64), exclusive: false },
    )
    .ok()?;
    for b in 0..16u8 {
        let mut block = ReadBuf::new(BS);
        block.as_mut_slice().fill(b + 1);
        dev.write_at(u64::from(b) * BS as u64, block.as_slice()).ok()?;
    }
    Some(Arc::new(dev))
}

/// Watch `b`'s memory while `on_thread` runs on a new thread that it ends with; how many
/// frees of that memory happened until the thread (and its ring) is gone. `None`: the
/// thread's device started nothing (no io_uring here).
fn frees_across_thread(
    dev: &Arc<FileDevice>,
    b: ReadBuf,
    on_thread: impl FnOnce(&FileDevice, ReadBuf) -> bool + Send + 'static,
) -> Option<usize> {
    let dev = Arc::clone(dev);
    let mut started = false;
    let freed = watching_alloc::frees_while(b.as_ptr() as usize, || {
        started = std::thread::spawn(move || on_thread(&dev, b)).join().unwrap();
    });
    started.then_some(freed)
}

/// Start a read of block 3 into `buf`'s first block, tag 1; whether it started.
fn start(dev: &FileDevice, buf: ReadBuf) -> bool {
    let part = ReadPart { offset: 3 * BS as u64, at: 0, len: BS };
    dev.start_read(buf, &[part], 1, true).is_ok()
}

/// Reap until the read tagged 1 comes back; its buffer, checked.
fn reap(dev: &FileDevice) -> ReadBuf {
    let mut back = None;
    while back.is_none() {
        dev.reap_reads(1, None, &mut |tag, buf, outcomes| {
            assert_eq!(tag, 1);
            assert_eq!(outcomes.len(), 1);
            assert_eq!(*outcomes[0].as_ref().unwrap(), BS);
            back = Some(buf);
        });
    }
    let buf = back.unwrap();
    assert!(buf.as_slice()[..BS].iter().all(|&x| x == 4), "block 3's bytes");
    buf
}

#[test]
fn a_thread_that_ends_with_a_read_unreaped_leaks_its_buffer() {
    let _one = exclusive();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(dev) = direct_device(&dir) else {
        eprintln!("no O_DIRECT here: nothing to test");
        return;
    };
    let Some(freed) = frees_across_thread(&dev, ReadBuf::new(2 * BS), start) else {
        eprintln!("no io_uring here: nothing to test");
        return;
    };
    assert_eq!(freed, 0, "a buffer the kernel may still write into was freed");
    // The control: reaped, it comes back and is freed when dropped.
    let freed = frees_across_thread(&dev, ReadBuf::new(2 * BS), |dev, buf| {
        let at = buf.as_ptr();
        let started = start(dev, buf);
        let back = reap(dev);
        assert_eq!(back.as_ptr(), at, "the same buffer back");
        drop(back);
        started
    });
    assert_eq!(freed, Some(1));
}

#[test]
fn a_registered_buffer_is_freed_only_once_its_ring_let_go_of_it() {
    let _one = exclusive();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(dev) = direct_device(&dir) else {
        eprintln!("no O_DIRECT here: nothing to test");
        return;
    };
    for let_go in [false, true] {
        let freed = frees_across_thread(&dev, ReadBuf::new(BS), move |dev, mut buf| {
            if !dev.register_read_buffer(&mut buf) {
                return false;
            }
            assert!(buf.is_registered());
            let started = start(dev, buf);
            let mut back = reap(dev);
            assert!(back.is_registered(), "still registered after its read");
            if let_go {
                assert!(dev.unregister_read_buffer(&mut back));
                assert!(!back.is_registered());
            }
            drop(back);
            started
        });
        let Some(freed) = freed else {
            eprintln!("no registered buffers here: nothing to test");
            return;
        };
        if let_go {
            assert_eq!(freed, 1, "unregistered, then freed");
        } else {
            assert_eq!(freed, 0, "a buffer still registered with a ring was freed");
        }
    }
}
