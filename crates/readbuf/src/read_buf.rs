//! [`ReadBuf`]: the owned, aligned bytes a started READ is read into.

use std::fmt;

/// Alignment of a [`ReadBuf`]'s bytes and the unit of its capacity: O_DIRECT's requirement
/// for buffer addresses (and 4 KiB, the cache block, for the reads the engine starts).
pub const ALIGN: usize = 4096;

/// An owned buffer whose first byte is [`ALIGN`]-aligned, with a capacity (a multiple of
/// [`ALIGN`], fixed when it is made: its memory never moves) and a length (the bytes of the
/// current READ, at most the capacity). Its bytes are always initialized (zeroed when made).
///
/// Rules the rest of ember relies on:
/// - it is handed to the code that starts a READ by value, and comes back by value when the
///   READ completed (or was never started): nothing keeps a pointer into it meanwhile;
/// - while the kernel may write into it, it is a [`Lent`](crate::Lent), which offers no
///   view of the bytes and leaks them when dropped;
/// - a buffer marked registered ([`ReadBuf::set_registered`]) is leaked when dropped, never
///   freed: only the ring that registered it clears the mark.
pub struct ReadBuf {
    /// The allocation: the capacity and the slack to align its start.
    raw: Vec<u8>,
    /// Index in `raw` of the first, aligned, byte.
    start: usize,
    /// Usable bytes from `start`.
    capacity: usize,
    /// Bytes of the current READ.
    len: usize,
    /// Registered with a ring: dropping leaks the memory.
    registered: bool,
}

impl ReadBuf {
    /// A buffer of `len` zero bytes, its capacity `len` rounded up to [`ALIGN`]. Aborts when
    /// memory runs out, like a `Vec`; [`ReadBuf::try_new`] returns `None` instead.
    pub fn new(len: usize) -> ReadBuf {
        let capacity = len.div_ceil(ALIGN).saturating_mul(ALIGN);
        Self::from_raw(vec![0u8; capacity.saturating_add(ALIGN - 1)], capacity, len)
    }

    /// As [`ReadBuf::new`], or `None` if the memory cannot be had.
    pub fn try_new(len: usize) -> Option<ReadBuf> {
        let capacity = len.checked_next_multiple_of(ALIGN)?;
        let total = capacity.checked_add(ALIGN - 1)?;
        let mut raw = Vec::new();
        raw.try_reserve_exact(total).ok()?;
        raw.resize(total, 0);
        Some(Self::from_raw(raw, capacity, len))
    }

    /// Place the aligned run of `capacity` bytes inside `raw` (which has `ALIGN - 1` bytes of
    /// slack).
    fn from_raw(raw: Vec<u8>, capacity: usize, len: usize) -> ReadBuf {
        let start = (ALIGN - raw.as_ptr() as usize % ALIGN) % ALIGN;
        ReadBuf { raw, start, capacity, len, registered: false }
    }

    /// Bytes of the current READ.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the length is zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most bytes the buffer holds (a multiple of [`ALIGN`]).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Make the length `len`; false, and nothing changed, if it exceeds the capacity. The
    /// bytes are whatever the last READ left.
    #[must_use]
    pub fn set_len(&mut self, len: usize) -> bool {
        if len > self.capacity {
            return false;
        }
        self.len = len;
        true
    }

    /// The first `len()` bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// The first `len()` bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }

    /// The address of the first byte ([`ALIGN`]-aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.raw[self.start..].as_ptr()
    }

    /// The address of the first byte, for handing the whole capacity to a kernel (a ring's
    /// registration). Writing through it is the caller's `unsafe`.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.raw[self.start..].as_mut_ptr()
    }

    /// Whether the buffer is marked registered with a ring.
    pub fn is_registered(&self) -> bool {
        self.registered
    }

    /// Mark the buffer registered with a ring: from now on dropping it leaks its memory, until
    /// [`ReadBuf::clear_registered`]. Called by the code that registered it with the kernel.
    pub fn set_registered(&mut self) {
        self.registered = true;
    }

    /// Clear the registered mark: dropping the buffer frees its memory again.
    ///
    /// # Safety
    ///
    /// No registration may refer to the buffer's memory any more: the kernel's entry for it
    /// was emptied, and no table that hands out its address for fixed reads still holds it.
    pub unsafe fn clear_registered(&mut self) {
        self.registered = false;
    }
}

impl Drop for ReadBuf {
    /// Free the memory, unless the buffer is marked registered: then it is leaked (a ring's
    /// registration could still let a read write into its pages).
    fn drop(&mut self) {
        if self.registered {
            std::mem::forget(std::mem::take(&mut self.raw));
        }
    }
}

impl fmt::Debug for ReadBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .field("registered", &self.registered)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_are_aligned_zeroed_and_as_long_as_asked() {
        for len in [0, 1, 8, 511, 4095, 4096, 4097, 12288, 65536, 65537] {
            let mut b = ReadBuf::new(len);
            assert_eq!(b.as_ptr() as usize % ALIGN, 0, "{len} bytes aligned");
            assert_eq!(b.as_mut_ptr() as usize % ALIGN, 0);
            assert_eq!(b.len(), len);
            assert_eq!(b.is_empty(), len == 0);
            assert_eq!(b.capacity(), len.next_multiple_of(ALIGN));
            assert!(b.as_slice().iter().all(|&x| x == 0));
            assert_eq!(b.as_mut_slice().len(), len);
            assert_eq!(b.as_slice().as_ptr(), b.as_ptr());
            let t = ReadBuf::try_new(len).unwrap();
            assert_eq!((t.len(), t.capacity()), (b.len(), b.capacity()));
            assert_eq!(t.as_ptr() as usize % ALIGN, 0);
        }
    }

    #[test]
    fn the_length_stays_within_the_capacity() {
        let mut b = ReadBuf::new(5000);
        assert_eq!(b.capacity(), 8192);
        assert!(b.set_len(8192));
        assert_eq!(b.as_slice().len(), 8192);
        assert!(!b.set_len(8193), "past the capacity");
        assert_eq!(b.len(), 8192, "unchanged");
        assert!(b.set_len(100));
        assert_eq!(b.as_mut_slice().len(), 100);
        assert!(ReadBuf::try_new(usize::MAX).is_none(), "no room for that");
    }

    #[test]
    fn a_lent_buffer_comes_back_as_it_went() {
        let mut b = ReadBuf::new(8192);
        b.as_mut_slice()[..5].copy_from_slice(b"ember");
        assert!(b.set_len(4096));
        let at = b.as_ptr();
        let lent = b.lend();
        assert_eq!(lent.as_mut_ptr().cast_const(), at, "the kernel gets the first byte");
        assert_eq!((lent.len(), lent.capacity()), (4096, 8192));
        // SAFETY: nothing was started into it.
        let back = unsafe { lent.reclaim() };
        assert_eq!(back.as_ptr(), at, "the memory did not move");
        assert_eq!(back.len(), 4096);
        assert_eq!(&back.as_slice()[..5], b"ember");
    }

    #[test]
    fn the_registered_mark_is_kept_across_a_loan() {
        let mut b = ReadBuf::new(4096);
        assert!(!b.is_registered());
        b.set_registered();
        let lent = b.lend();
        assert!(lent.is_registered());
        // SAFETY: nothing was started into it.
        let mut b = unsafe { lent.reclaim() };
        assert!(b.is_registered());
        // SAFETY: no ring ever registered it.
        unsafe { b.clear_registered() };
        assert!(!b.is_registered());
    }
}
