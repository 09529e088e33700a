//! Reads that complete later: started with [`start`] (into any buffer, or with
//! `IORING_OP_READ_FIXED` into a registered one), reported by [`reap`], which may also wake
//! on a descriptor through the poll of `poll.rs`.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;

use io_uring::{opcode, types};

use super::poll::{arm_poll, cancel_poll};
use super::{
    new_ring, submit, took, ENTRIES, FIXED, FIXED_READS, INDEX_SHIFT, LATER, POLL, RING, TAG_LIMIT,
    URING_READS,
};

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
/// with [`register`](fn@super::register) is read with `IORING_OP_READ_FIXED`. Submitted to
/// the kernel at once when `now`, else at the next [`start`] with `now` or [`reap`].
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
