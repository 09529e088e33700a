//! The one-shot poll of a [`reap`](super::reap)'s wake descriptor: armed on the thread's ring,
//! and cancelled (its completion awaited) before it could be taken for a poll of another
//! descriptor of the same number.

use std::os::fd::RawFd;

use io_uring::{opcode, types};

use super::{submit, took, Ring, CANCEL, LATER, POLL};

/// Push a one-shot poll for `fd` becoming readable; false if the ring had no room (the
/// caller then waits for reads only).
pub(super) fn arm_poll(r: &mut Ring, fd: RawFd) -> bool {
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
/// seen meanwhile stay in the completion queue for [`reap`](super::reap).
pub(super) fn cancel_poll(r: &mut Ring) {
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
