//! The replies of consecutive cache hits on one connection's reader, sent together: while
//! the reader already holds the next request (the client keeps several in flight), a hit's
//! reply is read straight into this buffer behind the previous ones, and the whole run leaves
//! in one `send` when the reader runs out of buffered requests (or before it does anything
//! else, or when the batch is full). At queue depth 32 that is one system call for several
//! replies instead of one each; at depth 1 nothing is ever batched.
//!
//! The batch is the reader's own memory, not charged to the connection's in-flight budget:
//! at most [`MAX_BYTES`] per connection (plus one reply), like the reusable reply buffer.

use std::time::Instant;

use super::replies::Replies;

/// Bytes a batch holds before it is sent.
pub(crate) const MAX_BYTES: usize = 256 << 10;
/// Replies a batch holds before it is sent.
const MAX_REPLIES: usize = 64;

/// Replies waiting to leave together.
pub(crate) struct HitBatch {
    /// The replies back to back in `bytes[..used]`; `bytes` keeps its length (a high-water
    /// mark) so appending never zeroes memory again.
    bytes: Vec<u8>,
    used: usize,
    /// Per reply: when its request was received, and its data bytes.
    replies: Vec<(Instant, u64)>,
}

impl HitBatch {
    /// An empty batch.
    pub(crate) fn new() -> HitBatch {
        HitBatch { bytes: Vec::new(), used: 0, replies: Vec::with_capacity(MAX_REPLIES) }
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// Whether the batch is full (send it now).
    pub(crate) fn full(&self) -> bool {
        self.used >= MAX_BYTES || self.replies.len() >= MAX_REPLIES
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

    /// Send every waiting reply (one `send` when the socket takes them all) and empty the
    /// batch. Keeps the buffer unless it grew past what a batch holds.
    pub(crate) fn flush(&mut self, replies: &Replies) {
        if self.replies.is_empty() {
            return;
        }
        replies.send_batch(&self.bytes[..self.used], &self.replies);
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
    }
}
