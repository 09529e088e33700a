//! Device wrappers for the engine's tests: a [`Wrapper`] names only what it changes and
//! [`Wrap`] makes it a [`Device`]; the shared ones are here (a device read as if from the
//! medium, one that panics once, one that jitters).

use std::io;
use std::ops::Deref;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ember_engine::device::{Identity, MemDevice, ReadBuf, ReadPart, ReadsDone};
use ember_engine::Device;

/// A device around another: every method not overridden passes to [`Wrapper::inner`] (the
/// reads, writes, syncs, TRIMs and WRITE_ZEROES), or answers as [`Device`]'s own default does
/// (identity unknown, read from memory, no reads started, no DEMOTEs).
pub trait Wrapper: Send + Sync {
    /// The device wrapped.
    fn inner(&self) -> &dyn Device;

    /// A short description for messages.
    fn describe(&self) -> String;

    /// [`Device::read_at`].
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner().read_at(offset, buf)
    }

    /// [`Device::read_many`]: by default one [`Wrapper::read_at`] after another.
    fn read_many(&self, reads: &mut [(u64, &mut [u8])], done: &mut dyn FnMut(usize, Res)) {
        reads.iter_mut().enumerate().for_each(|(i, (at, buf))| done(i, self.read_at(*at, buf)));
    }

    /// Whether reads started with [`Device::start_read`] (and their buffers' registration)
    /// pass to the inner device; by default none are started.
    fn starts_reads(&self) -> bool {
        false
    }

    /// What a started read's parts report when it is reaped, instead of the inner device's
    /// `outcomes` (one a part; its buffer comes back unchanged either way): by default
    /// nothing else (`None`).
    fn reaped(&self, outcomes: &[Rd]) -> Option<Vec<Rd>> {
        let _ = outcomes;
        None
    }

    /// [`Device::write_at`].
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner().write_at(offset, data)
    }

    /// [`Device::sync`].
    fn sync(&self) -> io::Result<()> {
        self.inner().sync()
    }

    /// [`Device::trim`].
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner().trim(offset, len)
    }

    /// [`Device::write_zeroes`].
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner().write_zeroes(offset, len)
    }

    /// [`Device::reads_from_memory`]: yes, by default.
    fn reads_from_memory(&self) -> bool {
        true
    }

    /// [`Device::identity`]: unknown by default (such a backing never starts warm).
    fn identity(&self) -> io::Result<Identity> {
        Ok(Identity::Unknown("a test device"))
    }
}

/// A [`Wrapper`] as a [`Device`]; derefs to the wrapper, so a test reaches its fields.
pub struct Wrap<W>(pub W);

impl<W> Deref for Wrap<W> {
    type Target = W;
    fn deref(&self) -> &W {
        &self.0
    }
}

// The started-read methods pass to the inner device only for a wrapper that starts reads.
impl<W: Wrapper> Device for Wrap<W> {
    fn size(&self) -> u64 {
        self.0.inner().size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_at(offset, buf)
    }
    fn read_many(&self, r: &mut [(u64, &mut [u8])], d: &mut dyn FnMut(usize, Res)) {
        self.0.read_many(r, d)
    }
    fn start_read(&self, buf: ReadBuf, p: &[ReadPart], tag: u64, now: bool) -> Result<(), ReadBuf> {
        if self.0.starts_reads() {
            self.0.inner().start_read(buf, p, tag, now)
        } else {
            Err(buf)
        }
    }
    fn read_room(&self) -> usize {
        if self.0.starts_reads() {
            self.0.inner().read_room()
        } else {
            0
        }
    }
    fn reap_reads(&self, n: usize, w: Option<RawFd>, d: &mut ReadsDone<'_>) -> usize {
        if !self.0.starts_reads() {
            return 0;
        }
        self.0.inner().reap_reads(n, w, &mut |tag, buf, outcomes| match self.0.reaped(outcomes) {
            Some(instead) => d(tag, buf, &instead),
            None => d(tag, buf, outcomes),
        })
    }
    fn register_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.0.starts_reads() && self.0.inner().register_read_buffer(buf)
    }
    fn unregister_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.0.starts_reads() && self.0.inner().unregister_read_buffer(buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_at(offset, data)
    }
    fn sync(&self) -> io::Result<()> {
        self.0.sync()
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.write_zeroes(offset, len)
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn reads_from_memory(&self) -> bool {
        self.0.reads_from_memory()
    }
    fn identity(&self) -> io::Result<Identity> {
        self.0.identity()
    }
}

/// What a started read's part reports: the bytes read, or the error.
type Rd = io::Result<usize>;

/// What a read reports: done, or the error.
type Res = io::Result<()>;

/// A memory device read as if with O_DIRECT: a hit waits on the medium, so nothing is
/// resident in the sense of "served at once".
pub struct OnTheMedium(pub MemDevice);

impl OnTheMedium {
    /// A memory device of `size` bytes read as if from the medium.
    pub fn new(size: u64) -> Wrap<OnTheMedium> {
        Wrap(OnTheMedium(MemDevice::new(size)))
    }
}

impl Wrapper for OnTheMedium {
    fn inner(&self) -> &dyn Device {
        &self.0
    }
    fn describe(&self) -> String {
        "memory read as if O_DIRECT".into()
    }
    fn reads_from_memory(&self) -> bool {
        false
    }
}

/// A memory device whose next write panics once armed (a faulting driver, a bug).
pub struct PanicOnce {
    /// The memory.
    pub inner: MemDevice,
    /// Whether the next write panics.
    pub armed: AtomicBool,
}

impl PanicOnce {
    /// `inner`, not armed yet.
    pub fn new(inner: MemDevice) -> Wrap<PanicOnce> {
        Wrap(PanicOnce { inner, armed: AtomicBool::new(false) })
    }

    /// Make the next write panic.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }
}

impl Wrapper for PanicOnce {
    fn inner(&self) -> &dyn Device {
        &self.inner
    }
    fn describe(&self) -> String {
        "panicking memory".into()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if self.armed.swap(false, Ordering::SeqCst) {
            panic!("injected panic in a write at {offset}");
        }
        self.inner.write_at(offset, data)
    }
}

/// Sleeps up to 100 µs after about one read or write in three of the device it wraps, so
/// requests racing on a block overlap in every possible order.
pub struct Jitter(pub Arc<dyn Device>, pub AtomicU64);

impl Jitter {
    /// `inner`, jittered.
    pub fn new(inner: Arc<dyn Device>) -> Wrap<Jitter> {
        Wrap(Jitter(inner, AtomicU64::new(0)))
    }

    fn pause(&self) {
        let n = self.1.fetch_add(1, Ordering::Relaxed);
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        if h.is_multiple_of(3) {
            std::thread::sleep(std::time::Duration::from_micros(h % 100));
        }
    }
}

impl Wrapper for Jitter {
    fn inner(&self) -> &dyn Device {
        self.0.as_ref()
    }
    fn describe(&self) -> String {
        format!("jittery {}", self.0.describe())
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_at(offset, buf)?;
        self.pause();
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.pause();
        self.0.write_at(offset, data)
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.pause();
        self.0.trim(offset, len)
    }
    fn identity(&self) -> io::Result<Identity> {
        self.0.identity()
    }
}
