//! Reads waited for together: every read of [`read_many`] is submitted at once and waited
//! for before it returns, so no buffer is written after its owner got it back; without a
//! ring, or while reads started with `start` hold it, they are read one after another.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;

use io_uring::{opcode, types, IoUring};

use super::{new_ring, ENTRIES, HANDOFFS, POLL, RING, URING_READS};

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
/// is in flight and the caller reads them another way). A poll armed by [`reap`](super::reap) that
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
