//! Tests of the thread's ring: started reads, the wake poll, registered buffers.

use super::*;
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

/// Start a read of the pipe (at its current position) into `buf`, tag `tag`.
fn start_pipe_read(r: &File, buf: &mut [u8; 8], tag: u64) {
    // SAFETY: `buf` outlives the read: every test reaps it before `buf` goes.
    assert!(unsafe { start(r, u64::MAX, buf.as_mut_ptr(), buf.len(), tag, true) });
}

/// Reap until `tag` is reported; its outcome.
fn reap_tag(tag: u64) -> io::Result<usize> {
    let mut out = None;
    while out.is_none() {
        reap(1, None, &mut |t, o| {
            assert_eq!(t, tag);
            out = Some(o);
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
    let mut buf = [0u8; 8];
    start_pipe_read(&r, &mut buf, 7);
    let (a, b) = UnixStream::pair().unwrap();
    let writer = write_later(w, Duration::from_secs(5));
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        (&b).write_all(b"x").unwrap();
        b
    });
    let t = Instant::now();
    let n = reap(1, Some(a.as_raw_fd()), &mut |t, _| panic!("tag {t} reported early"));
    let waited = t.elapsed();
    assert_eq!(n, 0, "the pipe read is still in flight");
    assert!(
        waited < Duration::from_secs(3),
        "the wait ended {waited:?} after it began: woken by the read, not the socket"
    );
    assert_eq!(polling(), None, "the poll fired");
    // The read in flight is reaped normally once its data comes.
    assert_eq!(reap_tag(7).unwrap(), 8);
    assert_eq!(&buf, b"pipedata");
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
    let mut buf = [0u8; 8];
    start_pipe_read(&r, &mut buf, 1);
    let (a, a_peer) = UnixStream::pair().unwrap();
    let old = a.as_raw_fd();
    let first = write_later(w, Duration::from_millis(50));
    let mut got = 0;
    while got == 0 {
        got = reap(1, Some(old), &mut |t, o| assert_eq!((t, o.unwrap()), (1, 8)));
    }
    first.join().unwrap();
    assert_eq!(polling(), Some(old), "the poll on the first socket is still armed");
    // Done with the ring for now (no read in flight, no socket): the poll is dropped.
    assert_eq!(reap(0, None, &mut |t, _| panic!("tag {t}")), 0);
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
    let mut buf2 = [0u8; 8];
    start_pipe_read(&r2, &mut buf2, 2);
    let writer = write_later(w2, Duration::from_secs(5));
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        (&d).write_all(b"x").unwrap();
        d
    });
    let t = Instant::now();
    let n = reap(1, Some(c.as_raw_fd()), &mut |t, _| panic!("tag {t} reported early"));
    let waited = t.elapsed();
    assert_eq!(n, 0);
    assert!(waited < Duration::from_secs(3), "woken after {waited:?}: a stale poll");
    assert_eq!(reap_tag(2).unwrap(), 8);
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
    let mut buf = [0u8; 8];
    start_pipe_read(&r, &mut buf, 3);
    let (a, _a_peer) = UnixStream::pair().unwrap();
    let first = write_later(w, Duration::from_millis(50));
    let mut got = 0;
    while got == 0 {
        got = reap(1, Some(a.as_raw_fd()), &mut |t, _| assert_eq!(t, 3));
    }
    first.join().unwrap();
    assert_eq!(polling(), Some(a.as_raw_fd()));
    let (r2, w2) = pipe();
    let mut buf2 = [0u8; 8];
    start_pipe_read(&r2, &mut buf2, 4);
    let (c, d) = UnixStream::pair().unwrap();
    let writer = write_later(w2, Duration::from_secs(5));
    (&d).write_all(b"x").unwrap();
    let t = Instant::now();
    assert_eq!(reap(1, Some(c.as_raw_fd()), &mut |t, _| panic!("tag {t}")), 0);
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_eq!(reap_tag(4).unwrap(), 8);
    writer.join().unwrap();
}

#[test]
fn a_registered_buffer_is_read_fixed_and_not_let_go_while_read_into() {
    if room() == 0 {
        eprintln!("no io_uring here: nothing to test");
        return;
    }
    let mut buf = Box::new([0u8; 8]);
    let p = buf.as_mut_ptr();
    // SAFETY: `buf` lives until after it is unregistered below.
    assert!(unsafe { register(p, 8) });
    // SAFETY: as above (refused, so nothing is registered twice).
    assert!(!unsafe { register(p.wrapping_add(4), 8) }, "an overlapping range");
    let (r, w) = pipe();
    let fixed_before = fixed_reads_through_io_uring();
    start_pipe_read(&r, &mut buf, 6);
    assert!(!unregister(p), "let go while a read into it is in flight");
    let writer = write_later(w, Duration::from_millis(20));
    assert_eq!(reap_tag(6).unwrap(), 8, "the tag comes back without the index bits");
    writer.join().unwrap();
    assert_eq!(&*buf, b"pipedata");
    // Only this test registers buffers in this binary.
    assert_eq!(fixed_reads_through_io_uring() - fixed_before, 1, "a fixed read");
    let addr = p as usize;
    let elsewhere = std::thread::spawn(move || unregister(addr as *mut u8)).join().unwrap();
    assert!(!elsewhere, "another thread's ring does not hold it");
    assert!(unregister(p));
    assert!(!unregister(p), "already let go");
    // No longer registered: a plain read.
    let (r, w) = pipe();
    start_pipe_read(&r, &mut buf, 7);
    let writer = write_later(w, Duration::from_millis(20));
    assert_eq!(reap_tag(7).unwrap(), 8);
    writer.join().unwrap();
    assert_eq!(fixed_reads_through_io_uring() - fixed_before, 1, "not a fixed read");
    drop(buf);
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
    let mut buf = [0u8; 8];
    start_pipe_read(&r, &mut buf, 5);
    w.write_all(b"pipedata").unwrap();
    let mut seen = None;
    let t = Instant::now();
    while seen.is_none() && t.elapsed() < Duration::from_secs(3) {
        reap(0, None, &mut |t, o| seen = Some((t, o.unwrap())));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(seen, Some((5, 8)), "a completed read never reported without waiting");
    assert_eq!(&buf, b"pipedata");
}
