//! READs a connection's reader started to complete later ([`Export::start_read`]: `ember
//! serve --direct`, whose hits wait on the O_DIRECT cache device): each READ hit is started
//! as soon as it is parsed, and the reader reaps completions and sends their replies while
//! it keeps parsing, so about as many device reads stay in flight as the client keeps
//! requests (the device queue no longer drains between runs of requests, as it did
//! when a run was read, waited for and answered before the next was parsed; `read_run.rs`).
//!
//! Each READ in flight has a slot, whose buffer ([`ReadBuf`]: 4 KiB-aligned, as O_DIRECT
//! needs) is handed to the export by value when the READ starts and comes back with its
//! outcome when it completes: the reply is sent from it and it waits in its slot for the
//! next READ, so nothing is allocated per READ once the slots have grown. A buffer in flight
//! is the export's: this file never holds a pointer into it, and one that never comes back
//! (an export that lost a READ, or panicked) stays with the export, which leaks it rather
//! than free it under a device. Dropping the READs first waits for every one still in flight
//! ([`StartedReads::drain`]), a client that disconnects with READs in flight included.
//! Replies join the connection's [`HitBatch`]; a READ that failed goes the ordinary way
//! (admitted, then a worker), which reports its error properly.
//!
//! Each slot's buffer is registered with the export when it is made and unregistered
//! before it is dropped ([`Export::register_read_buffer`]: ember's O_DIRECT cache then reads
//! into it without pinning its pages on every READ); one the export does not let go of
//! stays marked registered, and dropping it leaks it, never frees it.
//!
//! Bounded: at most [`MAX_READS`] READs and [`MAX_BYTES`] of data in flight per connection.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;

use super::hit_batch::HitBatch;
use super::job::ConnShared;
use super::worker::{guarded, read_head, read_header};
use crate::export::{Export, ReadStart};
use crate::proto;
use crate::request::Request;
use ember_readbuf::{ReadBuf, ALIGN};

/// Largest READ started this way.
pub(crate) const MAX_ONE: usize = 64 << 10;
/// READs in flight at most (the engine's ring holds 64 device reads).
pub(crate) const MAX_READS: usize = 64;
/// Data bytes in flight at most.
pub(crate) const MAX_BYTES: usize = 256 << 10;
/// A reader that waits for READs to complete waits for this fraction of those in flight
/// (at least one), or until the socket is readable when it waits for the client too: their
/// replies leave together and the client sends as many new requests at once, while the
/// other half keeps the device busy. Fewer returns than answering each one on a machine
/// whose cores the client shares.
const WAIT_DIV: usize = 2;
/// While requests are buffered, the READs started are handed to the device every this many
/// (each hand-off also collects the completions that are in, so their replies leave
/// sooner). Eight: the kernel plugs a hand-off of more than two reads (io_uring's
/// `need_plug`), so the group reaches a virtio disk with one doorbell; handed over in twos,
/// each O_DIRECT read rang its own, a VM exit that was a fifth of the server's CPU on the
/// session-21 machine (perf). There, one server per build and fio's O_DIRECT limit
/// interleaved round by round (ember / limit at iodepth 32, per-round medians): 0.45
/// with 2, 0.51 with 3 and 4, 0.56 with 8, 0.55 with every READ held until the socket is
/// drained. The best group depends on the machine: on the session-15 machine, whose disk
/// took 255 us a read and whose system calls were cheaper, a READ waiting for its group of 8
/// left the disk idle, and 2 was ahead (median of 11 runs 0.83 against 0.775 over 10 with 8;
/// bench/serve, docs/benchmarks.md).
pub(crate) const SUBMIT_EVERY: usize = 8;
/// A connection starts READs while at most this many of its requests or reply batches are
/// in flight elsewhere (on workers, or queued for the writer thread when the socket did not
/// take a batch at once): the replies a client does not read stay bounded, and one READ
/// sent to a worker does not switch the connection's hits to the workers for good.
pub(crate) const QUEUED: usize = 4;

/// One READ in flight, or a free slot.
struct Slot {
    /// The slot's buffer while no READ of it is in flight (`None` while one is, or before
    /// the slot's first READ).
    buf: Option<ReadBuf>,
    /// The READ in flight here.
    read: Option<(Request, Instant)>,
}

/// Drop a slot's buffer, unregistered from `export` first; one the export does not let go
/// of stays marked registered, and is leaked (its registration could still let a device
/// write into it).
fn release(export: &dyn Export, mut buf: ReadBuf) {
    if buf.is_registered() {
        export.unregister_read_buffer(&mut buf);
    }
    drop(buf);
}

/// What [`StartedReads::start`] did with a READ.
pub(crate) enum Started {
    /// In flight; its reply follows when it is reaped.
    InFlight,
    /// Served at once: its reply is in the batch.
    Served,
    /// Not now: it needs what a READ in flight holds (a stripe, room on the device); reap
    /// some and start it again. Never while nothing is in flight.
    Busy,
    /// Not taken: the READ goes the ordinary way.
    Ordinary,
}

/// The READs of one connection in flight.
pub(crate) struct StartedReads {
    export: Arc<dyn Export>,
    slots: Vec<Slot>,
    /// Free slot numbers.
    free: Vec<usize>,
    /// READs in flight, and their data bytes (aligned).
    count: usize,
    bytes: usize,
    /// READs started since the last reap.
    unsubmitted: usize,
    /// Most READs in flight at once since none was.
    peak: usize,
    /// Whether the client kept several READs in flight before the last time none was.
    deep: bool,
}

impl StartedReads {
    /// No READ in flight yet; slots are made as needed.
    pub(crate) fn new(export: Arc<dyn Export>) -> StartedReads {
        StartedReads {
            export,
            slots: Vec::new(),
            free: Vec::new(),
            count: 0,
            bytes: 0,
            unsubmitted: 0,
            peak: 0,
            deep: false,
        }
    }

    /// Whether no READ is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether the client kept several READs in flight until the last time none was (its
    /// queue depth, as seen here): a READ that then arrives alone is the first of the next
    /// burst, not a client at depth 1, and is started, not read at once on this thread.
    pub(crate) fn deep(&self) -> bool {
        self.deep
    }

    /// READs started since the last [`StartedReads::reap`] (their device reads are handed
    /// to the device by the next one).
    pub(crate) fn unsubmitted(&self) -> usize {
        self.unsubmitted
    }

    /// Whether a READ of `len` bytes fits now.
    pub(crate) fn has_room(&self, len: usize) -> bool {
        self.count < MAX_READS && self.bytes + len.next_multiple_of(ALIGN) <= MAX_BYTES
    }

    /// The buffer of slot `at` for a READ of `len` bytes: its own if large enough, else a
    /// new one (registered with the export; the old one released). `None` if no memory.
    fn buffer(&mut self, at: usize, len: usize) -> Option<ReadBuf> {
        let export = self.export.as_ref();
        let mut buf = match self.slots.get_mut(at)?.buf.take() {
            Some(buf) if buf.capacity() >= len => buf,
            old => {
                if let Some(old) = old {
                    release(export, old);
                }
                let mut buf = ReadBuf::try_new(len)?;
                if export.register_read_buffer(&mut buf) {
                    // Marked by the export already; marked here too, so that no export can
                    // have it freed while registered.
                    buf.set_registered();
                }
                buf
            }
        };
        buf.set_len(len).then_some(buf)
    }

    /// Start a validated READ of 1..=[`MAX_ONE`] bytes (the caller made room,
    /// [`StartedReads::has_room`]).
    pub(crate) fn start(
        &mut self,
        conn: &ConnShared,
        request: &Request,
        received: Instant,
        batch: &mut HitBatch,
    ) -> Started {
        let len = request.length as usize;
        if len == 0 || len > MAX_ONE || !self.has_room(len) {
            return Started::Ordinary;
        }
        let at = match self.free.pop() {
            Some(at) => at,
            None => {
                self.slots.push(Slot { buf: None, read: None });
                self.slots.len() - 1
            }
        };
        let Some(buf) = self.buffer(at, len) else {
            self.free.push(at);
            return Started::Ordinary;
        };
        let export = self.export.as_ref();
        let outcome = guarded(|| Ok(export.start_read(request.offset, buf, at as u64)));
        let back = match outcome {
            Ok(ReadStart::Started) => {
                self.slots[at].read = Some((*request, received));
                self.count += 1;
                self.peak = self.peak.max(self.count);
                self.unsubmitted += 1;
                self.bytes += len.next_multiple_of(ALIGN);
                return Started::InFlight;
            }
            Ok(ReadStart::Done(buf, Ok(()))) => {
                reply(conn, request, received, buf.as_slice(), batch);
                (Some(buf), Started::Served)
            }
            Ok(ReadStart::Busy(buf)) if self.count > 0 => (Some(buf), Started::Busy),
            // Declined, no room, or failed: nothing in flight.
            Ok(ReadStart::Declined(buf) | ReadStart::Busy(buf) | ReadStart::Done(buf, Err(_))) => {
                (Some(buf), Started::Ordinary)
            }
            // The export panicked: the buffer stayed with it (with a device read into it
            // perhaps in flight); the slot gets a new one.
            Err(_) => (None, Started::Ordinary),
        };
        let (buf, started) = back;
        self.slots[at].buf = buf;
        self.free.push(at);
        started
    }

    /// Reap the READs that completed (with `wait`, at least one unless none is in flight, or
    /// until `wake` (the connection's socket) is readable, whichever comes first): replies of
    /// the served ones join `batch` (flushed when full), the failed ones are added to `failed`
    /// for the ordinary path. Returns how many were reaped.
    pub(crate) fn reap(
        &mut self,
        conn: &ConnShared,
        wait: bool,
        wake: Option<RawFd>,
        batch: &mut HitBatch,
        failed: &mut Vec<(Request, Instant)>,
    ) -> usize {
        if self.count == 0 {
            return 0;
        }
        self.unsubmitted = 0;
        let export = Arc::clone(&self.export);
        let mut reaped = 0;
        let want = if wait { (self.count / WAIT_DIV).max(1) } else { 0 };
        export.reap_reads(want, wake, &mut |tag, buf, outcome| {
            let at = tag as usize;
            let Some(slot) = self.slots.get_mut(at) else { return };
            let Some((request, received)) = slot.read.take() else { return };
            let len = request.length as usize;
            self.count -= 1;
            self.bytes -= len.next_multiple_of(ALIGN);
            reaped += 1;
            match outcome {
                Ok(()) => reply(conn, &request, received, buf.as_slice(), batch),
                Err(_) => failed.push((request, received)),
            }
            slot.buf = Some(buf);
            self.free.push(at);
        });
        if self.count == 0 {
            self.deep = self.peak > 1;
            self.peak = 0;
        }
        reaped
    }

    /// Wait for every READ in flight, as [`StartedReads::reap`].
    pub(crate) fn drain(
        &mut self,
        conn: &ConnShared,
        batch: &mut HitBatch,
        failed: &mut Vec<(Request, Instant)>,
    ) {
        let mut idle = 0u32;
        while self.count > 0 {
            // A wait may complete part of a READ only (reported when all its parts are in).
            if self.reap(conn, true, None, batch, failed) == 0 {
                idle += 1;
                if self.lost(idle) {
                    break;
                }
            } else {
                idle = 0;
            }
        }
    }

    /// After `idle` waits in a row reported nothing with READs in flight: true if the export
    /// lost them (cannot happen with ember's engine, whose waits block until a device read
    /// completes); their buffers then stay with the export, which never frees one under a
    /// device that might still write into it.
    fn lost(&mut self, idle: u32) -> bool {
        if idle < 1_000_000 {
            return false;
        }
        eprintln!(
            "ember-nbd: {} READs in flight never completed; their buffers stay with the export",
            self.count
        );
        for slot in &mut self.slots {
            slot.read = None;
        }
        self.count = 0;
        self.bytes = 0;
        true
    }
}

/// Add a served READ's reply to the batch.
fn reply(
    conn: &ConnShared,
    request: &Request,
    received: Instant,
    data: &[u8],
    batch: &mut HitBatch,
) {
    let head = read_head(conn.structured);
    let len = data.len();
    let (h, d) = batch.tail(head, len);
    d.copy_from_slice(data);
    read_header(h, conn.structured, request, proto::REPLY_FLAG_DONE, len);
    batch.commit(head, len, received);
    if batch.full() {
        batch.flush(&conn.replies);
    }
}

impl Drop for StartedReads {
    /// Wait for every READ still in flight, so its buffer comes back (its reply is dropped:
    /// the connection is gone), let the export forget the socket, then release the buffers.
    fn drop(&mut self) {
        let mut idle = 0u32;
        while self.count > 0 {
            let export = Arc::clone(&self.export);
            let mut got = 0;
            export.reap_reads(1, None, &mut |tag, buf, _| {
                if let Some(slot) = self.slots.get_mut(tag as usize) {
                    if slot.read.take().is_some() {
                        got += 1;
                        slot.buf = Some(buf);
                    }
                }
            });
            self.count -= got.min(self.count);
            idle = if got == 0 { idle + 1 } else { 0 };
            if self.lost(idle) {
                break;
            }
        }
        // With nothing in flight, a reap without a socket lets the export drop the wait on
        // this connection's socket it may still hold (the poll on the engine's ring).
        self.export.reap_reads(0, None, &mut |_, _, _| {});
        for slot in &mut self.slots {
            if let Some(buf) = slot.buf.take() {
                release(self.export.as_ref(), buf);
            }
        }
    }
}
