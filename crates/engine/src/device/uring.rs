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

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use io_uring::{opcode, types, IoUring};

/// Reads completed through io_uring by this process.
static URING_READS: AtomicU64 = AtomicU64::new(0);

/// How many reads this process has completed through io_uring (zero where io_uring is not
/// available): for tests and reports.
pub fn reads_through_io_uring() -> u64 {
    URING_READS.load(Ordering::Relaxed)
}

/// Entries of a thread's ring: reads in flight at most.
const ENTRIES: u32 = 64;

/// The user-data bit of a read started with [`start`].
const LATER: u64 = 1 << 63;

/// A thread's ring and the reads started on it that complete later.
struct Ring {
    ring: IoUring,
    /// Reads started with [`start`] and not yet reaped.
    later: usize,
    /// Of those, pushed but not yet submitted to the kernel.
    unsubmitted: usize,
}

thread_local! {
    /// This thread's ring: `None` before the first use; `Some(None)` when io_uring is not
    /// available here.
    static RING: RefCell<Option<Option<Ring>>> = const { RefCell::new(None) };
}

fn new_ring() -> Option<Ring> {
    let ring = IoUring::new(ENTRIES).ok()?;
    Some(Ring { ring, later: 0, unsubmitted: 0 })
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
/// by a later [`reap`] with `tag` (at most 2^63 - 1). False (nothing started) if this thread
/// has no ring or no room: the caller reads another way. Submitted to the kernel at once
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
        if r.later >= ENTRIES as usize || len > u32::MAX as usize {
            return false;
        }
        let entry = opcode::Read::new(types::Fd(file.as_raw_fd()), buf, len as u32)
            .offset(offset)
            .build()
            .user_data(tag | LATER);
        // SAFETY: the caller keeps `buf` valid and untouched until the completion is reaped.
        if unsafe { r.ring.submission().push(&entry) }.is_err() {
            return false;
        }
        r.later += 1;
        r.unsubmitted += 1;
        if now {
            submit(r);
        }
        true
    })
}

/// Hand every pushed entry to the kernel. An entry the kernel cannot take now stays queued
/// for the next call (it is not in flight yet, its buffer untouched).
fn submit(r: &mut Ring) {
    if r.unsubmitted == 0 {
        return;
    }
    if let Ok(n) = r.ring.submit() {
        r.unsubmitted = r.unsubmitted.saturating_sub(n);
    }
}

/// Report the completed reads started with [`start`] on this thread, `done(tag, outcome)`
/// each, the outcome the bytes read (fewer than asked: a short read, for the caller to
/// finish another way) or the error; first wait until at least `wait` of them have
/// completed (at most as many as are in flight; 0: no waiting). Returns how many were
/// reported.
pub(crate) fn reap(wait: usize, done: &mut dyn FnMut(u64, io::Result<usize>)) -> usize {
    let mut got: Vec<(u64, i32)> = Vec::new();
    RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return };
        let Some(Some(r)) = slot.as_mut() else { return };
        let target = wait.min(r.later);
        let mut errors = 0u32;
        loop {
            for cqe in r.ring.completion() {
                got.push((cqe.user_data(), cqe.result()));
            }
            if got.len() >= target {
                submit(r);
                break;
            }
            // Submit what was pushed and wait, in one system call.
            match r.ring.submit_and_wait(target - got.len()) {
                Ok(n) => {
                    r.unsubmitted = r.unsubmitted.saturating_sub(n);
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
        got.retain(|(ud, _)| ud & LATER != 0);
        r.later -= got.len().min(r.later);
    });
    URING_READS.fetch_add(got.len() as u64, Ordering::Relaxed);
    for (ud, res) in &got {
        let outcome =
            if *res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(*res as usize) };
        done(ud & !LATER, outcome);
    }
    got.len()
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
            if !submit_and_reap(&mut r.ring, file, &mut reads[base..end], base, done) {
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
/// is in flight and the caller reads them another way).
fn submit_and_reap(
    ring: &mut IoUring,
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
            Ok(_) => {
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
