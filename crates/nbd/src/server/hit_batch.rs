//! The replies of consecutive cache hits on one connection's reader, sent together: while
//! the reader already holds the next request (the client keeps several in flight), a hit's
//! reply is read straight into this buffer behind the previous ones, and the whole run leaves
//! in one `send` when the reader runs out of buffered requests (or before it does anything
//! else, or when the batch is full). At queue depth 32 that is one system call for several
//! replies instead of one each; at depth 1 nothing is ever batched.
//!
//! A reply's data may also be *lent* instead of copied in ([`HitBatch::commit_lent`]: the
//! slot an io_uring read of `ember serve --direct` completed into, `started_reads.rs`): the
//! batch then leaves in one `sendmsg` whose iovecs alternate its own bytes (the headers) and
//! the lent buffers, so the data is copied once (by the kernel, into the socket) instead of
//! twice. A lent buffer is used until the next [`HitBatch::flush`] only: what the socket did
//! not take at once is copied out then (into the reply queued for the writer thread), and
//! the flush hands the lender's numbers back ([`HitBatch::take_returned`]).
//!
//! The batch is the reader's own memory, not charged to the connection's in-flight budget:
//! at most [`MAX_BYTES`] per connection (plus one reply), like the reusable reply buffer.

use std::io::IoSlice;
use std::time::Instant;

use super::replies::Replies;

/// Bytes a batch holds before it is sent.
pub(crate) const MAX_BYTES: usize = 256 << 10;
/// Replies a batch holds before it is sent.
const MAX_REPLIES: usize = 64;

/// A lent data part: it goes after the batch's own bytes up to `at`.
struct Lent {
    at: usize,
    ptr: *const u8,
    len: usize,
    /// The lender's number for it, handed back by the flush.
    id: usize,
}

/// Replies waiting to leave together.
pub(crate) struct HitBatch {
    /// The batch's own bytes (headers, and copied data) back to back in `bytes[..used]`;
    /// `bytes` keeps its length (a high-water mark) so appending never zeroes memory again.
    bytes: Vec<u8>,
    used: usize,
    /// Lent data parts, in order.
    lent: Vec<Lent>,
    /// Bytes of lent data.
    lent_bytes: usize,
    /// Numbers of lent parts the last flushes are done with.
    returned: Vec<usize>,
    /// Per reply: when its request was received, and its data bytes.
    replies: Vec<(Instant, u64)>,
}

impl HitBatch {
    /// An empty batch.
    pub(crate) fn new() -> HitBatch {
        HitBatch {
            bytes: Vec::new(),
            used: 0,
            lent: Vec::with_capacity(MAX_REPLIES),
            lent_bytes: 0,
            returned: Vec::with_capacity(MAX_REPLIES),
            replies: Vec::with_capacity(MAX_REPLIES),
        }
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// Whether the batch is full (send it now).
    pub(crate) fn full(&self) -> bool {
        self.used + self.lent_bytes >= MAX_BYTES || self.replies.len() >= MAX_REPLIES
    }

    /// Room for one more reply of `head` header and `len` data bytes at the end: its header
    /// and data parts. Nothing is added until [`HitBatch::commit`].
    pub(crate) fn tail(&mut self, head: usize, len: usize) -> (&mut [u8], &mut [u8]) {
        let end = self.used + head + len;
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        let (h, d) = self.bytes[self.used..end].split_at_mut(head);
        (h, d)
    }

    /// Add the reply prepared by [`HitBatch::tail`] with the same sizes.
    pub(crate) fn commit(&mut self, head: usize, len: usize, received: Instant) {
        self.used += head + len;
        self.replies.push((received, len as u64));
    }

    /// Add a reply whose `head` header bytes were written into [`HitBatch::tail`]`(head, 0)`
    /// and whose `len` data bytes are lent at `data`, under the lender's number `id` (handed
    /// back by the flush that is done with them, [`HitBatch::take_returned`]).
    ///
    /// # Safety
    ///
    /// `data` must stay valid for reads of `len` bytes, and unchanged, until the next
    /// [`HitBatch::flush`] returns (or the batch is dropped without one).
    pub(crate) unsafe fn commit_lent(
        &mut self,
        head: usize,
        data: *const u8,
        len: usize,
        id: usize,
        received: Instant,
    ) {
        self.used += head;
        self.lent.push(Lent { at: self.used, ptr: data, len, id });
        self.lent_bytes += len;
        self.replies.push((received, len as u64));
    }

    /// Move the numbers of the lent parts flushed since the last call into `into`: their
    /// buffers are the lender's again.
    pub(crate) fn take_returned(&mut self, into: &mut Vec<usize>) {
        into.append(&mut self.returned);
    }

    /// Send every waiting reply (one `send`, or one `sendmsg` with lent parts, when the
    /// socket takes them all; what it does not take is copied for the writer thread) and
    /// empty the batch: no lent buffer is used after this returns. Keeps the buffer unless it
    /// grew past what a batch holds.
    pub(crate) fn flush(&mut self, replies: &Replies) {
        if self.replies.is_empty() {
            return;
        }
        if self.lent.is_empty() {
            replies.send_batch(&[IoSlice::new(&self.bytes[..self.used])], &self.replies);
        } else {
            let mut parts: Vec<IoSlice<'_>> = Vec::with_capacity(2 * self.lent.len() + 1);
            let mut from = 0;
            for l in &self.lent {
                if l.at > from {
                    parts.push(IoSlice::new(&self.bytes[from..l.at]));
                }
                // SAFETY: `commit_lent`'s contract: valid and unchanged until this flush
                // returns.
                parts.push(IoSlice::new(unsafe { std::slice::from_raw_parts(l.ptr, l.len) }));
                from = l.at;
            }
            if self.used > from {
                parts.push(IoSlice::new(&self.bytes[from..self.used]));
            }
            replies.send_batch(&parts, &self.replies);
            self.returned.extend(self.lent.drain(..).map(|l| l.id));
            self.lent_bytes = 0;
        }
        self.used = 0;
        self.replies.clear();
        if self.bytes.len() > 2 * MAX_BYTES {
            self.bytes = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::Shared;
    use crate::stream::Stream;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    #[test]
    fn replies_are_laid_back_to_back() {
        let mut b = HitBatch::new();
        assert!(b.is_empty());
        let t = Instant::now();
        let (h, d) = b.tail(16, 4);
        h.fill(1);
        d.fill(2);
        b.commit(16, 4, t);
        // A tail that is not committed adds nothing.
        let (h, _) = b.tail(16, 100);
        h.fill(9);
        let (h, d) = b.tail(28, 3);
        h.fill(3);
        d.fill(4);
        b.commit(28, 3, t);
        assert!(!b.is_empty() && !b.full());
        let mut want = vec![1u8; 16];
        want.extend([2u8; 4]);
        want.extend([3u8; 28]);
        want.extend([4u8; 3]);
        assert_eq!(&b.bytes[..b.used], &want[..]);
        assert_eq!(b.replies.iter().map(|r| r.1).collect::<Vec<_>>(), vec![4, 3]);
    }

    #[test]
    fn full_by_bytes_or_by_count() {
        let t = Instant::now();
        let mut b = HitBatch::new();
        b.tail(16, MAX_BYTES);
        b.commit(16, MAX_BYTES, t);
        assert!(b.full());
        let mut b = HitBatch::new();
        for _ in 0..MAX_REPLIES {
            assert!(!b.full());
            b.tail(16, 0);
            b.commit(16, 0, t);
        }
        assert!(b.full());
        // Lent data counts too.
        let data = vec![0u8; MAX_BYTES];
        let mut b = HitBatch::new();
        b.tail(16, 0);
        // SAFETY: `data` outlives the batch.
        unsafe { b.commit_lent(16, data.as_ptr(), data.len(), 0, t) };
        assert!(b.full());
    }

    /// A connection's reply path on one end of a Unix socket pair whose send buffer is
    /// small (so a batch is sent in part), its writer thread running; the other end.
    fn small_socket() -> (std::sync::Arc<Replies>, std::thread::JoinHandle<()>, UnixStream) {
        use std::os::fd::AsRawFd;
        let (ours, peer) = UnixStream::pair().unwrap();
        let size: libc::c_int = 4096;
        // SAFETY: `ours` is an open socket; the option value is a c_int of that size.
        let rc = unsafe {
            libc::setsockopt(
                ours.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        let writer_end = Stream::Unix(ours.try_clone().unwrap());
        let replies = std::sync::Arc::new(Replies::new(
            Stream::Unix(ours),
            Shared::for_test(),
            None,
            64,
            64 << 20,
        ));
        let writer = {
            let r = std::sync::Arc::clone(&replies);
            std::thread::spawn(move || r.writer_loop(writer_end))
        };
        // A test that loses bytes fails instead of waiting for them for ever.
        peer.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        (replies, writer, peer)
    }

    /// 32 replies of 16 header bytes (`0xA0 + i`) and 4 KiB lent data (`i`), lent from
    /// `slots`.
    fn lend_all(b: &mut HitBatch, slots: &[Vec<u8>]) -> Vec<u8> {
        let t = Instant::now();
        let mut want = Vec::new();
        for (i, data) in slots.iter().enumerate() {
            let (h, _) = b.tail(16, 0);
            h.fill(0xA0 + i as u8);
            want.extend_from_slice(&[0xA0 + i as u8; 16]);
            want.extend_from_slice(data);
            // SAFETY: `slots` is neither changed nor dropped before the flush.
            unsafe { b.commit_lent(16, data.as_ptr(), data.len(), i, t) };
        }
        want
    }

    #[test]
    fn lent_data_the_socket_did_not_take_is_copied_before_the_flush_returns() {
        let (replies, writer, mut peer) = small_socket();
        let mut slots: Vec<Vec<u8>> = (0..32u8).map(|i| vec![i; 4096]).collect();
        let mut b = HitBatch::new();
        let want = lend_all(&mut b, &slots);
        assert!(!b.full());
        b.flush(&replies);
        // The socket took part of it only: the rest is queued for the writer thread.
        assert_eq!(replies.in_flight(), 1, "the batch was not sent in part");
        let mut back = Vec::new();
        b.take_returned(&mut back);
        assert_eq!(back, (0..32).collect::<Vec<_>>(), "every lent slot handed back");
        assert!(b.is_empty());
        // The lender reuses its slots at once: the bytes still to go must not change.
        for s in &mut slots {
            s.fill(0xEE);
        }
        let mut got = vec![0u8; want.len()];
        peer.read_exact(&mut got).unwrap();
        let first_bad = got.iter().zip(&want).position(|(a, b)| a != b);
        assert_eq!(first_bad, None, "the peer got other bytes than the replies'");
        replies.close();
        writer.join().unwrap();
    }

    #[test]
    fn a_peer_gone_with_a_batch_half_sent_ends_the_connection_and_returns_the_slots() {
        let (replies, writer, mut peer) = small_socket();
        let slots: Vec<Vec<u8>> = (0..32u8).map(|i| vec![i; 4096]).collect();
        let mut b = HitBatch::new();
        let want = lend_all(&mut b, &slots);
        b.flush(&replies);
        assert_eq!(replies.in_flight(), 1, "the batch was not sent in part");
        // The peer reads a little of it and goes.
        let mut got = vec![0u8; 1000];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(got, want[..1000]);
        drop(peer);
        // The writer's send fails: the queued rest is dropped and its admission ended.
        replies.close();
        writer.join().unwrap();
        assert_eq!(replies.in_flight(), 0);
        // A later batch on the dead connection is dropped, and its slots handed back too.
        let mut back = Vec::new();
        b.take_returned(&mut back);
        assert_eq!(back.len(), 32);
        lend_all(&mut b, &slots);
        b.flush(&replies);
        back.clear();
        b.take_returned(&mut back);
        assert_eq!(back.len(), 32);
        assert_eq!(replies.in_flight(), 0);
    }
}
