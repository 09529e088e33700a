//! Registering a buffer with this thread's ring (`IORING_REGISTER_BUFFERS_UPDATE` into the
//! sparse table `new_ring` made), so reads into it skip pinning its pages; the table's
//! bookkeeping is `device/registered.rs`.

use super::{new_ring, Ring, RING};

/// Register `len` bytes at `buf` with this thread's ring, so that reads into them started
/// here skip pinning their pages. False: not registered (no ring, no table, no free entry,
/// a range overlapping one registered, or the kernel refused); reads into it work as before.
///
/// # Safety
///
/// `buf` must be valid for `len` bytes and stay allocated until [`unregister`] on this
/// thread returned true for it; if that never happens, it must never be freed.
pub(crate) unsafe fn register(buf: *mut u8, len: usize) -> bool {
    RING.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return false };
        let Some(r) = slot.get_or_insert_with(new_ring).as_mut() else { return false };
        let Ring { ring, registered, .. } = r;
        registered.add(buf as usize, len, |index| {
            let iov = libc::iovec { iov_base: buf.cast(), iov_len: len };
            // SAFETY: the caller keeps `buf` allocated while it is registered.
            unsafe { ring.submitter().register_buffers_update(u32::from(index), &[iov], None) }
                .is_ok()
        })
    })
    .unwrap_or(false)
}

/// Unregister the buffer registered at `buf` by [`register`] on this thread. True: it is no
/// longer registered and may be freed. False: it must not be freed (not registered on this
/// thread's ring, a read into it still in flight, or the kernel refused).
pub(crate) fn unregister(buf: *mut u8) -> bool {
    RING.try_with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return false };
        let Some(Some(r)) = slot.as_mut() else { return false };
        let Ring { ring, registered, .. } = r;
        registered.remove(buf as usize, |index| {
            let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
            // SAFETY: an empty entry refers to no memory.
            unsafe { ring.submitter().register_buffers_update(u32::from(index), &[empty], None) }
                .is_ok()
        })
    })
    .unwrap_or(false)
}
