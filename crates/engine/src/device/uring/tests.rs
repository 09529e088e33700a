//! Tests of the thread's ring: started reads, the wake poll, registered buffers.

use super::*;
use crate::device::ReadPart;
use ember_readbuf::ReadBuf;
use std::fs::File;
use std::io;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A pipe: a read of its read end started on the ring stays in flight until the write
/// end is written.
fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) returns.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors are fresh and owned by nothing else.
    unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
}

/// Start a read of 8 bytes of the pipe (at its current position) into a new buffer, tag
/// `tag`.
fn start_pipe_read(r: &File, tag: u64) {
    start_pipe_read_into(r, ReadBuf::new(8), tag);
}

/// Start a read of 8 bytes of the pipe into `buf`, tag `tag`.
fn start_pipe_read_into(r: &File, buf: ReadBuf, tag: u64) {
    let part = ReadPart { offset: u64::MAX, at: 0, len: 8 };
    assert!(start(r, buf, &[part], tag, true).is_ok());
}

/// Reap until `tag` is reported; its buffer and outcome.
fn reap_tag(tag: u64) -> (ReadBuf, io::Result<usize>) {
    let mut out = None;
    while out.is_none() {
        reap(1, None, &mut |t, buf, outcomes| {
            assert_eq!(t, tag);
            assert_eq!(outcomes.len(), 1, "one part");
            let o = match &outcomes[0] {
                Ok(n) => Ok(*n),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            out = Some((buf, o));
        });
    }
    out.unwrap()
}

/// The pipe is written after `after` whatever happens (so a test that fails does not
/// hang); the thread's handle.
fn write_later(mut w: File, after: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        let _ = w.write_all(b"pipedata");
    })
}

fn polling() -> Option<RawFd> {
    RING.with(|c| c.borrow().as_ref().and_then(|r| r.as_ref()).and_then(|r| r.polling))
}

#[test]
fn a_wait_with_a_socket_wakes_when_the_socket_is_readable() {
    if room() == 0 {
        eprintln!("no io_uring here: nothing to test");
        return;
    }
    let (r, w) = pipe();
    start_pipe_read(&r, 7);
    let (a, b) = UnixStream::pair().unwrap();
    let writer = write_later(w, Duration::from_secs(5));
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        (&b).write_all(b"x").unwrap();
        b
    });
    let t = Instant::now();
    let n = reap(1, Some(a.as_raw_fd()), &mut |t, _, _| panic!("tag {t} reported early"));
    let waited = t.elapsed();
    assert_eq!(n, 0, "the pipe read is still in flight");
    assert!(
        waited < Duration::from_secs(3),
        "the wait ended {waited:?} after it began: woken by the read, not the socket"
    );
    assert_eq!(polling(), None, "the poll fired");
    // The read in flight is reaped normally once its data comes.
    let (buf, n) = reap_tag(7);
    assert_eq!(n.unwrap(), 8);
    assert_eq!(buf.as_slice(), b"pipedata");
    writer.join().unwrap();
    drop(sender.join().unwrap());
}

#[test]
fn a_poll_left_armed_is_cancelled_before_its_socket_number_is_reused() {
    if room() == 0 {
        eprintln!("no io_uring here: nothing to test");
        return;
    }
    // A wait on socket `a` ends with the read: the poll on `a` stays armed.
    let (r, w) = pipe();
    start_pipe_read(&r, 1);
    let (a, a_peer) = UnixStream::pair().unwrap();
    let old = a.as_raw_fd();
    let first = write_later(w, Duration::from_millis(50));
    let mut got = 0;
    while got == 0 {
        got = reap(1, Some(old), &mut |t, _, o| {
            assert_eq!((t, o.len()), (1, 1));
            assert_eq!(*o[0].as_ref().unwrap(), 8);
        });
    }
    first.join().unwrap();
    assert_eq!(polling(), Some(old), "the poll on the first socket is still armed");
    // Done with the ring for now (no read in flight, no socket): the poll is dropped.
    assert_eq!(reap(0, None, &mut |t, _, _| panic!("tag {t}")), 0);
    assert_eq!(polling(), None, "the poll was cancelled");
    // A new socket takes the old one's number (the old one's peer stays open and quiet).
    let (c, d) = UnixStream::pair().unwrap();
    // SAFETY: `old` is `a`'s descriptor, replaced here by a copy of `c`'s; `a` is then
    // forgotten so that nothing closes the number twice.
    assert_eq!(unsafe { libc::dup2(c.as_raw_fd(), old) }, old);
    std::mem::forget(a);
    // SAFETY: `old` now owns the copy of `c`'s socket made above.
    let c = unsafe { UnixStream::from_raw_fd(old) };
    let (r2, w2) = pipe();
    start_pipe_read(&r2, 2);
    let writer = write_later(w2, Duration::from_secs(5));
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        (&d).write_all(b"x").unwrap();
        d
    });
    let t = Instant::now();
    let n = reap(1, Some(c.as_raw_fd()), &mut |t, _, _| panic!("tag {t} reported early"));
    let waited = t.elapsed();
    assert_eq!(n, 0);
    assert!(waited < Duration::from_secs(3), "woken after {waited:?}: a stale poll");
    assert_eq!(reap_tag(2).1.unwrap(), 8);
    writer.join().unwrap();
    drop((sender.join().unwrap(), a_peer));
}

#[test]
fn a_wait_on_another_socket_cancels_the_armed_poll_first() {
    if room() == 0 {
        eprintln!("no io_uring here: nothing to test");
        return;
    }
    let (r, w) = pipe();
    start_pipe_read(&r, 3);
    let (a, _a_peer) = UnixStream::pair().unwrap();
    let first = write_later(w, Duration::from_millis(50));
    let mut got = 0;
    while got == 0 {
        got = reap(1, Some(a.as_raw_fd()), &mut |t, _, _| assert_eq!(t, 3));
    }
    first.join().unwrap();
    assert_eq!(polling(), Some(a.as_raw_fd()));
    let (r2, w2) = pipe();
    start_pipe_read(&r2, 4);
    let (c, d) = UnixStream::pair().unwrap();
    let writer = write_later(w2, Duration::from_secs(5));
    (&d).write_all(b"x").unwrap();
    let t = Instant::now();
    assert_eq!(reap(1, Some(c.as_raw_fd()), &mut |t, _, _| panic!("tag {t}")), 0);
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_eq!(reap_tag(4).1.unwrap(), 8);
    writer.join().unwrap();
}

#[test]
fn a_registered_buffer_is_read_fixed_and_let_go_only_by_its_ring() {
    if room() == 0 {
        eprintln!("no io_uring here: nothing to test");
        return;
    }
    let mut buf = ReadBuf::new(8);
    assert!(register(&mut buf));
    assert!(buf.is_registered(), "marked: dropping it would leak it");
    assert!(!register(&mut buf), "registered already");
    let at = buf.as_ptr();
    let (r, w) = pipe();
    let fixed_before = fixed_reads_through_io_uring();
    // While its read is in flight the buffer is the ring's: nothing else holds it to ask for
    // it to be let go (the table's own refusal is tested in `registered.rs`).
    start_pipe_read_into(&r, buf, 6);
    let writer = write_later(w, Duration::from_millis(20));
    let (buf, n) = reap_tag(6);
    assert_eq!(n.unwrap(), 8, "the tag comes back as given");
    writer.join().unwrap();
    assert_eq!(buf.as_ptr(), at, "the same buffer back");
    assert_eq!(buf.as_slice(), b"pipedata");
    // Only this test registers buffers in this binary.
    assert_eq!(fixed_reads_through_io_uring() - fixed_before, 1, "a fixed read");
    let (mut buf, elsewhere) = std::thread::spawn(move || {
        let mut buf = buf;
        let ok = unregister(&mut buf);
        (buf, ok)
    })
    .join()
    .unwrap();
    assert!(!elsewhere, "another thread's ring does not hold it");
    assert!(buf.is_registered(), "still marked");
    assert!(unregister(&mut buf));
    assert!(!buf.is_registered(), "let go: dropping it frees it");
    assert!(!unregister(&mut buf), "already let go");
    // No longer registered: a plain read.
    let (r, w) = pipe();
    start_pipe_read_into(&r, buf, 7);
    let writer = write_later(w, Duration::from_millis(20));
    assert_eq!(reap_tag(7).1.unwrap(), 8);
    writer.join().unwrap();
    assert_eq!(fixed_reads_through_io_uring() - fixed_before, 1, "not a fixed read");
}

#[test]
fn a_reap_that_does_not_wait_still_sees_completions() {
    // The ring defers completions to this thread's waits: a reap that does not wait
    // must still have them posted, or a reader that polls without waiting never sees
    // its reads complete.
    if room() == 0 {
        eprintln!("no io_uring here: nothing to test");
        return;
    }
    let (r, mut w) = pipe();
    start_pipe_read(&r, 5);
    w.write_all(b"pipedata").unwrap();
    let mut seen = None;
    let t = Instant::now();
    while seen.is_none() && t.elapsed() < Duration::from_secs(3) {
        reap(0, None, &mut |t, buf, o| {
            seen = Some((t, *o[0].as_ref().unwrap(), buf.as_slice().to_vec()));
        });
        std::thread::sleep(Duration::from_millis(1));
    }
    let seen = seen.expect("a completed read never reported without waiting");
    assert_eq!(seen, (5, 8, b"pipedata".to_vec()));
}

#[test]
fn a_read_of_several_parts_comes_back_once_with_every_part_in_place() {
    if room() == 0 {
        eprintln!("no io_uring here: nothing to test");
        return;
    }
    let mut f = tempfile::tempfile().unwrap();
    let content: Vec<u8> = (0..3 * 4096).map(|i| (i / 4096 + 1) as u8 * 0x11).collect();
    f.write_all(&content).unwrap();
    let mut buf = ReadBuf::new(3 * 4096);
    buf.as_mut_slice().fill(0xEE);
    let at = buf.as_ptr();
    // The file's third page into the buffer's first, its first into the second; the third
    // is not read.
    let parts = [
        ReadPart { offset: 2 * 4096, at: 0, len: 4096 },
        ReadPart { offset: 0, at: 4096, len: 4096 },
    ];
    assert!(start(&f, buf, &parts, 9, true).is_ok());
    let mut back = None;
    while back.is_none() {
        reap(1, None, &mut |t, buf, o| {
            assert_eq!(t, 9);
            let o: Vec<usize> = o.iter().map(|x| *x.as_ref().unwrap()).collect();
            back = Some((buf, o));
        });
    }
    let (buf, outcomes) = back.unwrap();
    assert_eq!(outcomes, vec![4096, 4096], "each part's outcome, in the parts' order");
    assert_eq!(buf.as_ptr(), at, "the same buffer back");
    let b = buf.as_slice();
    assert!(b[..4096].iter().all(|&x| x == 0x33));
    assert!(b[4096..8192].iter().all(|&x| x == 0x11));
    assert!(b[8192..].iter().all(|&x| x == 0xEE), "untouched");
}

#[test]
fn a_part_outside_the_buffer_starts_nothing_and_hands_the_buffer_back() {
    let f = tempfile::tempfile().unwrap();
    let buf = ReadBuf::new(4096);
    let at = buf.as_ptr();
    for part in [
        ReadPart { offset: 0, at: 1, len: 4096 },
        ReadPart { offset: 0, at: 0, len: 4097 },
        ReadPart { offset: 0, at: usize::MAX, len: 2 },
    ] {
        let before = room();
        let Err(back) = start(&f, ReadBuf::new(4096), &[part], 1, true) else {
            panic!("{part:?} was started");
        };
        assert_eq!(back.len(), 4096);
        assert_eq!(room(), before, "nothing in flight");
    }
    let Err(back) = start(&f, buf, &[], 1, true) else { panic!("no parts, started") };
    assert_eq!(back.as_ptr(), at, "the buffer back");
}
