//! What the server needs from whatever it exports (ember's engine, or a plain device in tests).

use std::os::fd::RawFd;
use std::sync::Arc;

use ember_readbuf::ReadBuf;

/// Capabilities an export honours; the server advertises exactly these in its transmission
/// flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportFlags {
    /// The export refuses writes.
    pub read_only: bool,
    /// FLUSH makes every write acknowledged before it durable.
    pub can_flush: bool,
    /// The FUA flag on a write makes that write durable before its reply.
    pub can_fua: bool,
    /// TRIM is honoured (data in the range may read back as anything afterwards).
    pub can_trim: bool,
    /// WRITE_ZEROES is honoured.
    pub can_write_zeroes: bool,
    /// A FLUSH on any connection covers writes acknowledged on every connection, so clients
    /// may open several connections (NBD_FLAG_CAN_MULTI_CONN).
    pub can_multi_conn: bool,
}

/// Why an export could not carry out a command; the server maps each to an NBD error.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// An I/O error on a device (NBD_EIO).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// No space left (NBD_ENOSPC).
    #[error("no space left")]
    NoSpace,
    /// The request is invalid for this export (NBD_EINVAL).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The export is read-only (NBD_EPERM).
    #[error("export is read-only")]
    ReadOnly,
    /// The export cannot do this command (NBD_ENOTSUP).
    #[error("not supported: {0}")]
    NotSupported(&'static str),
    /// The server is shutting down (NBD_ESHUTDOWN).
    #[error("shutting down")]
    Shutdown,
}

/// What [`Export::start_read`] did. Every outcome but [`ReadStart::Started`] hands the
/// buffer back.
#[derive(Debug)]
pub enum ReadStart {
    /// Not started, nothing done: the READ takes the ordinary path.
    Declined(ReadBuf),
    /// No room for it now: reap some READs in flight ([`Export::reap_reads`]) and try again.
    Busy(ReadBuf),
    /// In flight, the buffer with it: a later [`Export::reap_reads`] on this thread hands it
    /// back with its tag.
    Started,
    /// Served at once (`Ok`, the data is in the buffer), or failed (the ordinary path then
    /// reports the error properly); nothing is in flight.
    Done(ReadBuf, Result<(), ExportError>),
}

/// One READ of a run offered to [`Export::read_many_if_fast`].
pub struct FastRead<'a> {
    /// Byte offset in the export.
    pub offset: u64,
    /// Where the bytes go (its length is the READ's).
    pub buf: &'a mut [u8],
    /// `None`: declined, nothing done (the READ takes the ordinary path); `Some`: served,
    /// or failed (the ordinary path then reports the error properly).
    pub outcome: Option<Result<(), ExportError>>,
}

/// One exported block device. Methods take `&self`: the server calls them from many threads
/// at once (requests in flight on many connections), so an export does its own locking.
/// Offsets and lengths are already checked against [`Export::size`] by the server.
pub trait Export: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;

    /// Preferred I/O block size in bytes (advertised with NBD_INFO_BLOCK_SIZE).
    fn preferred_block_size(&self) -> u32 {
        4096
    }

    /// The capabilities this export honours.
    fn flags(&self) -> ExportFlags;

    /// Read `buf.len()` bytes at `offset`.
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError>;

    /// Whether a READ of `len` bytes at `offset` will complete at once, without waiting on
    /// slow storage (for a cache: every block is resident). The server then runs it on the
    /// connection's reader thread, saving the hand-off to a worker. A wrong answer costs only
    /// speed (a slow read on the reader delays the reading of that connection's next
    /// requests). The default says no.
    fn read_is_fast(&self, _offset: u64, _len: u64) -> bool {
        false
    }

    /// The hit path: read `buf.len()` bytes at `offset` now if that completes without
    /// waiting on slow storage (a cache hit), returning its result; `None`, having done
    /// nothing, if it might wait. The server calls it on the connection's reader, for a READ
    /// of an idle connection (nothing in flight), and answers from the reader's reusable
    /// buffer; on `None` (or an error, which the ordinary path then reports properly) the
    /// READ takes the ordinary path. `idle`: besides, no further request of the connection
    /// has arrived, so a read that waits briefly on a fast device (an O_DIRECT cache hit)
    /// delays no other request. The default asks [`Export::read_is_fast`], then reads.
    fn read_if_fast(
        &self,
        offset: u64,
        buf: &mut [u8],
        idle: bool,
    ) -> Option<Result<(), ExportError>> {
        let _ = idle;
        if self.read_is_fast(offset, buf.len() as u64) {
            Some(self.read(offset, buf))
        } else {
            None
        }
    }

    /// Whether the server should offer a connection's runs of already-received READs
    /// together to [`Export::read_many_if_fast`]: the export's hits wait on a device (an
    /// O_DIRECT cache), and reading them together keeps them all in flight at once. The
    /// default says no (each READ is offered alone to [`Export::read_if_fast`]).
    fn batches_reads(&self) -> bool {
        false
    }

    /// Serve at once every READ of `reads` that completes without waiting on slow storage,
    /// setting each [`FastRead::outcome`]. The default offers them one by one to
    /// [`Export::read_if_fast`] (not idle: more requests are waiting).
    fn read_many_if_fast(&self, reads: &mut [FastRead<'_>]) {
        for r in reads.iter_mut() {
            r.outcome = self.read_if_fast(r.offset, r.buf, false);
        }
    }

    /// Whether READs can be started on the calling thread to complete later
    /// ([`Export::start_read`], [`Export::reap_reads`]): the export's hits wait on a device
    /// that takes several reads in flight (`ember serve --direct` with io_uring), so the
    /// connection's reader keeps parsing requests while they are read. Asked by the reader
    /// thread itself. The default says no.
    fn starts_reads(&self) -> bool {
        false
    }

    /// Start a READ of `buf.len()` bytes at `offset` into `buf` if it completes without
    /// waiting on slow storage (a cache hit); `tag` (below 4096, unique among this thread's
    /// READs in flight) names it until [`Export::reap_reads`] hands the buffer back. The
    /// default declines.
    ///
    /// The buffer is the export's from the call on; it MUST come back exactly once: in the
    /// returned [`ReadStart`], or, on [`ReadStart::Started`], through
    /// [`Export::reap_reads`] on this thread. An export MUST NOT free it while a device may
    /// still write into it (its loan to a device, [`ReadBuf::lend`], leaks it if dropped).
    fn start_read(&self, offset: u64, buf: ReadBuf, tag: u64) -> ReadStart {
        let _ = (offset, tag);
        ReadStart::Declined(buf)
    }

    /// Register `buf`, a buffer this thread will start READs into, with the device they are
    /// read from (ember: its O_DIRECT cache's io_uring, which then skips pinning the
    /// buffer's pages on every read). True: registered, and marked so
    /// ([`ReadBuf::is_registered`]): dropping it leaks it, until
    /// [`Export::unregister_read_buffer`] on this thread let go of it. The default registers
    /// nothing.
    fn register_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        let _ = buf;
        false
    }

    /// Unregister a buffer [`Export::register_read_buffer`] registered on this thread. True:
    /// no longer registered, its mark cleared: dropping it frees it. False: still registered
    /// (registered on another thread, or refused): dropping it leaks it.
    fn unregister_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        let _ = buf;
        false
    }

    /// Hand back the buffers of the READs started on this thread that completed,
    /// `done(tag, buf, outcome)` each; first wait until at least `wait` of them completed (as
    /// far as the export can tell: at most as many as are in flight, 0: no waiting), or, with
    /// `wake` (an open descriptor: the connection's socket), until it is readable, whichever
    /// comes first. Returns how many were reported.
    fn reap_reads(
        &self,
        wait: usize,
        wake: Option<RawFd>,
        done: &mut dyn FnMut(u64, ReadBuf, Result<(), ExportError>),
    ) -> usize {
        let _ = (wait, wake, done);
        0
    }

    /// Whether this export takes ember's DEMOTE (docs/reference/nbd.md); only then does the server
    /// acknowledge [`crate::proto::OPT_EMBER_DEMOTE`] for it. The default says no.
    fn accepts_demote(&self) -> bool {
        false
    }

    /// A DEMOTE: a client cache hands down `data`, its clean copy of the bytes at `offset`,
    /// as it evicts them. A hint: the export may keep or ignore it, and never writes it to
    /// its backing. Called only on connections that negotiated the extension.
    fn demote(&self, _offset: u64, _data: &[u8]) -> Result<(), ExportError> {
        Err(ExportError::NotSupported("DEMOTE"))
    }

    /// Write `data` at `offset`; with `fua`, durable before returning.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ExportError>;

    /// Make every write completed before this call durable (an NBD barrier).
    fn flush(&self) -> Result<(), ExportError>;

    /// Discard `len` bytes at `offset`; with `fua`, durable before returning.
    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), ExportError>;

    /// Whether the export takes NBD_CMD_CACHE ([`Export::cache`]); the server advertises
    /// `NBD_FLAG_SEND_CACHE` exactly when it does. Default: no.
    fn can_cache(&self) -> bool {
        false
    }

    /// NBD_CMD_CACHE: load `len` bytes at `offset` into the cache, a prefetch.
    ///
    /// - MUST NOT change what any read returns (no data semantics);
    /// - MUST NOT hold memory in proportion to `len` (the length is not capped by the
    ///   maximum payload): load in bounded pieces;
    /// - MUST NOT let a loaded copy overwrite data written after the load read it.
    fn cache(&self, _offset: u64, _len: u64) -> Result<(), ExportError> {
        Err(ExportError::NotSupported("NBD_CMD_CACHE"))
    }

    /// Write `len` zero bytes at `offset`; with `fua`, durable before returning. `may_trim`
    /// is false when the client set NBD_CMD_FLAG_NO_HOLE.
    fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        may_trim: bool,
    ) -> Result<(), ExportError>;
}

/// The exports a server offers, by name.
pub trait ExportSet: Send + Sync {
    /// The export called `name` (the empty name selects the default export, if any).
    fn get(&self, name: &str) -> Option<Arc<dyn Export>>;

    /// Every export's name and description, for NBD_OPT_LIST.
    fn list(&self) -> Vec<(String, String)>;

    /// The canonical name and description of the export `name` selects (for NBD_INFO_NAME
    /// and NBD_INFO_DESCRIPTION). The provided method looks `name` up in [`ExportSet::list`];
    /// for the empty name it answers the only listed export, if there is exactly one.
    fn describe(&self, name: &str) -> Option<(String, String)> {
        let list = self.list();
        if let Some(found) = list.iter().find(|(n, _)| n == name) {
            return Some(found.clone());
        }
        if name.is_empty() && list.len() == 1 {
            return list.into_iter().next();
        }
        None
    }
}
