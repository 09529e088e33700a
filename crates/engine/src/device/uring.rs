//! Several reads of an O_DIRECT file in flight at once, through an io_uring of the calling
//! thread (made on first use, kept for the thread's life). An O_DIRECT read waits on the
//! medium; a connection's cache hits at iodepth 32 read one after another on one thread
//! would leave the device at queue depth 1. Without io_uring (an old kernel, a sandbox that
//! forbids it) the reads are done one after another with `pread`.
//!
//! Every read submitted by [`read_many`] is waited for before it returns, so no buffer is
//! written after its owner got it back.
//!
//! The same ring also carries reads that complete later ([`start`], reaped by [`reap`]):
//! a connection's reader (`ember serve --direct`) keeps parsing requests while their hits'
//! reads are in flight (issue 14). Their completions carry [`LATER`] in their user data;
//! while any is in flight [`read_many`] reads with `pread` instead (the ring's room belongs
//! to them, and its completions to [`reap`]).
//!
//! A [`reap`] that waits may also wake when a descriptor becomes readable (the connection's
//! socket): a one-shot poll of it rides on the same ring, so the reader sleeps in one system
//! call until either a read completes or the client sends more requests, and starts those at
//! once instead of after the reads it waited for. The poll stays armed across waits until it
//! fires; one armed for another descriptor is cancelled (and its completion awaited) first.
//!
//! A buffer registered with this thread's ring ([`register`], `registered.rs`) is read into
//! with `IORING_OP_READ_FIXED` by [`start`]: its pages were pinned once, at registration,
//! instead of on every read.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use io_uring::{opcode, types, IoUring};

use super::registered::{Registered, SLOTS};

/// Reads completed through io_uring by this process.
static URING_READS: AtomicU64 = AtomicU64::new(0);
/// Of those, reads into a registered buffer.
static FIXED_READS: AtomicU64 = AtomicU64::new(0);
/// System calls that handed reads to the kernel.
static HANDOFFS: AtomicU64 = AtomicU64::new(0);

/// How many reads this process has completed through io_uring (zero where io_uring is not
/// available): for tests and reports.
pub fn reads_through_io_uring() -> u64 {
    URING_READS.load(Ordering::Relaxed)
}

/// How many of [`reads_through_io_uring`] went into a registered buffer
/// ([`crate::device::Device::register_read_buffer`]).
pub fn fixed_reads_through_io_uring() -> u64 {
    FIXED_READS.load(Ordering::Relaxed)
}

/// How many `io_uring_enter` calls of this process handed reads to the kernel: with
/// [`reads_through_io_uring`], the reads a hand-off carried on average. The kernel plugs a
/// hand-off of more than two entries, so its reads reach the disk together (one doorbell of
/// a virtio disk, where each is a VM exit).
pub fn read_handoffs_through_io_uring() -> u64 {
    HANDOFFS.load(Ordering::Relaxed)
}

/// Entries of a thread's ring: reads in flight at most.
const ENTRIES: u32 = 64;

/// The user-data bit of a read started with [`start`].
const LATER: u64 = 1 << 63;
/// The user data of the poll of a [`reap`]'s wake descriptor.
const POLL: u64 = 1 << 62;
/// The user data of the cancellation of that poll.
const CANCEL: u64 = POLL | 1;
/// The user-data bit of a read started with [`start`] into a registered buffer, whose table
/// index is in the bits at [`INDEX_SHIFT`].
const FIXED: u64 = 1 << 61;
/// Where a fixed read's table index sits in its user data.
const INDEX_SHIFT: u32 = 48;
/// Tags of [`start`] are below this (the bits above carry the flags and the index).
const TAG_LIMIT: u64 = 1 << INDEX_SHIFT;

/// A thread's ring and the reads started on it that complete later.
struct Ring {
    ring: IoUring,
    /// Reads started with [`start`] and not yet reaped.
    later: usize,
    /// Entries (reads, a poll, a cancellation) pushed but not yet submitted to the kernel.
    unsubmitted: usize,
    /// Of those, reads.
    unsubmitted_reads: usize,
    /// The descriptor a poll is armed on (pushed, its completion not yet seen).
    polling: Option<RawFd>,
    /// Completions of reads taken out of the completion queue while waiting for a poll's
    /// cancellation, reported by the next [`reap`].
    stash: Vec<(u64, i32)>,
    /// The buffers registered with this ring.
    registered: Registered,
}

thread_local! {
    /// This thread's ring: `None` before the first use; `Some(None)` when io_uring is not
    /// available here.
    static RING: RefCell<Option<Option<Ring>>> = const { RefCell::new(None) };
}

/// This thread's ring: only this thread submits to it and waits on it, so its completions
/// are deferred to this thread's waits (`IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN`, Linux
/// 6.1): a completion does not interrupt the thread, and a wait for `n` events sleeps until
/// `n` are in (`TASKRUN_FLAG` tells when some wait to be run). A kernel without them gets a
/// plain ring.
fn new_ring() -> Option<Ring> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_taskrun_flag()
        .build(ENTRIES)
        .or_else(|_| IoUring::new(ENTRIES))
        .ok()?;
    // An empty table whose entries `register` fills one at a time (Linux 5.19); without it
    // every read pins its buffer as before.
    let registered = match ring.submitter().register_buffers_sparse(u32::from(SLOTS)) {
        Ok(()) => Registered::with_table(),
        Err(_) => Registered::none(),
    };
    Some(Ring {
        ring,
        later: 0,
        unsubmitted: 0,
        unsubmitted_reads: 0,
        polling: None,
        stash: Vec::new(),
        registered,
    })
}

/// Register `len` bytes at `buf` with this thread's ring, so that reads into them started
/// here skip pinning their pages. False: not registered (no ring, no table, no free entry,
/// a range overlapping one registered, or the kernel refused); reads into it work as before.
///
/// # Safety
///
/// `buf` must be valid for `len` bytes and stay allocated until [`unregister`] on this
/// thread returned true for it; if that never happens, it must never be freed.
pub(crate) unsafe fn register(buf: *mut u8, len: usize) -> bool {
    RING.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return false };
        let Some(r) = slot.get_or_insert_with(new_ring).as_mut() else { return false };
        let Ring { ring, registered, .. } = r;
        registered.add(buf as usize, len, |index| {
            let iov = libc::iovec { iov_base: buf.cast(), iov_len: len };
            // SAFETY: the caller keeps `buf` allocated while it is registered.
            unsafe { ring.submitter().register_buffers_update(u32::from(index), &[iov], None) }
                .is_ok()
        })
    })
    .unwrap_or(false)
}

/// Unregister the buffer registered at `buf` by [`register`] on this thread. True: it is no
/// longer registered and may be freed. False: it must not be freed (not registered on this
/// thread's ring, a read into it still in flight, or the kernel refused).
pub(crate) fn unregister(buf: *mut u8) -> bool {
    RING.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return false };
        let Some(Some(r)) = slot.as_mut() else { return false };
        let Ring { ring, registered, .. } = r;
        registered.remove(buf as usize, |index| {
            let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
            // SAFETY: an empty entry refers to no memory.
            unsafe { ring.submitter().register_buffers_update(u32::from(index), &[empty], None) }
                .is_ok()
        })
    })
    .unwrap_or(false)
}

/// How many more reads [`start`] can take now on this thread (0 without io_uring).
pub(crate) fn room() -> usize {
    RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return 0 };
        match slot.get_or_insert_with(new_ring) {
            Some(r) => ENTRIES as usize - r.later,
            None => 0,
        }
    })
}

/// Start reading `len` bytes at `offset` of `file` into `buf`; its completion is reported
/// by a later [`reap`] with `tag` (below 2^48). False (nothing started) if this thread
/// has no ring or no room: the caller reads another way. A `buf` inside a buffer registered
/// with [`register`] is read with `IORING_OP_READ_FIXED`. Submitted to the kernel at once
/// when `now`, else at the next [`start`] with `now` or [`reap`].
///
/// # Safety
///
/// `buf` must be valid for writes of `len` bytes, and neither read, written nor freed by
/// anyone until [`reap`] on this thread reported `tag`: the kernel writes into it meanwhile.
pub(crate) unsafe fn start(
    file: &File,
    offset: u64,
    buf: *mut u8,
    len: usize,
    tag: u64,
    now: bool,
) -> bool {
    RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return false };
        let Some(r) = slot.get_or_insert_with(new_ring).as_mut() else { return false };
        if r.later >= ENTRIES as usize || len > u32::MAX as usize || tag >= TAG_LIMIT {
            return false;
        }
        let fd = types::Fd(file.as_raw_fd());
        let fixed = r.registered.lookup(buf as usize, len);
        let entry = match fixed {
            Some(index) => opcode::ReadFixed::new(fd, buf, len as u32, index)
                .offset(offset)
                .build()
                .user_data(tag | LATER | FIXED | u64::from(index) << INDEX_SHIFT),
            None => {
                opcode::Read::new(fd, buf, len as u32).offset(offset).build().user_data(tag | LATER)
            }
        };
        // SAFETY: the caller keeps `buf` valid and untouched until the completion is reaped.
        if unsafe { r.ring.submission().push(&entry) }.is_err() {
            return false;
        }
        if let Some(index) = fixed {
            r.registered.read_started(index);
        }
        r.later += 1;
        r.unsubmitted += 1;
        r.unsubmitted_reads += 1;
        if now {
            submit(r);
        }
        true
    })
}

/// Hand every pushed entry to the kernel (and run the completions deferred to this thread).
/// An entry the kernel cannot take now stays queued for the next call (it is not in flight
/// yet, its buffer untouched).
fn submit(r: &mut Ring) {
    if r.unsubmitted == 0 && !r.ring.submission().taskrun() {
        return;
    }
    if let Ok(n) = r.ring.submit() {
        took(r, n);
    }
}

/// The kernel took `n` of the entries pushed (in the order pushed): count a hand-off of
/// reads.
fn took(r: &mut Ring, n: usize) {
    if n == 0 {
        return;
    }
    if r.unsubmitted_reads > 0 {
        HANDOFFS.fetch_add(1, Ordering::Relaxed);
    }
    r.unsubmitted_reads =
        if n >= r.unsubmitted { 0 } else { r.unsubmitted_reads.saturating_sub(n) };
    r.unsubmitted = r.unsubmitted.saturating_sub(n);
}

/// Report the completed reads started with [`start`] on this thread, `done(tag, outcome)`
/// each, the outcome the bytes read (fewer than asked: a short read, for the caller to
/// finish another way) or the error; first wait until at least `wait` of them have
/// completed (at most as many as are in flight; 0: no waiting), or, with `wake`, until that
/// descriptor is readable (or hung up), whichever comes first. Returns how many were
/// reported.
///
/// `wake` must be an open descriptor; the poll armed on it holds its own reference to the
/// file until it fires or is cancelled: by a wait on another descriptor, by a reap without
/// `wake` that leaves no read in flight and either waited or found none in flight (call one
/// before closing the descriptor), or when the thread's ring is dropped.
pub(crate) fn reap(
    wait: usize,
    wake: Option<RawFd>,
    done: &mut dyn FnMut(u64, io::Result<usize>),
) -> usize {
    let mut got: Vec<(u64, i32)> = Vec::new();
    let mut fixed = 0u64;
    RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return };
        let Some(Some(r)) = slot.as_mut() else { return };
        let target = wait.min(r.later);
        // A call with nothing in flight, or one that waits: see the cancellation below.
        let settles = r.later == 0 || wait > 0;
        let mut errors = 0u32;
        let mut woken = false;
        got.append(&mut r.stash);
        loop {
            // Completions deferred to this thread are posted by an enter (GETEVENTS).
            if r.ring.submission().taskrun() {
                let _ = r.ring.submit();
            }
            for cqe in r.ring.completion() {
                let ud = cqe.user_data();
                if ud & LATER != 0 {
                    got.push((ud, cqe.result()));
                } else if ud == POLL {
                    r.polling = None;
                    woken = true;
                }
            }
            if got.len() >= target || (woken && wake.is_some()) {
                submit(r);
                break;
            }
            // Wait on the socket too: arm its poll (once; it stays armed until it fires).
            let polled = match wake {
                Some(fd) if r.polling == Some(fd) => true,
                Some(_) if r.polling.is_some() => {
                    // Armed on another descriptor: cancel it first (reads that completed
                    // meanwhile are counted by the next round).
                    cancel_poll(r);
                    got.append(&mut r.stash);
                    continue;
                }
                Some(fd) => arm_poll(r, fd),
                None => false,
            };
            // Submit what was pushed and wait, in one system call: for the first event when
            // the socket is polled too (a read or the poll: the loop checks which), else for
            // the reads wanted.
            let want = if polled { 1 } else { target - got.len() };
            match r.ring.submit_and_wait(want) {
                Ok(n) => {
                    took(r, n);
                    errors = 0;
                }
                Err(_) => {
                    // Interrupted or busy while reads are in flight: wait again; they must
                    // complete before their buffers are handed back.
                    errors += 1;
                    if errors > 100_000 {
                        eprintln!(
                            "ember: io_uring wait keeps failing with reads in flight; aborting"
                        );
                        std::process::abort();
                    }
                }
            }
        }
        r.later -= got.len().min(r.later);
        for (ud, _) in &got {
            if ud & FIXED != 0 {
                r.registered.read_ended(index_of(*ud));
                fixed += 1;
            }
        }
        // No read left in flight and no socket to wait on, from a call that waited (a
        // connection draining its READs) or that found nothing in flight (one ending): the
        // caller is done with the ring for now. A poll left armed would hold its socket, and
        // could be taken for one on a later socket of the same number. (A reap that only
        // collects while READs are being started keeps the poll for the next wait.)
        if wake.is_none() && settles && r.later == 0 && r.polling.is_some() {
            cancel_poll(r);
        }
    });
    URING_READS.fetch_add(got.len() as u64, Ordering::Relaxed);
    FIXED_READS.fetch_add(fixed, Ordering::Relaxed);
    for (ud, res) in &got {
        let outcome =
            if *res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(*res as usize) };
        done(ud & (TAG_LIMIT - 1), outcome);
    }
    got.len()
}

/// The table index in a fixed read's user data.
fn index_of(ud: u64) -> u16 {
    ((ud & !(LATER | POLL | FIXED)) >> INDEX_SHIFT) as u16
}

/// Push a one-shot poll for `fd` becoming readable; false if the ring had no room (the
/// caller then waits for reads only).
fn arm_poll(r: &mut Ring, fd: RawFd) -> bool {
    let mask = (libc::POLLIN | libc::POLLRDHUP) as u32;
    let entry = opcode::PollAdd::new(types::Fd(fd), mask).build().user_data(POLL);
    // SAFETY: a poll entry refers to no memory of ours.
    if unsafe { r.ring.submission().push(&entry) }.is_err() {
        return false;
    }
    r.unsubmitted += 1;
    r.polling = Some(fd);
    true
}

/// Cancel the armed poll and wait until its completion is seen (it fired, or was
/// cancelled): afterwards no poll of this ring refers to that descriptor. Read completions
/// seen meanwhile stay in the completion queue for [`reap`].
fn cancel_poll(r: &mut Ring) {
    let entry = opcode::AsyncCancel::new(POLL).build().user_data(CANCEL);
    // SAFETY: a cancellation refers to no memory of ours.
    while unsafe { r.ring.submission().push(&entry) }.is_err() {
        submit(r);
    }
    r.unsubmitted += 1;
    let mut errors = 0u32;
    let mut cancelled = false;
    while r.polling.is_some() || !cancelled {
        match r.ring.submit_and_wait(1) {
            Ok(n) => took(r, n),
            Err(_) => {
                errors += 1;
                if errors > 100_000 {
                    eprintln!("ember: io_uring poll cancellation keeps failing; aborting");
                    std::process::abort();
                }
                continue;
            }
        }
        // Take the poll's and the cancellation's completions out; keep the reads' for reap.
        for cqe in r.ring.completion() {
            match cqe.user_data() {
                POLL => r.polling = None,
                CANCEL => cancelled = true,
                ud if ud & LATER != 0 => r.stash.push((ud, cqe.result())),
                _ => {}
            }
        }
    }
}

/// Read every `(offset, buffer)` of `reads` from `file`, calling `done(i, outcome)` for
/// each; the reads go out together. Buffers and offsets must suit O_DIRECT (the caller
/// checked).
pub(crate) fn read_many(
    file: &File,
    reads: &mut [(u64, &mut [u8])],
    done: &mut dyn FnMut(usize, io::Result<()>),
) {
    let served = RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return false };
        let ring = slot.get_or_insert_with(new_ring);
        let Some(r) = ring.as_mut() else { return false };
        if r.later > 0 {
            // Reads started with `start` hold the ring's room: read these plainly.
            return false;
        }
        let mut base = 0;
        while base < reads.len() {
            let end = (base + ENTRIES as usize).min(reads.len());
            if !submit_and_reap(
                &mut r.ring,
                &mut r.polling,
                file,
                &mut reads[base..end],
                base,
                done,
            ) {
                // Nothing of this round was submitted: drop the ring, read the rest plainly.
                *ring = None;
                sequential(file, &mut reads[base..], base, done);
                return true;
            }
            base = end;
        }
        true
    });
    if !served {
        sequential(file, reads, 0, done);
    }
}

fn sequential(
    file: &File,
    reads: &mut [(u64, &mut [u8])],
    base: usize,
    done: &mut dyn FnMut(usize, io::Result<()>),
) {
    for (i, (offset, buf)) in reads.iter_mut().enumerate() {
        done(base + i, file.read_exact_at(buf, *offset));
    }
}

/// One round of at most [`ENTRIES`] reads: false if the kernel took none of them (then none
/// is in flight and the caller reads them another way). A poll armed by [`reap`] that
/// completes meanwhile is marked fired in `polling`.
fn submit_and_reap(
    ring: &mut IoUring,
    polling: &mut Option<RawFd>,
    file: &File,
    reads: &mut [(u64, &mut [u8])],
    base: usize,
    done: &mut dyn FnMut(usize, io::Result<()>),
) -> bool {
    let fd = types::Fd(file.as_raw_fd());
    let n = reads.len();
    {
        let mut sq = ring.submission();
        for (i, (offset, buf)) in reads.iter_mut().enumerate() {
            let entry = opcode::Read::new(fd, buf.as_mut_ptr(), buf.len() as u32)
                .offset(*offset)
                .build()
                .user_data(i as u64);
            // SAFETY: the buffer stays valid and unaliased until its completion is reaped
            // below: this function returns only once every submitted read has completed.
            if unsafe { sq.push(&entry) }.is_err() {
                // Cannot happen: the ring was empty and holds ENTRIES >= n entries.
                return false;
            }
        }
    }
    let mut submitted = false;
    let mut complete = vec![false; n];
    let mut left = n;
    let mut errors = 0u32;
    while left > 0 {
        match ring.submit_and_wait(left) {
            Ok(taken) => {
                if !submitted && taken > 0 {
                    HANDOFFS.fetch_add(1, Ordering::Relaxed);
                }
                submitted = true;
                errors = 0;
            }
            Err(e)
                if !submitted
                    && !matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) =>
            {
                // io_uring_enter failed before taking anything: nothing is in flight. The
                // entries still queued are discarded with the ring by the caller.
                return false;
            }
            Err(_) => {
                // Interrupted (or busy) while reads are in flight: wait again; they must
                // complete before their buffers are handed back.
                errors += 1;
                if errors > 100_000 {
                    eprintln!("ember: io_uring wait keeps failing with reads in flight; aborting");
                    std::process::abort();
                }
                continue;
            }
        }
        let cq = ring.completion();
        for cqe in cq {
            if cqe.user_data() == POLL {
                // The socket poll of an earlier reap fired: disarmed.
                *polling = None;
                continue;
            }
            let i = cqe.user_data() as usize;
            if i >= n || complete[i] {
                continue;
            }
            complete[i] = true;
            left -= 1;
            URING_READS.fetch_add(1, Ordering::Relaxed);
            let res = cqe.result();
            let (offset, buf) = &mut reads[i];
            let outcome = if res < 0 {
                Err(io::Error::from_raw_os_error(-res))
            } else if (res as usize) < buf.len() {
                // A short read (end of file, or the kernel split it): finish it plainly.
                let got = res as usize;
                file.read_exact_at(&mut buf[got..], *offset + got as u64)
            } else {
                Ok(())
            };
            done(base + i, outcome);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::FromRawFd;
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
}
