//! Registering a buffer with this thread's ring (`IORING_REGISTER_BUFFERS_UPDATE` into the
//! sparse table `new_ring` made), so reads into it skip pinning its pages; the table's
//! bookkeeping is `device/registered.rs`. A registered buffer is marked so
//! ([`ReadBuf::set_registered`]): dropping it leaks it, until [`unregister`] emptied the
//! kernel's entry and cleared the mark.

use ember_readbuf::ReadBuf;

use super::{new_ring, Ring, RING};

/// Register `buf`'s whole capacity with this thread's ring, so that reads into it started
/// here skip pinning its pages, and mark it registered. False: not registered (marked
/// registered already, no ring, no table, no free entry, or the kernel refused); reads into
/// it work as before.
pub(crate) fn register(buf: &mut ReadBuf) -> bool {
    if buf.is_registered() {
        // Registered with a ring already: one mark cannot stand for two registrations.
        return false;
    }
    let len = buf.capacity();
    let ptr = buf.as_mut_ptr();
    let added = RING
        .try_with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else { return false };
            let Some(r) = slot.get_or_insert_with(new_ring).as_mut() else { return false };
            let Ring { ring, registered, .. } = r;
            registered.add(ptr as usize, len, |index| {
                let iov = libc::iovec { iov_base: ptr.cast(), iov_len: len };
                // SAFETY: the kernel pins the buffer's `len` bytes at `ptr` (its capacity,
                // allocated and unmoving for the buffer's life). The buffer is marked
                // registered below, and a marked buffer is never freed (dropping it leaks it)
                // until `unregister` emptied this entry.
                unsafe { ring.submitter().register_buffers_update(u32::from(index), &[iov], None) }
                    .is_ok()
            })
        })
        .unwrap_or(false);
    if added {
        buf.set_registered();
    }
    added
}

/// Unregister `buf`, registered by [`register`] on this thread, and clear its mark. True: it
/// is no longer registered, and dropping it frees it. False: not registered with this
/// thread's ring (its mark stays: it is leaked when dropped), or the kernel refused.
pub(crate) fn unregister(buf: &mut ReadBuf) -> bool {
    if !buf.is_registered() {
        return false;
    }
    let start = buf.as_ptr() as usize;
    let removed = RING
        .try_with(|cell| {
            let Ok(mut slot) = cell.try_borrow_mut() else { return false };
            let Some(Some(r)) = slot.as_mut() else { return false };
            let Ring { ring, registered, .. } = r;
            registered.remove(start, |index| {
                let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
                // SAFETY: an empty entry refers to no memory.
                unsafe {
                    ring.submitter().register_buffers_update(u32::from(index), &[empty], None)
                }
                .is_ok()
            })
        })
        .unwrap_or(false);
    if removed {
        // SAFETY: the kernel's entry for the buffer was emptied and this ring's table forgot
        // it: no registration refers to its memory any more.
        unsafe { buf.clear_registered() };
    }
    removed
}
