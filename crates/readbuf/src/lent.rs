//! [`Lent`]: a [`ReadBuf`] handed to a device whose reads into it may be in flight.

use std::fmt;
use std::mem::ManuallyDrop;

use crate::read_buf::ReadBuf;

/// A [`ReadBuf`] lent to a device (made by [`ReadBuf::lend`]): the kernel may be writing
/// into it. It gives out the address of its first byte and nothing else: no slice, so no
/// reference to the memory the kernel writes. Dropping it leaks the memory (a ring dropped
/// with reads in flight, a thread that ends without reaping them): the kernel may still
/// write there, so it is never freed. [`Lent::reclaim`] turns it back into the buffer once
/// every read into it completed.
///
/// Not `Send`: a buffer lent to a thread's ring stays with that thread.
pub struct Lent {
    /// Never dropped from here: only `reclaim` gives it back.
    buf: ManuallyDrop<ReadBuf>,
    /// Its first byte, taken before it was lent.
    ptr: *mut u8,
}

impl ReadBuf {
    /// Lend the buffer to a device that starts reads into it: the [`Lent`] keeps the memory
    /// alive and unmoved, gives out its address only, and leaks it if dropped.
    pub fn lend(mut self) -> Lent {
        let ptr = self.as_mut_ptr();
        Lent { buf: ManuallyDrop::new(self), ptr }
    }
}

impl Lent {
    /// The address of the first byte: reads into `[ptr + at, ptr + at + n)` with
    /// `at + n <= len()` stay inside the buffer. Writing through it is the caller's `unsafe`.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The buffer's length (the READ's bytes).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the length is zero.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The buffer's capacity.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Whether the buffer is marked registered with a ring.
    pub fn is_registered(&self) -> bool {
        self.buf.is_registered()
    }

    /// The buffer back, to be read and written again.
    ///
    /// # Safety
    ///
    /// Every read started into the buffer completed (its completion was reaped, or it was
    /// never handed to the kernel): nothing writes into the memory any more.
    pub unsafe fn reclaim(self) -> ReadBuf {
        ManuallyDrop::into_inner(self.buf)
    }
}

impl fmt::Debug for Lent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lent").field("buf", &*self.buf).finish()
    }
}
