//! The reusable reply buffer of a thread (a connection's reader, a worker): a READ's data is
//! read straight into it, its header written just in front, and the whole reply leaves in
//! one `send` from it. The data starts on a 4 KiB boundary, so an O_DIRECT cache device
//! reads into it without a bounce buffer. Nothing is allocated or zeroed per request once
//! the buffer has grown to the largest read seen (up to [`KEEP`]; larger replies use a
//! one-off buffer).

use std::cell::RefCell;

/// Alignment of the data part (O_DIRECT's usual requirement).
const ALIGN: usize = 4096;

/// Largest data part a thread keeps between requests.
pub(crate) const KEEP: usize = 1 << 20;

/// One reply's bytes: header, then data aligned to [`ALIGN`].
pub(crate) struct ReplyBuf {
    buf: Vec<u8>,
    /// Index of the first data byte (aligned, and at least [`ALIGN`] so any header fits).
    data_at: usize,
}

impl ReplyBuf {
    /// An empty buffer (grows on first use).
    pub(crate) const fn new() -> ReplyBuf {
        ReplyBuf { buf: Vec::new(), data_at: 0 }
    }

    /// Make room for a reply of `head` header bytes and `len` data bytes; returns the header
    /// and the data parts. Their previous contents are whatever the last reply left: the
    /// caller overwrites both completely before sending.
    pub(crate) fn parts(&mut self, head: usize, len: usize) -> (&mut [u8], &mut [u8]) {
        debug_assert!(head <= ALIGN);
        if self.data_at == 0 || self.buf.len() < self.data_at + len {
            // Room for the header before the first aligned position past ALIGN, the data,
            // and the alignment slack.
            let want = self.buf.len().max((2 * ALIGN + len).next_multiple_of(ALIGN));
            self.buf = vec![0u8; want + ALIGN];
            let misalign = self.buf.as_ptr() as usize % ALIGN;
            self.data_at = ALIGN + (ALIGN - misalign) % ALIGN;
        }
        let (front, back) = self.buf.split_at_mut(self.data_at);
        (&mut front[self.data_at - head..], &mut back[..len])
    }

    /// The reply prepared by [`ReplyBuf::parts`] with the same sizes.
    pub(crate) fn reply(&self, head: usize, len: usize) -> &[u8] {
        &self.buf[self.data_at - head..self.data_at + len]
    }

    /// Whether this buffer is worth keeping for the next request.
    fn keep(&self) -> bool {
        self.buf.len() <= KEEP + 4 * ALIGN
    }
}

thread_local! {
    static BUF: RefCell<ReplyBuf> = const { RefCell::new(ReplyBuf::new()) };
}

/// Run `f` with this thread's reply buffer (a fresh one if it is in use, which a nested
/// call never does, or after a reply too large to keep).
pub(crate) fn with<T>(f: impl FnOnce(&mut ReplyBuf) -> T) -> T {
    BUF.with(|cell| match cell.try_borrow_mut() {
        Ok(mut b) => {
            let out = f(&mut b);
            if !b.keep() {
                *b = ReplyBuf::new();
            }
            out
        }
        Err(_) => f(&mut ReplyBuf::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_aligned_and_header_adjacent() {
        let mut b = ReplyBuf::new();
        for (head, len) in [(16, 4096), (28, 512), (16, 65536), (28, 1), (16, 0)] {
            let (h, d) = b.parts(head, len);
            assert_eq!(h.len(), head);
            assert_eq!(d.len(), len);
            assert_eq!(d.as_ptr() as usize % ALIGN, 0, "data of {len} bytes is aligned");
            h.fill(0xAA);
            d.fill(0x55);
            let r = b.reply(head, len);
            assert_eq!(r.len(), head + len);
            assert!(r[..head].iter().all(|&x| x == 0xAA));
            assert!(r[head..].iter().all(|&x| x == 0x55));
        }
    }

    #[test]
    fn the_buffer_is_reused_not_reallocated() {
        let mut b = ReplyBuf::new();
        let p1 = b.parts(16, 4096).1.as_ptr();
        let p2 = b.parts(16, 4096).1.as_ptr();
        let p3 = b.parts(28, 2048).1.as_ptr();
        assert_eq!(p1, p2);
        assert_eq!(p1, p3);
    }

    #[test]
    fn large_replies_are_not_kept() {
        with(|b| {
            b.parts(16, KEEP * 2);
        });
        BUF.with(|c| assert!(c.borrow().buf.is_empty(), "a 2 MiB buffer was dropped"));
        with(|b| {
            b.parts(16, KEEP);
        });
        BUF.with(|c| assert!(c.borrow().keep() && !c.borrow().buf.is_empty(), "1 MiB is kept"));
    }
}
