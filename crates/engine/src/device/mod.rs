//! The `Device` abstraction: anything ember reads and writes blocks on, the cache device and
//! every backing volume alike.
//!
//! Implementations: [`FileDevice`] (a regular file or a block device, optionally O_DIRECT),
//! [`MemDevice`] (memory), [`FaultDevice`] (a wrapper that injects I/O errors and simulates a
//! power cut, for tests). The NBD-backed device lives in the adapter
//! crate `ember-serve`, so the engine does not depend on one frontend.

mod deadline;
pub mod fault;
pub mod file;
#[cfg(test)]
pub(crate) mod hooked;
pub mod identity;
pub mod mem;
mod registered;
pub mod sync_skip;
mod uring;
pub(crate) mod watched;

pub use ember_readbuf::ReadBuf;
pub use fault::{FaultDevice, IoKind};
pub use file::{AlignedBuf, FileDevice, FileOptions};
pub use identity::Identity;
pub use mem::MemDevice;
pub use uring::{
    fixed_reads_through_io_uring, read_handoffs_through_io_uring, reads_through_io_uring,
};

use std::io;
use std::os::fd::RawFd;

/// A byte-addressed storage device. Methods take `&self` and may be called from many threads
/// at once; callers that issue overlapping writes concurrently get no ordering guarantee
/// (the engine never does: it serializes requests on a block with its lock table).
///
/// Durability follows the block-layer contract of thesis section 2.4: a completed write is
/// durable only once a later [`Device::sync`] has returned.
pub trait Device: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;

    /// Fill `buf` with the bytes at `offset`. `offset + buf.len()` must not exceed the size.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Fill `buf` with the bytes at `offset` only if that needs no wait on the medium (they
    /// are in memory: a memory device, a file's page cache). `None`: they are not at hand,
    /// or the read failed; nothing is promised about `buf` then and the caller reads with
    /// [`Device::read_at`], where it may wait and where a failure is reported. The default
    /// says `None`: a device that cannot tell never answers from here.
    ///
    /// An implementation MUST NOT block on the medium, and MUST return `Some(Ok(()))` only
    /// with all of `buf` filled.
    fn read_if_cached(&self, offset: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        let _ = (offset, buf);
        None
    }

    /// Read several ranges, `reads[i]` = (offset, buffer), calling `done(i, outcome)` for
    /// each. The reads may be in flight at once (an O_DIRECT file submits them together
    /// through io_uring); the default reads them one after another with [`Device::read_at`].
    fn read_many(
        &self,
        reads: &mut [(u64, &mut [u8])],
        done: &mut dyn FnMut(usize, io::Result<()>),
    ) {
        for (i, (offset, buf)) in reads.iter_mut().enumerate() {
            done(i, self.read_at(*offset, buf));
        }
    }

    /// Start the reads `parts` into `buf`, to complete later: a later [`Device::reap_reads`]
    /// on this thread hands `buf` back with `tag` and every part's outcome, once all of them
    /// completed. `now`: hand them to the medium at once (else at the next `start_read` with
    /// `now` or `reap_reads`). `Err(buf)`: nothing was started (the caller reads another way,
    /// into the buffer it got back). The default starts nothing; an O_DIRECT file starts them
    /// on this thread's io_uring (`uring/`).
    ///
    /// An implementation that returns `Ok` MUST hand `buf` back through `reap_reads` on this
    /// thread once no read into it is in flight, and MUST NOT free it before (a
    /// [`ReadBuf::lend`] loan leaks it if it is dropped unreaped).
    fn start_read(
        &self,
        buf: ReadBuf,
        parts: &[ReadPart],
        tag: u64,
        now: bool,
    ) -> Result<(), ReadBuf> {
        let _ = (parts, tag, now);
        Err(buf)
    }

    /// How many reads (parts) [`Device::start_read`] can take now on this thread (0: none).
    fn read_room(&self) -> usize {
        0
    }

    /// Hand back the buffers of the reads started with [`Device::start_read`] on this thread
    /// whose parts all completed, `done(tag, buf, outcomes)` each: `outcomes[k]` is part
    /// `k`'s, the bytes read (fewer than asked is a short read) or the error. First wait until
    /// at least `wait` parts have completed (at most as many as are in flight; 0: no waiting),
    /// or, with `wake` (an open descriptor), until it is readable, whichever comes first.
    /// Returns how many buffers were handed back.
    fn reap_reads(&self, wait: usize, wake: Option<RawFd>, done: &mut ReadsDone<'_>) -> usize {
        let _ = (wait, wake, done);
        0
    }

    /// Register `buf` for the reads this thread starts into it with [`Device::start_read`]
    /// (an O_DIRECT file: with this thread's io_uring, which then skips pinning the buffer's
    /// pages on every read). True: registered and marked so ([`ReadBuf::is_registered`]):
    /// dropping it leaks it until [`Device::unregister_read_buffer`] on this thread let go of
    /// it. The default registers nothing.
    fn register_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        let _ = buf;
        false
    }

    /// Unregister a buffer [`Device::register_read_buffer`] registered on this thread. True:
    /// no longer registered, its mark cleared: dropping it frees it. False: still registered
    /// (registered on another thread, or the kernel refused), and dropping it leaks it.
    fn unregister_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        let _ = buf;
        false
    }

    /// Write `data` at `offset`. `offset + data.len()` must not exceed the size.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Make every write completed before this call durable (a cache flush / barrier).
    fn sync(&self) -> io::Result<()>;

    /// Discard `len` bytes at `offset`: afterwards the range may read back as anything
    /// (every implementation here reads zeros where the medium allows it).
    fn trim(&self, offset: u64, len: u64) -> io::Result<()>;

    /// Write `len` zero bytes at `offset`. The default writes a zero buffer in 1 MiB pieces.
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        write_zeroes_by_writes(self, offset, len)
    }

    /// A short description for messages and reports (path, URI, "memory").
    fn describe(&self) -> String;

    /// Whether a read of data written before usually completes from memory (a memory device,
    /// a file behind the page cache) rather than waiting on the medium (O_DIRECT). Only then
    /// is a cache hit "fast" for [`crate::Volume::resident`]'s callers. The default says yes.
    fn reads_from_memory(&self) -> bool {
        true
    }

    /// Whether the device forgets everything when ember stops (a memory cache, `mem:SIZE`):
    /// the engine then refuses, as a cache device, the write policies that keep acknowledged
    /// writes only on it (write-back persist, unsafe write-back), at open and live. The
    /// default says no.
    fn volatile(&self) -> bool {
        false
    }

    /// Whether this device takes DEMOTE hints ([`Device::demote`]): an NBD export of an array
    /// tier that granted ember's `x-ember:demote` extension (docs/reference/nbd.md). The default
    /// says no.
    fn takes_demotes(&self) -> bool {
        false
    }

    /// Wong & Wilkes' DEMOTE: hand down `data`, the clean copy of the bytes at `offset` that
    /// the cache above evicts, without waiting for the answer. A hint that never changes the
    /// device's data. Returns false if it was dropped (not taken, or the device's queue of
    /// DEMOTEs is full). The default drops it.
    fn demote(&self, offset: u64, data: &[u8]) -> bool {
        let _ = (offset, data);
        false
    }

    /// What identifies the medium and its state, so a warm start can tell a backing changed
    /// while ember was stopped. The default cannot know ([`Identity::Unknown`]): such a
    /// backing never starts warm.
    fn identity(&self) -> io::Result<Identity> {
        Ok(Identity::Unknown("the device cannot be identified"))
    }
}

/// What [`Device::reap_reads`] calls for each started read whose parts all completed: its
/// tag, its buffer back, and each part's outcome in the order of the parts (the bytes read,
/// or the error).
pub type ReadsDone<'a> = dyn FnMut(u64, ReadBuf, &[io::Result<usize>]) + 'a;

/// One device read of a started read ([`Device::start_read`]): `len` bytes at device offset
/// `offset` into the buffer's bytes `at..at + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadPart {
    /// Byte offset on the device.
    pub offset: u64,
    /// Where in the buffer the bytes go.
    pub at: usize,
    /// Bytes to read.
    pub len: usize,
}

/// [`Device::write_zeroes`] by plain writes of a zero buffer.
pub fn write_zeroes_by_writes<D: Device + ?Sized>(
    dev: &D,
    offset: u64,
    len: u64,
) -> io::Result<()> {
    const PIECE: u64 = 1 << 20;
    let zeros = vec![0u8; PIECE.min(len) as usize];
    let mut pos = offset;
    let end = offset + len;
    while pos < end {
        let n = PIECE.min(end - pos) as usize;
        dev.write_at(pos, &zeros[..n])?;
        pos += n as u64;
    }
    Ok(())
}

/// Check that `[offset, offset + len)` lies within a device of `size` bytes.
pub fn check_range(size: u64, offset: u64, len: u64, what: &str) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} of {len} bytes at {offset} is beyond the device size {size}"),
        )),
    }
}

/// Wrap an I/O error with which device and which operation failed.
pub(crate) fn io_context(
    dev: &dyn Device,
    op: &str,
    offset: u64,
    len: u64,
    e: io::Error,
) -> io::Error {
    if len == 0 && offset == 0 {
        return io::Error::new(e.kind(), format!("{}: {op}: {e}", dev.describe()));
    }
    io::Error::new(e.kind(), format!("{}: {op} of {len} bytes at {offset}: {e}", dev.describe()))
}
