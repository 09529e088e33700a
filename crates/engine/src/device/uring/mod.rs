//! Several reads of an O_DIRECT file in flight at once, through an io_uring of the calling
//! thread (made on first use, kept for the thread's life). An O_DIRECT read waits on the
//! medium; a connection's cache hits at iodepth 32 read one after another on one thread
//! would leave the device at queue depth 1. Without io_uring (an old kernel, a sandbox that
//! forbids it) the reads are done one after another with `pread`.
//!
//! Every read submitted by [`read_many`](fn@read_many) is waited for before it returns, so no
//! buffer is written after its owner got it back.
//!
//! The same ring also carries reads that complete later ([`start`], reaped by [`reap`]):
//! a connection's reader (`ember serve --direct`) keeps parsing requests while their hits'
//! reads are in flight. Their completions carry [`LATER`] in their user data;
//! while any is in flight [`read_many`](fn@read_many) reads with `pread` instead (the ring's
//! room belongs to them, and its completions to [`reap`]).
//!
//! A [`reap`] that waits may also wake when a descriptor becomes readable (the connection's
//! socket): a one-shot poll of it rides on the same ring, so the reader sleeps in one system
//! call until either a read completes or the client sends more requests, and starts those at
//! once instead of after the reads it waited for. The poll stays armed across waits until it
//! fires; one armed for another descriptor is cancelled (and its completion awaited) first.
//!
//! A buffer registered with this thread's ring ([`register`](fn@register), `registered.rs`) is
//! read into with `IORING_OP_READ_FIXED` by [`start`]: its pages were pinned once, at
//! registration, instead of on every read.
//!
//! The buffer of a read started with [`start`] is an owned [`ReadBuf`](ember_readbuf::ReadBuf),
//! lent to the ring ([`Lent`](ember_readbuf::Lent)) until every one of its reads completed,
//! then handed back by [`reap`]: nothing else can touch it meanwhile. A ring dropped with
//! reads in flight (its thread ended) leaks their buffers, never frees them under the kernel.
//! The `unsafe` of this module is where the kernel gets an address: the entries pushed (each
//! inside a buffer its flight holds) and the registrations (of a buffer marked registered,
//! which is never freed until the kernel's entry for it is emptied).
//!
//! - this file: the thread's ring, its constants and counters, and handing entries to the
//!   kernel;
//! - `register.rs`: registering a buffer with the thread's ring;
//! - `started.rs`: reads that complete later ([`start`], [`reap`], [`room`]) and the flights
//!   that hold their buffers;
//! - `poll.rs`: the one-shot poll of a [`reap`]'s wake descriptor, armed and cancelled;
//! - `read_many.rs`: reads waited for together ([`read_many`](fn@read_many)).

mod flights;
mod poll;
mod read_many;
mod register;
mod started;
#[cfg(test)]
mod tests;

pub(crate) use read_many::read_many;
pub(crate) use register::{register, unregister};
pub(crate) use started::{reap, room, start};

use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use io_uring::IoUring;

use super::registered::{Registered, SLOTS};
use flights::Flights;

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

/// The user-data bit of a read started with [`start`]: the bits at [`FLIGHT_SHIFT`] name its
/// flight (the started read it is a part of), the bits under [`PART_MASK`] the part.
const LATER: u64 = 1 << 63;
/// The user data of the poll of a [`reap`]'s wake descriptor.
const POLL: u64 = 1 << 62;
/// The user data of the cancellation of that poll.
const CANCEL: u64 = POLL | 1;
/// Where a started read's flight number sits in its parts' user data.
const FLIGHT_SHIFT: u32 = 16;
/// The part's number in a started read's user data.
const PART_MASK: u64 = (1 << FLIGHT_SHIFT) - 1;

/// A thread's ring and the reads started on it that complete later.
struct Ring {
    ring: IoUring,
    /// Reads (parts) started with [`start`] and not yet reaped.
    later: usize,
    /// The started reads in flight, each holding its buffer.
    flights: Flights,
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
        flights: Flights::new(ENTRIES as usize),
        unsubmitted: 0,
        unsubmitted_reads: 0,
        polling: None,
        stash: Vec::new(),
        registered,
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
