//! Reads that complete later: started with [`start`] (into any buffer, or with
//! `IORING_OP_READ_FIXED` into a registered one), their buffers handed back by [`reap`],
//! which may also wake on a descriptor through the poll of `poll.rs`. A started read is a
//! flight of one or more parts (device reads into its buffer), `flights.rs`.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;

use ember_readbuf::ReadBuf;
use io_uring::{opcode, types};

use super::flights::{Flight, Flights, Outcomes};
use super::poll::{arm_poll, cancel_poll};
use super::{new_ring, submit, took, Ring, ENTRIES, FIXED_READS, LATER, POLL, RING, URING_READS};
use crate::device::{ReadPart, ReadsDone};

/// How many more reads (parts) [`start`] can take now on this thread (0 without io_uring).
pub(crate) fn room() -> usize {
    RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return 0 };
        match slot.get_or_insert_with(new_ring) {
            Some(r) => ENTRIES as usize - r.later,
            None => 0,
        }
    })
}

/// Start reading `parts` of `file` into `buf`: `buf` is lent to the ring until the
/// completions of all of them are in, then handed back with `tag` by a later [`reap`] on this
/// thread. `Err(buf)` (nothing started) if this thread has no ring or no room for them all,
/// or a part does not lie inside the buffer's length: the caller reads another way. A
/// buffer registered with [`register`](fn@super::register) is read with
/// `IORING_OP_READ_FIXED`. Submitted to the kernel at once when `now`, else at the next
/// [`start`] with `now` or [`reap`].
pub(crate) fn start(
    file: &File,
    buf: ReadBuf,
    parts: &[ReadPart],
    tag: u64,
    now: bool,
) -> Result<(), ReadBuf> {
    RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return Err(buf) };
        let Some(r) = slot.get_or_insert_with(new_ring).as_mut() else { return Err(buf) };
        let n = parts.len();
        let inside = |p: &ReadPart| {
            p.len <= u32::MAX as usize && p.at.checked_add(p.len).is_some_and(|e| e <= buf.len())
        };
        if n == 0 || n > ENTRIES as usize - r.later || !parts.iter().all(inside) {
            return Err(buf);
        }
        let free = {
            let sq = r.ring.submission();
            sq.capacity() - sq.len()
        };
        if free < n {
            return Err(buf);
        }
        let Some(at) = r.flights.take_number() else { return Err(buf) };
        let fd = types::Fd(file.as_raw_fd());
        let fixed = r.registered.lookup(buf.as_ptr() as usize, buf.len());
        let buf = buf.lend();
        let mut pushed = 0;
        {
            let mut sq = r.ring.submission();
            for (k, p) in parts.iter().enumerate() {
                let ptr = buf.as_mut_ptr().wrapping_add(p.at);
                let ud = Flights::user_data(at, k);
                let entry = match fixed {
                    Some(index) => opcode::ReadFixed::new(fd, ptr, p.len as u32, index)
                        .offset(p.offset)
                        .build()
                        .user_data(ud),
                    None => opcode::Read::new(fd, ptr, p.len as u32)
                        .offset(p.offset)
                        .build()
                        .user_data(ud),
                };
                // SAFETY: the kernel writes `p.len` bytes at `ptr`, inside the lent buffer
                // (`p.at + p.len <= len`, checked above), which this ring's flight holds
                // from here on: nothing reads, writes, moves or frees it until the
                // completions of all its parts are reaped, and the loan leaks it if the ring
                // is dropped first. A fixed read's buffer is registered in this ring's table
                // (`lookup`), which lets go of it only with no read into it in flight.
                if unsafe { sq.push(&entry) }.is_err() {
                    break;
                }
                pushed += 1;
            }
        }
        if pushed == 0 {
            r.flights.give_back(at);
            // SAFETY: none of its reads reached the kernel.
            return Err(unsafe { buf.reclaim() });
        }
        // Parts the queue did not take (it had room for all: cannot happen) are reported
        // failed, for the caller to read another way.
        let mut outcomes = Outcomes::new();
        outcomes.extend((0..n).map(|k| {
            if k < pushed {
                Ok(0)
            } else {
                Err(io::Error::from_raw_os_error(libc::EAGAIN))
            }
        }));
        if let Some(index) = fixed {
            for _ in 0..pushed {
                r.registered.read_started(index);
            }
        }
        r.flights.open(at, Flight { buf, tag, left: pushed, outcomes, fixed });
        r.later += pushed;
        r.unsubmitted += pushed;
        r.unsubmitted_reads += pushed;
        if now {
            submit(r);
        }
        Ok(())
    })
}

/// Hand back the buffers of the reads started with [`start`] on this thread whose parts all
/// completed, `done(tag, buf, outcomes)` each, `outcomes[k]` part `k`'s: the bytes read
/// (fewer than asked: a short read, for the caller to finish another way) or the error;
/// first wait until at least `wait` parts have completed (at most as many as are in flight;
/// 0: no waiting), or, with `wake`, until that descriptor is readable (or hung up),
/// whichever comes first. Returns how many buffers were handed back.
///
/// `wake` must be an open descriptor; the poll armed on it holds its own reference to the
/// file until it fires or is cancelled: by a wait on another descriptor, by a reap without
/// `wake` that leaves no read in flight and either waited or found none in flight (call one
/// before closing the descriptor), or when the thread's ring is dropped.
pub(crate) fn reap(wait: usize, wake: Option<RawFd>, done: &mut ReadsDone<'_>) -> usize {
    let mut finished = Vec::new();
    let mut reads = 0u64;
    let mut fixed = 0u64;
    RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return };
        let Some(Some(r)) = slot.as_mut() else { return };
        let target = wait.min(r.later);
        // A call with nothing in flight, or one that waits: see the cancellation below.
        let settles = r.later == 0 || wait > 0;
        let mut errors = 0u32;
        let mut woken = false;
        let mut got = 0usize;
        take_stash(r, &mut got, &mut fixed);
        loop {
            // Completions deferred to this thread are posted by an enter (GETEVENTS).
            if r.ring.submission().taskrun() {
                let _ = r.ring.submit();
            }
            for cqe in r.ring.completion() {
                let ud = cqe.user_data();
                if ud & LATER != 0 {
                    if let Some(f) = r.flights.complete(ud, cqe.result(), &mut r.registered) {
                        got += 1;
                        fixed += u64::from(f);
                    }
                } else if ud == POLL {
                    r.polling = None;
                    woken = true;
                }
            }
            if got >= target || (woken && wake.is_some()) {
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
                    take_stash(r, &mut got, &mut fixed);
                    continue;
                }
                Some(fd) => arm_poll(r, fd),
                None => false,
            };
            // Submit what was pushed and wait, in one system call: for the first event when
            // the socket is polled too (a read or the poll: the loop checks which), else for
            // the reads wanted.
            let want = if polled { 1 } else { target - got };
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
        r.later -= got.min(r.later);
        reads = got as u64;
        // No read left in flight and no socket to wait on, from a call that waited (a
        // connection draining its READs) or that found nothing in flight (one ending): the
        // caller is done with the ring for now. A poll left armed would hold its socket, and
        // could be taken for one on a later socket of the same number. (A reap that only
        // collects while READs are being started keeps the poll for the next wait.)
        if wake.is_none() && settles && r.later == 0 && r.polling.is_some() {
            cancel_poll(r);
        }
        finished = std::mem::take(&mut r.flights.finished);
    });
    if reads > 0 {
        URING_READS.fetch_add(reads, Ordering::Relaxed);
        FIXED_READS.fetch_add(fixed, Ordering::Relaxed);
    }
    let count = finished.len();
    for f in finished.drain(..) {
        done(f.tag, f.buf, &f.outcomes);
    }
    // The list's memory goes back for the next reap (unless a reap made from `done` left
    // reads finished in the list the ring holds now: those wait for the next reap).
    RING.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            if let Some(Some(r)) = slot.as_mut() {
                if r.flights.finished.is_empty()
                    && r.flights.finished.capacity() < finished.capacity()
                {
                    r.flights.finished = finished;
                }
            }
        }
    });
    count
}

/// Record the read completions the poll's cancellation set aside (`poll.rs`), counting the
/// parts (`got`) and the fixed reads among them.
fn take_stash(r: &mut Ring, got: &mut usize, fixed: &mut u64) {
    let mut stash = std::mem::take(&mut r.stash);
    for (ud, res) in stash.drain(..) {
        if let Some(f) = r.flights.complete(ud, res, &mut r.registered) {
            *got += 1;
            *fixed += u64::from(f);
        }
    }
    r.stash = stash;
}
