//! A run of READs a connection's reader already holds, offered to the export together
//! ([`Export::read_many_if_fast`](crate::Export::read_many_if_fast)) when its hits wait on a
//! device ([`Export::batches_reads`](crate::Export::batches_reads): `ember serve --direct`).
//! While the next request is already buffered, a READ joins the run instead of being served
//! or handed to a worker; when the reader runs out of buffered requests (or the run is full,
//! or another kind of request comes), the run is read in one call, with its device reads in
//! flight at once, the hits' replies join the connection's [`HitBatch`] and leave together,
//! and the READs the export declined take the ordinary path (admitted, then a worker).
//!
//! The data of each READ is read into its own 4 KiB-aligned slot of this buffer (O_DIRECT
//! needs the alignment; the batch's replies are back to back and not aligned) and copied
//! into the batch. The buffer is the reader's own memory, like the batch: at most
//! [`MAX_BYTES`] of data plus the alignment.

use std::time::Instant;

use super::hit_batch::HitBatch;
use super::job::ConnShared;
use super::worker::{guarded, read_head, read_header};
use crate::export::FastRead;
use crate::proto;
use crate::request::Request;

/// Alignment of each READ's data slot.
const ALIGN: usize = 4096;
/// Largest READ that joins a run.
pub(crate) const MAX_ONE: usize = 64 << 10;
/// Data bytes of a run before it is read.
const MAX_BYTES: usize = 256 << 10;
/// READs of a run before it is read.
const MAX_READS: usize = 64;

/// READs waiting to be read together.
pub(crate) struct ReadRun {
    reqs: Vec<(Request, Instant)>,
    /// Sum of the slots' aligned sizes.
    used: usize,
    buf: Vec<u8>,
}

impl ReadRun {
    /// An empty run.
    pub(crate) fn new() -> ReadRun {
        ReadRun { reqs: Vec::with_capacity(MAX_READS), used: 0, buf: Vec::new() }
    }

    /// Whether no READ waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether the run is full (read it now).
    pub(crate) fn full(&self) -> bool {
        self.reqs.len() >= MAX_READS || self.used >= MAX_BYTES
    }

    /// Add a validated READ of 1..=[`MAX_ONE`] bytes.
    pub(crate) fn push(&mut self, request: Request, received: Instant) {
        self.used += (request.length as usize).next_multiple_of(ALIGN);
        self.reqs.push((request, received));
    }

    /// Read the run: every READ the export served is added to `batch` (the caller sends
    /// it); returns the READs it declined or failed, for the ordinary path. Empties the run.
    pub(crate) fn read(
        &mut self,
        conn: &ConnShared,
        batch: &mut HitBatch,
    ) -> Vec<(Request, Instant)> {
        if self.reqs.is_empty() {
            return Vec::new();
        }
        let want = self.used + ALIGN;
        if self.buf.len() < want {
            self.buf = vec![0u8; want];
        }
        let skip = (ALIGN - self.buf.as_ptr() as usize % ALIGN) % ALIGN;
        let mut reads: Vec<FastRead<'_>> = Vec::with_capacity(self.reqs.len());
        let mut rest: &mut [u8] = &mut self.buf[skip..];
        for (request, _) in &self.reqs {
            let len = request.length as usize;
            let taken = std::mem::take(&mut rest);
            let (slot, tail) = taken.split_at_mut(len.next_multiple_of(ALIGN));
            rest = tail;
            reads.push(FastRead { offset: request.offset, buf: &mut slot[..len], outcome: None });
        }
        let export = conn.export.as_ref();
        let _ = guarded(|| {
            export.read_many_if_fast(&mut reads);
            Ok(())
        });
        let head = read_head(conn.structured);
        let mut declined = Vec::new();
        for (r, (request, received)) in reads.iter().zip(self.reqs.drain(..)) {
            match r.outcome {
                Some(Ok(())) => {
                    let len = r.buf.len();
                    let (h, d) = batch.tail(head, len);
                    d.copy_from_slice(r.buf);
                    read_header(h, conn.structured, &request, proto::REPLY_FLAG_DONE, len);
                    batch.commit(head, len, received);
                    if batch.full() {
                        batch.flush(&conn.replies);
                    }
                }
                _ => declined.push((request, received)),
            }
        }
        self.used = 0;
        if self.buf.len() > 2 * (MAX_BYTES + MAX_ONE + ALIGN) {
            self.buf = Vec::new();
        }
        declined
    }
}
